"""32 agents with their own tokens claim one exclusive lane at once through a real `amid serve`."""

from __future__ import annotations

import asyncio

from amid.server.local_client import call as admin_call
from amid.server.mcp_client import ToolCallFailed, call, connect
from tests.server.conftest import Running

N_AGENTS = 32


async def _claim(running: Running, token: str) -> str:
    async with connect(running.url, token) as client:
        try:
            await call(client, "claim_lane", {"lane_id": "nnunet-3d-fullres"})
        except ToolCallFailed as exc:
            return str(exc)
        return "claimed"


async def _race(running: Running, tokens: list[str]) -> list[str]:
    async with connect(running.url, running.tokens["alice"]) as client:
        listed = await call(client, "list_lanes", {})  # the first lane call plans the portfolio
    assert any(lane["lane_id"] == "nnunet-3d-fullres" for lane in listed["lanes"])
    return await asyncio.gather(*(_claim(running, token) for token in tokens))


def test_32_concurrent_agents_claim_one_exclusive_lane_and_exactly_one_wins(running: Running) -> None:
    tokens = [
        admin_call(running.workspace, "token_create", {"name": f"racer{i:02d}", "role": "agent"})["token"]
        for i in range(N_AGENTS)
    ]
    outcomes = asyncio.run(_race(running, tokens))
    assert outcomes.count("claimed") == 1
    refused = [o for o in outcomes if o != "claimed"]
    assert len(refused) == N_AGENTS - 1 and all(
        "CONFLICT: lane_id: got 'nnunet-3d-fullres', held by" in o for o in refused
    )
    rows = admin_call(
        running.workspace,
        "sql",
        {"query": "SELECT agent_id FROM claims WHERE lane_id = 'nnunet-3d-fullres' AND released_at IS NULL"},
    )["rows"]
    assert len(rows) == 1 and rows[0][0].startswith("racer")
