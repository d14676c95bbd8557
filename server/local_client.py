"""How the CLI reaches a workspace: through the running server, or the DuckDB file itself.

DuckDB allows one read-write process per file, so while `amid serve` runs every operation goes
through its admin routes (guarded by the 0600 secret it wrote into .amid/). When no server runs,
the CLI opens the file directly.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from amid.server import admin
from amid.server.errors import AmidError, Conflict, InvalidInput
from amid.server.ledger import Ledger
from amid.server.workspace import Workspace, read_server_marker

READ_ACTIONS = {"status", "sql", "token_list", "export"}  # export: a snapshot copy, then Parquet


def call(workspace: Workspace, action: str, body: dict[str, Any]) -> dict[str, Any]:
    marker = read_server_marker(workspace)
    if marker:
        return _through_server(workspace, marker["url"], action, body)
    if action == admin.SERVER_ONLY_ACTION:
        raise Conflict(f"workspace {workspace.root} is not served; start `amid serve -w {workspace.root}` first")
    ledger = Ledger(workspace.ledger_path, read_only=action in READ_ACTIONS)
    try:
        return admin.ACTIONS[action](ledger, workspace, body)
    finally:
        ledger.close()


def _through_server(workspace: Workspace, mcp_url: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
    parts = urlsplit(mcp_url)
    wait_s = admin.SLOW_ACTIONS.get(action, admin.DEFAULT_WAIT_S)
    secret = (workspace.control_dir / "admin.secret").read_text(encoding="utf-8")
    request = urllib.request.Request(
        f"{parts.scheme}://{parts.netloc}/admin/{action}",
        data=json.dumps(body).encode(),
        headers={"x-amid-admin": secret, "content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=wait_s) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        detail = _error_detail(exc)
        raise InvalidInput(detail) if exc.code == 400 else AmidError(detail) from None
    except urllib.error.URLError as exc:
        raise Conflict(f"server at {mcp_url} does not answer ({exc.reason}); is it still running?") from None
    except TimeoutError:
        raise Conflict(
            f"server at {mcp_url} did not answer {action} within {wait_s:.0f} s; see `amid status`"
        ) from None
    except (http.client.HTTPException, OSError, ValueError) as exc:  # it died or was stopped mid-call
        raise Conflict(
            f"server at {mcp_url} stopped answering during {action} ({type(exc).__name__}); "
            f"is it still running? (amid status -w {workspace.root})"
        ) from None


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The admin route's `error` text; a body that is not its JSON (a 500 page) gives the status line."""
    try:
        detail = json.loads(exc.read() or b"{}").get("error")
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        detail = None
    return str(detail or f"HTTP {exc.code} {exc.reason}")
