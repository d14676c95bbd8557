"""The in-process MCP client the tool tests share: one agent, identified locally (as over stdio)."""

from __future__ import annotations

from typing import Any, Literal

from mcp import Client

from amid.server.app import build_app
from amid.server.context import Services
from amid.server.ledger import Identity, Role


def local_client(
    services: Services, agent_id: str, role: Role = "agent", mode: Literal["legacy", "auto"] = "legacy"
) -> Client:
    """A client of a fresh app over `services`, calling as `agent_id` (registered on first use)."""
    if services.ledger.identities.role_of(agent_id) is None:
        services.ledger.identities.create_token(agent_id, role)
    app = build_app(services, local_identity=Identity(agent_id=agent_id, role=role), with_auth=False)
    return Client(app.mcp, mode=mode)


async def ok(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured result."""
    result = await client.call_tool(tool, arguments or {})
    assert not result.is_error, f"{tool} failed: {result.content}"
    assert result.structured_content is not None
    return dict(result.structured_content)


async def error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Call a tool that must fail; return its error text without the SDK's prefix."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    return str(result.content[0].text).removeprefix(f"Error executing tool {tool}: ")  # type: ignore[union-attr]
