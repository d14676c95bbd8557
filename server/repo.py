"""The run's git repository, as attempts and the reviewer see it (gitpython, imported lazily).

Commits are resolved to full hashes; a submitted commit is pinned under `refs/amid/attempts/` so
that no branch rewrite or garbage collection can take away the code of a recorded attempt.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PIN_PREFIX = "refs/amid/attempts/"
MAX_SCANNED_BYTES = 2_000_000


def resolve_commit(repo_dir: Path, rev: str) -> str | None:
    """The full hash of a commit-ish (hash, abbreviated hash, branch), or None if it is not there."""
    import git

    if rev.startswith("-") or not rev.strip():
        return None
    with git.Repo(repo_dir) as repo:
        try:
            return str(repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")).strip() or None
        except git.GitCommandError:
            return None


def pin_commit(repo_dir: Path, sha: str, attempt_id: str) -> None:
    import git

    with git.Repo(repo_dir) as repo:
        repo.git.update_ref(PIN_PREFIX + attempt_id, sha)


def changed_files(repo_dir: Path, sha: str) -> Iterator[tuple[str, bytes]]:
    """Text-sized files of the commit's tree that differ from the run's first commit (the code the
    attempt added since the run started), with their bytes; binaries and huge files are skipped."""
    import git

    with git.Repo(repo_dir) as repo:
        commit = repo.commit(sha)
        base = {b.path: b.hexsha for b in _blobs(repo.commit(_first_commit(repo)).tree)}
        for blob in _blobs(commit.tree):
            if base.get(blob.path) == blob.hexsha or blob.size > MAX_SCANNED_BYTES:
                continue
            data = blob.data_stream.read()
            if b"\x00" not in data[:8192]:
                yield blob.path, data


def _blobs(tree: Any) -> Iterator[Any]:
    for item in tree.traverse():
        if item.type == "blob":
            yield item


def _first_commit(repo: Any) -> str:
    roots = repo.git.rev_list("--max-parents=0", "main").split()
    return str(roots[-1])


@contextmanager
def detached_worktree(repo_dir: Path, sha: str) -> Iterator[Path]:
    """A throw-away worktree checked out at `sha` (detached), removed afterwards."""
    import git

    parent = Path(tempfile.mkdtemp(prefix="amid-replay-"))
    path = parent / "tree"
    with git.Repo(repo_dir) as repo:
        repo.git.worktree("add", "--detach", str(path), sha)
    try:
        yield path
    finally:
        with git.Repo(repo_dir) as repo:
            try:
                repo.git.worktree("remove", "--force", str(path))
            except git.GitCommandError:
                repo.git.worktree("prune")
        shutil.rmtree(parent, ignore_errors=True)


def prune_worktrees(repo_dir: Path) -> None:
    """Forget replay worktrees whose folders vanished (a review killed mid-replay)."""
    import git

    with git.Repo(repo_dir) as repo:
        repo.git.worktree("prune")
