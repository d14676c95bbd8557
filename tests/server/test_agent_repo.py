"""Each agent's own repository: only `main` and its branch, its own identity, nothing of another
agent's work; a submitted commit is fetched out of it into the server's store, and a repository
rigged to reach another agent's objects is refused. Real git, real bubblewrap, the real MCP client."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import git
import pytest

from amid.server import sandbox
from amid.server.agent_repo import agent_commit, import_commit
from amid.server.connect import ensure_worktree
from amid.server.context import Services
from amid.server.errors import Forbidden
from amid.server.repo import resolve_commit
from amid.server.workspace import Workspace
from tests.server.reviewer.sandbox import AgentSandbox, call, call_error, client_for, marked

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_problem() is not None, reason=f"{sandbox.bwrap_problem()}")


def commit_in(workspace: Workspace, agent: str, files: dict[str, str]) -> str:
    worktree = ensure_worktree(workspace, agent)
    for rel, text in files.items():
        (worktree / rel).write_text(text, encoding="utf-8")
    with git.Repo(worktree) as repo:
        repo.index.add(list(files))
        return str(repo.index.commit(f"work of {agent}").hexsha)


def git_out(worktree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(worktree), *args], capture_output=True, text=True, check=False)


def test_an_agents_repository_has_main_and_its_own_branch_its_identity_and_no_remote(workspace: Workspace) -> None:
    worktree = ensure_worktree(workspace, "ann")
    sha = commit_in(workspace, "ann", {"model.py": "print('ann')\n"})
    assert (worktree / ".git").is_dir() and not (worktree / ".git").is_symlink()
    assert git_out(worktree, "for-each-ref", "--format=%(refname)").stdout.split() == [
        "refs/heads/agent/ann",
        "refs/heads/main",
    ]
    assert git_out(worktree, "remote").stdout == ""
    with git.Repo(worktree) as repo:
        commit = repo.commit(sha)
        assert repo.active_branch.name == "agent/ann"
        assert (commit.author.name, commit.author.email) == ("ann", f"ann@{workspace.contract().id}")
    with git.Repo(workspace.repo_dir) as run_repo:
        assert commit.parents[0].hexsha == run_repo.commit("main").hexsha  # built on the run's base


def test_a_submitted_commit_reaches_the_store_and_the_run_repository_but_no_other_agent(workspace: Workspace) -> None:
    sha = commit_in(workspace, "ann", {"model.py": "print('ann secret idea')\n"})
    import_commit(workspace.commit_store, workspace.repo_dir, workspace.worktrees_dir / "ann", sha)
    unsubmitted = commit_in(workspace, "ann", {"model.py": "print('ann, not yet submitted')\n"})
    bob = ensure_worktree(workspace, "bob")  # created after ann's submission: still only main

    assert resolve_commit(workspace.commit_store, sha) == sha == resolve_commit(workspace.repo_dir, sha)
    assert resolve_commit(workspace.repo_dir, unsubmitted) is None  # only what was submitted leaves ann's repo
    for other in (sha, unsubmitted):
        assert git_out(bob, "cat-file", "-e", other).returncode != 0
    assert "ann" not in git_out(bob, "log", "--all", "--format=%an %s").stdout
    assert agent_commit(bob, sha) is None  # bob cannot name ann's commit as his own


def _gitdir_link(workspace: Workspace, mine: Path, other: Path) -> None:
    shutil.rmtree(mine / ".git")
    (mine / ".git").symlink_to(other / ".git")


def _gitdir_file(workspace: Workspace, mine: Path, other: Path) -> None:
    shutil.rmtree(mine / ".git")
    (mine / ".git").write_text(f"gitdir: {other / '.git'}\n", encoding="utf-8")


def _alternates(workspace: Workspace, mine: Path, other: Path) -> None:
    (mine / ".git/objects/info").mkdir(parents=True, exist_ok=True)
    (mine / ".git/objects/info/alternates").write_text(f"{other / '.git/objects'}\n", encoding="utf-8")


def _pack_link(workspace: Workspace, mine: Path, other: Path) -> None:
    subprocess.run(["git", "-C", str(other), "gc", "--quiet"], check=True)  # the commit now lies in a pack
    shutil.rmtree(mine / ".git/objects/pack")
    (mine / ".git/objects/pack").symlink_to(other / ".git/objects/pack")


def _run_repo_link(workspace: Workspace, mine: Path, other: Path) -> None:
    shutil.rmtree(mine / ".git")
    (mine / ".git").symlink_to(workspace.repo_dir / ".git")


@pytest.mark.parametrize("rig", [_gitdir_link, _gitdir_file, _alternates, _pack_link, _run_repo_link])
def test_a_repository_rigged_to_reach_another_agents_objects_is_refused_and_nothing_is_copied(
    workspace: Workspace, rig: object
) -> None:
    theirs = commit_in(workspace, "victim", {"model.py": "print('the victim's unsubmitted work')\n"})
    mine = ensure_worktree(workspace, "thief")
    rig(workspace, mine, workspace.worktrees_dir / "victim")  # type: ignore[operator]
    with pytest.raises(Forbidden, match=r"^commit: "):
        import_commit(workspace.commit_store, workspace.repo_dir, mine, theirs)
    with pytest.raises(Forbidden):
        agent_commit(mine, theirs)
    assert resolve_commit(workspace.commit_store, theirs) is None
    assert resolve_commit(workspace.repo_dir, theirs) is None


@needs_bwrap
def test_git_in_the_reader_box_sees_no_objects_outside_the_agents_repository(workspace: Workspace) -> None:
    """What the static checks cannot promise (a link made after them): git reads the repository in a
    box where nothing else exists, so even an alternate pointing at another agent finds nothing."""
    theirs = commit_in(workspace, "victim", {"model.py": "print('victim')\n"})
    mine = ensure_worktree(workspace, "racer")
    _alternates(workspace, mine, workspace.worktrees_dir / "victim")
    look = ["git", f"--git-dir={os.path.realpath(mine / '.git')}", "cat-file", "-e", theirs]
    assert subprocess.run(look, capture_output=True, check=False).returncode == 0  # unboxed, the alternate works
    boxed = subprocess.run([*sandbox.git_reader_box(mine / ".git"), *look], capture_output=True, check=False)
    assert boxed.returncode != 0, boxed.stderr
    own = commit_in(workspace, "racer", {"model.py": "print('racer')\n"})
    honest = [*sandbox.git_reader_box(mine / ".git"), "git", f"--git-dir={os.path.realpath(mine / '.git')}"]
    assert subprocess.run([*honest, "cat-file", "-e", own], capture_output=True, check=False).returncode == 0


@pytest.mark.anyio
async def test_submit_attempt_refuses_another_agents_commit_and_accepts_its_own(services: Services) -> None:
    victim = AgentSandbox(services.workspace, "victim")
    theirs = victim.commit({"train.py": "print('victim')\n"})
    thief = AgentSandbox(services.workspace, "thief")
    payload = thief.payload(theirs, 0, thief.write_predictions(0, marked(41)))
    async with client_for(services, "thief") as client:
        refused = await call_error(client, "submit_attempt", payload)
        _gitdir_link(services.workspace, thief.worktree, victim.worktree)
        rigged = await call_error(client, "submit_attempt", payload)
    assert refused.startswith("NOT_FOUND: commit") and rigged.startswith("FORBIDDEN: commit")
    assert resolve_commit(services.workspace.commit_store, theirs) is None
    assert int(services.ledger.db.scalar("SELECT count(*) FROM attempts")) == 0
    honest = AgentSandbox(services.workspace, "honest")
    sha = honest.commit({"train.py": "print('honest')\n"})
    async with client_for(services, "honest") as client:
        attempt = await call(client, "submit_attempt", honest.payload(sha, 0, honest.write_predictions(0, marked(42))))
    assert attempt["commit"] == sha and resolve_commit(services.workspace.commit_store, sha) == sha


def test_a_detached_commit_is_imported_and_config_planted_in_the_agents_repository_runs_nothing(
    workspace: Workspace, tmp_path: Path
) -> None:
    worktree = ensure_worktree(workspace, "planter")
    marker = tmp_path / "ran"
    with git.Repo(worktree) as repo, repo.config_writer() as config:
        for key in ("core.fsmonitor", "uploadpack.packObjectsHook", "core.sshCommand", "core.alternateRefsCommand"):
            section, option = key.split(".")
            config.set_value(section, option, f"touch {marker}")
    hook = worktree / ".git/hooks/post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    hook.chmod(0o755)
    first = commit_in(workspace, "planter", {"model.py": "print(1)\n"})
    subprocess.run(
        ["git", "-C", str(worktree), "-c", "core.hooksPath=/dev/null", "checkout", "-q", "--detach"], check=True
    )
    marker.unlink(missing_ok=True)  # anything the agent's own git ran does not count
    detached = commit_in(workspace, "planter", {"model.py": "print(2)\n"})  # on no branch
    assert agent_commit(worktree, "HEAD") == detached != first
    import_commit(workspace.commit_store, workspace.repo_dir, worktree, detached)
    assert resolve_commit(workspace.commit_store, detached) == detached
    assert not marker.exists()


def test_without_bubblewrap_an_agents_repository_is_not_read_unless_the_sandbox_is_switched_off(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = commit_in(workspace, "ann", {"model.py": "print('ann')\n"})
    worktree = workspace.worktrees_dir / "ann"
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    (no_bwrap / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(no_bwrap))
    sandbox.bwrap_problem.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable, match="install bubblewrap"):
            agent_commit(worktree, sha)
        with pytest.raises(sandbox.SandboxUnavailable, match="install bubblewrap"):
            import_commit(workspace.commit_store, workspace.repo_dir, worktree, sha)
        assert resolve_commit(workspace.commit_store, sha) is None  # nothing was fetched
        assert agent_commit(worktree, sha, boxed=False) == sha  # replay_sandbox=none: read plainly, by choice
    finally:
        sandbox.bwrap_problem.cache_clear()
