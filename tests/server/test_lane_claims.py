"""Lane claims are leases: exclusive under concurrency, renewed by activity, claimable again once expired."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from amid.server.errors import Conflict, NotFound
from amid.server.ledger import Ledger, utcnow
from amid.server.ledger.lanes import LaneRow

LEASE_S = 600


@pytest.fixture
def ledger(tmp_path) -> Ledger:  # type: ignore[no-untyped-def]
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
        for name in ("nnunet", "monai", "ensemble")
    ]
    ledger.lanes.add(rows, utcnow())
    yield ledger
    ledger.close()


def _status(ledger: Ledger, lane_id: str) -> str:
    return str((ledger.lanes.get(lane_id) or {})["status"])


def test_claim_is_exclusive_under_concurrency(ledger: Ledger) -> None:
    start = threading.Barrier(32)
    won: list[str] = []
    refused: list[str] = []

    def claim(agent: str) -> None:
        start.wait()
        try:
            ledger.lanes.claim("nnunet", agent, now=utcnow(), lease_s=LEASE_S, max_claimants=1)
            won.append(agent)
        except Conflict as exc:
            refused.append(exc.message)

    threads = [threading.Thread(target=claim, args=(f"agent{i:02d}",)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 31
    assert all(f"held by {won[0]}" in message for message in refused)
    assert [c["agent_id"] for c in ledger.lanes.active_claims("nnunet", LEASE_S)] == won
    assert _status(ledger, "nnunet") == "claimed"


def test_an_expired_lease_can_be_claimed_again(ledger: Ledger) -> None:
    start = utcnow() - timedelta(seconds=2 * LEASE_S)
    ledger.lanes.claim("nnunet", "idle", now=start, lease_s=LEASE_S, max_claimants=1)
    with pytest.raises(Conflict):
        ledger.lanes.claim(
            "nnunet", "eager", now=start + timedelta(seconds=LEASE_S - 1), lease_s=LEASE_S, max_claimants=1
        )
    outcome = ledger.lanes.claim("nnunet", "eager", now=utcnow(), lease_s=LEASE_S, max_claimants=1)
    assert outcome.holders == ["eager"] and not outcome.renewed
    expired = ledger.db.fetchone("SELECT released_at FROM claims WHERE agent_id = 'idle'")
    assert expired is not None and expired["released_at"] == start + timedelta(seconds=LEASE_S)
    assert ledger.activity.events(kind="claim_expired")[0]["subject_id"] == "nnunet"


def test_the_holders_activity_renews_the_lease(ledger: Ledger) -> None:
    long_ago = utcnow() - timedelta(seconds=LEASE_S - 5)  # nominal expiry: 5 s from now
    ledger.lanes.claim("nnunet", "busy", now=long_ago, lease_s=LEASE_S, max_claimants=1)
    ledger.activity.log("tool_call", agent_id="busy", subject_type="tool", subject_id="get_job")
    later = utcnow() + timedelta(seconds=60)
    with pytest.raises(Conflict, match="held by busy"):
        ledger.lanes.claim("nnunet", "other", now=later, lease_s=LEASE_S, max_claimants=1)
    much_later = utcnow() + timedelta(seconds=LEASE_S + 1)
    assert ledger.lanes.claim("nnunet", "other", now=much_later, lease_s=LEASE_S, max_claimants=1).holders == ["other"]


def test_max_claimants_lets_that_many_agents_share_a_lane(ledger: Ledger) -> None:
    for agent in ("a", "b"):
        ledger.lanes.claim("monai", agent, now=utcnow(), lease_s=LEASE_S, max_claimants=2)
    with pytest.raises(Conflict, match="at most 2 claimant"):
        ledger.lanes.claim("monai", "c", now=utcnow(), lease_s=LEASE_S, max_claimants=2)


def test_an_agent_holds_one_lane_and_claiming_again_renews(ledger: Ledger) -> None:
    ledger.lanes.claim("nnunet", "w1", now=utcnow(), lease_s=LEASE_S, max_claimants=1)
    assert ledger.lanes.claim("nnunet", "w1", now=utcnow(), lease_s=LEASE_S, max_claimants=1).renewed
    moved = ledger.lanes.claim("monai", "w1", now=utcnow(), lease_s=LEASE_S, max_claimants=1)
    assert moved.released == ["nnunet"]
    assert (_status(ledger, "nnunet"), _status(ledger, "monai")) == ("open", "claimed")


def test_release_reopens_the_lane_and_only_the_holder_can_release(ledger: Ledger) -> None:
    ledger.lanes.claim("ensemble", "w1", now=utcnow(), lease_s=LEASE_S, max_claimants=1)
    assert not ledger.lanes.release("ensemble", "w2", utcnow())
    assert ledger.lanes.release("ensemble", "w1", utcnow())
    assert _status(ledger, "ensemble") == "open"
    assert ledger.lanes.history("ensemble")["claims"][0]["agent_id"] == "w1"


def test_unknown_and_retired_lanes_cannot_be_claimed(ledger: Ledger) -> None:
    with pytest.raises(NotFound, match="got 'nope'; expected a lane of the run"):
        ledger.lanes.claim("nope", "w1", now=utcnow(), lease_s=LEASE_S, max_claimants=1)
    ledger.db.execute("UPDATE lanes SET status = 'retired' WHERE lane_id = 'monai'")
    with pytest.raises(Conflict, match="is retired"):
        ledger.lanes.claim("monai", "w1", now=utcnow(), lease_s=LEASE_S, max_claimants=1)


def test_lanes_are_added_once(ledger: Ledger) -> None:
    again = LaneRow(
        lane_id="nnunet", title="x", family="baseline", tier="primary", origin="planner", rank=0, lane_file="x", spec={}
    )
    assert ledger.lanes.add([again], utcnow()) == 0
    assert ledger.lanes.count("planner") == 3
