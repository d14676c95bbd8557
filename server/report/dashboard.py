"""`GET /dashboard`: the report page, live and read-only, for a human token.

Custom routes sit outside the MCP endpoint's authentication, so this one checks the bearer token
itself: none or an unknown one is 401, a token of another role (agent, supervisor) is 403. The
page is built in a worker thread, off the event loop, and reloads itself every `REFRESH_S`.
"""

from __future__ import annotations

import anyio.to_thread
from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from server.context import Services
from server.ledger import Identity

REFRESH_S = 15
PATH = "/dashboard"


def _caller(request: Request, services: Services) -> Identity | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return services.ledger.identities.verify(token.strip())


def _refused(status: int, message: str) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="amid-dashboard"'} if status == 401 else {}
    return PlainTextResponse(message, status_code=status, headers=headers)


def add_dashboard_route(mcp: MCPServer, services: Services) -> None:
    """Register `GET /dashboard` on the server's HTTP app."""

    @mcp.custom_route(PATH, methods=["GET"])
    async def dashboard(request: Request) -> Response:
        caller = await anyio.to_thread.run_sync(_caller, request, services)
        if caller is None:
            return _refused(401, "dashboard: send Authorization: Bearer <token> with a human token "
                                 "(amid token create NAME --role human)")  # fmt: skip
        if caller.role != "human":
            return _refused(403, f"dashboard: the token of {caller.agent_id} has role {caller.role}; "
                                 "the dashboard needs a human token")  # fmt: skip
        page = await anyio.to_thread.run_sync(_page, services)
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})


def _page(services: Services) -> str:
    from server.report.build import build_report

    return build_report(services.ledger, services.workspace, refresh_s=REFRESH_S)
