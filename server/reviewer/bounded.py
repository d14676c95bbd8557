"""A bounded subprocess: own process group, wall-clock limit, KILL to the whole group on expiry.

Holdout replay and task graders run through here until they go through the job runner; the shape
(argv, cwd, env, limit → exit code, timed out, log tails) is what a job spec and its state give.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

TAIL_BYTES = 4000
LIVE_GROUPS: set[int] = set()  # process groups started here and still running (killed on SIGTERM)


@dataclass(frozen=True)
class Outcome:
    returncode: int | None
    timed_out: bool
    stdout: str
    stderr_tail: str
    seconds: float


def run_bounded(argv: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> Outcome:
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, env=env, start_new_session=True)
        except OSError as exc:
            return Outcome(None, False, "", f"cannot start {argv[0]!r}: {exc}", 0.0)
        LIVE_GROUPS.add(process.pid)
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(process.pid)
            process.wait()
        finally:
            LIVE_GROUPS.discard(process.pid)
        out.seek(0)
        stdout = out.read().decode("utf-8", errors="replace")
        return Outcome(process.returncode, timed_out, stdout, _tail(err), time.monotonic() - started)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_live_groups() -> None:
    """Kill every process group still running from here (a review being stopped)."""
    for pgid in list(LIVE_GROUPS):
        kill_group(pgid)


def _tail(handle: IO[bytes]) -> str:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - TAIL_BYTES))
    return handle.read().decode("utf-8", errors="replace")


def exit_with(server_pid: int, signum: int = signal.SIGTERM, poll_s: float = 0.5) -> threading.Thread:
    """Signal this process with `signum` as soon as the server process `server_pid` is gone.

    A review process is a child of the pool's forkserver, which outlives a SIGKILLed server, so the
    kernel's parent-death signal would never come; a daemon thread polling the server's pid does the
    same job (within `poll_s`), and the SIGTERM handler then kills the review's subprocess groups.
    """

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            try:
                os.kill(server_pid, 0)
            except ProcessLookupError:
                os.kill(os.getpid(), signum)
                return
            except PermissionError:  # a pid reused by another user's process: the server is gone
                os.kill(os.getpid(), signum)
                return

    thread = threading.Thread(target=watch, name="amid-exit-with-server", daemon=True)
    thread.start()
    return thread


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment without AMID_* settings and secrets, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMID_")}
    env.update(extra or {})
    return env
