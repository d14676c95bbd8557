"""`amid connect CLIENT --agent NAME`: a worktree, a token and the client's MCP configuration.

The worktree is a git repository of the agent's own (a clone of the run's `main`: no other agent's
commits, no remote); `submit_attempt` fetches the named commit from it into the server's store.
Configs reference the token through the AMID_TOKEN environment variable; the token
itself is written to `.amid-local/token` (git-ignored, mode 0600) inside the worktree. Issuing a
token for an agent revokes the ones it had, so re-running `connect` leaves one live token. The
printed command is shell-quoted (paths with spaces), keeps the user's own client login (Codex gets
the server through `-c`, not a CODEX_HOME of its own) and gives each Claude worker its own
auto-memory folder (worktrees of one repository would share one).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amid.server.agent_repo import create_agent_repo
from amid.server.errors import AmidError
from amid.server.ledger.identity import check_agent_name
from amid.server.local_client import call
from amid.server.protocol import agents_md
from amid.server.workspace import Workspace

Client = Literal["claude", "codex", "cursor", "opencode"]
CLIENTS: tuple[Client, ...] = ("claude", "codex", "cursor", "opencode")
TOKEN_FILE = Path(".amid-local") / "token"
CLAUDE_SETTINGS = Path(".amid-local") / "claude-settings.json"
CLAUDE_DENIED = "AskUserQuestion,EnterPlanMode,ExitPlanMode"  # they wait for a human


@dataclass(frozen=True)
class Connection:
    agent_id: str
    worktree: Path
    config_path: Path
    config_text: str
    command: str


def _claude(url: str, worktree: Path) -> tuple[Path, str, list[str]]:
    config = {
        "mcpServers": {"amid": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${AMID_TOKEN}"}}}
    }
    memory = {"autoMemoryDirectory": str(worktree / ".amid-local" / "claude-memory")}
    (worktree / CLAUDE_SETTINGS).write_text(json.dumps(memory, indent=2) + "\n", encoding="utf-8")
    command = ["claude", "--mcp-config", ".mcp.json", "--strict-mcp-config", "--settings", str(CLAUDE_SETTINGS)]
    command += ["--allowedTools=mcp__amid__*", f"--disallowedTools={CLAUDE_DENIED}"]
    return worktree / ".mcp.json", json.dumps(config, indent=2) + "\n", command


def _codex(url: str, worktree: Path) -> tuple[Path, str, list[str]]:
    settings = {
        "url": json.dumps(url),
        "bearer_token_env_var": '"AMID_TOKEN"',
        "tool_timeout_sec": "60",
        "default_tools_approval_mode": '"approve"',
    }
    text = "[mcp_servers.amid]\n" + "".join(f"{key} = {value}\n" for key, value in settings.items())
    command = ["codex", *(arg for key, value in settings.items() for arg in ("-c", f"mcp_servers.amid.{key}={value}"))]
    return worktree / ".amid-local" / "codex-mcp.toml", text, command  # for reading; the command carries it


def _cursor(url: str, worktree: Path) -> tuple[Path, str, list[str]]:
    config = {"mcpServers": {"amid": {"url": url, "headers": {"Authorization": "Bearer ${env:AMID_TOKEN}"}}}}
    return worktree / ".cursor" / "mcp.json", json.dumps(config, indent=2) + "\n", ["cursor-agent", "--approve-mcps"]


def _opencode(url: str, worktree: Path) -> tuple[Path, str, list[str]]:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {
            "amid": {
                "type": "remote",
                "url": url,
                "enabled": True,
                "oauth": False,
                "headers": {"Authorization": "Bearer {env:AMID_TOKEN}"},
            }
        },
    }
    return worktree / "opencode.json", json.dumps(config, indent=2) + "\n", ["opencode"]


WRITERS: dict[Client, Callable[[str, Path], tuple[Path, str, list[str]]]] = {
    "claude": _claude,
    "codex": _codex,
    "cursor": _cursor,
    "opencode": _opencode,
}


def ensure_worktree(workspace: Workspace, agent_id: str) -> Path:
    """The agent's own repository (a clone of the run's `main`, on `agent/<agent>`, under the agent's
    git identity), created on first use; a folder left by a crash mid-clone never exists (renamed in)."""
    check_agent_name(agent_id)
    worktree = workspace.worktrees_dir / agent_id
    if worktree.is_dir():
        return worktree
    try:
        create_agent_repo(workspace.repo_dir, worktree, agent_id, workspace.contract().id)
    except OSError:
        if not worktree.is_dir():  # not another `connect` of the same agent that got there first
            raise
    return worktree


def issue_token(workspace: Workspace, agent_id: str, role: str = "agent") -> dict[str, Any]:
    """A fresh token for the agent (through the server when it runs); its earlier tokens are revoked."""
    try:
        call(workspace, "token_revoke", {"name": agent_id})
    except AmidError as exc:  # NotFound directly, InvalidInput through the server's admin route
        if "no live token" not in exc.message:
            raise
    return call(workspace, "token_create", {"name": agent_id, "role": role})


def prepare_worktree(workspace: Workspace, agent_id: str, token: str, title: str) -> Path:
    """The agent's worktree with its token file (0600) and the protocol in AGENTS.md / CLAUDE.md."""
    worktree = ensure_worktree(workspace, agent_id)
    (worktree / ".amid-local").mkdir(exist_ok=True)
    token_file = worktree / TOKEN_FILE
    token_file.write_text(token, encoding="utf-8")
    token_file.chmod(0o600)
    for name in ("AGENTS.md", "CLAUDE.md"):
        (worktree / name).write_text(agents_md(agent_id, title), encoding="utf-8")
    return worktree


def connect(workspace: Workspace, client: Client, agent_id: str, url: str, token: str, title: str) -> Connection:
    worktree = prepare_worktree(workspace, agent_id, token, title)
    path, text, start = WRITERS[client](url, worktree)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    command = f'cd {shlex.quote(str(worktree))} && AMID_TOKEN="$(cat {TOKEN_FILE})" {shlex.join(start)}'
    return Connection(agent_id, worktree, path, text, command)
