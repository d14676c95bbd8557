"""Ranking by a pessimistic bound widened for tries: the leaderboard, promotion and the final
candidate agree, and the best of many honest repeats is not ranked first for its luck."""

from __future__ import annotations

import pytest

from amid.server.context import Services
from amid.server.package.evidence import best_eligible
from amid.server.ranking import bound, rank_rows, standard_error, z_value
from tests.clients import local_client
from tests.server.supervisor.conftest import Make, supervisor_of
from tests.server.supervisor.seed import add_lanes, reviewed

pytestmark = pytest.mark.anyio
SIX_SEEDS = [0.519, 0.531, 0.524, 0.547, 0.538, 0.559]  # issue 21: one agent, one lane, six honest seeds


def test_standard_error_counts_patients_not_scans() -> None:
    scans = {"p1a": 0.9, "p1b": 0.9, "p2a": 0.5, "p2b": 0.5, "p3a": 0.7, "p3b": 0.7}
    by_patient = standard_error(scans, {case: case[:2] for case in scans})
    by_scan = standard_error(scans)
    assert by_patient is not None and by_scan is not None and by_patient > by_scan * 1.3
    assert standard_error({"a": 0.5}) is None and standard_error({"a": 0.5, "b": float("nan")}) is None
    assert standard_error({"a": 0.4, "b": 0.6}) == pytest.approx(0.1)  # s / √n


def test_the_bound_is_pessimistic_in_the_metrics_direction_and_widens_with_tries() -> None:
    assert bound(0.8, 0.05, 1, True) == pytest.approx(0.8 - 1.6449 * 0.05, abs=1e-4)
    assert bound(4.0, 0.5, 1, False) == pytest.approx(4.0 + 1.6449 * 0.5, abs=1e-4)  # HD95 in mm: above
    assert z_value(1) < z_value(6) < z_value(100) and z_value(6) == pytest.approx(2.394, abs=1e-3)
    assert bound(0.8, None, 6, True) == 0.8  # no spread recorded: nothing to widen


def test_a_steady_lower_hd95_ranks_above_a_noisy_lower_one() -> None:
    rows = [
        {"attempt_id": "noisy", "verified_score": 3.0, "score_se": 2.0, "tries": 1, "created_at": "1"},
        {"attempt_id": "steady", "verified_score": 3.5, "score_se": 0.1, "tries": 1, "created_at": "2"},
        {"attempt_id": "unscored", "verified_score": None, "score_se": None, "tries": 1, "created_at": "3"},
    ]
    assert [r["attempt_id"] for r in rank_rows(rows, higher_is_better=False)] == ["steady", "noisy"]


def _seed_repetition(services: Services) -> tuple[list[str], str]:
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    seeds = [reviewed(ledger, ws, "ana", "unet", [score], case_se=0.03) for score in SIX_SEEDS]
    once = reviewed(ledger, ws, "ben", "unet", [0.545], case_se=0.03)
    return seeds, once


async def test_the_max_of_six_honest_seeds_is_not_ranked_above_one_try_of_the_same_skill(services: Services) -> None:
    seeds, once = _seed_repetition(services)
    async with local_client(services, "eve", "human") as client:
        from amid.server.mcp_client import call

        board = await call(client, "leaderboard", {"lane_id": "unet", "per_lane": 10})
    rows = {r["attempt_id"]: r for r in board["rows"]}
    assert board["rows"][0]["attempt_id"] == once and rows[once]["tries"] == 1  # 0.545 − 1.64·0.03 = 0.496
    luckiest = rows[seeds[-1]]
    assert luckiest["verified_score"] == pytest.approx(0.559) and luckiest["tries"] == 6 and luckiest["rank"] == 2
    assert luckiest["ranked_by"] == pytest.approx(0.559 - z_value(6) * 0.03) and luckiest["score_se"] == 0.03


async def test_one_fold_attempts_have_noise_from_their_case_spread(tuned: Make) -> None:
    """Before: noise 0 for one fold, so 0.75 beat 0.72 outright and no challenger was kept."""
    services = tuned(supervisor_budget_s=1.0)
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary"})
    reviewed(ledger, ws, "ana", "unet", [0.75], case_se=0.05)  # bound 0.668
    reviewed(ledger, ws, "ben", "fm", [0.72], case_se=0.01)  # bound 0.704
    async with supervisor_of(services) as supervisor:
        assert (await supervisor.tick()).stage == "exploitation"
    rows = ledger.db.fetchall("SELECT lane_id, to_status, reason, evidence FROM v_lane_decisions ORDER BY decision_id")
    decided = {r["lane_id"]: r["to_status"] for r in rows}
    assert decided == {"fm": "promoted", "unet": "challenger"}  # gap 0.03 ≤ noise hypot(0.05, 0.01)
    promoted = next(r["reason"] for r in rows if r["to_status"] == "promoted")
    assert "fm: " in promoted and "± 0.05" in promoted and "after 1 tries" in promoted


async def test_the_final_candidate_is_the_top_ranked_eligible_attempt(services: Services) -> None:
    seeds, once = _seed_repetition(services)
    services.ledger.supervision.decide_lane("unet", "promoted", "test", {}, "boss")
    assert best_eligible(services.ledger) == once
    assert once not in seeds
