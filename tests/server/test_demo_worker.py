"""The scripted demo worker's commit step, resumed after a session was killed in the middle of a commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git

from amid.server.demo_worker import _commit


def _worktree(tmp_path: Path) -> Path:
    main, worktree = tmp_path / "main", tmp_path / "worker-1"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    for key, value in (("user.name", "t"), ("user.email", "t@example.org")):
        subprocess.run(["git", "-C", str(main), "config", key, value], check=True)
    subprocess.run(["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(worktree), "-b", "agent/worker-1"], check=True)
    return worktree


def test_a_commit_after_a_session_killed_mid_commit_clears_its_stale_locks(tmp_path: Path) -> None:
    worktree = _worktree(tmp_path)
    (worktree / "model.py").write_text("threshold = 0.5\n", encoding="utf-8")
    with git.Repo(worktree) as repo:  # what a SIGTERM between taking and releasing the locks leaves
        locks = [Path(f"{repo.index.path}.lock"), Path(repo.common_dir) / "refs/heads/agent/worker-1.lock"]
    for lock in locks:
        lock.write_bytes(b"")
    first = _commit(worktree, ["model.py"], "Threshold model")
    assert not any(lock.exists() for lock in locks)
    with git.Repo(worktree) as repo:
        assert repo.head.commit.hexsha == first and repo.head.reference.path == "refs/heads/agent/worker-1"
        assert [b.path for b in repo.head.commit.tree.blobs] == ["model.py"]
    # the step re-run (the session interrupted after the commit, before recording it) reuses the commit
    assert _commit(worktree, ["model.py"], "Threshold model") == first
