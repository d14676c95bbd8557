"""Each real CLI (Claude Code, Codex, OpenCode) under the real `amid supervise`, its model a scripted endpoint:
a supervisor killed with SIGKILL and started again resumes the CLI's own session and gives it the heartbeat
sent meanwhile exactly once; a model that never answers trips the stall watchdog set by flag and the worker
is resumed in its session; a model that refuses the key makes the CLI exit at once, and the breaker set by
flags pauses the worker and says why on stderr, in `amid status` and in the ledger's worker events."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amid.server.supervisor.workers.settings import CONTINUE_PROMPT, STALL_PROMPT
from amid.server.workspace import Workspace
from tests.server.supervisor.cli_workers import running_as, serving, transitions, wait_for
from tests.server.supervisor.workers.real_supervise import (
    CLIS,
    binary_of,
    kill,
    printed_sessions,
    send_heartbeat,
    supervise,
    worker_log,
)

# Real CLIs start slowly on a loaded machine; the stall case alone waits through 90 s of silence for OpenCode.
pytestmark = [pytest.mark.slow, pytest.mark.external, pytest.mark.timeout(900)]
BACKENDS = sorted(CLIS)
HEARTBEAT = "HEARTBEAT sent while no supervisor ran: post a note on what you learned."
# Above each CLI's silence from its start to its first event on a loaded machine (the watchdog's clock starts
# with the process; at load 17 on 2 cores Claude Code printed after 13 s, OpenCode, which prints nothing until
# its first model step, after 43 s even unsandboxed at load 19).
STALL_S = {"claude-code": "20", "codex": "20", "opencode": "90"}
AUTH_ERRORS = {"claude-code": "Invalid API key", "codex": "401 Unauthorized", "opencode": "Incorrect API key"}


def _events(workspace: Workspace) -> list[str]:
    return [event for event, _, _ in transitions(workspace)]


def _where(body: dict[str, Any], text: str) -> list[str]:
    """Where `text` stands in a request: each message (index, role) or other top-level field holding it."""
    turns = "messages" if "messages" in body else "input"  # Messages and chat bodies; a Responses body
    places = [f"{k}" for k, v in body.items() if k != turns and text in json.dumps(v)]
    for i, message in enumerate(body.get(turns) or []):
        places += [f"{i}:{message.get('role')}: {json.dumps(message)[:400]}"] * json.dumps(message).count(text)
    return places


def _one_session(workspace: Workspace, backend: str) -> str:
    """The CLI printed one session id over all its launches, and the ledger recorded only that one."""
    printed = printed_sessions(workspace, CLIS[backend])
    recorded = {session for _, session, _ in transitions(workspace) if session}
    assert printed and set(printed) == recorded == {printed[0]}, (printed, recorded, worker_log(workspace))
    return printed[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_supervisor_killed_and_restarted_resumes_the_real_cli_session_and_gives_the_heartbeat_once(
    backend: str, workspace: Workspace, tmp_path: Path
) -> None:
    cli, log = CLIS[backend], tmp_path / "supervise.log"
    binary = str(binary_of(cli))
    with cli.endpoint() as endpoint, serving(workspace) as url:
        # After get_task the model thinks and thinks: the CLI is alive, waiting, when its supervisor dies.
        endpoint.hold = lambda body: cli.session_turn(body) and "HEARTBEAT" not in cli.last_user_text(body)
        first = supervise(workspace, cli, endpoint, log)
        try:
            silent = lambda: "session" in _events(workspace) and bool(endpoint.held)  # noqa: E731
            wait_for(silent, "get_task, then silence", log, 120)
        finally:
            kill(first)
        wait_for(lambda: not running_as(binary), "the old CLI dying with its supervisor", log, 30)
        heartbeat_id = send_heartbeat(workspace, url, HEARTBEAT)
        for _ in range(2):  # the second restart must not give the heartbeat again
            held = len(endpoint.held)
            again = supervise(workspace, cli, endpoint, log)
            try:
                wait_for(lambda n=held: len(endpoint.held) > n, "the resumed session waiting on its model", log, 120)
            finally:
                kill(again)
            wait_for(lambda: not running_as(binary), "the CLI dying with its supervisor", log, 30)
        recorded = transitions(workspace)
    session = _one_session(workspace, backend)
    restarts = [(s, d) for e, s, d in recorded if e == "restarted"]
    assert [s for s, _ in restarts] == [session, session] and all(d["resume"] for _, d in restarts)
    assert restarts[0][1]["heartbeat_ids"] == [heartbeat_id] and "heartbeat_ids" not in restarts[1][1]
    assert {d["sandbox"] for _, d in restarts} == {"bwrap"}
    turns = [r for r in endpoint.requests + endpoint.held if HEARTBEAT in cli.last_user_text(r)]
    assert len(turns) == 1, f"the endpoint was given the heartbeat {len(turns)} times"
    last = endpoint.held[-1]  # the last turn of the session: everything before it, the heartbeat once
    found = _where(last, "HEARTBEAT sent while no supervisor ran")
    assert len(found) == 1, found
    assert "demo-liver-lesion-ct" in " ".join(cli.tool_results(last))  # the first run's get_task, same session


# OpenCode prints nothing until its first model step, so its stall case needs a 90 s threshold.


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_that_never_answers_trips_the_stall_watchdog_and_the_real_cli_is_resumed_in_its_session(
    backend: str, workspace: Workspace, tmp_path: Path
) -> None:
    cli, log = CLIS[backend], tmp_path / "supervise.log"
    with cli.endpoint() as endpoint, serving(workspace):
        # Silent after get_task, every turn but the watchdog's: that one is answered and the turn ends cleanly.
        endpoint.hold = lambda body: cli.session_turn(body) and cli.last_user_text(body) != STALL_PROMPT
        deadline = 120 + 3 * float(STALL_S[backend])  # start-up, the silence, the resumed turn
        supervisor = supervise(workspace, cli, endpoint, log, "--stall-timeout-s", STALL_S[backend])
        try:
            after_stall = lambda: _events(workspace)[_events(workspace).index("stalled") :]  # noqa: E731
            resumed_turn = lambda: "stalled" in _events(workspace) and "exited" in after_stall()  # noqa: E731
            try:
                wait_for(resumed_turn, "stall, resume", log, deadline)
            except AssertionError as exc:  # what the held turns ended with: the CLI's prompt as the model saw it
                held = [cli.user_texts(r)[-2:] for r in endpoint.held]
                raise AssertionError(f"{exc}\nlast user texts of the held turns: {json.dumps(held)[-3000:]}") from None
        finally:
            kill(supervisor, signal.SIGTERM)
        recorded = transitions(workspace)
    session = _one_session(workspace, backend)
    events = [e for e, _, _ in recorded]
    at = events.index("stalled")
    assert events[:2] == ["started", "session"] and events[at - 1 : at + 2] == ["interrupted", "stalled", "resumed"]
    stalled, resumed = recorded[at], recorded[at + 1]
    assert stalled[2]["silent_s"] >= float(STALL_S[backend]) and resumed[2]["resume"] is True and resumed[1] == session
    exited = next(d for e, _, d in recorded[at:] if e == "exited")
    assert exited["exit_class"] == "clean", worker_log(workspace)
    answered = [r for r in endpoint.requests if cli.last_user_text(r) == STALL_PROMPT]
    assert len(answered) == 1 and "demo-liver-lesion-ct" in " ".join(cli.tool_results(answered[0]))
    assert cli.last_user_text(endpoint.held[0]) != CONTINUE_PROMPT  # the first silence was the task's own turn
    assert "worker worker-1 stalled" in log.read_text()


def _status(workspace: Workspace) -> str:
    command = [sys.executable, "-m", "amid", "status", "-w", str(workspace.root)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_real_cli_whose_model_refuses_the_key_trips_the_breaker_and_the_reason_is_said_loudly(
    backend: str, workspace: Workspace, tmp_path: Path
) -> None:
    cli, log = CLIS[backend], tmp_path / "supervise.log"
    flags = ("--crash-burst", "2", "--crash-window-s", "120", "--crash-pause-s", "600")
    with cli.endpoint() as endpoint, serving(workspace):
        endpoint.auth_error = True
        supervisor = supervise(workspace, cli, endpoint, log, *flags)
        try:
            wait_for(lambda: "paused" in _events(workspace), "the breaker", log, 150)
            wait_for(lambda: "paused for 600 s" in log.read_text(), "the pause said", log)
            status = _status(workspace)
        finally:
            kill(supervisor, signal.SIGTERM)
        recorded = transitions(workspace)
    said, why = log.read_text(), AUTH_ERRORS[backend]
    exits = [d for e, _, d in recorded if e == "exited"]
    assert [d["exit_class"] for d in exits] == ["no_result", "no_result"], worker_log(workspace)
    assert all(why in str(d["reason"]) for d in exits), exits
    paused: dict[str, Any] = next(d for e, _, d in recorded if e == "paused")
    assert paused["pause_s"] == 600 and str(paused["reason"]).startswith("2 failures within 120 s; last: no_result")
    assert why in str(paused["reason"]) and endpoint.refused >= 2
    assert "amid supervise: worker worker-1 paused for 600 s: 2 failures within 120 s" in said and why in said
    assert "worker    worker-1 " + backend + " paused" in status and why in status, status
