"""A CLI that stalls before it ever names a session is started afresh with the task prompt (then the
stall prompt), not with the stall prompt alone: the new session must know what it is for."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from amid.server.protocol import INSTRUCTIONS
from amid.server.supervisor.workers.settings import STALL_PROMPT
from amid.server.workspace import Workspace
from tests.server.supervisor.cli_workers import QUIET_CLI, calls_of, serving, stand_in_cli, supervise, wait_for

pytestmark = pytest.mark.slow

# The stand-in CLI, minus its session announcement: it records what it was started with, then says nothing.
MUTE_CLI = QUIET_CLI.replace(
    'print(json.dumps({{"type": "system", "subtype": "init", "session_id": session}}), flush=True)\n', ""
)


def test_a_cli_silent_before_naming_a_session_is_started_afresh_with_the_task_prompt_first(
    workspace: Workspace, tmp_path: Path
) -> None:
    assert MUTE_CLI != QUIET_CLI
    cli, log = stand_in_cli(tmp_path, MUTE_CLI, "mute-cli"), tmp_path / "supervise.log"
    with serving(workspace):
        supervisor = supervise(workspace, cli, log, "--stall-timeout-s", "1", "--sandbox", "none")
        try:
            wait_for(lambda: len(calls_of(workspace)) >= 2, "a fresh start after the stall", log)
        finally:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(timeout=30)
    first, again = calls_of(workspace)[:2]
    assert first["prompt"] == INSTRUCTIONS and first["resume"] is False
    assert again["resume"] is False and again["prompt"] == f"{INSTRUCTIONS}\n\n{STALL_PROMPT}"
