"""Stage transitions and promotion, driven by seeded evidence and asserted in the ledger."""

from __future__ import annotations

import pytest

from amid.server.context import Services
from tests.server.supervisor.conftest import Make, supervisor_of
from tests.server.supervisor.seed import add_lanes, reviewed

pytestmark = pytest.mark.anyio


def _stages(services: Services) -> list[tuple[str, str, str]]:
    rows = services.ledger.db.fetchall("SELECT from_stage, to_stage, reason FROM v_stage_transitions")
    return [(r["from_stage"], r["to_stage"], r["reason"]) for r in rows]


def _roles(services: Services) -> list[tuple[str, str, str, str | None]]:
    rows = services.ledger.db.fetchall(
        "SELECT agent_id, stage, role, lane_id FROM v_agent_roles ORDER BY assignment_id"
    )
    return [(r["agent_id"], r["stage"], r["role"], r["lane_id"]) for r in rows]


def _decisions(services: Services) -> dict[str, str]:
    rows = services.ledger.db.fetchall("SELECT lane_id, to_status FROM v_lane_decisions ORDER BY decision_id")
    return {r["lane_id"]: r["to_status"] for r in rows}


async def test_exploration_ends_when_primary_lanes_are_covered_and_plateaued_then_the_run_finalizes(
    tuned: Make,
) -> None:
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary", "post": "secondary"})
    best = reviewed(ledger, ws, "ana", "unet", [0.80])
    reviewed(ledger, ws, "ana", "unet", [0.78])
    async with supervisor_of(services) as supervisor:
        first = await supervisor.tick()
        assert first.stage == "exploration" and _decisions(services) == {"unet": "covered"}
        reviewed(ledger, ws, "ana", "unet", [0.79])  # second non-improving: unet plateaus
        reviewed(ledger, ws, "ben", "fm", [0.70])
        reviewed(ledger, ws, "ben", "fm", [0.60], verdict="rejected", codes=("PRED_NOT_REPRODUCED",))
        reviewed(ledger, ws, "ben", "fm", [0.65])
        reviewed(ledger, ws, "cy", "post", [0.9], verdict="rejected", codes=("PRED_NOT_REPRODUCED",))
        second = await supervisor.tick()
        assert second.stage == "exploitation"
        assert _decisions(services) == {"unet": "promoted", "fm": "plateaued"}
        promotion = ledger.db.fetchone("SELECT reason FROM v_lane_decisions WHERE to_status = 'promoted'")
        assert promotion is not None and "gap 0.1 > noise 0: no challenger" in promotion["reason"]
        assert (await supervisor.tick()).stage == "exploitation"  # no plateau since promotion yet
        assert _roles(services) == [  # cy's 0.9 failed checks (a gain to repair); ben's rejected 0.6 was no gain
            ("ana", "exploitation", "optimizer", "unet"),
            ("ben", "exploitation", "support", "unet"),
            ("cy", "exploitation", "repair", "post"),
        ]
        reviewed(ledger, ws, "ana", "unet", [0.77])
        reviewed(ledger, ws, "ana", "unet", [0.76])
        third = await supervisor.tick()
        assert third.stage == "done" or (await supervisor.tick()).stage == "done"
    assert [(f, t) for f, t, _ in _stages(services)] == [
        ("exploration", "exploitation"),
        ("exploitation", "finalization"),
        ("finalization", "done"),
    ]
    assert "every primary lane is covered and plateaued" in _stages(services)[0][2]
    assert "plateaued since promotion" in _stages(services)[1][2]
    final = ledger.db.fetchone("SELECT attempt_id, lane_id, audit_id FROM v_final_choice")
    assert final is not None and final["attempt_id"] == best and final["lane_id"] == "unet" and final["audit_id"]
    assert ledger.db.scalar("SELECT stage FROM v_stage") == "done"
    assert _roles(services)[3:] == [
        ("ana", "finalization", "finalizer", "unet"),
        ("ben", "finalization", "finalizer", "fm"),
        ("cy", "finalization", "finalizer", "post"),
    ]


async def test_a_runner_up_within_fold_noise_is_kept_as_challenger_and_uncovered_lanes_are_waived(
    tuned: Make,
) -> None:
    services = tuned(supervisor_budget_s=1.0)  # the run started before this test: the budget is spent
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary", "nnunet": "primary"})
    reviewed(ledger, ws, "ana", "unet", [0.76, 0.74])  # 0.75, standard error 0.01
    reviewed(ledger, ws, "ben", "fm", [0.80, 0.66])  # 0.73 ± 0.07: the gap 0.02 is within noise
    async with supervisor_of(services) as supervisor:
        assert (await supervisor.tick()).stage == "exploitation"
    assert _decisions(services) == {"nnunet": "waived", "unet": "promoted", "fm": "challenger"}
    assert _roles(services) == [
        ("ana", "exploitation", "optimizer", "unet"),
        ("ben", "exploitation", "challenger", "fm"),
    ]
    reason = ledger.db.fetchone("SELECT reason FROM v_lane_decisions WHERE to_status = 'challenger'")
    assert reason is not None and "fm kept as challenger" in reason["reason"]
    assert "of the wall-clock budget spent" in _stages(services)[0][2]


async def test_lower_is_better_ranks_by_the_smallest_verified_score(tuned: Make) -> None:
    from amid.server.supervisor.promotion import promote
    from amid.server.supervisor.state import RunView

    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"a": "primary", "b": "primary"})
    reviewed(ledger, ws, "ana", "a", [0.2])
    reviewed(ledger, ws, "ben", "b", [0.4])
    async with supervisor_of(services) as supervisor:
        view = await supervisor.view()
    flipped = RunView(view.evidence.model_copy(update={"higher_is_better": False}))
    promotion = promote(flipped)
    assert promotion is not None and promotion.promoted.lane_id == "a"
    assert promote(view) is not None and promote(view).promoted.lane_id == "b"  # type: ignore[union-attr]


async def test_a_revoked_attempt_is_never_promoted(tuned: Make) -> None:
    services = tuned(supervisor_budget_s=1.0)
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary"})
    forged = reviewed(ledger, ws, "ana", "unet", [0.95], pin=False)  # its commit is not in the store
    reviewed(ledger, ws, "ben", "fm", [0.70])
    async with supervisor_of(services) as supervisor:
        assert (await supervisor.tick()).stage == "exploitation"
    assert ledger.attempts.get(forged)["status"] == "revoked"
    assert _decisions(services) == {"unet": "waived", "fm": "promoted"}


async def test_tune_and_smoke_attempts_do_not_count_for_coverage(tuned: Make) -> None:
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    reviewed(ledger, ws, "ana", "unet", [0.9], budget_class="tune")
    reviewed(ledger, ws, "ana", "unet", [0.9], budget_class="smoke")
    async with supervisor_of(services) as supervisor:
        report = await supervisor.tick()
    assert report.stage == "exploration" and _decisions(services) == {}


async def test_stages_only_move_forward(services: Services) -> None:
    from amid.server.errors import Conflict

    sup = services.ledger.supervision
    assert sup.set_stage("exploration", "exploitation", "test", "boss")
    assert not sup.set_stage("exploration", "exploitation", "a repeat", "boss")
    with pytest.raises(Conflict, match="stages go forward"):
        sup.set_stage("finalization", "done", "skipping", "boss")
