"""`amid serve` says at start, on stderr and in the ledger's event log, who besides the server can read
private/: other OS users when its mode lets them, and agents that run as the server's own user."""

from __future__ import annotations

import os
from pathlib import Path

from amid.server.demo import start_server, stop_server
from amid.server.exposure import private_warnings
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace


def _server_warnings(workspace: Workspace) -> tuple[str, list[str]]:
    server, _ = start_server(workspace.root)
    try:
        rows = admin_call(workspace, "sql", {"query": "SELECT payload FROM events WHERE kind = 'server_warning'"})
    finally:
        stop_server(server)
    return (workspace.control_dir / "serve.log").read_text(encoding="utf-8"), [str(r[0]) for r in rows["rows"]]


def test_a_private_folder_other_users_can_read_is_warned_about_with_the_secure_setup(workspace: Workspace) -> None:
    workspace.private_dir.chmod(0o755)
    stderr, logged = _server_warnings(workspace)
    said = f"private/ ({workspace.private_dir}) is mode 0755: other OS users can read it"
    assert f"amid: warning: {said}" in stderr
    assert f"chmod 700 {workspace.private_dir}" in stderr and "--sandboxed" in stderr
    assert any(said in entry for entry in logged)


def test_a_0700_private_folder_draws_only_the_warning_about_agents_of_the_servers_own_user(
    workspace: Workspace,
) -> None:
    workspace.private_dir.chmod(0o700)
    warnings = private_warnings(workspace.private_dir)
    assert len(warnings) == 1 and f"owned by this server's user (uid {os.geteuid()})" in warnings[0]
    stderr, logged = _server_warnings(workspace)
    assert "other OS users can read it" not in stderr and "other OS users can read it" not in "".join(logged)
    assert "an agent that runs as this user outside the sandbox can read" in stderr


def test_a_workspace_without_private_data_draws_no_warning(tmp_path: Path) -> None:
    assert private_warnings(tmp_path / "private") == []
