"""`amid connect CLIENT --agent NAME`: a worktree, a token and the client's MCP configuration.

The worktree shares the run's repository, so the agent's commits land where `submit_attempt`
looks for them. Configs reference the token through the AMID_TOKEN environment variable; the token
itself is written to `.amid-local/token` (git-ignored, mode 0600) inside the worktree.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from server.errors import Conflict
from server.ledger.identity import check_agent_name
from server.protocol import agents_md
from server.workspace import Workspace

Client = Literal["claude", "codex", "cursor", "opencode"]
CLIENTS: tuple[Client, ...] = ("claude", "codex", "cursor", "opencode")


@dataclass(frozen=True)
class Connection:
    agent_id: str
    worktree: Path
    config_path: Path
    config_text: str
    command: str


def _claude(url: str, worktree: Path) -> tuple[Path, str, str]:
    config = {
        "mcpServers": {"amid": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${AMID_TOKEN}"}}}
    }
    command = "claude --mcp-config .mcp.json --strict-mcp-config --allowedTools 'mcp__amid__*'"
    return worktree / ".mcp.json", json.dumps(config, indent=2) + "\n", command


def _codex(url: str, worktree: Path) -> tuple[Path, str, str]:
    config = (
        "[mcp_servers.amid]\n"
        f'url = "{url}"\n'
        'bearer_token_env_var = "AMID_TOKEN"\n'
        "tool_timeout_sec = 60\n"
        'default_tools_approval_mode = "approve"\n'
    )
    home = worktree / ".amid-local" / "codex"
    return home / "config.toml", config, f"CODEX_HOME={home} codex"


def _cursor(url: str, worktree: Path) -> tuple[Path, str, str]:
    config = {"mcpServers": {"amid": {"url": url, "headers": {"Authorization": "Bearer ${env:AMID_TOKEN}"}}}}
    return worktree / ".cursor" / "mcp.json", json.dumps(config, indent=2) + "\n", "cursor-agent --approve-mcps"


def _opencode(url: str, worktree: Path) -> tuple[Path, str, str]:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {
            "amid": {
                "type": "remote",
                "url": url,
                "enabled": True,
                "headers": {"Authorization": "Bearer {env:AMID_TOKEN}"},
            }
        },
    }
    return worktree / "opencode.json", json.dumps(config, indent=2) + "\n", "opencode"


WRITERS: dict[Client, Callable[[str, Path], tuple[Path, str, str]]] = {
    "claude": _claude,
    "codex": _codex,
    "cursor": _cursor,
    "opencode": _opencode,
}


def ensure_worktree(workspace: Workspace, agent_id: str) -> Path:
    import git

    check_agent_name(agent_id)
    worktree = workspace.worktrees_dir / agent_id
    if worktree.is_dir():
        return worktree
    branch = f"agent/{agent_id}"
    with git.Repo(workspace.repo_dir) as repo:
        if branch in [head.name for head in repo.heads]:
            raise Conflict(f"agent: branch {branch} exists without its worktree; pick another agent name")
        repo.git.worktree("add", "-b", branch, str(worktree), "main")
    return worktree


def connect(workspace: Workspace, client: Client, agent_id: str, url: str, token: str, title: str) -> Connection:
    worktree = ensure_worktree(workspace, agent_id)
    local = worktree / ".amid-local"
    local.mkdir(exist_ok=True)
    token_file = local / "token"
    token_file.write_text(token, encoding="utf-8")
    token_file.chmod(0o600)
    for name in ("AGENTS.md", "CLAUDE.md"):
        (worktree / name).write_text(agents_md(agent_id, title), encoding="utf-8")
    path, text, start = WRITERS[client](url, worktree)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    command = f'cd {worktree} && AMID_TOKEN="$(cat .amid-local/token)" {start}'
    return Connection(agent_id, worktree, path, text, command)
