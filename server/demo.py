"""`amid demo`: the whole system end to end on the embedded task, with scripted agents.

It makes the demo task, creates a workspace, starts `amid serve` as a real subprocess on a free
loopback port, issues tokens, and drives a scripted worker and a scripted supervisor through the
real MCP client over HTTP. Each later subsystem (profiling, lanes, attempts, reviews, jobs) adds
its step here.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from server.connect import ensure_worktree
from server.errors import JobFailed
from server.holdout_split import with_holdout_fraction
from server.local_client import call as admin_call
from server.mcp_client import call, connect
from server.workspace import Workspace, init_workspace, read_server_marker
from tools.task.demo_task import make_demo_task
from tools.task.importers import import_task

console = Console(stderr=False)
DEMO_HOLDOUT_FRACTION = 0.2


def start_server(workspace: Path, timeout_s: float = 60.0) -> tuple[subprocess.Popen[bytes], str]:
    """Start `amid serve` on a free port; return the process and its MCP URL once it listens.

    The server's stderr goes to `.amid/serve.log` (a pipe nobody drains would block it)."""
    log_path = workspace / ".amid" / "serve.log"
    command = [sys.executable, "-m", "server.cli", "serve", "-w", str(workspace), "--port", "0"]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        marker = read_server_marker(Workspace(workspace))
        if marker and marker["pid"] == process.pid:
            return process, str(marker["url"])
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise JobFailed(
        f"amid serve did not start within {timeout_s:.0f} s: {log_path.read_text(encoding='utf-8')[-2000:]}"
    )


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _script(workspace: Workspace, url: str, worker_token: str, supervisor_token: str) -> dict[str, Any]:
    from server.demo_worker import run_worker

    async with connect(url, worker_token) as worker, connect(url, supervisor_token) as supervisor:
        steps = await run_worker(worker, workspace, "worker-1")
        prompt = f"Your attempt was {steps['verdict']}: write a reflection note, then try a learned model."
        beat = await call(
            supervisor, "send_heartbeat", {"agent_id": "worker-1", "kind": "reflection", "prompt": prompt}
        )
        steps["send_heartbeat"] = f"reflection heartbeat {beat['heartbeat_id']} queued for worker-1"
        again = await call(worker, "get_task", {"include_case_ids": False})
        steps["worker inbox"] = "; ".join(again["inbox"]) or "(empty)"
        snapshot = await call(supervisor, "run_snapshot", {"recent_events": 5})
        steps["run_snapshot"] = f"attempts {snapshot['attempts_by_status']}, lanes {snapshot['lanes_by_status']}"
    return steps


def run_demo(root: Path | None = None) -> Workspace:
    root = (root or Path(tempfile.mkdtemp(prefix="amid-demo-"))).resolve()
    console.rule("AMID demo")
    challenge = make_demo_task(root / "challenge")
    console.print(f"demo task generated at {challenge}")
    imported = import_task(challenge)
    # DESIGN §5: the server-held holdout is on for the demo (20 % of the patients, grouped, seeded).
    imported.contract = with_holdout_fraction(imported.contract, DEMO_HOLDOUT_FRACTION)
    workspace = init_workspace(imported, root / "workspace")
    console.print(f"workspace created at {workspace.root}")
    process, url = start_server(workspace.root)
    try:
        console.print(f"server listening at {url}")
        worker = admin_call(workspace, "token_create", {"name": "worker-1", "role": "agent"})["token"]
        supervisor = admin_call(workspace, "token_create", {"name": "manager", "role": "supervisor"})["token"]
        ensure_worktree(workspace, "worker-1")
        steps = asyncio.run(_script(workspace, url, worker, supervisor))
        status = admin_call(workspace, "status", {})
    finally:
        stop_server(process)
    table = Table("step", "result", title="scripted run over MCP/HTTP")
    for step, result in steps.items():
        table.add_row(step, escape(str(result)))
    console.print(table)
    console.print(f"ledger: {status['events']} events, agents {[a['agent_id'] for a in status['agents']]}")
    console.print(f'inspect it: amid sql "SELECT * FROM v_agent_activity" -w {workspace.root}')
    return workspace
