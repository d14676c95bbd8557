"""`GET /dashboard`: the report page, live and read-only, for a human; and its browser login.

Custom routes sit outside the MCP endpoint's authentication, so these check the caller
themselves. A request is a human's when it carries a human bearer token, or the session cookie
that a one-time login link set (`server/report/login.py`; `amid dashboard` prints the link).
None or an unknown credential is 401, a token of another role (agent, supervisor) is 403. The
page is built in a worker thread, off the event loop, and reloads itself every `REFRESH_S`.
"""

from __future__ import annotations

import threading

import anyio.to_thread
from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from amid.server.context import Services
from amid.server.ledger import Identity
from amid.server.report.login import COOKIE, SESSION_S, DashboardLogins, holds_human_token
from amid.server.report.markup import el

REFRESH_S = 15
PATH = "/dashboard"
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
LOGIN_HELP = "run `amid dashboard -w WORKSPACE` for a one-time login link"


_LOGINS_LOCK = threading.Lock()


def logins(services: Services) -> DashboardLogins:
    with _LOGINS_LOCK:
        if services.dashboard_logins is None:
            services.dashboard_logins = DashboardLogins()
        return services.dashboard_logins


def _bearer(request: Request, services: Services) -> Identity | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return services.ledger.identities.verify(token.strip())


def _session_human(request: Request, services: Services) -> str | None:
    """The human whose live session the cookie names (while they still hold a live human token)."""
    session = request.cookies.get(COOKIE)
    agent_id = logins(services).session_agent(session) if session else None
    return agent_id if agent_id and holds_human_token(services.ledger, agent_id) else None


def _refused(status: int, message: str) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="amid-dashboard"'} if status == 401 else {}
    return PlainTextResponse(message, status_code=status, headers={**headers, **NO_STORE})


def _refused_page(status: int, message: str) -> Response:
    head = el("head", el("title", "AMID dashboard"))
    page = el("html", head, el("body", el("p", message, id="refused")), lang="en")
    return HTMLResponse("<!DOCTYPE html>\n" + page, status_code=status, headers=NO_STORE)


def add_dashboard_route(mcp: MCPServer, services: Services) -> None:
    """Register `GET /dashboard`, `GET /dashboard/login` and `POST /dashboard/logout`."""

    @mcp.custom_route(PATH, methods=["GET"])
    async def dashboard(request: Request) -> Response:
        human = await anyio.to_thread.run_sync(_session_human, request, services)
        if human is None:
            caller = await anyio.to_thread.run_sync(_bearer, request, services)
            if caller is None:
                return _refused(
                    401,
                    "dashboard: send Authorization: Bearer <token> with a human token "
                    f"(amid token create NAME --role human), or {LOGIN_HELP}",
                )
            if caller.role != "human":
                return _refused(
                    403,
                    f"dashboard: the token of {caller.agent_id} has role {caller.role}; "
                    "the dashboard needs a human token",
                )
        page = await anyio.to_thread.run_sync(_page, services, human)
        return HTMLResponse(page, headers=NO_STORE)

    @mcp.custom_route(f"{PATH}/login", methods=["GET"])
    async def login(request: Request) -> Response:
        session = await anyio.to_thread.run_sync(_redeem, services, request.query_params.get("code", ""))
        if session is None:
            return _refused_page(401, f"This login link was used already, has expired or is unknown: {LOGIN_HELP}.")
        # 303 to the page itself: the code leaves the address bar and the history's last entry
        response = RedirectResponse(PATH, status_code=303, headers=NO_STORE)
        response.set_cookie(COOKIE, session, max_age=SESSION_S, path=PATH, httponly=True, samesite="strict")
        return response

    @mcp.custom_route(f"{PATH}/logout", methods=["POST"])
    async def logout(request: Request) -> Response:
        await anyio.to_thread.run_sync(_end, services, request.cookies.get(COOKIE))
        response = _refused_page(200, f"Logged out. {LOGIN_HELP[0].upper()}{LOGIN_HELP[1:]} to come back.")
        response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict")
        return response


def _redeem(services: Services, code: str) -> str | None:
    """The new session id for a live code (consumed now), logged as the human's login; None otherwise."""
    redeemed = logins(services).redeem(code)
    if redeemed is None:
        return None
    agent_id, session = redeemed
    services.ledger.activity.log("dashboard_login", agent_id=agent_id, subject_type="agent", subject_id=agent_id)
    return session


def _end(services: Services, session: str | None) -> None:
    agent_id = logins(services).end(session) if session else None
    if agent_id:
        services.ledger.activity.log("dashboard_logout", agent_id=agent_id, subject_type="agent", subject_id=agent_id)


def _page(services: Services, signed_in_as: str | None) -> str:
    from amid.server.report.build import build_report

    return build_report(services.ledger, services.workspace, refresh_s=REFRESH_S, signed_in_as=signed_in_as)
