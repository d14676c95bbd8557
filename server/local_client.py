"""How the CLI reaches a workspace: through the running server, or the DuckDB file itself.

DuckDB allows one read-write process per file, so while `amid serve` runs every operation goes
through its admin routes (guarded by the 0600 secret it wrote into .amid/). When no server runs,
the CLI opens the file directly.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from server import admin
from server.errors import AmidError, Conflict, InvalidInput
from server.ledger import Ledger
from server.workspace import Workspace, read_server_marker

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
    secret = (workspace.control_dir / "admin.secret").read_text(encoding="utf-8")
    request = urllib.request.Request(
        f"{parts.scheme}://{parts.netloc}/admin/{action}",
        data=json.dumps(body).encode(),
        headers={"x-amid-admin": secret, "content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=admin.SLOW_ACTIONS.get(action, admin.DEFAULT_WAIT_S)) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
        raise InvalidInput(str(detail)) if exc.code == 400 else AmidError(str(detail)) from None
    except urllib.error.URLError as exc:
        raise Conflict(f"server at {mcp_url} does not answer ({exc.reason}); is it still running?") from None
