"""Real third-party MCP clients (npm) against a running server: Claude Code and the MCP Inspector.

They are installed by .ci/run; elsewhere the tests skip with the reason, unless
AMID_REQUIRE_EXTERNAL=1 (set by CI) turns a missing client into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.conftest import Running


def _binary(name: str) -> str:
    prefix = os.environ.get("AMID_NPM_PREFIX", str(Path.home() / ".cache" / "amid" / "npm"))
    found = shutil.which(name) or shutil.which(name, path=str(Path(prefix) / "node_modules" / ".bin"))
    if found:
        return found
    if os.environ.get("AMID_REQUIRE_EXTERNAL") == "1":
        pytest.fail(f"{name} is required (AMID_REQUIRE_EXTERNAL=1) but not on PATH or under {prefix}")
    pytest.skip(f"{name} not installed (npm); .ci/run installs it")


def test_claude_code_lists_the_server_as_connected_with_the_token_header(running: Running, tmp_path: Path) -> None:
    claude = _binary("claude")
    env = {**os.environ, "HOME": str(tmp_path), "DISABLE_AUTOUPDATER": "1"}
    token = running.tokens["alice"]
    add = [
        claude,
        "mcp",
        "add",
        "--transport",
        "http",
        "amid",
        running.url,
        "--header",
        f"Authorization: Bearer {token}",
    ]
    subprocess.run(add, cwd=tmp_path, env=env, check=True, capture_output=True, text=True, timeout=120)
    listed = subprocess.run([claude, "mcp", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "amid" in listed.stdout and "✔ Connected" in listed.stdout, listed.stdout + listed.stderr


def test_claude_code_does_not_connect_with_a_wrong_token(running: Running, tmp_path: Path) -> None:
    claude = _binary("claude")
    env = {**os.environ, "HOME": str(tmp_path), "DISABLE_AUTOUPDATER": "1"}
    add = [claude, "mcp", "add", "--transport", "http", "amid", running.url, "--header", "Authorization: Bearer amid_x"]
    subprocess.run(add, cwd=tmp_path, env=env, check=True, capture_output=True, text=True, timeout=120)
    listed = subprocess.run([claude, "mcp", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "✔ Connected" not in listed.stdout


def _inspector(running: Running, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        _binary("mcp-inspector"),
        "--cli",
        running.url,
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {running.tokens['bob']}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_mcp_inspector_lists_the_tools_and_calls_get_task(running: Running) -> None:
    listed = _inspector(running, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = [tool["name"] for tool in json.loads(listed.stdout)["tools"]]
    assert "get_task" in names
    called = _inspector(
        running, "--method", "tools/call", "--tool-name", "get_task", "--tool-arg", "include_case_ids=false"
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result.get("isError") in (None, False)
    assert result["structuredContent"]["task_id"] == "demo-liver-lesion-ct"
