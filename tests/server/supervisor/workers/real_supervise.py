"""The real `amid supervise` with one managed worker of a real CLI (claude-code, codex, opencode), its model a
scripted endpoint given only by the documented setting (`--model-base-url`, the key through
`--model-api-key-env`), and reads of what each side saw: the conversation the endpoint received (the user
texts of a request, the tool results in it), the session ids the CLI itself printed, the ledger's worker
transitions. One spec per backend, so the restart, stall and breaker tests run the same mechanics on each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from amid.registry.loader import worker_backend
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.supervisor.workers.backend import session_id_in
from amid.server.workspace import Workspace
from tests.server.supervisor.workers import chat_endpoint, messages_endpoint, responses_endpoint
from tests.server.supervisor.workers.scripted_endpoint import ScriptedEndpoint
from tests.server.supervisor.workers.whole_attempt import npm_prefix, require_bwrap
from tests.server.test_real_clients import _binary

KEY_ENV = "AMID_TEST_MODEL_KEY"  # the variable --model-api-key-env names; its value reaches only the CLI
AGENT = "worker-1"


def _claude_user_texts(body: dict[str, Any]) -> list[str]:
    users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
    blocks = [[{"type": "text", "text": c}] if isinstance(c, str) else c for c in users]
    return [" ".join(str(b.get("text", "")) for b in user if b.get("type") == "text") for user in blocks]


def _codex_user_texts(body: dict[str, Any]) -> list[str]:
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    users = [i for i in items if i.get("type", "message") == "message" and i.get("role") == "user"]
    return [responses_endpoint.text_of(i) for i in users]


def _opencode_user_texts(body: dict[str, Any]) -> list[str]:
    """OpenCode's `run` quotes a message argument that holds a space (`"You were silent …"`, inner quotes
    escaped): the model reads the prompt so; the texts here are the prompt as given."""
    texts = [chat_endpoint.content_text(m) for m in body.get("messages", []) if m.get("role") == "user"]
    return [t[1:-1].replace('\\"', '"') if len(t) > 1 and t[0] == t[-1] == '"' else t for t in texts]


def _claude_offers_amid(body: dict[str, Any]) -> bool:
    return any(str(t.get("name", "")).startswith(messages_endpoint.PREFIX) for t in body.get("tools", []))


def _codex_offers_amid(body: dict[str, Any]) -> bool:
    return any("amid" in ns + name for ns, name in responses_endpoint.tool_names(body.get("tools", [])))


def _opencode_offers_amid(body: dict[str, Any]) -> bool:
    return any(str(t.get("function", {}).get("name", "")).startswith("amid_") for t in body.get("tools", []))


@dataclass(frozen=True)
class RealCli:
    """How one backend's real CLI is found, spoken to and read."""

    backend: str
    binary_name: str
    endpoint: Callable[[], ScriptedEndpoint]
    user_texts: Callable[[dict[str, Any]], list[str]]  # the user messages' texts of a request, in order
    tool_results: Callable[[dict[str, Any]], list[str]]
    offers_amid: Callable[[dict[str, Any]], bool]  # a turn of the worker's session, not a title request
    worker_env: tuple[str, ...] = ()

    def last_user_text(self, body: dict[str, Any]) -> str:
        texts = self.user_texts(body)
        return texts[-1] if texts else ""

    def session_turn(self, body: dict[str, Any]) -> bool:
        """A turn of the worker's session after get_task came back (the model has the task in its context)."""
        return self.offers_amid(body) and bool(self.tool_results(body))


CLIS = {
    "claude-code": RealCli(
        "claude-code",
        "claude",
        messages_endpoint.MessagesEndpoint,
        _claude_user_texts,
        messages_endpoint.tool_results,
        _claude_offers_amid,
        # Claude Code retries even a 401 ten times, backing off for minutes: a user who wants it to fail fast
        # says so in its environment (the breaker test's CLI must exit, as it does after the retries).
        ("CLAUDE_CODE_MAX_RETRIES=0",),
    ),
    "codex": RealCli(
        "codex",
        "codex",
        responses_endpoint.ResponsesEndpoint,
        _codex_user_texts,
        responses_endpoint.tool_results,
        _codex_offers_amid,
    ),
    "opencode": RealCli(
        "opencode",
        "opencode",
        chat_endpoint.ChatEndpoint,
        _opencode_user_texts,
        chat_endpoint.tool_results,
        _opencode_offers_amid,
        ("OPENCODE_DISABLE_MODELS_FETCH=1",),  # models.dev is out of reach offline
    ),
}


def binary_of(cli: RealCli) -> Path:
    """The installed CLI (a missing one skips, or fails under AMID_REQUIRE_EXTERNAL=1); bubblewrap is required."""
    found = Path(_binary(cli.binary_name))
    require_bwrap()
    return found


def supervise(
    workspace: Workspace, cli: RealCli, endpoint: ScriptedEndpoint, log: Path, *flags: str
) -> subprocess.Popen[bytes]:
    """`amid supervise --forever` with one sandboxed worker of the real CLI, reaching `endpoint` by the setting."""
    binary = binary_of(cli)
    command = [sys.executable, "-m", "amid", "supervise", "-w", str(workspace.root), "--forever"]
    command += ["--poll-s", "0.2", "--workers", "1", "--backend", cli.backend, "--npm-prefix", str(npm_prefix(binary))]
    command += ["--model-base-url", endpoint.url, "--model-api-key-env", KEY_ENV, "--model-name", "scripted-model"]
    command += [arg for pair in cli.worker_env for arg in ("--worker-env", pair)]
    with log.open("ab") as out:
        env = {**os.environ, KEY_ENV: "scripted-key"}
        return subprocess.Popen([*command, *flags], stdout=out, stderr=subprocess.STDOUT, env=env)


def kill(process: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGKILL) -> None:
    process.send_signal(sig)
    process.wait(timeout=60)


def send_heartbeat(workspace: Workspace, url: str, prompt: str) -> int:
    """A heartbeat sent by another supervisor's token while none runs; its id."""
    token = admin_call(workspace, "token_create", {"name": "earlier-supervisor", "role": "supervisor"})["token"]

    async def send() -> int:
        async with connect(url, token) as client:
            sent = await call(client, "send_heartbeat", {"agent_id": AGENT, "kind": "custom", "prompt": prompt})
        return int(sent["heartbeat_id"])

    return anyio.run(send)


def printed_sessions(workspace: Workspace, cli: RealCli) -> list[str]:
    """Every session id the CLI itself printed, in order, over all its launches (its output log)."""
    backend = worker_backend(cli.backend)
    log = workspace.sub("workers") / AGENT / "output.jsonl"
    found = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        session = session_id_in(backend, event) if isinstance(event, dict) else None
        if session:
            found.append(session)
    return found


def worker_log(workspace: Workspace) -> str:
    return (workspace.sub("workers") / AGENT / "output.jsonl").read_text(encoding="utf-8", errors="replace")[-3000:]
