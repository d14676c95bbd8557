"""What the ledger answers from memory between writes (token checks, run state, empty inboxes)
is never stale: each writer makes it re-read."""

from __future__ import annotations

from pathlib import Path

from server.ledger import Ledger


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
