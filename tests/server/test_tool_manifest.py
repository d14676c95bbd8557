"""The tool manifest: what `tools/list` shows without importing the tool modules, and its guards."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.tool_manifest import MANIFEST_PATH, derive, load, main, render, tool_specs
from amid.server.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_manifest_is_what_the_tool_modules_derive() -> None:
    # A stale file would list schemas the tools no longer validate against: regenerate it with
    # `python -m amid.server.tool_manifest` after changing a tool's arguments, title or roles.
    assert MANIFEST_PATH.read_text(encoding="utf-8") == render(derive())
    assert main(["--check"]) == 0
    assert [e.name for e in load()] == [s.name for s in tool_specs()]


def test_check_reports_a_stale_manifest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stale = tmp_path / "tool_manifest.json"
    body = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    body["tools"][0]["input_schema"]["properties"].pop(next(iter(body["tools"][0]["input_schema"]["properties"])))
    stale.write_text(json.dumps(body), encoding="utf-8")
    monkeypatch.setattr("amid.server.tool_manifest.MANIFEST_PATH", stale)
    assert main(["--check"]) == 1
    assert stale.read_text(encoding="utf-8") == json.dumps(body)  # --check writes nothing
    assert main([]) == 0 and main(["--check"]) == 0  # the rewrite makes it current


def test_an_entry_that_no_longer_matches_its_module_is_refused_at_the_call() -> None:
    entry = next(e for e in load() if e.name == "run_snapshot")
    assert entry.spec().roles == frozenset({"supervisor", "human"})  # the module's own roles decide
    widened = dataclasses.replace(entry, roles=frozenset({"agent", "supervisor", "human"}))
    with pytest.raises(RuntimeError, match=r"tool_manifest\.json is stale for 'run_snapshot'"):
        widened.spec()
    moved = dataclasses.replace(entry, attribute="NO_SUCH_SPEC")
    with pytest.raises(RuntimeError, match="stale"):
        moved.spec()


LAZY = """
import asyncio, json, sys
from pathlib import Path
from mcp import Client
from amid.server.context import Services
from amid.server.ledger import Identity, Ledger
from amid.server.serve import build_app, http_app
from amid.server.settings import Settings
from amid.server.workspace import Workspace
ws = Workspace.open(Path(sys.argv[1]))
services = Services(settings=Settings(workspace=ws.root), workspace=ws, ledger=Ledger(ws.ledger_path))
app = build_app(services, local_identity=Identity(agent_id="lazy", role="agent"), with_auth=False)
http_app(app)
loaded = lambda: sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
seen = {"started": loaded()}
async def calls() -> None:
    async with Client(app.mcp, mode="legacy") as client:
        seen["listed"] = len((await client.list_tools()).tools)
        seen["after_list"] = loaded()
        result = await client.call_tool("get_task", {"include_case_ids": False})
        seen["get_task_ok"] = not result.is_error
        seen["after_get_task"] = loaded()
asyncio.run(calls())
print(json.dumps(seen))
"""


def test_the_server_imports_a_tool_module_only_at_that_tools_first_call(workspace: Workspace) -> None:
    modules = sorted({e.module for e in load()})
    assert len(modules) == 14 and "amid.tools.get_task" in modules
    command = [sys.executable, "-c", LAZY, str(workspace.root), json.dumps(modules)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    seen = json.loads(out.stdout)
    assert seen["started"] == [] and seen["after_list"] == []
    assert seen["listed"] == sum("agent" in e.roles for e in load())
    assert seen["get_task_ok"] and seen["after_get_task"] == ["amid.tools.get_task"]


def test_a_keyed_tool_without_a_key_argument_is_refused_where_it_is_declared() -> None:
    from amid.tools.get_task import TOOL

    with pytest.raises(TypeError, match="get_task: a keyed tool needs an idempotency_key argument"):
        dataclasses.replace(TOOL, keyed=True)
