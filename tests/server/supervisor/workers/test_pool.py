"""Managed workers with the scripted backend and small test CLIs: start, deliver, watchdog, breaker, retire."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amid.registry.loader import load_worker_backends, worker_backend
from amid.registry.schemas import WorkerBackend
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers.conftest import named, wait_for

QUIET = WorkerSettings(restart_on_clean=False, sandbox="none", model_env={"AMID_SCRIPTED_PLAY": "echo"})


def _test_cli(name: str, code: str) -> WorkerBackend:
    """A backend whose "CLI" is a small Python program (the true edge: no model service)."""
    data = worker_backend("scripted").model_dump()
    data.update(
        id=name, start=["{python}", "-c", code, "{prompt}"], resume=["{python}", "-c", code, "{session_id}", "{prompt}"]
    )
    return WorkerBackend.model_validate(data)


def _transitions(running: Running, agent_id: str) -> list[tuple[str, str]]:
    from amid.server.local_client import call

    rows = call(
        running.workspace,
        "sql",
        {
            "query": f"SELECT event, to_state FROM worker_transitions "
            f"WHERE agent_id = '{agent_id}' ORDER BY transition_id"
        },
    )["rows"]
    return [(event, state) for event, state in rows]


def test_every_shipped_backend_validates_and_names_its_session_id_field() -> None:
    backends = {b.id: b for b in load_worker_backends()}
    assert set(backends) == {"claude-code", "codex", "cursor-agent", "opencode", "scripted"}
    assert backends["codex"].session_id[0].field == "thread_id"
    assert backends["opencode"].session_id[0].field == "sessionID"
    for command in (backends["claude-code"].start, backends["claude-code"].resume):  # the work needs files and a shell
        [allowed] = [arg.split("=", 1)[1].split(",") for arg in command if arg.startswith("--allowedTools=")]
        assert {"mcp__amid__*", "Read", "Write", "Edit", "Bash"} <= set(allowed)
    permission = json.loads(backends["opencode"].env["OPENCODE_PERMISSION"].format_map({}))
    assert {permission[name] for name in ("edit", "bash", "external_directory", "doom_loop")} == {"allow"}


def test_scripted_worker_starts_calls_get_task_and_resumes_its_session_with_a_delivered_prompt(
    running: Running,
) -> None:
    pool = WorkerPool(
        running.workspace, running.url, "scripted", 1, settings=QUIET.model_copy(update={"agent_prefix": "sw"})
    )
    pool.start()
    try:
        [agent] = pool.agents
        first = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)))
        assert named(first, "exited")[0]["exit_class"] == "clean"
        session = pool.worker(agent).session_id
        assert session and session.startswith("scripted-")
        pool.deliver(agent, "HEARTBEAT reflection: post a note")
        wait_for(pool, lambda ev: bool(named(ev, "exited", agent)))
        assert pool.worker(agent).session_id == session
        last = json.loads(pool.worker(agent).log_path.read_text().splitlines()[-1])
        assert last["type"] == "result" and last["prompts"][-1] == "HEARTBEAT reflection: post a note"
        assert len(last["prompts"]) == 2  # the same conversation, resumed
    finally:
        pool.stop()
    events = _transitions(running, agent)
    assert events[0] == ("started", "running") and ("delivered", "running") in events
    assert events[-1] == ("retired", "retired")


HANG = (
    "import json, time; print(json.dumps({'type': 'system', 'subtype': 'init', 'session_id': 'h-1'}), flush=True);"
    " time.sleep(600)"
)
CRASH = "import sys; sys.exit(3)"


def test_a_silent_worker_is_interrupted_as_stalled_and_resumed_in_its_session(running: Running) -> None:
    settings = QUIET.model_copy(update={"stall_timeout_s": 1.0, "agent_prefix": "stall", "interrupt_grace_s": 2.0})
    pool = WorkerPool(running.workspace, running.url, _test_cli("hang", HANG), 1, settings=settings)
    pool.start()
    try:
        events = wait_for(pool, lambda ev: bool(named(ev, "stalled")), timeout_s=30)
        resumed = named(events, "resumed")
        assert resumed and resumed[0]["resume"] is True
        assert pool.worker(pool.agents[0]).session_id == "h-1"
    finally:
        pool.stop()


def test_a_stall_is_exempt_while_the_worker_made_a_recent_tool_call(running: Running) -> None:
    settings = QUIET.model_copy(update={"stall_timeout_s": 0.5, "agent_prefix": "busy"})
    pool = WorkerPool(running.workspace, running.url, _test_cli("hang2", HANG), 1, settings=settings)
    pool.start()
    try:
        worker = pool.worker(pool.agents[0])
        worker.process.last_output -= 60  # type: ignore[union-attr]  # silent for a minute
        # the server saw a tool call of this agent just now: not stalled
        assert pool._busy(worker) is False
        import anyio

        from amid.server.mcp_client import call, connect

        async def touch() -> None:
            async with connect(running.url, worker.token) as client:
                await call(client, "get_task", {"include_case_ids": False})

        anyio.run(touch)
        pool.settings = settings.model_copy(update={"stall_timeout_s": 30.0})
        assert pool._busy(worker) is True
    finally:
        pool.stop()


SLOW_START = (  # takes its prompt into a session only after a second, then waits
    "import json, sys, time; time.sleep(1.0); print(json.dumps({'type': 'system', 'subtype': 'init', "
    "'session_id': 's-1', 'prompt': sys.argv[-1]}), flush=True); time.sleep(600)"
)


def test_prompts_delivered_before_the_cli_took_them_travel_with_the_next_one(running: Running) -> None:
    settings = QUIET.model_copy(update={"agent_prefix": "slow", "interrupt_grace_s": 2.0})
    pool = WorkerPool(running.workspace, running.url, _test_cli("slow", SLOW_START), 1, settings=settings)
    pool.start()
    try:
        [agent] = pool.agents
        worker = pool.worker(agent)
        took_prompt = lambda ev: worker.process is not None and worker.process.session_id is not None  # noqa: E731
        wait_for(pool, took_prompt)
        pool.deliver(agent, "FIRST heartbeat")  # the CLI has its session: it takes this prompt in a second
        pool.deliver(agent, "SECOND heartbeat")  # interrupts it before it did: both go to the next turn
        wait_for(pool, took_prompt)
        seen = [json.loads(line) for line in worker.log_path.read_text().splitlines() if line.startswith("{")]
        assert seen[-1]["prompt"] == "FIRST heartbeat\n\nSECOND heartbeat"
        pool.deliver(agent, "THIRD heartbeat")  # the last turn took its prompts in: only the new one is sent
        wait_for(pool, took_prompt)
        seen = [json.loads(line) for line in worker.log_path.read_text().splitlines() if line.startswith("{")]
        assert seen[-1]["prompt"] == "THIRD heartbeat"
    finally:
        pool.stop()


def test_three_crashes_within_the_window_pause_the_worker(running: Running) -> None:
    settings = QUIET.model_copy(update={"crash_pause_s": 300.0, "agent_prefix": "crash"})
    pool = WorkerPool(running.workspace, running.url, _test_cli("crash", CRASH), 1, settings=settings)
    pool.start()
    try:
        events = wait_for(pool, lambda ev: bool(named(ev, "paused")), timeout_s=30)
        exits = named(events, "exited")
        assert len(exits) == 3 and {e["exit_class"] for e in exits} == {"no_result"}
        assert len(named(events, "started")) == 3  # the first start, two restarts, then paused
        assert pool.worker(pool.agents[0]).state == "paused"
        pool.deliver(pool.agents[0], "later")
        assert pool.worker(pool.agents[0]).pending_prompt == "later"
    finally:
        pool.stop()
    assert ("paused", "paused") in _transitions(running, "crash-1")


def test_a_usage_limit_exit_backs_off_without_counting_as_a_crash(running: Running) -> None:
    code = "print('Claude AI usage limit reached', flush=True); raise SystemExit(1)"
    settings = QUIET.model_copy(update={"usage_limit_backoff_s": 0.2, "agent_prefix": "usage"})
    pool = WorkerPool(running.workspace, running.url, _test_cli("usage", code), 1, settings=settings)
    pool.start()
    try:
        events = wait_for(pool, lambda ev: len(named(ev, "backoff")) >= 3, timeout_s=30)
        assert {e["exit_class"] for e in named(events, "exited")} == {"usage_limit"}
        assert not named(events, "paused")
        assert {e["wait_s"] for e in named(events, "backoff")} == {0.2}  # non-escalating
    finally:
        pool.stop()


def test_stop_revokes_the_workers_tokens(running: Running) -> None:
    pool = WorkerPool(
        running.workspace, running.url, "scripted", 1, settings=QUIET.model_copy(update={"agent_prefix": "rt"})
    )
    pool.start()
    token = pool.worker(pool.agents[0]).token
    pool.stop()
    from amid.server.local_client import call

    rows = call(
        running.workspace,
        "sql",
        {"query": "SELECT count(*) FROM tokens WHERE agent_id = 'rt-1' AND revoked_at IS NULL"},
    )
    assert rows["rows"] == [[0]]
    assert token.startswith("amid_")
    assert sys.executable
    assert Path(pool.worker("rt-1").worktree, ".amid-local", "token").is_file()
