"""`amid serve --stdio --agent NAME`: one local agent over stdio, a real subprocess."""

from __future__ import annotations

import sys

import pytest
from mcp import Client, StdioServerParameters

from amid.server.ledger import Ledger
from amid.server.workspace import Workspace


@pytest.mark.anyio
async def test_stdio_server_identifies_the_local_agent_and_serves_tools(workspace: Workspace) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "amid", "serve", "-w", str(workspace.root), "--stdio", "--agent", "solo"],
    )
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("get_task", {"include_case_ids": False})
        assert not result.is_error
        assert (result.structured_content or {})["task_id"] == "demo-liver-lesion-ct"
        denied = await client.call_tool("send_heartbeat", {"agent_id": "solo", "kind": "custom", "prompt": "x"})
        assert denied.is_error
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        rows = ledger.db.fetchall("SELECT agent_id, subject_id FROM events WHERE kind = 'tool_call' ORDER BY event_id")
    finally:
        ledger.close()
    assert [(r["agent_id"], r["subject_id"]) for r in rows] == [("solo", "get_task"), ("solo", "send_heartbeat")]
