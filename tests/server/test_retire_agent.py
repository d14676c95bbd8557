"""Retiring a worker gives back its lane claims (each release an event) and revokes its tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server import admin
from amid.server.ledger import Ledger, utcnow
from amid.server.ledger.lanes import LaneRow
from tests.conftest import DemoRun


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    ledger = Ledger(tmp_path / "amid.duckdb")
    rows = [
        LaneRow(
            lane_id=name,
            title=name,
            family="baseline",
            tier="primary",
            origin="planner",
            rank=1.0,
            lane_file=f"memory/lanes/{name}.md",
            spec={},
        )
        for name in ("nnunet", "monai")
    ]
    ledger.lanes.add(rows, utcnow())
    yield ledger
    ledger.close()


def _live_claims(ledger: Ledger) -> list[tuple[str, str]]:
    rows = ledger.db.fetchall("SELECT lane_id, agent_id FROM claims WHERE released_at IS NULL ORDER BY lane_id")
    return [(r["lane_id"], r["agent_id"]) for r in rows]


def test_retiring_a_worker_releases_its_claim_as_an_event_and_revokes_its_token(ledger: Ledger) -> None:
    for agent in ("worker-1", "worker-2"):
        ledger.identities.create_token(agent, "agent")
    ledger.lanes.claim("nnunet", "worker-1", now=utcnow(), lease_s=600, max_claimants=1)
    ledger.lanes.claim("monai", "worker-2", now=utcnow(), lease_s=600, max_claimants=1)
    result = admin.retire_agent(ledger, "worker-1")
    assert result == {"agent_id": "worker-1", "released": ["nnunet"], "revoked": 1}
    assert _live_claims(ledger) == [("monai", "worker-2")]  # the other worker keeps its lane
    assert (ledger.lanes.get("nnunet") or {})["status"] == "open"
    events = ledger.db.fetchall("SELECT subject_id, payload FROM events WHERE kind = 'lane_released'")
    assert [(e["subject_id"], '"reason": "worker retired"' in e["payload"]) for e in events] == [("nnunet", True)]
    assert ledger.identities.list()[0]["revoked_at"] is not None
    again = admin.retire_agent(ledger, "worker-1")  # a second stop finds nothing to give back, and no error
    assert again == {"agent_id": "worker-1", "released": [], "revoked": 0}


def test_after_the_demo_no_retired_worker_holds_a_lane(demo_run: DemoRun) -> None:
    ledger = Ledger(demo_run.workspace / "amid.duckdb", read_only=True)
    try:
        live = _live_claims(ledger)
        claimed = ledger.db.fetchall("SELECT lane_id FROM lanes WHERE status = 'claimed'")
        retired = ledger.db.fetchall("SELECT agent_id FROM workers WHERE state = 'retired'")
    finally:
        ledger.close()
    assert len(retired) == 3 and live == [] and claimed == []  # before: a lane stayed claimed by a revoked worker
