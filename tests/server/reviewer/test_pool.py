"""The reviewer pool under failure: a server killed mid-review, a crashing review, a runaway one.
None of them blocks a tool call, loses a review or records two verdicts."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.reviewer.pool import ReviewerPool
from amid.server.reviewer.report import CODES
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import AgentSandbox, call, client_for, verdict

pytestmark = pytest.mark.anyio

HANGING_GRADER = """\
import os, time
from pathlib import Path

Path({pidfile!r}).write_text(str(os.getpid()), encoding="utf-8")
time.sleep(120)


def grade(submission, answers, submission_dir=None, answers_dir=None):
    raise AssertionError("never reached")
"""


@pytest.fixture(scope="module")
def bare_services(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """A workspace whose pools the tests build themselves."""
    target = tmp_path_factory.mktemp("pool") / "ws"
    shutil.copytree(_pristine_workspace, target, symlinks=True)
    services = open_services(target)
    yield services
    services.ledger.close()


def _pool(services: Services, **settings: float) -> ReviewerPool:
    return ReviewerPool(services.ledger, services.workspace, services.settings.model_copy(update=settings))


def _wait_until(predicate: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        time.sleep(0.05)


async def _submitted(services: Services, agent_id: str, fold: int, seed: int, **artifacts: str) -> str:
    box = AgentSandbox(services.workspace, agent_id)
    payload = box.model_payload(box.commit(), fold, seed, artifacts=artifacts)
    async with client_for(services, agent_id) as client:
        return str((await call(client, "submit_attempt", payload))["attempt_id"])


async def test_a_review_left_running_by_a_killed_server_is_requeued_and_decided_once(bare_services: Services) -> None:
    attempt_id = await _submitted(bare_services, "survivor", 0, 1)
    review, _ = bare_services.ledger.reviews.request(attempt_id, "survivor")
    assert bare_services.ledger.reviews.start(review["review_id"])  # running ... and then the server died

    pool = _pool(bare_services)
    pool.start()
    try:
        assert pool.wait(review["review_id"], 120)
    finally:
        pool.close()
    done = bare_services.ledger.reviews.get(review["review_id"])
    assert (done["status"], done["verdict"]) == ("done", "accepted")
    assert bare_services.ledger.db.scalar("SELECT count(*) FROM reviews WHERE attempt_id = ?", [attempt_id]) == 1
    assert len(bare_services.ledger.reviews.checks(review["review_id"])) == len(CODES)
    assert bare_services.ledger.activity.events(kind="reviews_requeued")


async def test_a_crashing_review_fails_cleanly_and_can_be_requested_again(bare_services: Services) -> None:
    attempt_id = await _submitted(bare_services, "unlucky", 1, 2)
    folds = bare_services.workspace.task_dir / "folds.json"
    folds.rename(folds.with_suffix(".moved"))  # the review process cannot load the locked folds
    bare_services.reviewer = pool = _pool(bare_services)
    pool.start()
    try:
        async with client_for(bare_services, "unlucky") as client:
            queued = await call(client, "request_review", {"attempt_id": attempt_id})
            failed = await verdict(client, queued["review_id"])
            assert failed["status"] == "failed" and "folds.json" in failed["error"]
            assert failed["attempt_status"] == "pending"
            assert (await call(client, "get_task", {}))["task_id"]  # the server kept serving
            folds.with_suffix(".moved").rename(folds)
            again = await call(client, "request_review", {"attempt_id": attempt_id})
            assert again["review_id"] != queued["review_id"]
            assert (await verdict(client, again["review_id"]))["verdict"] == "accepted"
    finally:
        pool.close()
        bare_services.reviewer = None


async def test_a_runaway_review_is_killed_with_its_grader_at_the_review_timeout(
    bare_services: Services, tmp_path: Path
) -> None:
    grader = bare_services.workspace.private_dir / "grader/grade.py"
    original, pidfile = grader.read_text(encoding="utf-8"), tmp_path / "grader.pid"
    grader.write_text(HANGING_GRADER.format(pidfile=str(pidfile)), encoding="utf-8")
    box = AgentSandbox(bare_services.workspace, "runaway")
    attempt_id = await _submitted(bare_services, "runaway", 2, 3, submission=box.write_submission("outputs/sub"))
    pool = _pool(bare_services, review_timeout_s=6.0, grader_timeout_s=300.0)
    pool.start()
    try:
        review, _ = bare_services.ledger.reviews.request(attempt_id, "runaway")
        pool.submit(review["review_id"])
        _wait_until(pidfile.is_file)  # the task's grader is running (and hangs)
        assert pool.wait(review["review_id"], 120)
    finally:
        pool.close()
        grader.write_text(original, encoding="utf-8")
    failed = bare_services.ledger.reviews.get(review["review_id"])
    assert failed["status"] == "failed" and "timed out after 6 s" in failed["error"]
    assert bare_services.ledger.attempts.get(attempt_id)["status"] == "pending"
    _wait_until(lambda: not _alive(int(pidfile.read_text(encoding="utf-8"))), 10)  # no orphaned grader


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").split(")")[-1].split()[0] != "Z"  # a zombie is dead
