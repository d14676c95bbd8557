"""run_evidence's cursor: after the first answer a supervisor gets only what changed, and its merged copy
is what a fresh read of the whole window would give (nothing lost between two answers, nothing kept that
the window dropped)."""

from __future__ import annotations

from typing import Any

import pytest

from amid.server.context import Services
from amid.server.ledger.audits import AuditCheckRow
from amid.server.ledger.database import utcnow
from amid.server.mcp_client import call
from amid.server.supervisor.state import EvidenceSync, RunView
from tests.clients import error, local_client
from tests.server.supervisor.conftest import Make
from tests.server.supervisor.seed import add_lanes, pending, reviewed

pytestmark = pytest.mark.anyio


def _comparable(view: RunView) -> dict[str, Any]:
    evidence = view.evidence
    return {
        "attempts": [a.model_dump() for a in evidence.attempts],
        "causes": sorted((c.agent_id, c.cause_key) for c in evidence.causes_sent),
        "focus": [n.note_id for n in evidence.focus_notes],
    }


async def _fresh(services: Services, limit: int) -> RunView:
    async with local_client(services, "fresh", "supervisor") as client:
        return await EvidenceSync(limit).refresh(lambda name, args: call(client, name, args))


async def test_a_synced_copy_equals_a_fresh_read_after_verdicts_revocations_and_new_tries(tuned: Make) -> None:
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary"})
    old = reviewed(ledger, ws, "ana", "unet", [0.7, 0.72], case_se=0.01)
    reviewed(ledger, ws, "ben", "fm", [0.6], verdict="rejected", codes=("PRED_NOT_REPRODUCED",))
    answers: list[dict[str, Any]] = []
    async with local_client(services, "boss", "supervisor") as client:

        async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            answers.append(await call(client, name, arguments))
            return answers[-1]

        sync = EvidenceSync(limit=3)
        await sync.refresh(tool)
        for _ in range(3):  # rejected tries push the rejected ones out of a 3-attempt window
            reviewed(ledger, ws, "ben", "fm", [0.5], verdict="rejected", codes=("PRED_UNSTABLE",))
        later = reviewed(ledger, ws, "ana", "unet", [0.74], case_se=0.02)  # a second try widens the first's bound
        waiting = pending(ledger, ws, "ana", "fm")
        revoked = reviewed(ledger, ws, "ben", "fm", [0.65])
        ledger.audits.record("boss", utcnow(), 1, [AuditCheckRow(revoked, "ARTIFACT_CHANGED", False, "changed", {})])
        ledger.notes.add("ana", "focus", "unet", "next", "a deeper net", {"focus": "deeper"})
        ledger.supervision.heartbeat_once("ana", "custom", "reflect", "boss", "reflection:manual")
        view = await sync.refresh(tool)
    fresh = await _fresh(services, limit=3)
    assert _comparable(view) == _comparable(fresh)
    shown = {a.attempt_id: a for a in view.evidence.attempts}
    assert {old, later, waiting} <= set(shown) and shown[old].tries == 2
    last = answers[-1]
    assert last["changes_only"] is True and last["complete"] is True
    assert shown[revoked].status == "revoked"
    assert len(last["attempts"]) == 6 and [c["cause_key"] for c in last["causes_sent"]] == ["reflection:manual"]


async def test_changes_come_in_pages_and_a_foreign_cursor_is_refused(tuned: Make) -> None:
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    async with local_client(services, "boss", "supervisor") as client:
        first = await call(client, "run_evidence", {})
        made = [reviewed(ledger, ws, "ana", "unet", [0.5 + i / 100]) for i in range(5)]
        page = await call(client, "run_evidence", {"since": first["cursor"], "page": 3})
        rest = await call(client, "run_evidence", {"since": page["cursor"], "page": 3})
        nothing = await call(client, "run_evidence", {"since": rest["cursor"]})
        ahead = await error(client, "run_evidence", {"since": "a999999.h0.n0"})
        garbled = await error(client, "run_evidence", {"since": "yesterday"})
    assert first["attempts"] == [] and first["changes_only"] is False
    assert page["complete"] is False and [a["attempt_id"] for a in page["attempts"]] == made[:3]
    assert rest["complete"] is True and [a["attempt_id"] for a in rest["attempts"]] == made[3:]
    assert nothing["attempts"] == [] and nothing["cursor"] == rest["cursor"]
    assert "since" in ahead and "without since" in ahead
    assert "since" in garbled and "cursor" in garbled


def test_evidence_rows_equal_v_evidence(tuned: Make) -> None:
    # The supervisor's rows are computed for the asked attempts only; v_evidence (what humans query) for all.
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary", "fm": "primary"})
    reviewed(ledger, ws, "ana", "unet", [0.7, 0.72], case_se=0.01)
    reviewed(ledger, ws, "ana", "unet", [0.75])
    reviewed(ledger, ws, "ben", "fm", [0.6], verdict="rejected", codes=("PRED_NOT_REPRODUCED", "HOLDOUT_GAP"))
    reviewed(ledger, ws, "ben", "fm", [0.61, 0.63, 0.6], case_se=0.03)
    reviewed(ledger, ws, "ben", "unet", [0.4], budget_class="smoke")
    pending(ledger, ws, "ana", "fm")
    ledger.attempts.withdraw(pending(ledger, ws, "ana", "fm"), "ana")
    ledger.reviews.request(pending(ledger, ws, "ben", "fm"), "ben")  # in review
    failed, _ = ledger.reviews.request(pending(ledger, ws, "ben", "unet"), "ben")
    assert ledger.reviews.start(failed["review_id"])
    ledger.reviews.fail(failed["review_id"], "the replay crashed")  # back to pending, no verdict
    changes = ledger.supervision.evidence_changes(None, limit=100, page=100)
    tries = {(t["agent_id"], t["lane_id"]): t["tries"] for t in changes.tries}
    ours = {row["attempt_id"]: row for row in changes.attempts}
    theirs = {row["attempt_id"]: row for row in ledger.db.fetchall("SELECT * FROM v_evidence")}
    assert set(ours) == set(theirs) and len(ours) == 9
    for attempt_id, row in theirs.items():
        mine = ours[attempt_id]
        resolved = tries[(mine["agent_id"], mine["lane_id"])] if mine["tries"] is None else mine["tries"]
        assert {**mine, "tries": resolved, "change_seq": None} == {**row, "change_seq": None}, attempt_id


async def test_a_cursor_the_server_refuses_makes_the_copy_read_the_whole_window_again(tuned: Make) -> None:
    services = tuned()
    ledger, ws = services.ledger, services.workspace
    add_lanes(ledger, {"unet": "primary"})
    kept = reviewed(ledger, ws, "ana", "unet", [0.7])
    async with local_client(services, "boss", "supervisor") as client:
        sync = EvidenceSync(limit=10)
        sync.cursor = "a999999.h0.n0"  # as from a ledger restored to an older state
        view = await sync.refresh(lambda name, args: call(client, name, args))
    assert [a.attempt_id for a in view.evidence.attempts] == [kept] and sync.cursor != "a999999.h0.n0"
