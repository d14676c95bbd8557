"""The researcher views of migration 0009 on a seeded run, read through the human read path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from amid.server.ledger import Ledger, utcnow
from amid.server.ledger.attempts import ArtifactRow, NewAttempt
from amid.server.ledger.reviews import CheckRow, MetricRow, ReviewOutcome
from amid.server.workspace import Workspace
from tests.server.supervisor.seed import add_lanes

VIEWS = (
    "v_score_over_time",
    "v_lineage",
    "v_declared_vs_verified",
    "v_check_failures_by_code",
    "v_lane_states_over_time",
    "v_agent_timeline",
    "v_fold_scores",
)


@dataclass(frozen=True)
class Seeded:
    ledger: Ledger
    ids: dict[str, str]  # a1..a4 → attempt ids


def seed_attempt(
    ledger: Ledger,
    agent: str,
    lane: str,
    verified: list[float],
    *,
    accepted: bool = True,
    parent: str | None = None,
    declared: dict[int, dict[str, float]] | None = None,
    codes: tuple[str, ...] = (),
    artifacts: list[ArtifactRow] | None = None,
) -> str:
    """One attempt, its declared scores and a finished review with verified fold scores of `dice`."""
    new = NewAttempt(
        agent_id=agent,
        lane_id=lane,
        commit_sha="0" * 40,
        folds=list(range(len(verified))),
        budget_class="real",
        parent_attempt_id=parent,
        inference_command=None,
        idempotency_key=None,
        summary=None,
        declared=declared or {},
        artifacts=artifacts or [],
    )
    attempt_id, _ = ledger.attempts.create(new)
    review, _ = ledger.reviews.request(attempt_id, agent, agent)
    assert ledger.reviews.start(review["review_id"])
    checks = [CheckRow(code, False, "error", f"{code} fired on {attempt_id}", {}) for code in codes]
    metrics = [MetricRow("fold", fold, "dice", value, n_cases=4) for fold, value in enumerate(verified)]
    baselines = [MetricRow("baseline", 0, "dice", 0.0, predictor="empty_mask")]
    verdict = "accepted" if accepted else "rejected"
    outcome = ReviewOutcome(verdict=verdict, checks=checks, metrics=metrics, baselines=baselines)
    ledger.reviews.finish(review["review_id"], outcome)
    return attempt_id


@pytest.fixture
def seeded(workspace: Workspace) -> Iterator[Seeded]:
    ledger = Ledger(workspace.ledger_path)
    for agent in ("alice", "bob"):
        ledger.identities.create_token(agent, "agent")
    add_lanes(ledger, {"lane-a": "primary", "lane-b": "secondary"})
    now = utcnow()
    for agent in ("alice", "bob"):
        ledger.lanes.claim("lane-a", agent, now=now, lease_s=600, max_claimants=2)
    ledger.lanes.release("lane-a", "alice", utcnow())
    ledger.lanes.release("lane-a", "bob", utcnow())
    a1 = seed_attempt(ledger, "alice", "lane-a", [0.5, 0.7], declared={0: {"dice": 0.5}, 1: {"dice": 0.9}})
    a2 = seed_attempt(ledger, "alice", "lane-a", [0.8, 0.8], accepted=False, parent=a1, codes=("DUPLICATE_PAYLOAD",))
    a3 = seed_attempt(ledger, "bob", "lane-a", [0.8, 0.9], parent=a2)
    a4 = seed_attempt(ledger, "bob", "lane-b", [0.4, 0.4], accepted=False, codes=("DUPLICATE_PAYLOAD", "HOLDOUT_GAP"))
    ledger.supervision.decide_lane("lane-a", "covered", "2 accepted attempts", {}, "boss")
    yield Seeded(ledger, {"a1": a1, "a2": a2, "a3": a3, "a4": a4})
    ledger.close()


def _rows(ledger: Ledger, sql: str) -> list[dict[str, Any]]:
    page = ledger.db.human_query(sql)
    return [dict(zip(page.columns, row, strict=True)) for row in page.rows]


def test_every_human_view_answers_on_the_read_path(seeded: Seeded) -> None:
    names = {r["view_name"] for r in _rows(seeded.ledger, "SELECT view_name FROM duckdb_views() WHERE NOT internal")}
    assert set(VIEWS) <= names
    for view in VIEWS:
        assert _rows(seeded.ledger, f"SELECT count(*) AS n FROM {view}")[0]["n"] > 0, view


def test_best_so_far_counts_accepted_attempts_only_in_submission_order(seeded: Seeded) -> None:
    rows = _rows(seeded.ledger, "SELECT * FROM v_score_over_time WHERE lane_id = 'lane-a' ORDER BY created_at")
    assert [r["verified_score"] for r in rows] == pytest.approx([0.6, 0.8, 0.85])
    assert [r["lane_best_so_far"] for r in rows] == pytest.approx([0.6, 0.6, 0.85])
    assert [r["new_lane_best"] for r in rows] == [True, False, True]
    bob = _rows(seeded.ledger, "SELECT * FROM v_score_over_time WHERE agent_id = 'bob' ORDER BY created_at")
    assert [r["agent_best_so_far"] for r in bob] == pytest.approx([0.85, 0.85])
    assert {r["direction"] for r in rows} == {"higher_better"}


def test_best_so_far_follows_a_lower_better_primary_metric(seeded: Seeded) -> None:
    seeded.ledger.activity.set_state("primary_direction", "lower_better")
    rows = _rows(seeded.ledger, "SELECT * FROM v_score_over_time WHERE lane_id = 'lane-a' ORDER BY created_at")
    assert [r["lane_best_so_far"] for r in rows] == pytest.approx([0.6, 0.6, 0.6])
    assert [r["new_lane_best"] for r in rows] == [True, False, False]
    edge = _rows(seeded.ledger, f"SELECT improvement FROM v_lineage WHERE attempt_id = '{seeded.ids['a3']}'")
    assert edge[0]["improvement"] == pytest.approx(-0.05)


def test_lineage_has_one_edge_per_parent_with_depth_root_and_improvement(seeded: Seeded) -> None:
    ids = seeded.ids
    rows = _rows(seeded.ledger, "SELECT * FROM v_lineage ORDER BY depth")
    assert [(r["attempt_id"], r["parent_attempt_id"], r["depth"]) for r in rows] == [
        (ids["a2"], ids["a1"], 1),
        (ids["a3"], ids["a2"], 2),
    ]
    assert {r["root_attempt_id"] for r in rows} == {ids["a1"]}
    assert rows[1]["improvement"] == pytest.approx(0.05) and rows[1]["parent_agent_id"] == "alice"
    assert rows[1]["same_lane"] is True


def test_declared_and_verified_scores_are_paired_per_fold(seeded: Seeded) -> None:
    sql = f"SELECT * FROM v_declared_vs_verified WHERE attempt_id = '{seeded.ids['a1']}' ORDER BY fold"
    rows = _rows(seeded.ledger, sql)
    assert [(r["fold"], r["declared_value"], r["verified_value"], r["agreement"]) for r in rows] == [
        (0, 0.5, 0.5, "match"),
        (1, 0.9, 0.7, "differs"),
    ]
    assert rows[1]["difference"] == pytest.approx(-0.2) and rows[1]["is_primary"] is True
    only = _rows(seeded.ledger, f"SELECT agreement FROM v_declared_vs_verified WHERE attempt_id = '{seeded.ids['a3']}'")
    assert {r["agreement"] for r in only} == {"verified_only"}


def test_failed_checks_are_counted_by_code(seeded: Seeded) -> None:
    rows = {r["code"]: r for r in _rows(seeded.ledger, "SELECT * FROM v_check_failures_by_code")}
    assert set(rows) == {"DUPLICATE_PAYLOAD", "HOLDOUT_GAP"}
    duplicate = rows["DUPLICATE_PAYLOAD"]
    assert (duplicate["n_failures"], duplicate["n_attempts"], duplicate["n_agents"]) == (2, 2, 2)
    assert duplicate["lanes"] == "lane-a,lane-b" and duplicate["source"] == "review"


def test_lane_states_follow_claims_releases_and_decisions(seeded: Seeded) -> None:
    rows = _rows(seeded.ledger, "SELECT * FROM v_lane_states_over_time WHERE lane_id = 'lane-a'")
    rows.sort(key=lambda r: (r["changed_at"], ["created", "claimed", "released", "decision"].index(r["event"])))
    assert [(r["event"], r["status"], r["active_claims"]) for r in rows] == [
        ("created", "open", 0),
        ("claimed", "claimed", 2),
        ("claimed", "claimed", 2),
        ("released", "claimed", 1),
        ("released", "open", 0),
        ("decision", "covered", 0),
    ]
    assert rows[-1]["until"] is None and rows[-1]["reason"] == "2 accepted attempts"
    assert all(r["until"] is not None for r in rows[:-1])


def test_an_agent_timeline_is_ordered_and_holds_its_reviews(seeded: Seeded) -> None:
    seeded.ledger.activity.log("tool_call", agent_id="alice", subject_type="tool", subject_id="list_lanes")
    rows = _rows(seeded.ledger, "SELECT * FROM v_agent_timeline WHERE agent_id = 'alice' ORDER BY seq")
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert [r["occurred_at"] for r in rows] == sorted(r["occurred_at"] for r in rows)
    reviews = [(r["subject_id"], r["detail"]) for r in rows if r["source"] == "review"]
    assert reviews == [(seeded.ids["a1"], "accepted"), (seeded.ids["a2"], "rejected")]
    assert rows[-1]["subject_id"] == "list_lanes" and rows[-1]["since_previous_s"] >= 0


def test_fold_scores_hold_each_verified_fold_with_its_baseline(seeded: Seeded) -> None:
    sql = f"SELECT * FROM v_fold_scores WHERE attempt_id = '{seeded.ids['a1']}' ORDER BY fold"
    rows = _rows(seeded.ledger, sql)
    assert [(r["fold"], r["value"], r["n_cases"], r["is_primary"]) for r in rows] == [
        (0, 0.5, 4, True),
        (1, 0.7, 4, True),
    ]
    assert rows[0]["baselines"] == [{"predictor": "empty_mask", "value": 0.0}]
