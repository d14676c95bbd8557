"""Heartbeats: reflection, consolidation, plateau → focus note, isolation between agents, idempotence."""

from __future__ import annotations

import pytest

from amid.server.context import Services
from tests.clients import error, local_client, ok
from tests.server.supervisor.conftest import Make, supervisor_of
from tests.server.supervisor.seed import add_lanes, pending, reviewed

pytestmark = pytest.mark.anyio


def _beats(services: Services, agent_id: str) -> list[dict]:
    return services.ledger.db.fetchall(
        "SELECT kind, cause_key, prompt FROM heartbeats WHERE agent_id = ? ORDER BY heartbeat_id", [agent_id]
    )


async def test_a_heartbeat_carries_only_the_receivers_own_results(tuned: Make) -> None:
    services = tuned(consolidate_every=2)
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary"})
    ana = reviewed(ledger, ws, "ana", "unet", [0.8123])
    ben = reviewed(ledger, ws, "ben", "fm", [0.6789], verdict="rejected", codes=("PRED_NOT_REPRODUCED",))
    ben_ok = reviewed(ledger, ws, "ben", "fm", [0.7011])
    async with supervisor_of(services) as supervisor:
        await supervisor.tick()
    ana_beats, ben_beats = _beats(services, "ana"), _beats(services, "ben")
    assert [b["kind"] for b in ana_beats] == ["reflection", "consolidation"]
    assert sorted(b["kind"] for b in ben_beats) == ["consolidation", "reflection", "reflection"]
    assert "PRED_NOT_REPRODUCED" in ben_beats[0]["prompt"] and ben in ben_beats[0]["prompt"]
    ana_text, ben_text = " ".join(b["prompt"] for b in ana_beats), " ".join(b["prompt"] for b in ben_beats)
    for foreign in (ben, ben_ok, "0.6789", "0.7011", "0.679", "0.701", "ben", "PRED_NOT_REPRODUCED"):
        assert foreign not in ana_text, foreign
    for foreign in (ana, "0.8123", "0.812", "ana"):
        assert foreign not in ben_text, foreign
    assert ana in ana_text and "0.8123" in ana_text


async def test_heartbeats_are_sent_once_per_cause_across_supervisors(tuned: Make) -> None:
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    reviewed(ledger, ws, "ana", "unet", [0.8])
    async with supervisor_of(services) as supervisor:
        await supervisor.tick()
    async with supervisor_of(services) as restarted:  # a new supervisor rebuilds from the server
        again = await restarted.tick()
    assert again.heartbeats == []
    keys = [b["cause_key"] for b in _beats(services, "ana")]
    assert len(keys) == len(set(keys)) and any(k.startswith("reflection:rev-") for k in keys)
    async with local_client(services, "boss", "supervisor") as boss:
        first = ledger.db.fetchone("SELECT heartbeat_id, cause_key FROM heartbeats WHERE agent_id = 'ana' LIMIT 1")
        assert first is not None
        repeat = await ok(
            boss,
            "send_heartbeat",
            {"agent_id": "ana", "kind": "custom", "prompt": "again", "cause_key": first["cause_key"]},
        )
    assert repeat["created"] is False and repeat["heartbeat_id"] == first["heartbeat_id"]


async def test_a_plateau_demands_a_focus_note_before_more_real_attempts_are_reviewed(tuned: Make) -> None:
    services = tuned(plateau_after=2)
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    reviewed(ledger, ws, "ana", "unet", [0.80])
    reviewed(ledger, ws, "ana", "unet", [0.70], verdict="rejected", codes=("METRIC_MISMATCH",))
    last = reviewed(ledger, ws, "ana", "unet", [0.79])
    async with supervisor_of(services) as supervisor:
        await supervisor.tick()
    plateau = [b for b in _beats(services, "ana") if b["kind"] == "plateau"]
    assert len(plateau) == 1 and "focus" in plateau[0]["prompt"] and "abandon_condition" in plateau[0]["prompt"]
    next_attempt = pending(ledger, ws, "ana", "unet")
    given = ledger.reviews.latest_for(last)
    async with local_client(services, "ana") as ana:
        refused = await error(ana, "request_review", {"attempt_id": next_attempt})
        assert refused.startswith("CONFLICT: attempt_id: your lane plateaued") and "post_note kind=focus" in refused
        # the review that plateaued the lane is still hers to read: asking again returns it, queues nothing
        # (an agent resumed while that review ran asks again; refusing it left the demo's cheat stuck)
        again = await ok(ana, "request_review", {"attempt_id": last})
        assert (again["review_id"], again["status"]) == (given["review_id"], "done")
        assert ledger.db.scalar("SELECT count(*) FROM reviews WHERE attempt_id = ?", [next_attempt]) == 0
        await ok(
            ana,
            "post_note",
            {
                "kind": "focus",
                "title": "Switch to a larger patch",
                "body": "plan",
                "lane_id": "unet",
                "focus": "patch 128",
                "evidence": "att-00001 0.80",
                "remaining_budget": "1 h",
                "abandon_condition": "no gain in 2 attempts",
            },
        )
    assert ledger.supervision.focus_required("ana") is None


async def test_an_agent_may_have_at_most_max_pending_reviews_in_flight(tuned: Make) -> None:
    services = tuned(max_pending_reviews=2)
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    in_flight = [pending(ledger, ws, "ana", "unet") for _ in range(2)]
    for attempt_id in in_flight:
        ledger.reviews.request(attempt_id, "ana", "ana")
    third = pending(ledger, ws, "ana", "unet")
    async with local_client(services, "ana") as ana:
        refused = await error(ana, "request_review", {"attempt_id": third})
        again = await ok(ana, "request_review", {"attempt_id": in_flight[0]})  # its own review: not counted
    assert refused.startswith("CONFLICT: attempt_id: you have 2 reviews in flight") and "at most 2" in refused
    assert again["status"] in ("queued", "running")  # the pool may already have started it
