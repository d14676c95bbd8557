"""Sixteen agents submit and request reviews at the same moment: every attempt gets exactly one
review and one verdict, and honest work is accepted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from amid.server.context import Services
from amid.server.reviewer.report import CODES
from tests.server.reviewer.sandbox import AgentSandbox, call, client_for, verdict

pytestmark = pytest.mark.anyio
N_AGENTS = 16


async def _agent_run(services: Services, payload: dict[str, Any], agent_id: str) -> dict[str, Any]:
    async with client_for(services, agent_id) as client:
        attempt = await call(client, "submit_attempt", payload)
        first, second = await asyncio.gather(  # a nervous agent asks twice at once
            call(client, "request_review", {"attempt_id": attempt["attempt_id"]}),
            call(client, "request_review", {"attempt_id": attempt["attempt_id"]}),
        )
        assert first["review_id"] == second["review_id"]
        return await verdict(client, first["review_id"])


async def test_sixteen_agents_each_get_exactly_one_verdict(review_services: Services) -> None:
    payloads = {}
    for index in range(N_AGENTS):
        box = AgentSandbox(review_services.workspace, f"crowd-{index:02d}")
        fold = index % review_services.workspace.folds().k
        payloads[box.agent_id] = box.model_payload(box.commit(), fold, 100 + index)
    for agent_id in payloads:  # register identities before the rush
        review_services.ledger.identities.create_token(agent_id, "agent")

    reviews = await asyncio.gather(*(_agent_run(review_services, p, a) for a, p in payloads.items()))

    assert [r["verdict"] for r in reviews] == ["accepted"] * N_AGENTS, [r["failed_checks"] for r in reviews]
    db = review_services.ledger.db
    per_attempt = db.fetchall(
        "SELECT a.attempt_id, a.status, count(r.review_id) AS n, count(*) FILTER (WHERE r.status = 'done') AS done "
        "FROM attempts a JOIN reviews r USING (attempt_id) GROUP BY ALL"
    )
    assert len(per_attempt) == N_AGENTS
    assert all(row["n"] == 1 and row["done"] == 1 and row["status"] == "accepted" for row in per_attempt)
    assert db.scalar("SELECT count(*) FROM check_results") == len(CODES) * N_AGENTS
    assert db.scalar("SELECT count(*) FROM metrics WHERE source = 'reviewer' AND scope = 'fold'") == 2 * N_AGENTS
    assert db.scalar("SELECT count(*) FROM metrics WHERE scope = 'baseline'") == 2 * 5  # once per fold and metric
