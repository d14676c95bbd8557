"""A real `amid serve` per test module (one with a server-held holdout), and helpers to wait for worker events
with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from amid.server.demo import DEMO_HOLDOUT_FRACTION, start_server, stop_server
from amid.server.holdout_split import with_holdout_fraction
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from tests.server.conftest import Running


def wait_for(
    pool: WorkerPool, done: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 60.0
) -> list[dict[str, Any]]:
    """Poll the pool until `done(events so far)`; return the events (fails at the deadline)."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen += pool.poll()
        if done(seen):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"no such events within {timeout_s} s: {seen}")


def named(events: list[dict[str, Any]], event: str, agent_id: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == event and (agent_id is None or e["agent_id"] == agent_id)]


@pytest.fixture(scope="module")
def holdout_running(demo_challenge: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A real `amid serve` on the demo task with the demo's server-held holdout (the reviewer replays on it)."""
    imported = import_task(demo_challenge)
    imported.contract = with_holdout_fraction(imported.contract, DEMO_HOLDOUT_FRACTION)
    workspace = init_workspace(imported, tmp_path_factory.mktemp("holdout") / "ws")
    process, url = start_server(workspace.root)
    try:
        yield Running(workspace, url, {})
    finally:
        stop_server(process)
