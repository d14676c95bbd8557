"""A private single-node Ray cluster for tests, benchmarks and demos (`ray start --head --block`).

Every port is chosen free at start, so two clusters on one machine never collide, and token
authentication is on (Ray's default since 2.5x) with a fresh token that only this cluster and
its clients know. Stopping kills the session the head was started in — the processes this
cluster started and nothing else (`ray stop` would kill every Ray process on the machine, and a
SIGTERM makes `ray start --block` wind down for half a minute).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amid.server.errors import JobFailed
from amid.server.jobs.procs import session_members

_PORT_FLAGS = (
    "port",
    "dashboard-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
    "metrics-export-port",
    "node-manager-port",
    "object-manager-port",
    "ray-client-server-port",
)


class LocalRayCluster:
    def __init__(self, *, num_cpus: int = 2, num_gpus: int = 2, ray_cli: Path | None = None) -> None:
        """`num_gpus` are logical: Ray schedules on them whether or not the machine has GPUs."""
        self.token = secrets.token_hex(16)
        self._ports = {flag: _free_port() for flag in _PORT_FLAGS}
        self.address = f"http://127.0.0.1:{self._ports['dashboard-port']}"
        self._cli = ray_cli or Path(sys.executable).parent / "ray"
        self._resources = (num_cpus, num_gpus)
        self._temp_dir = ""
        self._head: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 180.0) -> LocalRayCluster:
        """Start the head and wait until it accepts job clients."""
        if not self._cli.exists():
            raise JobFailed(f"the ray CLI is not installed ({self._cli}); pip install 'ray[default]'")
        self._temp_dir = tempfile.mkdtemp(prefix="amid-ray-", dir="/tmp")  # socket paths must stay short
        env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}
        with open(Path(self._temp_dir) / "ray-start.log", "wb") as log:
            self._head = subprocess.Popen(
                self._argv(), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready(timeout_s)
        return self

    def _argv(self) -> list[str]:
        cpus, gpus = self._resources
        return [
            str(self._cli),
            "start",
            "--head",
            "--block",
            f"--num-cpus={cpus}",
            f"--num-gpus={gpus}",
            "--disable-usage-stats",
            f"--temp-dir={self._temp_dir}",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            *(f"--{flag}={port}" for flag, port in self._ports.items()),
        ]

    def _wait_ready(self, timeout_s: float) -> None:
        from amid.server.jobs.ray_backend import RayBackend

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                RayBackend(self.address, auth_token=self.token)
                return
            except JobFailed:
                if time.monotonic() >= deadline or (self._head and self._head.poll() is not None):
                    self.stop()
                    raise JobFailed(f"the local Ray cluster did not start within {timeout_s:g} s") from None
                time.sleep(0.5)

    def stop(self) -> None:
        if self._head is not None:
            _kill_session(self._head.pid)
            self._head.wait(timeout=30)
            self._head = None
        shutil.rmtree(self._temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _kill_session(session_id: int, timeout_s: float = 30.0) -> None:
    """SIGKILL every process of session `session_id` (Ray's reparented helpers included)."""
    deadline = time.monotonic() + timeout_s
    while (members := session_members(session_id)) and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
