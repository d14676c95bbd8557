"""The real Claude Code CLI as a managed worker, against a scripted Messages endpoint (offline)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers.conftest import named, wait_for
from tests.server.supervisor.workers.messages_endpoint import MessagesEndpoint
from tests.server.supervisor.workers.whole_attempt import SCRIPT, assert_accepted, run_attempt, run_cheater
from tests.server.test_real_clients import _binary

pytestmark = [pytest.mark.slow, pytest.mark.external]
HEARTBEAT = "HEARTBEAT reflection: your attempt was reviewed; post a note on what you learned."


def _texts(request: dict) -> str:
    parts = []
    for message in request.get("messages", []):
        content = message["content"]
        parts += [content] if isinstance(content, str) else [json.dumps(block) for block in content]
    return "\n".join(parts)


def test_claude_code_worker_calls_get_task_with_its_token_and_resumes_its_session_with_a_heartbeat(
    running: Running,
) -> None:
    claude = Path(_binary("claude"))
    prefix = claude.parent.parent.parent if claude.parent.name == ".bin" else None
    with MessagesEndpoint() as endpoint:
        settings = WorkerSettings(
            restart_on_clean=False,
            agent_prefix="claude",
            npm_prefix=prefix or Path(os.environ.get("AMID_NPM_PREFIX", Path.home() / ".cache/amid/npm")),
            model_env={"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "x"},
            task_prompt="Start the AMID loop: call get_task.",
        )
        pool = WorkerPool(running.workspace, running.url, "claude-code", 1, settings=settings)
        pool.start()
        try:
            [agent] = pool.agents
            first = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=180)
            worker = pool.worker(agent)
            assert named(first, "exited")[0]["exit_class"] == "clean", worker.log_path.read_text()[-3000:]
            session = worker.session_id
            assert session
            tool_results = [r for r in endpoint.requests if "tool_result" in _texts(r)]
            assert tool_results and "demo-liver-lesion-ct" in _texts(tool_results[0])  # get_task ran for real
            before = len(endpoint.requests)
            pool.deliver(agent, HEARTBEAT)
            second = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=180)
            assert named(second, "exited")[0]["exit_class"] == "clean", worker.log_path.read_text()[-3000:]
            assert worker.session_id == session
            resumed = [r for r in endpoint.requests[before:] if HEARTBEAT in _texts(r)]
            assert resumed, "the endpoint never received the heartbeat"
            conversation = _texts(resumed[0])
            assert "Start the AMID loop" in conversation and "demo-liver-lesion-ct" in conversation  # same session
            (running.workspace.root / "claude-resume-transcript.json").write_text(
                json.dumps(resumed[0]["messages"], indent=1)
            )
        finally:
            pool.stop()
    rows = running.workspace.root  # the agent's tool call is in the ledger, under its own id
    from amid.server.local_client import call

    calls = call(
        running.workspace,
        "sql",
        {"query": "SELECT count(*) FROM events WHERE agent_id = 'claude-1' AND subject_id = 'get_task'"},
    )
    assert calls["rows"][0][0] >= 1, rows


def test_claude_code_worker_writes_trains_commits_and_submits_with_its_own_tools_and_the_attempt_is_accepted(
    holdout_running: Running,
) -> None:
    claude = Path(_binary("claude"))
    with MessagesEndpoint(SCRIPT) as endpoint:
        model_env = {"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "x"}
        outcome = run_attempt(
            holdout_running, "claude-code", endpoint, prefix="claudea", binary=claude, model_env=model_env
        )
    accepted = assert_accepted(holdout_running, outcome, endpoint)
    print(json.dumps(accepted))


def test_a_cheating_claude_code_worker_reads_nothing_of_private_other_agents_or_the_server_and_writes_nothing_there(
    holdout_running: Running,
) -> None:
    claude = Path(_binary("claude"))
    with MessagesEndpoint() as endpoint:
        model_env = {"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "x"}
        seen = run_cheater(
            holdout_running, "claude-code", endpoint, prefix="claudec", binary=claude, model_env=model_env
        )
    print(json.dumps(seen))
