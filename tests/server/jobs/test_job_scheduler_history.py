"""A dispatcher tick looks at the live jobs only: a run's ended jobs (its history) cost it nothing,
and a job waiting for a slot is told why once, not re-decided on every tick."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from server.jobs.placement import SLOT_WAIT
from server.jobs.spec import JobSpec, JobState
from tests.server.jobs.helpers import SchedulerFactory, eventually, wait_status


class CountingStates(dict[str, JobState]):
    """The scheduler's state map, counting the scans of every job it holds."""

    scans = 0

    def values(self) -> Any:
        CountingStates.scans += 1
        return super().values()

    def items(self) -> Any:
        CountingStates.scans += 1
        return super().items()


def quick(cwd: Path) -> JobSpec:
    return JobSpec.create(command=["true"], cwd=str(cwd))


def test_ticks_never_scan_the_ended_jobs(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(max_concurrent=0)  # nothing starts: every job stays queued until cancelled
    s: Any = scheduler
    ids = [scheduler.submit("agent", quick(tmp_path)).job_id for _ in range(30)]
    for job_id in ids[:25]:
        scheduler.cancel(job_id)
    with s._lock:
        s._states = CountingStates(s._states)
        assert [state.job_id for state in s._live_states()] == ids[25:]
    CountingStates.scans = 0
    for _ in range(5):
        s._poll_active()
        s._dispatch_queued()
    assert CountingStates.scans == 0


def test_history_and_queue_survive_a_restart_and_the_queue_runs(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    first = make_scheduler(max_concurrent=0)
    ids = [first.submit("agent", quick(tmp_path)).job_id for _ in range(12)]
    for job_id in ids[:8]:
        first.cancel(job_id)
    first.close()
    second = make_scheduler(max_concurrent=2)  # reconciles from disk: 8 ended, 4 still queued
    s: Any = second
    with s._lock:
        assert [state.job_id for state in s._live_states()] == ids[8:]
    finals = [wait_status(second, job_id) for job_id in ids[8:]]
    assert [state.status for state in finals] == ["succeeded"] * 4
    assert [state.status for state in second.list()].count("cancelled") == 8
    with s._lock:
        assert s._live_states() == []


def test_a_job_waiting_for_a_slot_is_told_once(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    changes: Counter[str] = Counter()
    scheduler = make_scheduler(max_concurrent=0, on_change=lambda state: changes.update([state.job_id]))
    ids = [scheduler.submit("agent", quick(tmp_path)).job_id for _ in range(20)]
    eventually(lambda: all(scheduler.get(job_id).reason == SLOT_WAIT for job_id in ids), what="slot reasons")
    eventually(lambda: all(changes[job_id] == 2 for job_id in ids), what="two changes per job")
    time.sleep(0.5)  # about ten more ticks (poll interval 0.05 s): none may write again
    assert all(changes[job_id] == 2 for job_id in ids)
