"""A custom model endpoint for managed workers: one base URL and key, said the way each CLI takes it.

    claude-code  ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (and ANTHROPIC_MODEL): an Anthropic Messages API
    codex        a `-c model_providers.amid_endpoint…` provider (Responses API), its key in AMID_MODEL_API_KEY
    opencode     OPENCODE_CONFIG_CONTENT: an `@ai-sdk/openai-compatible` provider (Chat Completions), merged
                 with the worktree's opencode.json

The key's value is read once at the edge (`amid supervise` reads the variable `--model-api-key-env`
names) and reaches only the worker's environment, never its argv (argv is visible to every process).
Cursor's CLI takes no custom endpoint; the scripted worker needs no model.

A sandboxed worker reaches its model endpoint and nothing else (`model_targets`): the custom base URL,
the http(s) URLs the worker's model environment or its backend's commands name (a base URL given with
--worker-env, a provider written into the backend), else the backend's own provider API.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from amid.registry.schemas import WorkerBackend
from amid.server.errors import InvalidInput
from amid.server.worker_network import Target, parse_target, target_of_url

PROVIDER = "amid_endpoint"
KEY_ENV = "AMID_MODEL_API_KEY"  # the variable Codex's provider reads its key from (env_key)
SUPPORTED = ("claude-code", "codex", "opencode")
URL = re.compile(r"https?://[^\s\"'<>,;]+")
# Each backend's own model API when no endpoint is named (Codex signed in with ChatGPT uses chatgpt.com).
PROVIDER_HOSTS = {
    "claude-code": ("api.anthropic.com:443",),
    "codex": ("api.openai.com:443", "chatgpt.com:443"),
}


@dataclass(frozen=True)
class Endpoint:
    """What a CLI needs to reach the endpoint: extra arguments right after its binary, and environment."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def endpoint_for(backend_id: str, base_url: str | None, api_key: str | None, model: str | None) -> Endpoint:
    """The endpoint in `backend_id`'s own terms; nothing when no base URL is set."""
    if base_url is None:
        return Endpoint()
    if backend_id not in SUPPORTED:
        raise InvalidInput(
            f"model_base_url: backend {backend_id} takes no custom model endpoint; use one of {', '.join(SUPPORTED)} "
            "(or set its own variables with --worker-env)",
            field="model_base_url",
        )
    return {"claude-code": _claude, "codex": _codex, "opencode": _opencode}[backend_id](base_url, api_key or "", model)


def _claude(base_url: str, api_key: str, model: str | None) -> Endpoint:
    env = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": api_key}
    return Endpoint(env={**env, **({"ANTHROPIC_MODEL": model} if model else {})})


def _codex(base_url: str, api_key: str, model: str | None) -> Endpoint:
    # Codex takes `-c` before its subcommand as well as after it: right after the binary fits start and resume.
    settings = {
        "model_provider": PROVIDER,
        f"model_providers.{PROVIDER}.name": "AMID custom endpoint",
        f"model_providers.{PROVIDER}.base_url": base_url,
        f"model_providers.{PROVIDER}.wire_api": "responses",
        f"model_providers.{PROVIDER}.env_key": KEY_ENV,
        **({"model": model} if model else {}),
    }
    args = [arg for key, value in settings.items() for arg in ("-c", f"{key}={json.dumps(value)}")]
    return Endpoint(args=args, env={KEY_ENV: api_key})


def _opencode(base_url: str, api_key: str, model: str | None) -> Endpoint:
    name = model or "default"
    config = {
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "AMID custom endpoint",
                "options": {"baseURL": base_url, "apiKey": api_key},
                "models": {name: {"name": name, "tool_call": True}},
            }
        },
        "model": f"{PROVIDER}/{name}",
        "small_model": f"{PROVIDER}/{name}",
    }
    return Endpoint(env={"OPENCODE_CONFIG_CONTENT": json.dumps(config)})


def model_targets(backend: WorkerBackend, base_url: str | None, model_env: dict[str, str]) -> tuple[Target, ...]:
    """The host:port pairs of the model endpoint a worker's CLI is set up for (its network allowlist's
    model half): the custom base URL and every URL in the model environment and the backend's commands
    and environment, else the backend's provider API."""
    texts: Iterable[str] = [*([base_url] if base_url else []), *model_env.values(), *backend.start, *backend.resume]
    named = [
        target_of_url(url, "model_base_url")
        for text in [*texts, *backend.env.values()]
        for url in URL.findall(text)
        if "{" not in url
    ]
    if named:
        return tuple(dict.fromkeys(named))
    return tuple(parse_target(entry) for entry in PROVIDER_HOSTS.get(backend.id, ()))
