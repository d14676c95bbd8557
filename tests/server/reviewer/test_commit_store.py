"""Server-owned commits: at submission the attempt's commit and its history are copied into the
server's bare store (`.amid/commits.git`), which no worktree shares, so an agent that erases its
pin from `repo/` and garbage-collects cannot take the code away from review and replay.

A demo workspace with a 20 % server-held holdout, so that a review replays the declared inference
command twice (validation sample and holdout); real git, real review processes, the real client.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from amid.server.context import Services
from amid.server.repo import resolve_commit, stored_commit
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.contract import ValidationProtocol
from amid.tools.task.importers import import_task
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import AgentSandbox, call, client_for, verdict

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def store_services(demo_challenge: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    imported = import_task(demo_challenge)
    imported.contract = imported.contract.model_copy(
        update={"validation": ValidationProtocol(k_folds=4, seed=0, holdout_fraction=0.2)}
    )
    workspace = init_workspace(imported, tmp_path_factory.mktemp("store") / "ws")
    services = open_services(workspace.root, replay_timeout_s=120.0)
    reviewer(services)
    yield services
    stop_reviewer(services)
    services.ledger.close()


def erase_from_repo(workspace: Workspace, box: AgentSandbox, keep: str, attempt_id: str) -> None:
    """Move the agent's branch back in its own repository, and delete the pin from repo/ and prune
    (what an agent could do when worktrees shared repo/; a human browsing it still can)."""
    with git.Repo(box.worktree) as tree:
        tree.git.reset("--hard", keep)
    with git.Repo(workspace.repo_dir) as repo:
        repo.git.update_ref("-d", f"refs/amid/attempts/{attempt_id}")
        repo.git.reflog("expire", "--expire=now", "--all")
        repo.git.gc("--prune=now", "--quiet")


def git_common_dir(worktree: Path) -> Path:
    out = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=worktree, capture_output=True, text=True)
    return (worktree / out.stdout.strip()).resolve()


async def test_submission_copies_the_commit_and_its_history_into_a_store_no_worktree_shares(
    store_services: Services,
) -> None:
    ws = store_services.workspace
    box = AgentSandbox(ws, "keeper")
    base = box.commit({"notes.txt": "base of keeper\n"}, message="base")
    sha = box.commit({"train.py": "print('keeper')\n"}, message="attempt")
    async with client_for(store_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", box.model_payload(sha, 0, seed=31))

    assert stored_commit(ws.commit_store, attempt["attempt_id"]) == sha
    assert resolve_commit(ws.commit_store, base) == base  # the history came along
    assert git_common_dir(box.worktree) == (box.worktree / ".git").resolve()  # the agent's own repository
    assert resolve_commit(ws.repo_dir, sha) == sha  # copied from the store into the run's repository
    with git.Repo(box.worktree) as tree:
        assert tree.git.for_each_ref("refs/amid/run-start") == ""  # the store's refs are not the worktree's


async def test_an_attempt_whose_commit_an_agent_erased_from_repo_is_still_reviewed_and_replayed(
    store_services: Services,
) -> None:
    ws = store_services.workspace
    box = AgentSandbox(ws, "eraser")
    base = box.commit({"notes.txt": "base of eraser\n"}, message="base")
    sha = box.commit({"train.py": "print('to be erased')\n"}, message="to be erased")
    async with client_for(store_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", box.model_payload(sha, 1, seed=32))
        erase_from_repo(ws, box, base, attempt["attempt_id"])
        assert resolve_commit(ws.repo_dir, sha) is None  # really gone from the shared repository
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = await verdict(client, queued["review_id"])

    assert review["verdict"] == "accepted", review["failed_checks"]
    assert {"COMMIT_UNKNOWN", "PRED_NOT_REPRODUCED", "HOLDOUT_GAP", "ILLEGAL_DATA_ACCESS"} <= set(
        review["passed_checks"]
    )
    holdout = [m for m in review["metrics"] if m["scope"] == "holdout"]
    assert holdout and all(m["n_valid"] > 0 for m in holdout)  # the holdout replay ran the stored code


async def test_a_commit_lost_from_the_server_store_fires_commit_unknown(store_services: Services) -> None:
    ws = store_services.workspace
    box = AgentSandbox(ws, "lost")
    sha = box.commit({"train.py": "print('lost')\n"}, message="lost from the store")
    async with client_for(store_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", box.model_payload(sha, 2, seed=33))
        with git.Repo(ws.commit_store) as store:
            store.git.update_ref("-d", f"refs/amid/attempts/{attempt['attempt_id']}")
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = await verdict(client, queued["review_id"])

    failed = {c["code"]: c for c in review["failed_checks"]}
    assert review["verdict"] == "rejected" and failed["COMMIT_UNKNOWN"]["evidence"]["commit"] == sha
    assert failed["COMMIT_UNKNOWN"]["evidence"]["repository"] == ".amid/commits.git"
