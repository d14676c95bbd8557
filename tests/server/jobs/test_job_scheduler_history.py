"""A dispatcher tick looks at the live jobs only: a run's ended jobs (its history) cost it nothing,
a job waiting for a slot is told why once, not re-decided on every tick, and a pick of the fairest
job costs O(agents), with the same decisions as the scan of the whole queue it replaced."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from amid.server.jobs.gpu import GpuInfo
from amid.server.jobs.placement import (
    SLOT_WAIT,
    AgentLoad,
    Placement,
    Waiting,
    _decide,
    _fairness_key,
    _Pool,
    plan_dispatch,
)
from amid.server.jobs.spec import JobSpec, JobState
from tests.server.jobs.helpers import SchedulerFactory, eventually, gpu, wait_status


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


def reference_plan(
    waiting: list[Waiting], inventory: list[GpuInfo], reserved: set[str], loads: dict[str, AgentLoad], slots: int
) -> dict[str, Placement]:
    """plan_dispatch as it was written first: the fairest job by a scan of the whole queue per pick."""
    pool = _Pool(inventory, set(reserved), {a: AgentLoad(v.gpus, v.jobs) for a, v in loads.items()}, slots, None)
    remaining = list(waiting)
    while remaining and pool.slots > 0:
        job = min(remaining, key=lambda w: _fairness_key(w, pool.loads))
        remaining.remove(job)
        pool.decisions[job.job_id] = _decide(job, pool)
    for job in remaining:
        pool.decisions[job.job_id] = _decide(job, pool)
    return pool.decisions


def test_the_per_agent_plan_decides_as_the_whole_queue_scan_did() -> None:
    rng = random.Random(25)
    for _ in range(300):
        inventory = [gpu(i, rng.choice([2_000, 12_000, 24_000])) for i in range(rng.randint(0, 3))]
        reserved = {g.uuid for g in inventory if rng.random() < 0.3}
        agents = [f"agent-{i}" for i in range(rng.randint(1, 4))]
        loads = {a: AgentLoad(rng.randint(0, 2), rng.randint(0, 3)) for a in agents if rng.random() < 0.5}
        waiting = [
            Waiting(f"job-{i:04d}", rng.choice(agents), rng.choice([0, 0, 1, 2]), rng.choice([0, 8_000, 20_000]))
            for i in rng.sample(range(1000), rng.randint(0, 12))
        ]
        slots = rng.randint(0, 5)
        expected = reference_plan(waiting, inventory, reserved, loads, slots)
        got = plan_dispatch(waiting, inventory, reserved, loads, slots)
        assert list(got.items()) == list(expected.items())  # the same decisions, made in the same order
