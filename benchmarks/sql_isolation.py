"""Latency of an agent's tool call while a long human query runs: before and after the read path.

Before: the server at the commit preceding the human read path (`amid sql` ran on the agents'
read-write connection behind their lock), checked out with `git worktree` into a temporary folder.
After: this tree (the query runs on a snapshot in its own DuckDB instance). Both serve a fresh demo
workspace as a real `amid serve`; an agent calls `list_jobs` over real HTTP, first idle, then while
one CPU-heavy human SELECT runs through the admin route. Results are medians and maxima of the
calls made while the query ran, and their ratios to the idle median of the same server.

    python benchmarks/sql_isolation.py [--before COMMIT] [--query-rows N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.demo import stop_server
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.workspace import Workspace, read_server_marker
from benchmarks._common import demo_workspace, write_result

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "c81b353781103cd6ee1fcfb48fb980b882cec562"  # parent of the read-path commit
SLOW_QUERY = "SELECT sum(hash(a.range * b.range)) AS h FROM range({rows}) a, range(1000) b"


def _serve(tree: Path, ws: Workspace) -> subprocess.Popen[bytes]:
    """`amid serve` with the code of `tree` (its folder first on the module path)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "amid", "serve", "-w", str(ws.root), "--port", "0"]
    with (ws.control_dir / "serve.log").open("ab") as log:
        process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        marker = read_server_marker(ws)
        if marker and marker["pid"] == process.pid:
            return process
        time.sleep(0.1)
    stop_server(process)
    raise RuntimeError(f"server from {tree} did not start; see {ws.control_dir / 'serve.log'}")


async def _list_jobs(client: Any) -> float:
    started = time.perf_counter()
    await call(client, "list_jobs", {})
    return (time.perf_counter() - started) * 1000


async def _session(url: str, token: str, ws: Workspace, query: str) -> tuple[list[float], list[float], float]:
    """Idle calls, then calls while the human query runs (one MCP session, opened before it starts)."""
    async with connect(url, token) as client:
        for _ in range(5):  # warm-up
            await _list_jobs(client)
        idle = [await _list_jobs(client) for _ in range(20)]
        done = threading.Event()
        took: list[float] = []

        def human() -> None:
            started = time.perf_counter()
            admin_call(ws, "sql", {"query": query, "time_limit_s": 120})
            took.append(time.perf_counter() - started)
            done.set()

        thread = threading.Thread(target=human)
        thread.start()
        await asyncio.sleep(0.3)  # the query is under way
        during = []
        while not done.is_set():
            during.append(await _list_jobs(client))
            await asyncio.sleep(0.05)
        thread.join()
    return idle, during, took[0]


def _measure(tree: Path, rows: int) -> dict[str, Any]:
    ws = demo_workspace()
    process = _serve(tree, ws)
    try:
        url = str(read_server_marker(ws)["url"])  # type: ignore[index]
        token = admin_call(ws, "token_create", {"name": "bench", "role": "agent"})["token"]
        idle, during, query_s = asyncio.run(_session(url, token, ws, SLOW_QUERY.format(rows=rows)))
    finally:
        stop_server(process)
    idle_ms = statistics.median(idle)
    return {
        "idle_median_ms": round(idle_ms, 1),
        "during_median_ms": round(statistics.median(during), 1),
        "during_max_ms": round(max(during), 1),
        "calls_during_query": len(during),
        "human_query_s": round(query_s, 2),
        "during_median_over_idle": round(statistics.median(during) / idle_ms, 2),
        "during_max_over_idle": round(max(during) / idle_ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE, help="commit of the old path")
    parser.add_argument("--query-rows", type=int, default=300_000, help="rows of the slow query's first range")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="amid-before-") as scratch:
        old_tree = Path(scratch) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old_tree), args.before],
            check=True,
            capture_output=True,
        )
        try:
            before = _measure(old_tree, args.query_rows)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_tree)], check=False)
    after = _measure(ROOT, args.query_rows)
    result = {
        "benchmark": "list_jobs latency over HTTP while one long human SELECT runs",
        "query": SLOW_QUERY.format(rows=args.query_rows),
        "before_commit": args.before,
        "before": before,
        "after": after,
        "during_median_before_over_after": round(before["during_median_ms"] / after["during_median_ms"], 1),
        "during_max_before_over_after": round(before["during_max_ms"] / after["during_max_ms"], 1),
    }
    print(write_result("sql_isolation", result).read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
