"""The whole path over real HTTP: a real `amid serve` process, a bearer token, its reviewer pool."""

from __future__ import annotations

import pytest

from amid.server.mcp_client import call, connect
from tests.server.conftest import Running
from tests.server.reviewer.sandbox import AgentSandbox

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_an_attempt_submitted_over_http_is_reviewed_by_the_servers_pool(running: Running) -> None:
    box = AgentSandbox(running.workspace, "alice")
    payload = box.model_payload(box.commit(), 0, seed=1)
    async with connect(running.url, running.tokens["alice"]) as client:
        attempt = await call(client, "submit_attempt", payload)
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = {"status": "queued"}
        for _ in range(6):
            review = await call(client, "get_review", {"review_id": queued["review_id"], "wait_s": 20})
            if review["status"] == "done":
                break
    assert review["verdict"] == "accepted", review
    async with connect(running.url, running.tokens["hugo"]) as human:
        board = await call(human, "leaderboard", {})
        refused = await human.call_tool("submit_attempt", payload)
    assert [row["attempt_id"] for row in board["rows"]] == [attempt["attempt_id"]]
    assert refused.is_error and "FORBIDDEN" in refused.content[0].text  # type: ignore[union-attr]
