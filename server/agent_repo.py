"""Each agent's own git repository, and bringing a submitted commit out of it into the server's store.

An agent gets `worktrees/<agent>/` as a repository of its own: `main` of the run's repository
fetched over git's transport (so only objects reachable from `main`, never a copy of the object
folder with other agents' work in it), its branch `agent/<agent>` checked out, no remote, and its
own commit identity (`<agent>` / `<agent>@<run>`). Nothing of `repo/` or the store is shared with it.

At submission the server treats that repository as hostile: its owner may have replaced `.git`
with a link or a `gitdir:` file, pointed `objects/info/alternates` or a pack folder at another
agent's objects, or planted config and hooks. So git reads it only through a bubblewrap box that
mounts nothing but that `.git` (read-only) and the system (where bubblewrap runs), after static
checks that hold without it; the fetch runs in the server's store with no tags, no submodules,
`transfer.fsckObjects` on, and the result is verified object by object before it is pinned.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from amid.server import sandbox
from amid.server.errors import Forbidden, JobFailed
from amid.server.repo import init_commit_store

SHA = re.compile(r"[0-9a-f]{40}")
FETCH_TIMEOUT_S = 600
# Config for every git that touches an agent's repository (GIT_CONFIG_PARAMETERS reaches the
# upload-pack the fetch starts, and outranks the repository's own config).
HARDENED = (
    "protocol.file.allow=always",
    "uploadpack.allowAnySHA1InWant=true",  # the commit may be on no branch (a detached HEAD)
    "transfer.fsckObjects=true",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
)


def branch_of(agent_id: str) -> str:
    return f"agent/{agent_id}"


def create_agent_repo(repo_dir: Path, target: Path, agent_id: str, run_id: str) -> None:
    """Clone `main` of the run's repository into `target` (built beside it and renamed, so a crash
    leaves no half repository), on the agent's branch, under the agent's identity, with no remote."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.clone-", dir=target.parent))
    try:
        clone = ["clone", "--quiet", "--no-local", "--single-branch", "--branch", "main", "--no-tags"]
        _git(None, *clone, str(repo_dir), str(staging / "tree"))
        tree = staging / "tree"
        _git(tree, "checkout", "--quiet", "-b", branch_of(agent_id))
        _git(tree, "remote", "remove", "origin")  # the run's repository is not the agent's to read
        _git(tree, "config", "user.name", agent_id)
        _git(tree, "config", "user.email", f"{agent_id}@{run_id}")
        tree.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def agent_commit(worktree: Path, rev: str, *, boxed: bool = True) -> str | None:
    """The full hash of a commit-ish in the agent's own repository, or None if it names no commit.
    `boxed`: read it in the reader box (bubblewrap required); False only where the sandbox setting is
    explicitly `none`."""
    if rev.startswith("-") or not rev.strip() or any(c in rev for c in "\x00\n"):
        return None
    git_dir = checked_git_dir(worktree)
    argv = [*_reader(git_dir, boxed), "git", *_config(), f"--git-dir={git_dir}", "rev-parse", "--verify", "--quiet"]
    done = _run([*argv, "--end-of-options", f"{rev}^{{commit}}"], timeout_s=60)
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and SHA.fullmatch(sha) else None


def import_commit(store: Path, repo_dir: Path, worktree: Path, sha: str, *, boxed: bool = True) -> None:
    """Fetch `sha` and its history from the agent's repository into the store, verify it there, then
    copy it from the store into the run's repository (the store is the only reader of agent code)."""
    if not SHA.fullmatch(sha):
        raise JobFailed(f"commit: {sha!r} is not a full commit hash")
    init_commit_store(store, repo_dir)
    git_dir = checked_git_dir(worktree)
    upload_pack = shlex.join([*_reader(git_dir, boxed), "git-upload-pack"])
    fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--no-auto-gc"]
    _git(store, *_config(), *fetch, f"--upload-pack={upload_pack}", str(git_dir), sha)
    _verify(store, sha)
    _git(repo_dir, *_config(), *fetch, str(store), sha)


def checked_git_dir(worktree: Path) -> Path:
    """The agent's `.git`, refused unless its objects can only be its own: a real folder (not a link,
    not a `gitdir:` file, not a linked worktree's), no alternates, no links under `objects/`."""
    git_dir = worktree / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir():
        raise Forbidden(f"commit: {git_dir} is not the agent's own repository folder; commit in your worktree")
    for name in ("commondir", "objects/info/alternates", "objects/info/http-alternates"):
        if os.path.lexists(git_dir / name):
            raise Forbidden(f"commit: {git_dir / name} points at objects outside your repository; remove it")
    for root, folders, files in os.walk(git_dir / "objects"):
        for name in (*folders, *files):
            if os.path.islink(os.path.join(root, name)):
                raise Forbidden(f"commit: {os.path.join(root, name)} is a link; objects must be your own")
    if os.path.islink(git_dir / "objects"):
        raise Forbidden(f"commit: {git_dir / 'objects'} is a link; objects must be your own")
    return Path(os.path.realpath(git_dir))  # the path the box mounts it at


def _verify(store: Path, sha: str) -> None:
    kind = _git(store, "cat-file", "-t", sha).strip()
    if kind != "commit":
        raise JobFailed(f"commit: {sha[:12]} arrived in the server's store as a {kind}, not a commit")
    _git(store, "rev-list", "--quiet", "--objects", sha)  # every object of its history is there


def _reader(git_dir: Path, boxed: bool) -> list[str]:
    """The prefix that runs git on an agent's repository: inside a box that mounts only it, read-only.
    A box that cannot run is an error naming the fix (never a quiet unboxed read)."""
    if not boxed:
        return []
    sandbox.resolve_kind("bwrap")
    return sandbox.git_reader_box(git_dir)


def _config() -> list[str]:
    return [arg for setting in HARDENED for arg in ("-c", setting)]


def _run(argv: list[str], timeout_s: float = FETCH_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_NO_REPLACE_OBJECTS": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, check=False, env=env, stdin=subprocess.DEVNULL, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise JobFailed(f"commit: {' '.join(argv[:3])} took over {timeout_s:.0f} s") from None


def _git(cwd: Path | None, *args: str) -> str:
    done = _run(["git", *(["-C", str(cwd)] if cwd else []), *args])
    if done.returncode != 0:
        command = next((a for a in args if not a.startswith("-") and "=" not in a), "")
        raise JobFailed(f"commit: git {command} failed: {done.stderr.strip()[-400:]}")
    return done.stdout
