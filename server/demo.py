"""`amid demo`: the whole system end to end on the embedded task, with scripted agents.

It makes the demo task, creates a workspace (with a 20 % server-held holdout), starts `amid serve`
as a real subprocess on a free loopback port, and starts `amid supervise --workers 3 --backend
scripted` as another: the supervisor runs three managed scripted workers (each a real MCP client
in its sandbox, on its own lane and fold; one cheats), sends heartbeats by interrupting and
resuming their sessions, promotes, finalizes, and stops when the run is done. The summary is read
back from the ledger.
"""

from __future__ import annotations

import json
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

from amid.server.demo_progress import watch
from amid.server.errors import JobFailed
from amid.server.holdout_split import with_holdout_fraction
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace, init_workspace, read_server_marker
from amid.tools.task.demo_task import make_demo_task
from amid.tools.task.importers import import_task

console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)  # logs keep whole cells
DEMO_HOLDOUT_FRACTION = 0.2


def start_server(
    workspace: Path, timeout_s: float = 60.0, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `amid serve` on a free port; return the process and its MCP URL once it listens.

    The server's stderr goes to `.amid/serve.log` (a pipe nobody drains would block it)."""
    log_path = workspace / ".amid" / "serve.log"
    command = [sys.executable, "-m", "amid", "serve", "-w", str(workspace), "--port", "0"]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
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


DEMO_SETTINGS = {  # thresholds small enough for a few minutes on two CPU cores
    "AMID_COVERAGE_ATTEMPTS": "1",
    "AMID_PLATEAU_AFTER": "1",
    "AMID_CONSOLIDATE_EVERY": "2",
    "AMID_MAX_PENDING_REVIEWS": "2",
}
N_WORKERS = 3
CHEATER = "worker-3"  # copies the validation labels as its predictions: the reviewer must reject it
MAX_S = 300.0


def start_supervisor(workspace: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`amid supervise -w --workers 3 --backend scripted` as its own process (output in .amid/supervise.log):
    it starts the three managed scripted workers, each in its sandbox, and runs the run to its end."""
    log_path = workspace / ".amid" / "supervise.log"
    command = [
        sys.executable,
        "-m",
        "amid",
        "supervise",
        "-w",
        str(workspace),
        "--poll-s",
        "1",
        "--max-s",
        str(MAX_S),
        "--workers",
        str(N_WORKERS),
        "--backend",
        "scripted",
        "--worker-env",
        f"AMID_SCRIPTED_CHEAT={CHEATER}",
    ]
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return process, log_path


def _summary(workspace: Workspace) -> dict[str, list[list[Any]]]:
    queries = {
        "lanes": "SELECT lane_id, tier, status FROM lanes WHERE status NOT IN ('open') ORDER BY lane_id",
        "attempts": "SELECT attempt_id, agent_id, lane_id, budget_class, verdict, round(verified_score, 4), "
        "coalesce(failed_codes, '') FROM v_evidence ORDER BY attempt_id",
        "stages": "SELECT from_stage, to_stage, reason FROM v_stage_transitions ORDER BY transition_id",
        "promotion": "SELECT lane_id, to_status, reason FROM v_lane_decisions WHERE to_status IN "
        "('promoted', 'challenger', 'waived') ORDER BY decision_id",
        "final": "SELECT attempt_id, lane_id, round(verified_score, 4), coalesce(package_path, '(no package builder)') "
        "FROM v_final_choice",
        "heartbeats": "SELECT agent_id, kind, count(*) FROM heartbeats GROUP BY ALL ORDER BY agent_id, kind",
        "roles": "SELECT agent_id, stage, role, coalesce(lane_id, '') FROM v_agent_roles ORDER BY assignment_id",
        "workers": "SELECT agent_id, backend, state, (SELECT count(*) FROM worker_transitions t WHERE t.agent_id = "
        "w.agent_id AND t.event = 'delivered'), (SELECT count(*) FROM worker_transitions t WHERE t.agent_id = "
        "w.agent_id) FROM workers w ORDER BY agent_id",
    }
    return {name: admin_call(workspace, "sql", {"query": sql})["rows"] for name, sql in queries.items()}


def worker_steps(workspace: Workspace) -> dict[str, dict[str, Any]]:
    """What each managed scripted worker did, from its own session store (in its home)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(workspace.sub("workers").glob("*/home/.amid-scripted/*.json")):
        plan = json.loads(path.read_text(encoding="utf-8")).get("plan") or {}
        found[path.parents[2].name] = plan.get("steps", {})
    return found


def _print(summary: dict[str, list[list[Any]]], steps: dict[str, dict[str, Any]]) -> None:
    columns = {
        "lanes": ("lane", "tier", "status"),
        "attempts": ("attempt", "agent", "lane", "budget", "verdict", "verified dice", "failed checks"),
        "stages": ("from", "to", "reason"),
        "promotion": ("lane", "decision", "reason"),
        "final": ("attempt", "lane", "verified", "package"),
        "heartbeats": ("agent", "kind", "n"),
        "roles": ("agent", "stage", "role", "lane"),
        "workers": ("worker", "backend", "state", "resumed with a heartbeat", "transitions"),
    }
    for name, rows in summary.items():
        table = Table(title=name)
        for column in columns[name]:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(escape(str(v)) for v in row))
        console.print(table)
    for agent_id, done in steps.items():
        shown = {k: v for k, v in done.items() if k != "profile_data" and not k.endswith(" submitted")}
        console.print(f"{agent_id}: " + "; ".join(f"{k}: {v}" for k, v in shown.items()))


def _verify_package(workspace: Workspace) -> None:
    """`amid verify-package` on the final package, as a reviewer of the run would check it."""
    package = workspace.root / "package"
    if not (package / "manifest.json").is_file():
        console.print("package: none was built")
        return
    command = [sys.executable, "-m", "amid", "verify-package", str(package), "-w", str(workspace.root)]
    checked = subprocess.run(command, capture_output=True, text=True, timeout=600)
    console.print(f"package: {package}")
    console.print(escape(checked.stdout.strip() or checked.stderr.strip()), soft_wrap=True)


def run_demo(root: Path | None = None) -> Workspace:
    root = (root or Path(tempfile.mkdtemp(prefix="amid-demo-"))).resolve()
    console.rule("AMID demo")
    challenge = make_demo_task(root / "challenge")
    console.print(f"demo task generated at {challenge}")
    imported = import_task(challenge)
    # docs/ARCHITECTURE.md §5: the server-held holdout is on for the demo (20 % of the patients, grouped, seeded).
    imported.contract = with_holdout_fraction(imported.contract, DEMO_HOLDOUT_FRACTION)
    workspace = init_workspace(imported, root / "workspace")
    console.print(f"workspace created at {workspace.root}")
    process, url = start_server(workspace.root, env=DEMO_SETTINGS)  # the server reads AMID_* settings at start
    supervisor = None
    try:
        console.print(f"server listening at {url}")
        supervisor, log_path = start_supervisor(workspace.root)
        watch(workspace, supervisor, console, timeout_s=MAX_S + 60)  # stage, attempts, verdicts as they come
        summary = _summary(workspace)
        report = workspace.root / "report.html"  # the page a researcher opens in the morning
        report.write_text(str(admin_call(workspace, "report", {})["html"]), encoding="utf-8")
    finally:
        if supervisor is not None and supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        stop_server(process)
    _print(summary, worker_steps(workspace))
    console.print(f"supervisor log: {log_path}")
    console.print(f"report: {report}")
    _verify_package(workspace)
    _print_next_steps(workspace)
    return workspace


def amid_command() -> str:
    """How to run `amid` as this demo was run: the venv's script (relative to here when inside), or
    this interpreter with -m: `amid` itself is on PATH only in an activated venv."""
    script = Path(sys.executable).parent / "amid"
    if not script.is_file():
        return f"{sys.executable} -m amid"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def _print_next_steps(workspace: Workspace) -> None:
    amid, where = amid_command(), workspace.root
    activate = f" (or `source {Path(amid).parent}/activate`, then plain amid)" if amid.endswith("/amid") else ""
    console.print(f"next, as printed{activate}:", soft_wrap=True, highlight=False)
    for line in (
        f'{amid} sql "SELECT * FROM v_stage_transitions" -w {where}',
        f"{amid} status -w {where}",
        f"{amid} dashboard -w {where}   # a one-time login link to the live page",
    ):
        console.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
