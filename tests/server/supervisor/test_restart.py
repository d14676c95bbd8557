"""`amid supervise` as a real process over HTTP: SIGKILLed mid-run and started again, it continues the
run from the server's state without duplicating heartbeats or transitions."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amid.server.demo import start_server, stop_server
from amid.server.ledger import Ledger
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace
from tests.server.supervisor.seed import add_lanes, reviewed


def _sql(workspace: Workspace, query: str) -> list[list[object]]:
    return admin_call(workspace, "sql", {"query": query})["rows"]


def _supervise(workspace: Workspace, poll_s: float, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "amid", "supervise", "-w", str(workspace.root), "--poll-s", str(poll_s)]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(predicate: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def test_a_supervisor_killed_mid_run_and_restarted_continues_without_duplicates(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(workspace.ledger_path)
    add_lanes(ledger, {"unet": "primary", "fm": "primary"})
    for agent, lane, score in (("ana", "unet", 0.8), ("ben", "fm", 0.7), ("ana", "unet", 0.75)):
        reviewed(ledger, workspace, agent, lane, [score])
    ledger.close()
    monkeypatch.setenv("AMID_SUPERVISOR_BUDGET_S", "1")  # already spent: exploration ends on the first tick
    monkeypatch.setenv("AMID_COVERAGE_ATTEMPTS", "1")
    server, _ = start_server(workspace.root)
    log = tmp_path / "supervise.log"
    try:
        first = _supervise(workspace, poll_s=600, log=log)  # one tick, then a long sleep
        _wait_for(lambda: _sql(workspace, "SELECT stage FROM v_stage") == [["exploitation"]] or first.poll())
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = _supervise(workspace, poll_s=0.2, log=log)
        assert second.wait(timeout=120) == 0, log.read_text()
        transitions = _sql(workspace, "SELECT from_stage, to_stage FROM v_stage_transitions ORDER BY transition_id")
        beats = _sql(workspace, "SELECT agent_id, cause_key FROM heartbeats WHERE cause_key IS NOT NULL")
        finals = _sql(workspace, "SELECT attempt_id, lane_id FROM v_final_choice")
        promoted = _sql(workspace, "SELECT lane_id FROM v_lane_decisions WHERE to_status = 'promoted'")
    finally:
        stop_server(server)
    assert transitions == [["exploration", "exploitation"], ["exploitation", "finalization"], ["finalization", "done"]]
    assert len(beats) == len({tuple(b) for b in beats})
    keys = {tuple(b) for b in beats}
    for agent in ("ana", "ben"):
        assert (agent, "stage:exploitation") in keys and (agent, "stage:finalization") in keys
    assert sum(1 for _, key in beats if str(key).startswith("reflection:")) == 3
    assert finals == [["att-00001", "unet"]] and promoted == [["unet"]]
    assert "final attempt att-00001" in log.read_text()
