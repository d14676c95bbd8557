"""`amid supervise` flags for managed workers, through the real CLI and a real server: a silent model
trips the stall watchdog at the threshold given and is resumed in its session; a CLI that fails at
once trips the breaker set by flags, and the supervisor says why on stderr and in the ledger; a CLI
that is not there stops the supervisor before any worker starts, naming the flag."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.supervisor.workers.settings import STALL_PROMPT
from amid.server.workspace import Workspace
from tests.server.supervisor.cli_workers import (
    FAILING_CLI,
    calls_of,
    serving,
    stand_in_cli,
    supervise,
    transitions,
    wait_for,
)

pytestmark = pytest.mark.slow


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def test_a_silent_model_trips_the_stall_watchdog_set_by_flag_and_is_resumed_in_its_session(
    workspace: Workspace, tmp_path: Path
) -> None:
    cli, log = stand_in_cli(tmp_path), tmp_path / "supervise.log"
    with serving(workspace):
        supervisor = supervise(workspace, cli, log, "--stall-timeout-s", "1")
        try:
            wait_for(lambda: len(calls_of(workspace)) >= 2, "a resume after the stall", log)
        finally:
            _stop(supervisor)
        events = [event for event, _, _ in transitions(workspace)]
    first, resumed = calls_of(workspace)[:2]
    assert (resumed["session"], resumed["resume"], resumed["prompt"]) == (first["session"], True, STALL_PROMPT)
    assert events[:5] == ["started", "session", "interrupted", "stalled", "resumed"]
    assert "worker worker-1 stalled" in log.read_text()


def test_a_cli_failing_at_once_trips_the_breaker_set_by_flags_and_the_reason_is_said_loudly(
    workspace: Workspace, tmp_path: Path
) -> None:
    cli, log = stand_in_cli(tmp_path, FAILING_CLI, "failing-cli"), tmp_path / "supervise.log"
    flags = ("--crash-burst", "2", "--crash-window-s", "60", "--crash-pause-s", "600")
    with serving(workspace):
        supervisor = supervise(workspace, cli, log, *flags)
        try:
            wait_for(lambda: "paused" in [e for e, _, _ in transitions(workspace)], "the breaker", log)
            wait_for(lambda: "paused for 600 s" in log.read_text(), "the pause said", log)
            status = subprocess.run(
                [sys.executable, "-m", "amid", "status", "-w", str(workspace.root)],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
        finally:
            _stop(supervisor)
        recorded = transitions(workspace)
    said = log.read_text()
    assert [e for e, _, _ in recorded].count("exited") == 2  # the second failure within the window pauses it
    paused = next(detail for event, _, detail in recorded if event == "paused")
    assert paused["pause_s"] == 600 and "2 failures within 60 s" in str(paused["reason"])
    assert "cannot reach the model endpoint (connection refused)" in str(paused["reason"])
    assert "amid supervise: worker worker-1 paused for 600 s: 2 failures within 60 s" in said
    assert "cannot reach the model endpoint" in said
    assert "worker    worker-1 scripted paused" in status, status  # amid status says it is paused, and why
    assert "why: 2 failures within 60 s; last: no_result" in status and "connection refused" in status


def test_a_cli_path_that_is_not_an_executable_stops_the_supervisor_naming_the_flag(
    workspace: Workspace, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-cli"
    with serving(workspace):
        command = [sys.executable, "-m", "amid", "supervise", "-w", str(workspace.root), "--workers", "1"]
        done = subprocess.run([*command, "--cli-path", str(missing)], capture_output=True, text=True, timeout=120)
        recorded = transitions(workspace)
    assert done.returncode == 2
    assert f"cli_path: {missing} is not an executable file" in done.stderr and "Traceback" not in done.stderr
    assert recorded == []
