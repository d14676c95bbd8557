"""Confinement of paths that agents name: inside their own worktree, never private/."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from amid.server.errors import Forbidden, InvalidInput, NotFound, shown
from amid.server.workspace import Workspace


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
    with os_errors_as_input(field, path):
        resolved = (root / path).resolve()
        resolved.exists()  # a component over NAME_MAX fails here, not later in a tool
    private = workspace.private_dir.resolve()
    if resolved == private or private in resolved.parents:
        raise Forbidden(f"{field}: {shown(path)} is under private/, which no tool reads for an agent", field=field)
    if resolved != root and root not in resolved.parents:
        raise Forbidden(
            f"{field}: {shown(path)} resolves outside your worktree {root}; use a path inside it", field=field
        )
    if ".git" in resolved.relative_to(root).parts:  # the worktree is a repository of its own: its store is git's
        raise Forbidden(
            f"{field}: {shown(path)} is inside your repository's .git folder; use a path of your files", field=field
        )
    return resolved


@contextmanager
def os_errors_as_input(field: str, path: str) -> Iterator[None]:
    """An OS refusal of an agent's path (name too long, symlink loop, no permission, not a
    folder, …) is the caller's input to fix: INVALID_INPUT naming the field and the reason."""
    try:
        yield
    except OSError as exc:
        reason = f"{errno.errorcode.get(exc.errno or 0, 'OSError')}: {exc.strerror or exc}"
        raise _unusable(field, path, reason) from None
    except RuntimeError as exc:  # pathlib's resolve() before Python 3.13 reports a symlink loop so
        raise _unusable(field, path, f"ELOOP: {exc}") from None


def _unusable(field: str, path: str, reason: str) -> InvalidInput:
    return InvalidInput(f"{field}: got {shown(path)}; expected a path the file system accepts ({reason})", field=field)


def readable_file(path: Path) -> bool:
    """A regular file this process may read (not a FIFO, socket or device, which would block or lie)."""
    return path.is_file() and os.access(path, os.R_OK)
