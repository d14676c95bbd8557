"""A real `amid serve` subprocess on a loopback port, reached by the real MCP client over HTTP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx2
import pytest

from amid.server.local_client import call as admin_call
from amid.server.mcp_client import ToolCallFailed, call, connect
from tests.server.conftest import Running

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}},
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def _get_task(running: Running, who: str, mode: str = "legacy") -> dict:
    async with connect(running.url, running.tokens[who], mode=mode) as client:  # type: ignore[arg-type]
        return await call(client, "get_task", {"include_case_ids": False})


def test_two_agents_with_two_tokens_are_told_apart_in_the_events_log(running: Running) -> None:
    asyncio.run(_get_task(running, "alice", "legacy"))
    asyncio.run(_get_task(running, "bob", "auto"))
    asyncio.run(_get_task(running, "bob", "legacy"))
    rows = admin_call(
        running.workspace,
        "sql",
        {
            "query": "SELECT agent_id, count(*) FROM events WHERE kind = 'tool_call' AND subject_id = 'get_task' "
            "GROUP BY agent_id ORDER BY agent_id"
        },
    )["rows"]
    counts = dict(rows)
    assert counts["alice"] >= 1 and counts["bob"] >= 2
    assert counts["bob"] - counts.get("alice", 0) >= 1


@pytest.mark.parametrize("header", [None, "Bearer amid_wrong", "Basic abc"])
def test_missing_or_wrong_token_gets_401_without_oauth_discovery(running: Running, header: str | None) -> None:
    headers = dict(ACCEPT)
    if header:
        headers["authorization"] = header
    response = httpx2.post(running.url, json=INIT, headers=headers, timeout=10)
    assert response.status_code == 401
    assert "resource_metadata" not in response.headers.get("www-authenticate", "")
    base = running.url.rsplit("/", 1)[0]
    assert httpx2.get(f"{base}/.well-known/oauth-protected-resource", timeout=10).status_code == 404
    assert httpx2.get(f"{base}/.well-known/oauth-authorization-server", timeout=10).status_code == 404


def test_agent_and_human_tokens_cannot_call_supervisor_tools(running: Running) -> None:
    async def attempt(who: str) -> str:
        async with connect(running.url, running.tokens[who]) as client:
            with pytest.raises(ToolCallFailed) as excinfo:
                await call(client, "send_heartbeat", {"agent_id": "alice", "kind": "custom", "prompt": "x"})
            return str(excinfo.value)

    refused = "FORBIDDEN: role: got 'agent' (agent 'alice'); expected supervisor for send_heartbeat"
    assert refused in asyncio.run(attempt("alice"))
    assert "got 'human' (agent 'hugo')" in asyncio.run(attempt("hugo"))


def test_heartbeat_reaches_the_agent_in_its_next_tool_result_once(running: Running) -> None:
    async def scenario() -> tuple[list, list]:
        async with connect(running.url, running.tokens["boss"]) as boss:
            await call(boss, "send_heartbeat", {"agent_id": "bob", "kind": "plateau", "prompt": "write a focus note"})
        first = (await _get_task(running, "bob"))["inbox"]
        second = (await _get_task(running, "bob"))["inbox"]
        return first, second

    first, second = asyncio.run(scenario())
    assert len(first) == 1 and first[0].startswith("[plateau #") and first[0].endswith("] write a focus note")
    assert second == []


def test_revoked_token_is_refused_on_the_next_request(running: Running) -> None:
    token = admin_call(running.workspace, "token_create", {"name": "carol", "role": "agent"})["token"]
    headers = {**ACCEPT, "authorization": f"Bearer {token}"}
    assert httpx2.post(running.url, json=INIT, headers=headers, timeout=10).status_code == 200
    admin_call(running.workspace, "token_revoke", {"name": "carol"})
    assert httpx2.post(running.url, json=INIT, headers=headers, timeout=10).status_code == 401


def test_a_second_server_on_the_same_workspace_exits_at_once_naming_the_first(running: Running) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "amid", "serve", "-w", str(running.workspace.root), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "already served by pid" in result.stderr and running.url in result.stderr
    assert time.monotonic() - started < 30


def test_cli_status_and_sql_go_through_the_running_server(running: Running) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "amid", *args, "-w", str(running.workspace.root)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    status = cli("status")
    assert status.returncode == 0 and "stage exploration" in status.stdout
    rows = cli("sql", "SELECT agent_id, role FROM agents WHERE agent_id = 'boss'", "--csv")
    assert rows.stdout.splitlines() == ["agent_id,role", "boss,supervisor"]
    refused = cli("sql", "DELETE FROM events")
    assert refused.returncode == 2 and "DELETE statements are refused" in refused.stderr
