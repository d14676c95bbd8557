"""get_task says which interpreter and environment an agent's jobs run with, and that one works."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server import runtime
from amid.server.connect import ensure_worktree
from amid.server.context import Services
from amid.server.job_environment import describe, job_rule
from tests.clients import local_client, ok


@pytest.fixture
def agent_services(services: Services) -> Iterator[Services]:
    services.ledger.identities.create_token("worker", "agent")
    ensure_worktree(services.workspace, "worker")
    yield services
    runtime.shutdown(services)


@pytest.mark.anyio
async def test_get_task_names_the_jobs_interpreter_and_a_job_started_with_it_imports_nibabel(
    agent_services: Services,
) -> None:
    async with local_client(agent_services, "worker") as client:
        task = await ok(client, "get_task", {"include_case_ids": False})
        jobs = task["jobs"]
        code = "import nibabel, numpy; print('imaging packages', nibabel.__version__)"
        started = await ok(client, "run_gpu_job", {"command": [jobs["python"], "-c", code]})
        done = await ok(client, "get_job", {"job_id": started["job_id"], "wait_s": 30})
    assert jobs["python"] == sys.executable and jobs["backend"] == "local"
    assert {"nibabel", "numpy"} <= set(jobs["packages"])
    assert "AMID_JOB_ID" in jobs["env"] and "CUDA_VISIBLE_DEVICES" in jobs["env"]
    assert any(rule.startswith(f"run_gpu_job: start Python as {sys.executable}") for rule in task["rules"])
    assert done["status"] == "succeeded", done
    assert "imaging packages" in done["stdout_tail"]


def test_a_bare_python3_elsewhere_on_the_jobs_path_is_named_as_one_that_may_lack_the_packages(tmp_path: Path) -> None:
    other = tmp_path / "bin" / "python3"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    other.chmod(0o755)
    jobs = describe("local", sys.executable, str(other.parent))
    assert jobs.bare_python3 == str(other)
    assert f"a bare python3 is {other} and may lack these packages" in job_rule(jobs)


def test_a_bare_python3_in_the_same_environment_is_said_to_be_the_same(tmp_path: Path) -> None:
    jobs = describe("local", sys.executable, str(Path(sys.executable).parent))
    assert "a bare python3 is the same one" in job_rule(jobs)
