"""A killed `amid supervise` loses no worker session: started again, it resumes each live worker's
recorded session, gives it the heartbeat it never got exactly once, and the old CLI died with the old
supervisor. Real processes throughout: the server, the supervisor (SIGKILL), a worker CLI in bubblewrap."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.sandbox import bwrap_problem
from amid.server.workspace import Workspace
from tests.server.supervisor.cli_workers import (
    calls_of,
    running_as,
    serving,
    stand_in_cli,
    supervise,
    transitions,
    wait_for,
)

pytestmark = pytest.mark.slow


def _send_heartbeat(workspace: Workspace, url: str, prompt: str) -> int:
    token = admin_call(workspace, "token_create", {"name": "old-supervisor", "role": "supervisor"})["token"]

    async def send() -> int:
        async with connect(url, token) as client:
            sent = await call(client, "send_heartbeat", {"agent_id": "worker-1", "kind": "custom", "prompt": prompt})
        return int(sent["heartbeat_id"])

    return anyio.run(send)


def _kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


@pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap cannot run: {bwrap_problem()}")
def test_a_restarted_supervisor_resumes_the_session_and_delivers_the_pending_heartbeat_once(
    workspace: Workspace, tmp_path: Path
) -> None:
    cli, log = stand_in_cli(tmp_path), tmp_path / "supervise.log"
    with serving(workspace) as url:
        first = supervise(workspace, cli, log)
        try:
            wait_for(lambda: any(e == "session" for e, _, _ in transitions(workspace)), "the session recorded", log)
            assert running_as(cli)  # the CLI is seen while its supervisor lives
        finally:
            _kill(first)
        [started] = calls_of(workspace)
        wait_for(lambda: not running_as(cli), "the old CLI dying with its supervisor", log, 30)
        heartbeat_id = _send_heartbeat(workspace, url, "HEARTBEAT sent while no supervisor ran")
        second = supervise(workspace, cli, log)
        try:
            restarted = "worker worker-1 restarted (sandbox bwrap, session resumed)"
            wait_for(lambda: len(calls_of(workspace)) == 2 and restarted in log.read_text(), "the restart", log)
        finally:
            _kill(second)
        third = supervise(workspace, cli, log)
        try:
            wait_for(lambda: len(calls_of(workspace)) == 3, "the third supervisor's start", log)
        finally:
            _kill(third)
        restarts = [(s, d) for e, s, d in transitions(workspace) if e == "restarted"]

    session, calls = started["session"], calls_of(workspace)
    assert [(c["session"], c["resume"]) for c in calls] == [(session, False), (session, True), (session, True)]
    assert calls[1]["prompt"] == "HEARTBEAT sent while no supervisor ran"  # the heartbeat, given once …
    assert "HEARTBEAT" not in str(calls[2]["prompt"])  # … and never again
    assert [s for s, _ in restarts] == [session, session]
    assert restarts[0][1]["heartbeat_ids"] == [heartbeat_id] and "heartbeat_ids" not in restarts[1][1]
    assert {d["sandbox"] for _, d in restarts} == {"bwrap"}
