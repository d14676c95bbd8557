"""The composition root: builds the MCP server, registers every tool once, wires auth and routes."""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from amid.server import __version__
from amid.server.context import Services
from amid.server.errors import AmidError
from amid.server.ledger import Identity, Ledger
from amid.server.protocol import INSTRUCTIONS
from amid.server.report.dashboard import add_dashboard_route
from amid.server.response_mode import route_by_progress
from amid.server.settings import Settings
from amid.server.tool_entries import load as load_manifest
from amid.server.toolkit import RoleListedServer, build_tool
from amid.server.workspace import Workspace


class LedgerTokenVerifier:
    """Bearer tokens are checked against the ledger's hashed tokens on every request."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def verify_token(self, token: str) -> AccessToken | None:
        identity = self.ledger.identities.verify(token)
        if identity is None:
            return None
        return AccessToken(token=token, client_id=identity.agent_id, scopes=[identity.role])


@dataclass
class App:
    mcp: MCPServer
    services: Services


def build_app(services: Services, *, local_identity: Identity | None = None, with_auth: bool = True) -> App:
    settings = services.settings
    auth = None
    verifier = None
    if with_auth:
        # resource_server_url=None: no OAuth discovery, so clients keep their static Bearer header.
        issuer = AnyHttpUrl(f"http://{settings.host}:{settings.port}")
        auth = AuthSettings(issuer_url=issuer, resource_server_url=None)
        verifier = LedgerTokenVerifier(services.ledger)
    services.profile_provider = services.profile_provider or _provide_profile  # the lane planner's input
    services.build_package = services.build_package or _build_package  # choose_final builds package/
    entries = load_manifest()  # listed from the manifest; a tool's module loads at its first call
    mcp = RoleListedServer(
        "amid",
        title="AMID",
        version=__version__,
        instructions=INSTRUCTIONS,
        token_verifier=verifier,
        auth=auth,
        local_identity=local_identity,
        log_level="WARNING",  # the SDK logs each stateless request at INFO (a rich render per call)
        tools=[build_tool(entry, services, local_identity) for entry in entries],
        tool_roles={entry.name: entry.roles for entry in entries},
    )
    _add_routes(mcp, services)
    add_dashboard_route(mcp, services)  # GET /dashboard: the report, live, for a human token
    return App(mcp=mcp, services=services)


def _provide_profile(*args: Any, **kwargs: Any) -> Any:
    from amid.tools.profile_data import provide_profile

    return provide_profile(*args, **kwargs)


def _build_package(*args: Any, **kwargs: Any) -> Any:
    from amid.server.package.finalize import build_package

    return build_package(*args, **kwargs)


def _admin_ok(request: Request, services: Services) -> bool:
    secret_file = services.workspace.control_dir / "admin.secret"
    given = request.headers.get("x-amid-admin", "")
    return secret_file.is_file() and hmac.compare_digest(given, secret_file.read_text(encoding="utf-8"))


def _add_routes(mcp: MCPServer, services: Services) -> None:
    """Unauthenticated health route, and admin routes for the local CLI (guarded by a 0600 secret)."""

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "task_id": services.contract.id, "version": __version__})

    @mcp.custom_route("/admin/{action}", methods=["POST"])
    async def admin(request: Request) -> Response:
        if not _admin_ok(request, services):
            return JSONResponse({"error": "admin secret missing or wrong"}, status_code=403)
        try:
            body = json.loads(await request.body() or b"{}")
            action = request.path_params["action"]  # in a thread: an audit re-hashes files for a while
            return JSONResponse(await anyio.to_thread.run_sync(_admin_action, services, action, body))
        except AmidError as exc:
            return JSONResponse({"error": f"{exc.code}: {exc.message}"}, status_code=400)


def _admin_action(services: Services, action: str, body: dict[str, Any]) -> dict[str, Any]:
    from amid.server import admin

    return admin.dispatch(services, action, body)


def http_app(app: App) -> Starlette:
    settings = app.services.settings
    hosts = [f"{h}:*" for h in ("127.0.0.1", "localhost", "[::1]", *settings.allowed_hosts)]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )
    starlette = app.mcp.streamable_http_app(
        streamable_http_path=settings.path,
        stateless_http=True,
        transport_security=security,
        host=settings.host,
    )
    # One JSON body per answer; a stream only for a call that asks for progress (server/response_mode.py).
    return route_by_progress(starlette, settings.path, [e.name for e in load_manifest() if e.wants_progress])


def open_services(settings: Settings) -> Services:
    workspace = Workspace.open(settings.workspace)
    return Services(settings=settings, workspace=workspace, ledger=Ledger(workspace.ledger_path))
