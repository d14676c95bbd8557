"""The job tools through the in-memory MCP client, on the real local backend (CPU jobs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from server import runtime
from server.app import build_app
from server.connect import ensure_worktree
from server.context import Services
from server.ledger import Identity


@pytest.fixture
def agent_services(services: Services) -> Iterator[Services]:
    services.ledger.identities.create_token("worker", "agent")
    ensure_worktree(services.workspace, "worker")
    yield services
    runtime.shutdown(services)


def _client(services: Services, agent_id: str = "worker", role: str = "agent") -> Client:
    app = build_app(services, local_identity=Identity(agent_id=agent_id, role=role), with_auth=False)  # type: ignore[arg-type]
    return Client(app.mcp, mode="legacy")


async def _call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


@pytest.mark.anyio
async def test_a_cpu_job_runs_in_the_worktree_and_its_log_and_exit_code_come_back(agent_services: Services) -> None:
    async with _client(agent_services) as client:
        started = await _call(
            client,
            "run_gpu_job",
            {"command": ["python", "-c", "import os; print(os.getcwd())"], "lane_id": "calibration-trivial"},
        )
        assert started["status"] in ("queued", "running")
        done = await _call(client, "get_job", {"job_id": started["job_id"], "wait_s": 30})
    assert done["status"] == "succeeded" and done["exit_code"] == 0
    assert done["stdout_tail"].strip().endswith("worktrees/worker")
    row = agent_services.ledger.jobs.get(started["job_id"])
    assert row is not None and row["status"] == "succeeded" and row["cwd"] == "worktrees/worker"


@pytest.mark.anyio
async def test_a_working_directory_outside_the_worktree_is_refused(agent_services: Services) -> None:
    async with _client(agent_services) as client:
        for cwd in ("..", "../../private", "/tmp"):
            result = await client.call_tool("run_gpu_job", {"command": ["true"], "cwd": cwd})
            assert result.is_error
            assert "FORBIDDEN: cwd:" in result.content[0].text  # type: ignore[union-attr]
    assert agent_services.ledger.db.scalar("SELECT count(*) FROM jobs") == 0


@pytest.mark.anyio
async def test_a_gpu_job_on_a_machine_without_gpus_fails_with_the_reason(agent_services: Services) -> None:
    async with _client(agent_services) as client:
        started = await _call(client, "run_gpu_job", {"command": ["true"], "gpus": 1})
        done = await _call(client, "get_job", {"job_id": started["job_id"], "wait_s": 10})
    assert done["status"] == "failed"
    assert done["reason"] and "GPU" in done["reason"]


@pytest.mark.anyio
async def test_agents_see_only_their_own_jobs_and_cancel_stops_a_running_one(agent_services: Services) -> None:
    agent_services.ledger.identities.create_token("other", "agent")
    ensure_worktree(agent_services.workspace, "other")
    async with _client(agent_services) as client:
        job = await _call(client, "run_gpu_job", {"command": ["sleep", "60"]})
        cancelled = await _call(client, "cancel_job", {"job_id": job["job_id"]})
        assert cancelled["job_id"] == job["job_id"]
        final = await _call(client, "get_job", {"job_id": job["job_id"], "wait_s": 30})
        assert final["status"] == "cancelled"
    async with _client(agent_services, "other") as other:
        assert (await _call(other, "list_jobs", {}))["total"] == 0
        denied = await other.call_tool("get_job", {"job_id": job["job_id"]})
        assert denied.is_error and "belongs to another agent" in denied.content[0].text  # type: ignore[union-attr]
