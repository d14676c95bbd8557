"""The custom model endpoint setting (`model_base_url`, its key, `model_name`) said the way each real CLI
takes it: Claude Code, Codex and OpenCode, each started as a managed worker with nothing but that
setting, reach the scripted endpoint, call get_task through it and end their turn cleanly."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amid.server.supervisor.workers.endpoint import KEY_ENV, endpoint_for
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers.chat_endpoint import ChatEndpoint
from tests.server.supervisor.workers.conftest import named, wait_for
from tests.server.supervisor.workers.messages_endpoint import MessagesEndpoint
from tests.server.supervisor.workers.responses_endpoint import ResponsesEndpoint
from tests.server.supervisor.workers.scripted_endpoint import ScriptedEndpoint
from tests.server.test_real_clients import _binary

CASES: dict[str, tuple[str, Callable[[], ScriptedEndpoint]]] = {
    "claude-code": ("claude", MessagesEndpoint),
    "codex": ("codex", ResponsesEndpoint),
    "opencode": ("opencode", ChatEndpoint),
}


def test_each_backend_gets_the_endpoint_in_its_own_terms_and_the_key_only_in_its_environment() -> None:
    claude = endpoint_for("claude-code", "http://127.0.0.1:9/", "k3y", "m1")
    assert claude.args == [] and claude.env == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/",
        "ANTHROPIC_API_KEY": "k3y",
        "ANTHROPIC_MODEL": "m1",
    }
    codex = endpoint_for("codex", "http://127.0.0.1:9/v1", "k3y", "m1")
    assert 'model_providers.amid_endpoint.base_url="http://127.0.0.1:9/v1"' in codex.args
    assert f'model_providers.amid_endpoint.env_key="{KEY_ENV}"' in codex.args and 'model="m1"' in codex.args
    assert codex.env == {KEY_ENV: "k3y"} and not any("k3y" in arg for arg in codex.args)  # argv is public
    config = json.loads(endpoint_for("opencode", "http://127.0.0.1:9/v1", "k3y", None).env["OPENCODE_CONFIG_CONTENT"])
    assert config["provider"]["amid_endpoint"]["options"] == {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "k3y"}
    assert config["model"] == "amid_endpoint/default"
    assert endpoint_for("scripted", None, None, None).env == {}


def test_a_backend_without_a_custom_endpoint_refuses_the_setting_naming_it() -> None:
    from amid.server.errors import InvalidInput

    with pytest.raises(InvalidInput, match="model_base_url: backend cursor-agent takes no custom model endpoint"):
        endpoint_for("cursor-agent", "http://127.0.0.1:9/", None, None)


def _texts(request: dict[str, Any]) -> str:
    return json.dumps(request)


@pytest.mark.slow
@pytest.mark.external
@pytest.mark.parametrize("backend", sorted(CASES))
def test_a_real_cli_reaches_the_custom_endpoint_given_only_by_the_setting(backend: str, running: Running) -> None:
    binary_name, make_endpoint = CASES[backend]
    binary = Path(_binary(binary_name))
    prefix = binary.parent.parent.parent if binary.parent.name == ".bin" else None
    with make_endpoint() as endpoint:
        settings = WorkerSettings(
            restart_on_clean=False,
            agent_prefix=f"ep-{binary_name}",
            npm_prefix=prefix or Path(os.environ.get("AMID_NPM_PREFIX", Path.home() / ".cache/amid/npm")),
            model_base_url=endpoint.url,
            model_api_key="scripted-key",
            model_name="scripted-model",
            model_env={"OPENCODE_DISABLE_MODELS_FETCH": "1"} if backend == "opencode" else {},  # offline
            task_prompt="Start the AMID loop: call get_task.",
        )
        pool = WorkerPool(running.workspace, running.url, backend, 1, settings=settings)
        pool.start()
        try:
            [agent] = pool.agents
            events = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=180)
            log = pool.worker(agent).log_path.read_text()[-3000:]
        finally:
            pool.stop()
    assert named(events, "exited")[0]["exit_class"] == "clean", log
    assert endpoint.requests, f"{backend} never reached the endpoint: {log}"
    assert any("demo-liver-lesion-ct" in _texts(r) for r in endpoint.requests), "get_task's result never came back"
    assert any(str(r.get("model", "")).endswith("scripted-model") for r in endpoint.requests)  # model_name too
