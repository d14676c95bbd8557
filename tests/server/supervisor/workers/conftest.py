"""A real `amid serve` per test module, and helpers to wait for worker events with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from server.supervisor.workers.pool import WorkerPool


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
