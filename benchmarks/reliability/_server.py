"""What the reliability suites share: a real `amid serve` on a fixed loopback port that can be killed
and restarted, and a walk of /proc for processes a killed server left behind.

The port stays the same across restarts, as it does for a real deployment, so that clients keep
their URL and simply retry.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from amid.server.workspace import Workspace, read_server_marker

JOB_WRAPPER = "amid.server.jobs.wrapper"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One `amid serve -w WS --port PORT` at a time; its stderr appends to .amid/serve.log."""

    workspace: Workspace
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def spawn(self) -> subprocess.Popen[bytes]:
        root, port = str(self.workspace.root), str(self.port)
        command = [sys.executable, "-m", "amid", "serve", "-w", root, "--port", port]
        with (self.workspace.control_dir / "serve.log").open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
            )
        return self.process

    def wait_for_marker(self, timeout_s: float = 60.0) -> None:
        """Until the server wrote its marker: it has bound the port and is starting its services."""
        process = self._running()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            marker = read_server_marker(self.workspace)
            if marker and marker["pid"] == process.pid:
                return
            time.sleep(0.01)
        raise RuntimeError(f"amid serve wrote no marker (exit {process.poll()}): {self.log_tail()}")

    def wait_until_serving(self, timeout_s: float = 90.0) -> None:
        process = self._running()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            marker = read_server_marker(self.workspace)
            if marker and marker["pid"] == process.pid and self._healthy():
                return
            time.sleep(0.05)
        raise RuntimeError(f"amid serve is not serving (exit {process.poll()}): {self.log_tail()}")

    def start(self) -> None:
        self.spawn()
        self.wait_until_serving()

    def stop(self, signum: int, timeout_s: float = 60.0) -> int:
        """Send `signum` and reap the process; returns its exit code (negative: killed by a signal)."""
        process = self._running()
        process.send_signal(signum)
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGUSR1)  # every thread's stack into serve.log: what it waited on
            time.sleep(1.0)
            process.kill()
            code = process.wait()
        self.process = None
        return code

    def log_tail(self, n: int = 3000) -> str:
        path = self.workspace.control_dir / "serve.log"
        return path.read_text(encoding="utf-8", errors="replace")[-n:] if path.is_file() else ""

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise RuntimeError("no amid serve process: spawn() first")
        return self.process

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    session: int
    state: str
    cmdline: str
    cwd: str


def processes() -> dict[int, Proc]:
    """Every live (non-zombie) process this user can see."""
    found: dict[int, Proc] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                cwd = ""
        except OSError:  # it ended while we looked
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            continue
        found[int(entry.name)] = Proc(int(entry.name), int(fields[1]), int(fields[3]), fields[0], cmdline, cwd)
    return found


def descendants(pid: int, procs: dict[int, Proc] | None = None) -> set[int]:
    procs = processes() if procs is None else procs
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _job_sessions(procs: dict[int, Proc]) -> set[int]:
    """Sessions led by a job wrapper: a running job is meant to outlive a server restart."""
    return {p.session for p in procs.values() if JOB_WRAPPER in p.cmdline and p.session == p.pid}


def leftovers(workspace: Workspace, old: set[int], server_pid: int | None) -> list[Proc]:
    """Processes that a killed server left behind: its former descendants, or anything whose command
    line or working directory names the workspace, that are neither the current server (with its
    descendants) nor part of a running job."""
    procs = processes()
    root = str(workspace.root.resolve())
    current = {server_pid, *descendants(server_pid, procs)} if server_pid else set()
    jobs = _job_sessions(procs)
    suspects = {pid for pid, p in procs.items() if pid in old or root in p.cmdline or p.cwd.startswith(root)}
    suspects -= current | {os.getpid()}
    return [procs[pid] for pid in sorted(suspects) if procs[pid].session not in jobs]


def settle_leftovers(workspace: Workspace, old: set[int], server_pid: int | None, timeout_s: float) -> list[Proc]:
    """Poll until no leftover remains (a review process notices its server's death within a second)."""
    deadline = time.monotonic() + timeout_s
    found = leftovers(workspace, old, server_pid)
    while found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = leftovers(workspace, old, server_pid)
    return found


SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM}
