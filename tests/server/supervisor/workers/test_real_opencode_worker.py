"""The real OpenCode CLI as a managed worker, against a scripted Chat Completions endpoint (offline).

OpenCode's bundled `@ai-sdk/openai-compatible` provider reaches the endpoint through a `baseURL`; the
provider and model come in OPENCODE_CONFIG_CONTENT (merged with the worktree's opencode.json, which
the backend writes with the AMID server), the way a user's own provider setting would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amid.server.local_client import call
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers.chat_endpoint import ChatEndpoint, content_text
from tests.server.supervisor.workers.conftest import named, wait_for
from tests.server.supervisor.workers.whole_attempt import SCRIPT, assert_accepted, run_attempt, run_cheater
from tests.server.test_real_clients import _binary

pytestmark = [pytest.mark.slow, pytest.mark.external]
HEARTBEAT = "HEARTBEAT reflection: your attempt was reviewed; post a note on what you learned."


@pytest.fixture(scope="module")
def opencode() -> Path:
    """The CLI, found before the server starts (a missing one skips the test with the reason)."""
    return Path(_binary("opencode"))


def _texts(request: dict) -> str:
    return "\n".join(content_text(m) or json.dumps(m) for m in request.get("messages", []))


def _provider(url: str) -> dict[str, str]:
    config = {
        "provider": {
            "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted Chat Completions endpoint",
                "options": {"baseURL": url, "apiKey": "x"},
                "models": {"scripted-model": {"name": "Scripted model", "tool_call": True}},
            }
        },
        "model": "scripted/scripted-model",
        "small_model": "scripted/scripted-model",
    }
    # models.dev is out of reach offline: without this OpenCode waits for that fetch to fail first
    return {"OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_DISABLE_MODELS_FETCH": "1"}


def test_opencode_worker_calls_get_task_with_its_token_and_resumes_its_session_with_a_heartbeat(
    opencode: Path, running: Running
) -> None:
    prefix = opencode.parent.parent.parent if opencode.parent.name == ".bin" else None
    with ChatEndpoint() as endpoint:
        settings = WorkerSettings(
            restart_on_clean=False,
            agent_prefix="opencode",
            npm_prefix=prefix or Path(os.environ.get("AMID_NPM_PREFIX", Path.home() / ".cache/amid/npm")),
            model_env=_provider(endpoint.url),
            task_prompt="Start the AMID loop: call get_task.",
        )
        pool = WorkerPool(running.workspace, running.url, "opencode", 1, settings=settings)
        pool.start()
        try:
            [agent] = pool.agents
            first = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=180)
            worker = pool.worker(agent)
            assert named(first, "exited")[0]["exit_class"] == "clean", worker.log_path.read_text()[-3000:]
            session = worker.session_id
            assert session and session.startswith("ses_")
            tool_results = [r for r in endpoint.requests if any(m.get("role") == "tool" for m in r["messages"])]
            assert tool_results and "demo-liver-lesion-ct" in _texts(tool_results[0])  # get_task ran for real
            before = len(endpoint.requests)
            pool.deliver(agent, HEARTBEAT)
            second = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=180)
            assert named(second, "exited")[0]["exit_class"] == "clean", worker.log_path.read_text()[-3000:]
            assert worker.session_id == session
            resumed = [r for r in endpoint.requests[before:] if r.get("tools") and HEARTBEAT in _texts(r)]
            assert resumed, "the endpoint never received the heartbeat"
            conversation = _texts(resumed[0])
            assert "Start the AMID loop" in conversation and "demo-liver-lesion-ct" in conversation  # same session
            (running.workspace.root / "opencode-resume-transcript.json").write_text(
                json.dumps(resumed[0]["messages"], indent=1)
            )
        finally:
            pool.stop()
    calls = call(
        running.workspace,
        "sql",
        {"query": "SELECT count(*) FROM events WHERE agent_id = 'opencode-1' AND subject_id = 'get_task'"},
    )
    assert calls["rows"][0][0] >= 1, worker.log_path.read_text()[-3000:]


def test_opencode_worker_writes_trains_commits_and_submits_with_its_own_tools_and_the_attempt_is_accepted(
    opencode: Path, holdout_running: Running
) -> None:
    with ChatEndpoint(SCRIPT) as endpoint:
        outcome = run_attempt(
            holdout_running,
            "opencode",
            endpoint,
            prefix="opencodea",
            binary=opencode,
            model_env=_provider(endpoint.url),
        )
    accepted = assert_accepted(holdout_running, outcome, endpoint)
    print(json.dumps(accepted))


def test_a_cheating_opencode_worker_reads_nothing_of_private_other_agents_or_the_server_and_writes_nothing_there(
    opencode: Path, holdout_running: Running
) -> None:
    with ChatEndpoint() as endpoint:
        seen = run_cheater(
            holdout_running,
            "opencode",
            endpoint,
            prefix="opencodec",
            binary=opencode,
            model_env=_provider(endpoint.url),
        )
    print(json.dumps(seen))
