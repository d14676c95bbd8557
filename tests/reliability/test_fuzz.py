"""Fuzzing every tool of a real `amid serve` over HTTP from its published inputSchema: every reply a
result or a coded tool error, no traceback in a reply or in the server log, no HTTP 5xx, and a
refused call changes neither the ledger's row counts nor the workspace's files."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from amid.server.connect import ensure_worktree
from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace
from tests.reliability.fuzzing import Fuzzer, prepare_worktree

EXAMPLES_PER_TOOL = 9  # ~270 calls over the 30 tools, derandomised (the same calls every run)


def ledger_counter(workspace: Workspace) -> Callable[[], dict[str, int]]:
    """Rows per ledger table, through the running server's read path (events log every call)."""
    query = "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' ORDER BY 1"
    names = [row[0] for row in admin_call(workspace, "sql", {"query": query})["rows"]]
    names = [name for name in names if name not in {"events", "schema_migrations"}]
    union = " UNION ALL ".join(f"SELECT '{name}', count(*) FROM {name}" for name in names)
    return lambda: {row[0]: int(row[1]) for row in admin_call(workspace, "sql", {"query": union})["rows"]}


@pytest.fixture(scope="module")
def served(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, str]]:
    root = tmp_path_factory.mktemp("fuzz") / "ws"
    shutil.copytree(_pristine_workspace, root, symlinks=True)
    workspace = Workspace.open(root)
    prepare_worktree(ensure_worktree(workspace, "alice"))
    process, url = start_server(root)
    try:
        yield workspace, url
    finally:
        stop_server(process)


def test_fuzzed_calls_get_results_or_coded_errors_and_refusals_write_nothing(served: tuple[Workspace, str]) -> None:
    workspace, url = served
    tokens = {
        role: admin_call(workspace, "token_create", {"name": name, "role": role})["token"]
        for name, role in (("alice", "agent"), ("boss", "supervisor"), ("hugo", "human"))
    }
    fuzzer = Fuzzer(url, tokens, ledger_counter(workspace), workspace.root)
    with fuzzer.session():
        schemas = fuzzer.schemas()
        assert len(schemas) == len(fuzzer.roles) and all(
            s.get("additionalProperties") is False for s in schemas.values()
        )
        for tool, schema in schemas.items():
            fuzzer.fuzz(tool, schema, EXAMPLES_PER_TOOL, strict=True)
    tally = fuzzer.tally
    assert tally.violations() == []
    assert tally.calls >= 200 and set(tally.by_tool) == set(schemas)
    assert tally.codes["INVALID_INPUT"] > tally.calls // 2 and tally.results > 0
    log = (workspace.root / ".amid" / "serve.log").read_text(encoding="utf-8")
    assert "Traceback" not in log and len(log) < 3000 * tally.calls  # no 300 000-character value echoed
