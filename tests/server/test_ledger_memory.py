"""What the ledger answers from memory between writes (token checks, run state, empty inboxes)
is never stale: each writer makes it re-read."""

from __future__ import annotations

from pathlib import Path

from amid.server.ledger import Ledger


def test_a_revoked_token_is_refused_although_it_was_verified_before(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    token = ledger.identities.create_token("alice", "agent")
    assert ledger.identities.verify(token) is not None
    assert ledger.identities.verify(token) is not None  # now from memory
    ledger.identities.revoke("alice")
    assert ledger.identities.verify(token) is None
    assert ledger.identities.verify("amid_not-a-token") is None
    ledger.close()


def test_an_empty_inbox_seen_once_still_delivers_a_later_heartbeat(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.identities.create_token("alice", "agent")
    assert ledger.activity.take_inbox("alice") == []
    assert ledger.activity.take_inbox("alice") == []  # from memory
    ledger.activity.add_heartbeat("alice", "reflection", "write a reflection", "boss", None)
    assert [row["prompt"] for row in ledger.activity.take_inbox("alice")] == ["write a reflection"]
    ledger.supervision.heartbeat_once("alice", "plateau", "post a focus note", "boss", "plateau-1")
    assert [row["prompt"] for row in ledger.activity.take_inbox("alice")] == ["post a focus note"]
    assert ledger.activity.take_inbox("alice") == []
    ledger.close()


def test_run_state_read_from_memory_follows_every_writer(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.activity.set_state("stage", "exploration")
    assert ledger.activity.get_state("stage") == "exploration"
    assert ledger.activity.get_state("missing", "fallback") == "fallback"
    ledger.supervision.set_stage("exploration", "exploitation", "plateau", "boss")
    assert ledger.activity.get_state("stage") == "exploitation"
    ledger.activity.set_state("stage", "finalization")
    assert ledger.activity.get_state("stage") == "finalization"
    ledger.close()


def test_deferred_call_events_are_seen_by_every_later_read_and_survive_close(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    for n in range(3):
        ledger.activity.log("tool_call", agent_id="alice", subject_type="tool", subject_id=f"t{n}", deferred=True)
    assert ledger.workers.last_tool_call("alice") is not None  # a read of events writes the batch first
    ledger.activity.log("tool_call", agent_id="alice", subject_type="tool", subject_id="t3", deferred=True)
    ledger.activity.log("server_stopped", agent_id=None)  # an ordinary event keeps its place after it
    ledger.activity.log("tool_call", agent_id="alice", subject_type="tool", subject_id="t4", deferred=True)
    page = ledger.db.human_query("SELECT count(*) FROM v_agent_activity WHERE n_tool_calls = 5")  # a snapshot
    assert page.rows == [(1,)]
    ledger.activity.log("tool_call", agent_id="alice", subject_type="tool", subject_id="t5", deferred=True)
    ledger.close()
    reopened = Ledger(tmp_path / "ledger.duckdb")
    kinds = [r["subject_id"] or r["kind"] for r in reopened.db.fetchall("SELECT * FROM events ORDER BY event_id")]
    assert kinds == ["t0", "t1", "t2", "t3", "server_stopped", "t4", "t5"]
    reopened.close()
