"""Confinement of paths that agents name: inside their own worktree, never private/."""

from __future__ import annotations

from pathlib import Path

from server.errors import Forbidden, InvalidInput, NotFound
from server.workspace import Workspace


def agent_worktree(workspace: Workspace, agent_id: str) -> Path:
    worktree = workspace.worktrees_dir / agent_id
    if not worktree.is_dir():
        raise NotFound(f"agent {agent_id!r} has no worktree; create it with `amid connect CLIENT --agent {agent_id}`")
    return worktree.resolve()


def confine(workspace: Workspace, agent_id: str, path: str, field: str) -> Path:
    """Resolve `path` (relative to the agent's worktree, or absolute inside it) with symlinks
    followed; refuse anything that lands outside the worktree or under the workspace's private/."""
    root = agent_worktree(workspace, agent_id)
    if "\x00" in path:
        raise InvalidInput(f"{field}: contains a NUL byte", field=field)
    resolved = (root / path).resolve()
    private = workspace.private_dir.resolve()
    if resolved == private or private in resolved.parents:
        raise Forbidden(f"{field}: {path!r} is under private/, which no tool reads for an agent", field=field)
    if resolved != root and root not in resolved.parents:
        raise Forbidden(f"{field}: {path!r} resolves outside your worktree {root}; use a path inside it", field=field)
    return resolved
