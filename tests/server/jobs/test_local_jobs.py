"""The local backend end to end: real wrapper processes, real process groups, real logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from amid.server.errors import Conflict, InvalidInput, NotFound
from amid.server.jobs.gpu import GpuInfo, GpuProcess, NvmlInventory, StaticInventory
from amid.server.jobs.procs import group_members
from amid.server.jobs.spec import JobSpec
from amid.server.jobs.wrapper import PeakSampler
from tests.server.jobs.helpers import (
    SchedulerFactory,
    eventually,
    gpu,
    process_running,
    python_job,
    state_when,
    text_when_written,
    wait_status,
)

# A job whose shell starts a background grandchild and sleeps; both pids are written down.
FAMILY = "sleep 60 & echo $! > grandchild.pid; echo $$ > child.pid; {trap}sleep 60; wait"


def family_job(cwd: Path, trap: str = "", **fields: object) -> JobSpec:
    return JobSpec.create(command=["/bin/sh", "-c", FAMILY.format(trap=trap)], cwd=str(cwd), **fields)


def read_pid(path: Path) -> int:
    return int(text_when_written(path))


def test_a_cpu_job_runs_with_no_visible_gpu(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    code = "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']), os.environ['FOO'], os.getcwd())"
    state = wait_status(scheduler, scheduler.submit("a", python_job(tmp_path, code, env={"FOO": "bar"})).job_id)
    assert (state.status, state.exit_code, state.reason) == ("succeeded", 0, None)
    assert scheduler.log_tail(state.job_id).stdout == f"'' bar {tmp_path}\n"
    assert state.wall_s is not None and state.started_at and state.ended_at


def test_the_time_limit_kills_the_whole_process_group(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    state = wait_status(scheduler, scheduler.submit("a", family_job(tmp_path, time_limit_s=1)).job_id)
    assert state.status == "timed_out"
    assert "time limit of 1 s" in (state.reason or "") and "SIGTERM" in (state.reason or "")
    for name in ("child.pid", "grandchild.pid"):
        assert not process_running(read_pid(tmp_path / name)), f"{name} survived the time limit"


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(kill_grace_s=0.5)
    job = family_job(tmp_path, trap="trap '' TERM; ", time_limit_s=1)
    state = wait_status(scheduler, scheduler.submit("a", job).job_id)
    assert state.status == "timed_out" and "SIGKILL after 0.5 s grace" in (state.reason or "")
    assert not process_running(read_pid(tmp_path / "child.pid"))


def test_cancel_stops_a_running_job_and_its_children(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    job_id = scheduler.submit("a", family_job(tmp_path)).job_id
    grandchild = read_pid(tmp_path / "grandchild.pid")
    scheduler.cancel(job_id)
    state = wait_status(scheduler, job_id)
    assert state.status == "cancelled" and "stopped on request" in (state.reason or "")
    assert not process_running(grandchild)
    with pytest.raises(Conflict, match="already ended"):
        scheduler.cancel(job_id)


def test_cancel_before_start_never_runs_the_job(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(max_concurrent=1)
    blocker = scheduler.submit("a", family_job(tmp_path)).job_id
    queued = scheduler.submit("a", python_job(tmp_path, "open('ran', 'w')")).job_id
    assert scheduler.cancel(queued).status == "cancelled"
    scheduler.cancel(blocker)
    wait_status(scheduler, blocker)
    assert not (tmp_path / "ran").exists()


def test_logs_are_complete(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    code = "import sys\nfor i in range(50000):\n    print(i)\n    print('e', i, file=sys.stderr)"
    state = wait_status(scheduler, scheduler.submit("a", python_job(tmp_path, code)).job_id)
    job_dir = tmp_path / "jobs" / state.job_id
    assert (job_dir / "stdout.log").read_text(encoding="utf-8") == "".join(f"{i}\n" for i in range(50000))
    assert (job_dir / "stderr.log").read_text(encoding="utf-8") == "".join(f"e {i}\n" for i in range(50000))
    tail = scheduler.log_tail(state.job_id, n_bytes=12)
    assert tail.stdout == "49998\n49999\n" and tail.stdout_bytes == (job_dir / "stdout.log").stat().st_size


def test_a_failing_command_reports_its_exit_code(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    state = wait_status(scheduler, scheduler.submit("a", python_job(tmp_path, "raise SystemExit(3)")).job_id)
    assert (state.status, state.exit_code, state.reason) == ("failed", 3, "exited with code 3")


def test_a_job_killed_by_a_signal_names_it(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    spec = JobSpec.create(command=["/bin/sh", "-c", "kill -KILL $$"], cwd=str(tmp_path))
    state = wait_status(scheduler, scheduler.submit("a", spec).job_id)
    assert (state.status, state.exit_code, state.reason) == ("failed", -9, "killed by SIGKILL")


def test_a_missing_program_fails_with_a_clear_reason(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    spec = JobSpec.create(command=["no-such-program-xyz"], cwd=str(tmp_path))
    state = wait_status(scheduler, scheduler.submit("a", spec).job_id)
    assert state.status == "failed" and "could not start 'no-such-program-xyz'" in (state.reason or "")


def test_a_gpu_job_on_a_machine_without_gpus_fails_at_once(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    inventory = NvmlInventory()
    if inventory.gpus():
        pytest.skip("this machine has GPUs")
    scheduler = make_scheduler(inventory)
    state = scheduler.submit("a", python_job(tmp_path, "pass", gpus=1))
    assert state.status == "failed"
    assert "no GPU is visible" in (state.reason or "") and "NVML" in (state.reason or "")


def test_a_gpu_job_without_gpus_queues_when_configured(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(NvmlInventory(), queue_when_unplaceable=True)
    if NvmlInventory().gpus():
        pytest.skip("this machine has GPUs")
    job_id = scheduler.submit("a", python_job(tmp_path, "pass", gpus=1)).job_id
    state = state_when(scheduler, job_id, lambda s: s.reason != "queued", "a queue reason")
    assert state.status == "queued" and "no GPU is visible" in (state.reason or "")


def test_bad_requests_are_refused_with_the_field(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    with pytest.raises(InvalidInput, match="cwd"):
        scheduler.submit("a", JobSpec.create(command=["true"], cwd=str(tmp_path / "missing")))
    with pytest.raises(NotFound, match="job_id"):
        scheduler.get("job-unknown")


def test_wait_is_bounded(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    job_id = scheduler.submit("a", family_job(tmp_path)).job_id
    assert scheduler.wait(job_id, 0.2).status in ("queued", "running")


def test_a_killed_wrapper_is_reported_lost_and_its_job_stopped(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    scheduler = make_scheduler()
    job_id = scheduler.submit("a", family_job(tmp_path)).job_id
    child = read_pid(tmp_path / "child.pid")
    eventually(lambda: (tmp_path / "jobs" / job_id / "child.json").exists(), what="child.json")
    wrapper = json.loads((tmp_path / "jobs" / job_id / "wrapper.json").read_text(encoding="utf-8"))["pid"]
    os.kill(wrapper, signal.SIGKILL)
    state = wait_status(scheduler, job_id)
    assert state.status == "lost" and "without recording an outcome" in (state.reason or "")
    eventually(lambda: not process_running(child), what="the orphaned job to be stopped")


def test_the_wrapper_records_its_own_identity(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler()
    state = wait_status(scheduler, scheduler.submit("a", python_job(tmp_path, "pass")).job_id)
    record = json.loads((tmp_path / "jobs" / state.job_id / "wrapper.json").read_text(encoding="utf-8"))
    assert state.backend_job_id == f"{record['host']}:{record['pid']}" and record["start_ticks"] > 0
    assert (
        json.loads((tmp_path / "jobs" / state.job_id / "exit.json").read_text(encoding="utf-8"))["status"]
        == "succeeded"
    )


class ChangingInventory(StaticInventory):
    """NVML stand-in whose devices can change between samples (the one edge these tests fake)."""

    def __init__(self, gpus: list[GpuInfo]) -> None:
        super().__init__(gpus)
        self.now = list(gpus)

    def gpus(self) -> list[GpuInfo]:
        return list(self.now)


def test_peak_gpu_memory_is_summed_over_the_jobs_process_group(tmp_path: Path) -> None:
    job = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & sleep 30"], start_new_session=True)
    try:
        eventually(lambda: len(group_members(job.pid)) >= 2, what="the background child")
        helper = [p for p in group_members(job.pid) if p != job.pid]
        device = gpu(0, free_mb=20_000)
        inventory = ChangingInventory([device])
        sampler = PeakSampler(inventory, [device.uuid], interval_s=0.0)
        processes = [GpuProcess(job.pid, 1000), GpuProcess(helper[0], 500), GpuProcess(1, 9999)]
        inventory.now = [device.model_copy(update={"processes": processes})]
        sampler.sample(job.pid)
        inventory.now = [device]
        sampler.sample(job.pid)
        assert sampler.result() == {"peak_gpu_mem_mb": 1500, "peak_gpu_mem_source": "processes"}
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def test_peak_gpu_memory_falls_back_to_device_growth_when_pids_do_not_match() -> None:
    device = gpu(0, free_mb=20_000)
    inventory = ChangingInventory([device])
    sampler = PeakSampler(inventory, [device.uuid], interval_s=0.0)
    inventory.now = [device.model_copy(update={"memory_free_mb": 17_000, "processes": [GpuProcess(4242, 3000)]})]
    sampler.sample(os.getpid())
    assert sampler.result() == {"peak_gpu_mem_mb": 3000, "peak_gpu_mem_source": "device_delta"}
