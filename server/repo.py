"""The run's git repositories, as agents, attempts and the reviewer see them (gitpython, imported lazily).

Each agent works in a repository of its own (`worktrees/<agent>/`, a clone of the run's `main`
with its own object store and only its own branch), so nothing another agent committed is in it.
At submission the server fetches the named commit from the agent's repository into its commit
store (`.amid/commits.git`, a bare repository no agent can see) and from there into `repo/`, the
run's repository humans browse; both pin it under `refs/amid/attempts/<attempt_id>`. Review,
replay and audit read an attempt's code from the store only.

An agent's repository is untrusted: git reads it only inside bubblewrap with nothing else of the
host mounted (where bubblewrap runs), after checks that its objects are its own (no alternates,
no links), with `transfer.fsckObjects` on and no config, hooks or tags taken from it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amid.server.errors import JobFailed

PIN_PREFIX = "refs/amid/attempts/"
RUN_START_REF = "refs/amid/run-start"  # the run's first commit: the base the access check diffs against
MAX_SCANNED_BYTES = 2_000_000
# Fetch by hash: the commit may be on no branch (a detached HEAD in a worktree).
FETCH_ANY = "uploadpack.allowAnySHA1InWant=true"
_store_creation = threading.Lock()


def resolve_commit(repo_dir: Path, rev: str) -> str | None:
    """The full hash of a commit-ish (hash, abbreviated hash, branch), or None if it is not there."""
    import git

    if rev.startswith("-") or not rev.strip() or "\x00" in rev or not repo_dir.is_dir():
        return None
    try:
        with git.Repo(repo_dir) as repo:
            return str(repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")).strip() or None
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def pin_commit(repo_dir: Path, sha: str, attempt_id: str) -> None:
    import git

    with git.Repo(repo_dir) as repo:
        repo.git.update_ref(PIN_PREFIX + attempt_id, sha)


def init_commit_store(store: Path, repo_dir: Path) -> None:
    """Create the server's bare commit store, with the run's first commit pinned, unless it exists.
    Built beside its final place and renamed, so a crash never leaves half a store."""
    import git

    with _store_creation:
        if (store / "HEAD").is_file():
            return
        staging = Path(tempfile.mkdtemp(prefix=f".{store.name}.", dir=store.parent))
        try:
            with git.Repo.init(staging, bare=True) as bare, bare.config_writer() as config:
                config.set_value("gc", "auto", "0")  # nothing in the store is ever garbage
                config.set_value("gc", "pruneExpire", "never")
            with git.Repo(repo_dir) as repo:
                start = str(repo.git.rev_list("--max-parents=0", "main").split()[-1])
            _fetch(staging, repo_dir, start)
            with git.Repo(staging) as bare:
                bare.git.update_ref(RUN_START_REF, start)
            staging.rename(store)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def store_commit(store: Path, repo_dir: Path, sha: str) -> None:
    """Copy `sha` and its history from `repo_dir` into the store (objects only: `pin_commit` on the
    store names it for its attempt, inside the transaction that records the attempt)."""
    init_commit_store(store, repo_dir)
    _fetch(store, repo_dir, sha)


def _fetch(store: Path, repo_dir: Path, sha: str) -> None:
    import git

    try:
        with git.Repo(store) as bare:
            bare.git(c=FETCH_ANY).fetch("--quiet", "--no-tags", "--no-write-fetch-head", str(repo_dir), sha)
    except git.GitCommandError as exc:
        raise JobFailed(f"commit: copying {sha[:12]} into the server's commit store failed: {exc.stderr}") from None


def stored_commit(store: Path, attempt_id: str) -> str | None:
    """The commit pinned for the attempt in the store, if it and every object of its history are there."""
    import git

    sha = resolve_commit(store, PIN_PREFIX + attempt_id)
    if sha is None:
        return None
    try:
        with git.Repo(store) as bare:
            bare.git.rev_list("--quiet", "--objects", sha)
    except git.GitCommandError:
        return None
    return sha


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
    """The store's pinned run start; in `repo/`, the root of `main`."""
    import git

    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{RUN_START_REF}^{{commit}}")).strip()
    except git.GitCommandError:
        return str(repo.git.rev_list("--max-parents=0", "main").split()[-1])


@contextmanager
def detached_worktree(repo_dir: Path, sha: str) -> Iterator[Path]:
    """A throw-away checkout of `sha` (symlinks and modes as git checks them out) in a temporary
    folder, removed afterwards. It has no `.git` and leaves nothing in the repository, so code run
    there cannot reach the store it came from; `repo_dir` may be bare (the commit store)."""
    import git

    parent = Path(tempfile.mkdtemp(prefix="amid-replay-"))
    path = parent / "tree"
    path.mkdir()
    try:
        with git.Repo(repo_dir) as repo, repo.git.custom_environment(GIT_INDEX_FILE=str(parent / "index")):
            repo.git(work_tree=str(path)).read_tree("--reset", "-u", sha)
        (parent / "index").unlink(missing_ok=True)
        yield path
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def prune_worktrees(repo_dir: Path) -> None:
    """Forget replay worktrees whose folders vanished (left in `repo/` by reviews of older versions)."""
    import git

    with git.Repo(repo_dir) as repo:
        repo.git.worktree("prune")
