"""One running agent CLI: its own process group, its output read line by line into a log.

Every line refreshes `last_output`; JSON lines are offered to the backend's session-id rules and its
result marker. Interrupting sends SIGTERM to the whole group, waits a bounded time, then SIGKILL.
The CLI dies with the supervisor (Linux PR_SET_PDEATHSIG, as bubblewrap's --die-with-parent does
inside the sandbox): a supervisor killed and started again resumes the session, and no orphan of
the old one works on beside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from amid.registry.schemas import WorkerBackend
from amid.server.supervisor.workers.backend import is_result, session_id_in

TAIL_LINES = 40
PR_SET_PDEATHSIG = 1


def _death_signal() -> Callable[[], None] | None:
    """A pre-exec hook that makes the child receive SIGKILL when its parent ends (Linux only); the
    libc function is resolved here, in the parent, so the forked child runs almost no Python."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


DIE_WITH_PARENT = _death_signal()


class WorkerProcess:
    def __init__(self, backend: WorkerBackend, argv: list[str], cwd: Path, env: dict[str, str], log_path: Path) -> None:
        self.backend = backend
        self.started = time.monotonic()
        self.last_output = self.started
        self.session_id: str | None = None
        self.saw_result = False
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._log = log_path.open("ab")
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=DIE_WITH_PARENT,  # one prctl call, resolved before the fork
        )
        self._reader = threading.Thread(target=self._read, name=f"worker-output-{self.popen.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            self._log.write(raw)
            self._log.flush()
            self.last_output = time.monotonic()
            line = raw.decode("utf-8", errors="replace").strip()
            self.tail.append(line)
            self._offer(line)
        self.popen.stdout.close()
        self._log.close()

    def _offer(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self.session_id = session_id_in(self.backend, event) or self.session_id
        self.saw_result = self.saw_result or is_result(self.backend, event)

    def exited(self) -> int | None:
        """The exit status once the process ended and its output was read to the end; None while it runs."""
        code = self.popen.poll()
        if code is None:
            return None
        self._reader.join(timeout=5)
        return code

    def uptime_s(self) -> float:
        return time.monotonic() - self.started

    def silent_s(self) -> float:
        return time.monotonic() - self.last_output

    def interrupt(self, grace_s: float) -> int:
        """SIGTERM to the group, a bounded wait, then SIGKILL; returns the exit status."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        code = self.popen.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):  # what outlived the group's leader
            os.killpg(self.popen.pid, signal.SIGKILL)  # (bubblewrap's init ignores a SIGTERM from outside)
        self._reader.join(timeout=5)
        return code
