"""A small MCP client over Streamable HTTP with a bearer token: used by the demo, the supervisor
and the tests, the same way any coding agent connects."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from amid.server.errors import AmidError

Mode = Literal["legacy", "auto"]


class ToolCallFailed(AmidError):
    code = "TOOL_ERROR"


@asynccontextmanager
async def connect(
    url: str, token: str, mode: Mode = "legacy", event_hooks: dict[str, list[Any]] | None = None
) -> AsyncIterator[Client]:
    """`event_hooks` go to the HTTP client (the fuzz suite counts 5xx answers with one)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0), event_hooks=event_hooks) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool and return its structured result; a tool error becomes ToolCallFailed."""
    result = await client.call_tool(tool, arguments or {})
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise ToolCallFailed(f"{tool}: {text}")
    return dict(result.structured_content or {})
