"""Run jobs on this machine, each under its own detached wrapper process (see wrapper.py).

The wrapper is spawned with posix_spawn in a new session rather than through subprocess.Popen:
a Popen object must be waited on by whoever holds it, while these wrappers are meant to outlive
the scheduler that started them (a restarted server finds them through wrapper.json).
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import cast

from amid import PACKAGE_ROOT
from amid.server import sandbox
from amid.server.errors import JobFailed
from amid.server.jobs import files
from amid.server.jobs.backend import JobHandle, Observation
from amid.server.jobs.boxing import JobBoxing, admit, boxed
from amid.server.jobs.procs import ProcessIdentity, identify, is_alive, terminate_group
from amid.server.jobs.spec import TERMINAL, BackendName, JobStatus

# `cd` so that `-m amid.server.jobs.wrapper` finds this package without touching the job's PYTHONPATH.
_LAUNCH_SCRIPT = 'cd "$1" && exec "$2" -m amid.server.jobs.wrapper "$3"'


class LocalBackend:
    name: BackendName = "local"
    enforces_time_limit = True

    def __init__(
        self,
        *,
        python: str,
        base_env: Mapping[str, str],
        kill_grace_s: float = 10.0,
        sample_interval_s: float = 0.5,
        start_grace_s: float = 15.0,
        boxing: JobBoxing | None = None,
    ) -> None:
        """`python` runs the wrapper; `base_env` is the environment unboxed jobs inherit (spec.env on
        top; a boxed job starts from sandbox.job_env instead, without the server's variables).

        A launched wrapper that has not recorded itself after `start_grace_s` is presumed dead.
        `boxing`: the job sandbox policy (None: jobs run unconfined, as in the job runner's own tests).
        """
        self._boxing = boxing
        self._python = python
        self._base_env = dict(base_env)
        self._kill_grace_s = kill_grace_s
        self._sample_interval_s = sample_interval_s
        self._start_grace_s = start_grace_s
        self._host = socket.gethostname()

    def start(self, handle: JobHandle) -> Observation:
        launched_at = files.utc_now()
        launch = {
            "gpu_uuids": list(handle.gpu_uuids),
            "pin_gpus": True,
            "kill_grace_s": self._kill_grace_s,
            "sample_interval_s": self._sample_interval_s,
            "launched_at": launched_at,
            **self._box_launch(handle),
        }
        files.write_json_atomic(handle.job_dir / files.LAUNCH, launch)
        try:
            pid = self._spawn(handle.job_dir)
        except OSError as exc:
            raise JobFailed(f"could not start the job wrapper for {handle.job_id}: {exc}") from exc
        identity = identify(pid)
        if identity is not None and not (handle.job_dir / files.WRAPPER).exists():
            record = {**identity.to_json(), "host": self._host}
            files.write_json_atomic(handle.job_dir / files.WRAPPER, record)
        return Observation("running", f"{self._host}:{pid}", started_at=launched_at)

    def admit(self, spec: object) -> str:
        return admit(self._boxing)

    def _box_launch(self, handle: JobHandle) -> dict[str, object]:
        """What the wrapper starts instead of the bare command: the boxed argv and its clean env."""
        try:
            command, box = boxed(self._boxing, handle)
        except sandbox.SandboxUnavailable as exc:
            raise JobFailed(str(exc)) from exc
        if box is None:
            return {"sandbox": "none"}
        return {"sandbox": "bwrap", "command": command, "env": sandbox.job_env(box.scratch)}

    def _spawn(self, job_dir: Path) -> int:
        log_flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        return os.posix_spawn(
            "/bin/sh",
            ["/bin/sh", "-c", _LAUNCH_SCRIPT, "amid-wrapper", str(PACKAGE_ROOT), self._python, str(job_dir)],
            self._base_env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, str(job_dir / files.WRAPPER_LOG), log_flags, 0o644),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
            # Ignored signals survive exec; Python ignores SIGPIPE, which jobs must not inherit.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGHUP),
            setsigmask=(),
        )

    def poll(self, handle: JobHandle) -> Observation:
        outcome = files.read_json(handle.job_dir / files.EXIT)
        if outcome is not None:
            return _observed_end(outcome, handle.backend_job_id)
        if self._wrapper_running(handle.job_dir):
            return Observation("running", handle.backend_job_id)
        # The wrapper may have written exit.json just before it ended: read again before judging.
        outcome = files.read_json(handle.job_dir / files.EXIT)
        if outcome is not None:
            return _observed_end(outcome, handle.backend_job_id)
        return self._wrapper_vanished(handle)

    def _wrapper_running(self, job_dir: Path) -> bool:
        record = files.read_json(job_dir / files.WRAPPER)
        if record is not None:
            return is_alive(ProcessIdentity.from_json(record))
        launch = files.read_json(job_dir / files.LAUNCH) or {}
        launched_at = launch.get("launched_at")
        # Not recorded yet: a wrapper that is still starting, unless it had ample time.
        return launched_at is not None and files.seconds_between(launched_at, files.utc_now()) < self._start_grace_s

    def _wrapper_vanished(self, handle: JobHandle) -> Observation:
        """The wrapper is gone without a word: stop what it left behind, never run it again."""
        child = files.read_json(handle.job_dir / files.CHILD)
        if child and "start_ticks" in child and is_alive(ProcessIdentity.from_json(child)):
            terminate_group(int(child["pgid"]), self._kill_grace_s)
        if (handle.job_dir / files.STOP).exists():
            return Observation("cancelled", handle.backend_job_id, reason="stopped on request; wrapper ended")
        log_tail, _ = files.read_tail(handle.job_dir / files.WRAPPER_LOG, 300)
        detail = f"; wrapper.log ends: {log_tail.strip()[-200:]}" if log_tail.strip() else ""
        reason = "the job wrapper ended without recording an outcome (killed, or the machine restarted)"
        return Observation("lost", handle.backend_job_id, ended_at=files.utc_now(), reason=reason + detail)

    def cancel(self, handle: JobHandle) -> None:
        """Wake the wrapper with SIGTERM; it reads stop.json (written by the scheduler) for the cause."""
        record = files.read_json(handle.job_dir / files.WRAPPER)
        if record is not None and is_alive(ProcessIdentity.from_json(record)):
            os.kill(int(record["pid"]), signal.SIGTERM)

    def reattach(self, handle: JobHandle) -> Observation | None:
        if not (handle.job_dir / files.LAUNCH).exists():
            return None
        record = files.read_json(handle.job_dir / files.WRAPPER)
        backend_job_id = handle.backend_job_id or (f"{self._host}:{record['pid']}" if record else None)
        return self.poll(replace(handle, backend_job_id=backend_job_id))

    def sync_logs(self, handle: JobHandle) -> None:
        """The wrapper writes the logs straight into the job folder."""

    def close(self) -> None:
        """Nothing to release: wrappers run on by design."""


def _observed_end(outcome: dict[str, object], backend_job_id: str | None) -> Observation:
    def number(key: str) -> float | None:
        value = outcome.get(key)
        return float(value) if isinstance(value, int | float) else None

    exit_code, peak = number("exit_code"), number("peak_gpu_mem_mb")
    return Observation(
        status=_terminal_status(outcome.get("status")),
        backend_job_id=backend_job_id,
        exit_code=None if exit_code is None else int(exit_code),
        started_at=_text(outcome.get("started_at")),
        ended_at=_text(outcome.get("ended_at")),
        wall_s=number("wall_s"),
        peak_gpu_mem_mb=None if peak is None else int(peak),
        reason=_text(outcome.get("reason")),
    )


def _terminal_status(value: object) -> JobStatus:
    return cast(JobStatus, value) if value in TERMINAL else "failed"


def _text(value: object) -> str | None:
    return None if value is None else str(value)
