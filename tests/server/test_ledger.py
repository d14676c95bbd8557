from __future__ import annotations

from pathlib import Path

import pytest

from amid.server.errors import Conflict, InvalidInput, NotFound
from amid.server.ledger import Ledger
from amid.server.ledger.database import _migrations


def test_migrations_apply_once_and_views_exist(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    ledger.close()
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        assert ledger.db.scalar("SELECT count(*) FROM schema_migrations") == len(_migrations())
        views = {r["view_name"] for r in ledger.db.fetchall("SELECT view_name FROM duckdb_views() WHERE NOT internal")}
        assert {
            "v_attempts",
            "v_leaderboard",
            "v_lane_summary",
            "v_agent_activity",
            "v_failed_checks",
            "v_jobs",
        } <= views
    finally:
        ledger.close()


def test_tokens_are_stored_hashed_verified_and_revoked(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        token = ledger.identities.create_token("alice", "agent")
        assert ledger.db.scalar("SELECT count(*) FROM tokens WHERE token_hash = ?", [token]) == 0
        identity = ledger.identities.verify(token)
        assert identity is not None and (identity.agent_id, identity.role) == ("alice", "agent")
        assert ledger.identities.verify(token + "x") is None
        assert ledger.identities.revoke("alice") == 1
        assert ledger.identities.verify(token) is None
        with pytest.raises(NotFound, match="no live token for agent 'alice'"):
            ledger.identities.revoke("alice")
    finally:
        ledger.close()


def test_an_agent_keeps_its_role(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.identities.create_token("boss", "supervisor")
        with pytest.raises(Conflict, match="already exists with role 'supervisor'"):
            ledger.identities.create_token("boss", "agent")
        with pytest.raises(InvalidInput, match="name: got 'Bad Name'"):
            ledger.identities.create_token("Bad Name", "agent")
        assert ledger.db.scalar("SELECT count(*) FROM agents") == 1
    finally:
        ledger.close()


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM events",
        "DROP TABLE events",
        "INSERT INTO agents VALUES ('x','agent',now(),'{}')",
        "SELECT 1; DELETE FROM events",
        "EXPLAIN ANALYZE DELETE FROM events",
        "COPY events TO 'x.csv'",
    ],
)
def test_read_only_sql_refuses_every_write_by_statement_type(tmp_path: Path, query: str) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.activity.log("probe", agent_id=None)
        with pytest.raises(InvalidInput, match="sql:"):
            ledger.db.read_only_query(query)
        assert ledger.db.scalar("SELECT count(*) FROM events") == 1
        columns, rows = ledger.db.read_only_query("SELECT kind FROM events")
        assert columns == ["kind"] and rows == [("probe",)]
    finally:
        ledger.close()


def test_a_second_writer_on_the_same_file_fails_fast(tmp_path: Path) -> None:
    import subprocess
    import sys

    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        probe = "from amid.server.ledger import Ledger; import sys; Ledger(__import__('pathlib').Path(sys.argv[1]))"
        result = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path / "a.duckdb")], capture_output=True, text=True, timeout=60
        )
        assert result.returncode != 0
        assert "is locked by another process" in result.stderr
    finally:
        ledger.close()


def test_inbox_is_delivered_once(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.identities.create_token("alice", "agent")
        ledger.activity.add_heartbeat("alice", "plateau", "write a focus note", "manager", None)
        first = ledger.activity.take_inbox("alice")
        assert [row["prompt"] for row in first] == ["write a focus note"]
        assert ledger.activity.take_inbox("alice") == []
    finally:
        ledger.close()


def test_a_heartbeat_given_as_a_workers_prompt_is_not_given_again_in_a_tool_result(tmp_path: Path) -> None:
    # A resumed Claude Code worker read the heartbeat as its prompt and, in its next tool result, again.
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        ledger.identities.create_token("alice", "agent")
        given = ledger.activity.add_heartbeat("alice", "custom", "given by resume", "manager", None)
        kept = ledger.activity.add_heartbeat("alice", "custom", "sent after the launch", "manager", None)
        detail = {"resume": True, "heartbeat_ids": [given]}
        ledger.workers.transition("alice", "claude-code", "running", "restarted", "s-1", detail, "manager")
        assert [h["heartbeat_id"] for h in ledger.workers.undelivered_heartbeats("alice")] == [kept]
        assert [row["prompt"] for row in ledger.activity.take_inbox("alice")] == ["sent after the launch"]
    finally:
        ledger.close()


def test_attempts_of_an_older_ledger_keep_their_status_and_may_become_revoked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    from amid.server.ledger import database

    every = database._migrations()
    monkeypatch.setattr(database, "_migrations", lambda: [m for m in every if m[0] < 5])
    old = Ledger(tmp_path / "a.duckdb")
    old.db.execute(
        "INSERT INTO attempts (attempt_id, agent_id, commit_sha, folds, status, created_at, updated_at) "
        "VALUES ('att-00001', 'ann', 'abc', '[0]', 'accepted', now(), now())"
    )
    old.close()
    monkeypatch.setattr(database, "_migrations", lambda: every)
    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        assert ledger.counts_by_status("attempts") == {"accepted": 1}
        ledger.db.execute("UPDATE attempts SET status = 'revoked' WHERE attempt_id = 'att-00001'")
        assert ledger.db.scalar("SELECT status FROM v_attempts") == "revoked"
        with pytest.raises(duckdb.ConversionException):
            ledger.db.execute("UPDATE attempts SET status = 'lost' WHERE attempt_id = 'att-00001'")
        with pytest.raises(duckdb.ConstraintException):
            ledger.db.execute("UPDATE attempts SET status = NULL WHERE attempt_id = 'att-00001'")
    finally:
        ledger.close()


def test_run_evidence_shows_the_newest_attempts_and_every_accepted_one(tmp_path: Path) -> None:
    # A 10,000-attempt run showed its supervisor only the first 1,000: nothing newer was ever ranked.
    from amid.server.ledger.attempts import NewAttempt

    ledger = Ledger(tmp_path / "a.duckdb")
    try:
        news = [NewAttempt("alice", None, f"{i:040x}", [0], "real", None, None, None, f"attempt {i}") for i in range(6)]
        ids = [attempt_id for attempt_id, _ in ledger.attempts.create_many(news)]
        with ledger.db.transaction() as cur:
            cur.execute("UPDATE attempts SET status = 'accepted' WHERE attempt_id = ?", [ids[0]])
        window = ledger.supervision.evidence_changes(None, limit=2, page=2).attempts
        shown = [row["attempt_id"] for row in window]
        assert shown == [ids[0], ids[4], ids[5]]  # the oldest accepted, the two newest; oldest first
    finally:
        ledger.close()
