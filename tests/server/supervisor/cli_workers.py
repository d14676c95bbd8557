"""Helpers for tests of `amid supervise` with managed workers: a stand-in CLI, the supervisor as a real
process, and reads of what the worker was started with and what the ledger recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace

# A headless "CLI" that takes the scripted backend's arguments: it announces a session (the one it
# resumes, else a new one), appends what it was started with to $HOME/calls.jsonl, then waits like a
# model that thinks for a long time.
QUIET_CLI = """#!{python}
import json, os, sys, time, uuid
args = sys.argv[1:]
session = args[args.index("--resume") + 1] if "--resume" in args else "quiet-" + uuid.uuid4().hex[:8]
prompt = args[args.index("--prompt") + 1]
with open(os.path.join(os.environ["HOME"], "calls.jsonl"), "a") as calls:
    calls.write(json.dumps({{"pid": os.getpid(), "session": session, "resume": "--resume" in args,
                            "prompt": prompt}}) + "\\n")
print(json.dumps({{"type": "system", "subtype": "init", "session_id": session}}), flush=True)
time.sleep(3600)
"""


@contextmanager
def serving(workspace: Workspace) -> Iterator[str]:
    """A real `amid serve` on the workspace; its MCP URL."""
    server, url = start_server(workspace.root)
    try:
        yield url
    finally:
        stop_server(server)


# A "CLI" that fails at once, saying why, as a CLI that cannot reach its model or its files does.
FAILING_CLI = """#!{python}
import sys
print("error: cannot reach the model endpoint (connection refused)", flush=True)
sys.exit(3)
"""


def stand_in_cli(tmp_path: Path, source: str = QUIET_CLI, name: str = "quiet-cli") -> Path:
    path = tmp_path / "cli" / name
    path.parent.mkdir(exist_ok=True)
    # The base interpreter, by its real path (the stand-in needs only the standard library).
    path.write_text(source.format(python=os.path.realpath(sys.executable)), encoding="utf-8")
    path.chmod(0o755)
    return path


def supervise(workspace: Workspace, cli: Path, log: Path, *flags: str) -> subprocess.Popen[bytes]:
    """`amid supervise` with one managed worker of the scripted backend, its CLI replaced by `cli`."""
    command = [sys.executable, "-m", "amid", "supervise", "-w", str(workspace.root), "--forever"]
    command += ["--poll-s", "0.2", "--workers", "1", "--backend", "scripted", "--cli-path", str(cli), *flags]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def calls_of(workspace: Workspace) -> list[dict[str, object]]:
    path = workspace.sub("workers") / "worker-1" / "home" / "calls.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines]


def transitions(workspace: Workspace) -> list[tuple[str, str | None, dict[str, object]]]:
    query = "SELECT event, session_id, detail FROM worker_transitions WHERE agent_id = 'worker-1' ORDER BY 1"
    rows = admin_call(workspace, "sql", {"query": query.replace("ORDER BY 1", "ORDER BY transition_id")})["rows"]
    return [(str(event), session, json.loads(str(detail))) for event, session, detail in rows]


def wait_for(predicate: Callable[[], bool], what: str, log: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s; the supervisor said: {log.read_text()[-3000:]}")


def running_as(cli: Path) -> list[int]:
    """Host pids of live processes started as `cli` (inside the sandbox its pids are its own)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(") ", 1)[-1][:1]
        except (OSError, ValueError):
            continue
        if str(cli).encode() in cmdline and state != "Z":
            found.append(int(proc.name))
    return found
