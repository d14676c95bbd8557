"""The ledger's bulk write path: `Database.batch`, `Attempts.create_many`, `Activity.log_many`
(a generated or imported history of 100,000 attempts goes through these, not raw INSERTs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amid.server.errors import Conflict
from amid.server.ledger import Ledger
from amid.server.ledger.attempts import ArtifactRow, NewAttempt


def _new(i: int, agent: str = "alice", key: str | None = None, summary: str | None = None) -> NewAttempt:
    return NewAttempt(
        agent,
        None,
        f"{i:040x}",
        [i % 2],
        "real",
        None,
        None,
        key,
        summary or f"attempt {i}",
        declared={i % 2: {"dice": 0.5 + i / 100}},
    )


def _rows(ledger: Ledger) -> list[tuple]:
    attempts = ledger.db.fetchall(
        "SELECT attempt_id, agent_id, commit_sha, folds, status, budget_class, idempotency_key, summary, claims, "
        "content_digests FROM attempts ORDER BY attempt_id"
    )
    metrics = ledger.db.fetchall("SELECT attempt_id, source, scope, fold, metric, value FROM metrics ORDER BY 1, 4")
    return [tuple(r.values()) for r in attempts] + [tuple(r.values()) for r in metrics]


def test_create_many_records_what_create_records(tmp_path: Path) -> None:
    one, many = Ledger(tmp_path / "one.duckdb"), Ledger(tmp_path / "many.duckdb")
    try:
        news = [_new(i, key=f"k{i}" if i % 2 else None) for i in range(7)]
        singles = [one.attempts.create(new) for new in news]
        assert many.attempts.create_many(news) == singles == [(f"att-{i:05d}", True) for i in range(1, 8)]
        assert _rows(one) == _rows(many)
    finally:
        one.close()
        many.close()


def test_create_many_keeps_idempotency_keys(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        first, _ = ledger.attempts.create(_new(0, key="same"))
        again = ledger.attempts.create_many([_new(0, key="same"), _new(1, key="new"), _new(1, key="new")])
        assert again == [(first, False), ("att-00002", True), ("att-00002", False)]
        assert ledger.db.scalar("SELECT count(*) FROM attempts") == 2
        assert ledger.attempts.create_many([_new(0, agent="bob", key="same")]) == [("att-00003", True)]
        with pytest.raises(Conflict, match="summary"):
            ledger.attempts.create_many([_new(5), _new(0, key="same", summary="other")])
        assert ledger.db.scalar("SELECT count(*) FROM attempts") == 3  # the failed list left nothing
    finally:
        ledger.close()


def test_create_many_writes_artifacts(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        new = _new(0)
        new.artifacts = [ArtifactRow("predictions", "pred/a.nii.gz", "ab" * 32, 10, "frozen/a.nii.gz", fold=0)]
        [(attempt_id, _)] = ledger.attempts.create_many([new])
        assert [a["declared_path"] for a in ledger.attempts.artifacts(attempt_id)] == ["pred/a.nii.gz"]
        assert ledger.attempts.create_many([]) == []
    finally:
        ledger.close()


def test_batch_commits_together_or_not_at_all(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        with ledger.db.batch():
            attempt_id, _ = ledger.attempts.create(_new(0))
            # a read inside the batch sees the batch's own writes, also through the cache
            assert ledger.attempts.get(attempt_id)["status"] == "pending"
            ledger.notes.add("alice", "observation", None, "a note", "body", {})
            assert len(ledger.notes.list()) == 1
        assert ledger.db.scalar("SELECT count(*) FROM attempts") == 1
        before = len(ledger.notes.list())
        with pytest.raises(RuntimeError), ledger.db.batch():
            ledger.notes.add("alice", "observation", None, "lost", "body", {})
            assert len(ledger.notes.list()) == before + 1
            raise RuntimeError("stop")
        assert len(ledger.notes.list()) == before  # rolled back, and no cached answer says otherwise
    finally:
        ledger.close()


def test_log_many_and_deferred_events_keep_their_order(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.activity.log_many([("bulk", "alice", "tool", f"t{i}", {"i": i}) for i in range(100)])
        for i in range(70):  # one flush of EVENT_BATCH rows, then the rest at the read
            ledger.activity.log("deferred", agent_id=None, subject_id=f"d{i}", payload={"i": i}, deferred=True)
        rows = ledger.db.fetchall("SELECT kind, agent_id, subject_type, subject_id FROM events ORDER BY event_id")
        bulk = [r for r in rows if r["kind"] == "bulk"]
        assert [r["subject_id"] for r in bulk] == [f"t{i}" for i in range(100)]
        assert {(r["agent_id"], r["subject_type"]) for r in bulk} == {("alice", "tool")}
        deferred = [r for r in rows if r["kind"] == "deferred"]
        assert [r["subject_id"] for r in deferred] == [f"d{i}" for i in range(70)]
        assert {r["subject_type"] for r in deferred} == {None}
    finally:
        ledger.close()


def test_log_many_in_a_failed_batch_leaves_no_event(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        before = ledger.db.scalar("SELECT count(*) FROM events")
        with pytest.raises(RuntimeError), ledger.db.batch():
            ledger.activity.log_many([("bulk", "alice", None, None, None)] * 3)
            raise RuntimeError("stop")
        ledger.db.flush()
        assert ledger.db.scalar("SELECT count(*) FROM events") == before
    finally:
        ledger.close()


def test_the_kept_leaderboard_follows_every_verdict(tmp_path: Path) -> None:
    from amid.server.ledger.reviews import MetricRow, ReviewOutcome

    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.activity.set_state("primary_metric", "dice")

        def accept(i: int, score: float) -> str:
            attempt_id, _ = ledger.attempts.create(_new(i))
            review, _ = ledger.reviews.request(attempt_id, "alice")
            ledger.reviews.start(review["review_id"])
            metric = MetricRow("fold", i % 2, "dice", score, n_cases=4, case_se=0.01)
            ledger.reviews.finish(review["review_id"], ReviewOutcome("accepted", [], [metric]))
            return attempt_id

        first = accept(0, 0.6)
        assert [r["attempt_id"] for r in ledger.reviews.leaderboard(True, None, 5)] == [first]
        board = ledger.reviews.leaderboard(True, None, 5)  # from memory
        board[0]["rank"] = 99  # a caller's change does not reach the kept answer
        assert ledger.reviews.leaderboard(True, None, 5)[0]["rank"] == 1
        second = accept(1, 0.9)
        assert [r["attempt_id"] for r in ledger.reviews.leaderboard(True, None, 5)] == [second, first]
        assert [r["attempt_id"] for r in ledger.reviews.leaderboard(True, None, 1)] == [second]
        ledger.activity.set_state("primary_metric", "hd95")  # the metric the board ranks by changed
        assert ledger.reviews.leaderboard(True, None, 5) == []
    finally:
        ledger.close()


def test_the_kept_leaderboard_outlives_writes_that_do_not_move_it_and_follows_those_that_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from amid.server.ledger import reviews
    from amid.server.ledger.audits import AuditCheckRow
    from amid.server.ledger.database import utcnow
    from amid.server.ledger.reviews import MetricRow, ReviewOutcome

    ranked: list[int] = []
    real_rank = reviews.rank_rows
    monkeypatch.setattr(reviews, "rank_rows", lambda rows, hib: ranked.append(1) or real_rank(rows, hib))
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.activity.set_state("primary_metric", "dice")

        def review(attempt_id: str, score: float) -> None:
            request, _ = ledger.reviews.request(attempt_id, "alice")
            ledger.reviews.start(request["review_id"])
            metric = MetricRow("fold", 0, "dice", score, n_cases=4, case_se=0.01)
            ledger.reviews.finish(request["review_id"], ReviewOutcome("accepted", [], [metric]))

        def board() -> list[str]:
            return [r["attempt_id"] for r in ledger.reviews.leaderboard(True, None, 5)]

        first, second = (ledger.attempts.create(_new(i))[0] for i in range(2))
        review(first, 0.6)
        assert board() == [first] and len(ranked) == 1
        waiting = ledger.attempts.create(_new(2))[0]  # a submission with declared scores, then withdrawn
        ledger.attempts.withdraw(waiting, None)
        assert board() == [first] and len(ranked) == 1  # not re-ranked: nothing it ranks moved
        review(second, 0.9)
        assert board() == [second, first] and len(ranked) == 2
        ledger.reviews.request(second, "alice", again=True)  # a re-review takes it off until its verdict
        assert board() == [first]
        ledger.audits.record("alice", utcnow(), 1, [AuditCheckRow(first, "ARTIFACT_CHANGED", False, "changed", {})])
        assert board() == []
    finally:
        ledger.close()
