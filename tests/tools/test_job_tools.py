"""The job tools through the in-memory MCP client, on the real local backend (CPU jobs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from amid.server import runtime
from amid.server.connect import ensure_worktree
from amid.server.context import Services
from tests.clients import local_client, ok


@pytest.fixture
def agent_services(services: Services) -> Iterator[Services]:
    services.ledger.identities.create_token("worker", "agent")
    ensure_worktree(services.workspace, "worker")
    yield services
    runtime.shutdown(services)


@pytest.mark.anyio
async def test_a_cpu_job_runs_in_the_worktree_and_its_log_and_exit_code_come_back(agent_services: Services) -> None:
    async with local_client(agent_services, "worker") as client:
        started = await ok(
            client,
            "run_gpu_job",
            {"command": ["python", "-c", "import os; print(os.getcwd())"], "lane_id": "calibration-trivial"},
        )
        assert started["status"] in ("queued", "running")
        done = await ok(client, "get_job", {"job_id": started["job_id"], "wait_s": 30})
    assert done["status"] == "succeeded" and done["exit_code"] == 0
    assert done["stdout_tail"].strip().endswith("worktrees/worker")
    row = agent_services.ledger.jobs.get(started["job_id"])
    assert row is not None and row["status"] == "succeeded" and row["cwd"] == "worktrees/worker"


@pytest.mark.anyio
async def test_a_working_directory_outside_the_worktree_is_refused(agent_services: Services) -> None:
    async with local_client(agent_services, "worker") as client:
        for cwd in ("..", "../../private", "/tmp"):
            result = await client.call_tool("run_gpu_job", {"command": ["true"], "cwd": cwd})
            assert result.is_error
            assert "FORBIDDEN: cwd:" in result.content[0].text  # type: ignore[union-attr]
    assert agent_services.ledger.db.scalar("SELECT count(*) FROM jobs") == 0


@pytest.mark.anyio
async def test_a_gpu_job_on_a_machine_without_gpus_fails_with_the_reason(agent_services: Services) -> None:
    async with local_client(agent_services, "worker") as client:
        started = await ok(client, "run_gpu_job", {"command": ["true"], "gpus": 1})
        done = await ok(client, "get_job", {"job_id": started["job_id"], "wait_s": 10})
    assert done["status"] == "failed"
    assert done["reason"] and "GPU" in done["reason"]


@pytest.mark.anyio
async def test_agents_see_only_their_own_jobs_and_cancel_stops_a_running_one(agent_services: Services) -> None:
    agent_services.ledger.identities.create_token("other", "agent")
    ensure_worktree(agent_services.workspace, "other")
    async with local_client(agent_services, "worker") as client:
        job = await ok(client, "run_gpu_job", {"command": ["sleep", "60"]})
        cancelled = await ok(client, "cancel_job", {"job_id": job["job_id"]})
        assert cancelled["job_id"] == job["job_id"]
        final = await ok(client, "get_job", {"job_id": job["job_id"], "wait_s": 30})
        assert final["status"] == "cancelled"
    async with local_client(agent_services, "other") as other:
        assert (await ok(other, "list_jobs", {}))["total"] == 0
        denied = await other.call_tool("get_job", {"job_id": job["job_id"]})
        assert denied.is_error and "another agent's" in denied.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_keyed_job_retried_after_a_restart_that_lost_its_ledger_key_is_not_started_twice(
    agent_services: Services,
) -> None:
    """The crash suite's window: the job is recorded, then the server dies before the ledger records
    the key. The retry (same key, same arguments) must get the first job back, created: false."""
    arguments = {"command": ["python", "-c", "print('once')"], "idempotency_key": "job-1"}
    async with local_client(agent_services, "worker") as client:
        first = await ok(client, "run_gpu_job", arguments)
    assert first["created"] is True
    runtime.shutdown(agent_services)  # the restart: the next call builds the scheduler from disk
    agent_services.ledger.db.execute("DELETE FROM idempotency_keys WHERE tool = 'run_gpu_job'")
    agent_services.ledger.db.idempotency_known.clear()
    async with local_client(agent_services, "worker") as client:
        retried = await ok(client, "run_gpu_job", arguments)
        other = await client.call_tool("run_gpu_job", {**arguments, "command": ["true"]})
        listed = await ok(client, "list_jobs", {})
    assert (retried["job_id"], retried["created"]) == (first["job_id"], False)
    assert other.is_error and "CONFLICT: idempotency_key: got 'job-1', used" in other.content[0].text  # type: ignore[union-attr]
    assert listed["total"] == 1
    assert agent_services.ledger.db.scalar("SELECT count(*) FROM jobs") == 1


@pytest.mark.anyio
async def test_list_jobs_pages_every_job_from_the_ledger_newest_first(
    agent_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scheduler keeps only the recently ended jobs in memory; the list comes from the ledger's mirror.
    from amid.server.jobs import scheduler as module

    monkeypatch.setattr(module, "KEEP_ENDED", 1)
    async with local_client(agent_services, "worker") as client:
        ids = []
        for i in range(3):
            job = await ok(client, "run_gpu_job", {"command": ["python", "-c", f"print({i})"]})
            await ok(client, "get_job", {"job_id": job["job_id"], "wait_s": 30})
            ids.append(job["job_id"])
        listed = await ok(client, "list_jobs", {"limit": 2})
        succeeded = await ok(client, "list_jobs", {"status": "succeeded"})
        failed = await ok(client, "list_jobs", {"status": "failed"})
    assert len(runtime.scheduler(agent_services).list()) == 1
    assert listed["total"] == 3 and [j["job_id"] for j in listed["jobs"]] == ids[::-1][:2]
    assert succeeded["total"] == 3 and failed["total"] == 0
    assert listed["jobs"][0]["sandbox"] in ("bwrap", "none") and listed["jobs"][0]["log_dir"] == f"jobs/{ids[-1]}"
