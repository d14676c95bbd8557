"""The real Codex CLI as a managed worker, against a scripted Responses endpoint (offline)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from amid.registry.loader import worker_backend
from amid.registry.schemas import WorkerBackend
from amid.server.local_client import call
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers.conftest import named, wait_for
from tests.server.supervisor.workers.responses_endpoint import ResponsesEndpoint, text_of
from tests.server.supervisor.workers.whole_attempt import SCRIPT, assert_accepted, run_attempt, run_cheater
from tests.server.test_real_clients import _binary

pytestmark = [pytest.mark.slow, pytest.mark.external]
HEARTBEAT = "HEARTBEAT reflection: your attempt was reviewed; post a note on what you learned."


@pytest.fixture(scope="module")
def codex() -> Path:
    """The CLI, found before the server starts (a missing one skips the test with the reason)."""
    return Path(_binary("codex"))


def _texts(request: dict) -> str:
    parts = []
    for item in request.get("input", []):
        parts.append(text_of(item) if item.get("type", "message") == "message" else json.dumps(item))
    return "\n".join(parts)


def _provider(url: str) -> list[str]:
    """The scripted endpoint as a Codex model provider, passed with -c like the server (the user's login stays)."""
    settings = {
        "model_provider": '"scripted"',
        "model": '"gpt-scripted"',
        "model_providers.scripted.name": '"Scripted Responses endpoint"',
        "model_providers.scripted.base_url": json.dumps(url),
        "model_providers.scripted.wire_api": '"responses"',
    }
    return [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]


def _backend(url: str) -> WorkerBackend:
    """The shipped backend with the scripted provider's flags after `exec`, in the first run and the resume."""
    real, flags = worker_backend("codex"), _provider(url)
    return real.model_copy(
        update={
            "start": [*real.start[:2], *flags, *real.start[2:]],
            "resume": [*real.resume[:2], *flags, *real.resume[2:]],
        }
    )


def test_codex_worker_calls_get_task_with_its_token_and_resumes_its_session_with_a_heartbeat(
    codex: Path, running: Running
) -> None:
    prefix = codex.parent.parent.parent if codex.parent.name == ".bin" else None
    with ResponsesEndpoint() as endpoint:
        backend = _backend(endpoint.url)
        settings = WorkerSettings(
            restart_on_clean=False,
            agent_prefix="codex",
            npm_prefix=prefix or Path(os.environ.get("AMID_NPM_PREFIX", Path.home() / ".cache/amid/npm")),
            task_prompt="Start the AMID loop: call get_task.",
        )
        pool = WorkerPool(running.workspace, running.url, backend, 1, settings=settings)
        pool.start()
        try:
            [agent] = pool.agents
            first = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=180)
            worker = pool.worker(agent)
            assert named(first, "exited")[0]["exit_class"] == "clean", worker.log_path.read_text()[-3000:]
            session = worker.session_id
            assert session
            tool_results = [r for r in endpoint.requests if "function_call_output" in _texts(r)]
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
            (running.workspace.root / "codex-resume-transcript.json").write_text(
                json.dumps(resumed[0]["input"], indent=1)
            )
            shutil.rmtree(worker.home / ".codex" / "sessions")  # the rollout is gone: resuming it must fail
            pool.deliver(agent, HEARTBEAT)
            third = wait_for(pool, lambda ev: len(named(ev, "exited", agent)) >= 2, timeout_s=180)
            assert [e["exit_class"] for e in named(third, "exited")] == ["session_error", "clean"], third
            assert named(third, "started", agent)  # afresh, with the task prompt
            assert worker.session_id not in (None, session)
        finally:
            pool.stop()
    calls = call(
        running.workspace,
        "sql",
        {"query": "SELECT count(*) FROM events WHERE agent_id = 'codex-1' AND subject_id = 'get_task'"},
    )
    assert calls["rows"][0][0] >= 1, worker.log_path.read_text()[-3000:]


def test_codex_worker_writes_trains_commits_and_submits_with_its_own_shell_and_the_attempt_is_accepted(
    codex: Path, holdout_running: Running
) -> None:
    with ResponsesEndpoint(SCRIPT) as endpoint:
        outcome = run_attempt(holdout_running, _backend(endpoint.url), endpoint, prefix="codexa", binary=codex)
    accepted = assert_accepted(holdout_running, outcome, endpoint)
    print(json.dumps(accepted))


def test_a_cheating_codex_worker_reads_nothing_of_private_other_agents_or_the_server_and_writes_nothing_there(
    codex: Path, holdout_running: Running
) -> None:
    with ResponsesEndpoint() as endpoint:
        seen = run_cheater(holdout_running, _backend(endpoint.url), endpoint, prefix="codexc", binary=codex)
    print(json.dumps(seen))
