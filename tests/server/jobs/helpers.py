"""Helpers for the job-runner tests: a deadline-bound poll, process checks, spec and GPU makers."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amid.server.jobs.gpu import GpuInfo
from amid.server.jobs.scheduler import JobScheduler
from amid.server.jobs.spec import JobSpec, JobState

PY = sys.executable


def eventually(probe: Callable[[], object], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Poll `probe` until it returns something truthy, or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def text_when_written(path: Path, timeout_s: float = 20.0) -> str:
    eventually(
        lambda: path.exists() and path.read_text(encoding="utf-8").strip(), timeout_s, what=f"{path.name} to be written"
    )
    return path.read_text(encoding="utf-8").strip()


def state_when(scheduler: JobScheduler, job_id: str, predicate: Callable[[JobState], bool], what: str) -> JobState:
    eventually(lambda: predicate(scheduler.get(job_id)), what=what)
    return scheduler.get(job_id)


def process_running(pid: int) -> bool:
    """True while `pid` runs; zombies (orphans this machine's PID 1 never reaps) count as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def gpu(index: int, free_mb: int, load_pct: int = 0, total_mb: int = 24_000) -> GpuInfo:
    return GpuInfo(
        index=index,
        uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        name="Fake A10",
        memory_total_mb=total_mb,
        memory_free_mb=free_mb,
        utilization_pct=load_pct,
    )


def python_job(cwd: Path, code: str, **fields: Any) -> JobSpec:
    return JobSpec(command=[PY, "-c", code], cwd=str(cwd), **fields)


def wait_status(scheduler: JobScheduler, job_id: str, timeout_s: float = 30.0) -> JobState:
    state = scheduler.wait(job_id, timeout_s)
    assert state.is_terminal, f"{job_id} still {state.status} after {timeout_s} s: {state.reason}"
    return state


SchedulerFactory = Callable[..., JobScheduler]
