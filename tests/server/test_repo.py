"""The server's commit store and the replay checkout, on a real demo workspace with real git."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import git

from amid.server.agent_repo import import_commit
from amid.server.connect import ensure_worktree
from amid.server.repo import RUN_START_REF, detached_worktree, pin_commit, resolve_commit, stored_commit
from amid.server.workspace import Workspace


def commit_in(workspace: Workspace, agent: str, files: dict[str, str]) -> str:
    worktree = ensure_worktree(workspace, agent)
    for rel, text in files.items():
        (worktree / rel).write_text(text, encoding="utf-8")
    with git.Repo(worktree) as repo:
        repo.index.add(list(files))
        return str(repo.index.commit(f"work of {agent}").hexsha)


def test_init_creates_the_store_with_the_runs_first_commit_pinned(workspace: Workspace) -> None:
    with git.Repo(workspace.repo_dir) as repo:
        start = repo.git.rev_list("--max-parents=0", "main")
    assert resolve_commit(workspace.commit_store, RUN_START_REF) == start
    with git.Repo(workspace.commit_store) as store:
        assert store.bare and store.config_reader().get_value("gc", "auto") == 0


def test_a_replay_checkout_has_the_commits_files_and_no_link_back_to_the_store(workspace: Workspace) -> None:
    sha = commit_in(workspace, "ann", {"predict.py": "print('ann')\n", "run.sh": "python predict.py\n"})
    import_commit(workspace.commit_store, workspace.repo_dir, workspace.worktrees_dir / "ann", sha)
    with detached_worktree(workspace.commit_store, sha) as tree:
        assert (tree / "predict.py").read_text(encoding="utf-8") == "print('ann')\n"
        assert not (tree / ".git").exists() and not (tree.parent / "index").exists()
        kept = tree
    assert not kept.exists()
    assert not (workspace.commit_store / "worktrees").exists()  # nothing to prune, nothing to reach


def test_commits_copied_at_once_into_a_store_that_did_not_exist_all_arrive(workspace: Workspace) -> None:
    shutil.rmtree(workspace.commit_store)  # a workspace made before the store existed
    shas = [commit_in(workspace, f"agent-{i}", {"model.py": f"print({i})\n"}) for i in range(6)]

    def copy(index: int) -> None:
        import_commit(
            workspace.commit_store, workspace.repo_dir, workspace.worktrees_dir / f"agent-{index}", shas[index]
        )

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(copy, range(6)))
    for index, sha in enumerate(shas):
        pin_commit(workspace.commit_store, sha, f"att-{index:05d}")
    assert [stored_commit(workspace.commit_store, f"att-{i:05d}") for i in range(6)] == shas
    assert stored_commit(workspace.commit_store, "att-99999") is None
