"""The Slurm backend against a real single-node Slurm (start it with .ci/setup_slurm.sh)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.jobs.backend import JobHandle
from amid.server.jobs.scheduler import JobScheduler
from amid.server.jobs.slurm import EXIT_RECORD, SlurmBackend
from amid.server.jobs.spec import JobSpec
from tests.server.jobs.helpers import eventually, python_job, wait_status

pytestmark = [pytest.mark.external, pytest.mark.slow]


def slurm_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH (run .ci/setup_slurm.sh as root to install a single-node Slurm)"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30, check=False)
    if "UP" not in ping.stdout:
        return f"slurmctld does not answer (run .ci/setup_slurm.sh): {ping.stdout.strip() or ping.stderr.strip()}"
    return None


@pytest.fixture(scope="module", autouse=True)
def _needs_slurm() -> None:
    problem = slurm_problem()
    if problem:
        pytest.skip(problem)


def make(tmp_path: Path) -> JobScheduler:
    return JobScheduler(tmp_path / "jobs", SlurmBackend(), None, max_concurrent=4, poll_interval_s=0.2)


@pytest.fixture
def slurm_scheduler(tmp_path: Path) -> Iterator[JobScheduler]:
    scheduler = make(tmp_path)
    yield scheduler
    for state in scheduler.list():
        if not state.is_terminal:
            scheduler.cancel(state.job_id)
            scheduler.wait(state.job_id, 30)
    scheduler.close()


def sleeper(cwd: Path, **fields: object) -> JobSpec:
    return JobSpec.create(command=["/bin/sh", "-c", "sleep 60"], cwd=str(cwd), **fields)


def test_a_gpu_job_gets_a_gres_gpu_and_separate_logs(slurm_scheduler: JobScheduler, tmp_path: Path) -> None:
    code = "import os, sys; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['FOO'], os.getcwd())\n"
    code += "print('e', file=sys.stderr)"
    state = slurm_scheduler.submit("a", python_job(tmp_path, code, gpus=1, env={"FOO": "it's"}))
    final = wait_status(slurm_scheduler, state.job_id, timeout_s=60)
    assert (final.status, final.exit_code) == ("succeeded", 0) and final.backend_job_id
    logs = slurm_scheduler.log_tail(state.job_id)
    visible, foo, cwd = logs.stdout.split()
    assert visible in ("0", "1") and foo == "it's" and cwd == str(tmp_path)
    assert logs.stderr == "e\n"


def test_a_failing_slurm_job_reports_its_exit_code(slurm_scheduler: JobScheduler, tmp_path: Path) -> None:
    state = slurm_scheduler.submit("a", python_job(tmp_path, "raise SystemExit(3)"))
    final = wait_status(slurm_scheduler, state.job_id, timeout_s=60)
    assert (final.status, final.exit_code) == ("failed", 3)


def test_cancel_stops_a_slurm_job(slurm_scheduler: JobScheduler, tmp_path: Path) -> None:
    job_id = slurm_scheduler.submit("a", sleeper(tmp_path)).job_id
    eventually(lambda: slurm_scheduler.get(job_id).status == "running", timeout_s=60, what="the job to run")
    slurm_scheduler.cancel(job_id)
    assert wait_status(slurm_scheduler, job_id, timeout_s=60).status == "cancelled"


def test_the_scheduler_stops_a_slurm_job_at_its_time_limit(slurm_scheduler: JobScheduler, tmp_path: Path) -> None:
    final = wait_status(slurm_scheduler, slurm_scheduler.submit("a", sleeper(tmp_path, time_limit_s=2)).job_id, 60)
    assert final.status == "timed_out" and final.wall_s is not None and final.wall_s < 30


def test_a_restart_reattaches_to_a_running_slurm_job(tmp_path: Path) -> None:
    hold, marker = tmp_path / "hold", tmp_path / "marker"
    script = f'while [ ! -e "{hold}" ]; do sleep 0.1; done; echo "$AMID_JOB_ID" >> "{marker}"'
    first = make(tmp_path)
    job_id = first.submit("a", JobSpec.create(command=["/bin/sh", "-c", script], cwd=str(tmp_path))).job_id
    eventually(lambda: first.get(job_id).status == "running", timeout_s=60, what="the job to run")
    first.close()
    second = make(tmp_path)
    try:
        assert second.get(job_id).status == "running"
        hold.touch()
        assert wait_status(second, job_id, timeout_s=60).status == "succeeded"
        assert marker.read_text(encoding="utf-8").split() == [job_id]
    finally:
        second.close()


def test_a_job_slurm_has_forgotten_is_read_from_its_exit_record(tmp_path: Path) -> None:
    spec = JobSpec.create(command=["true"], cwd=str(tmp_path))
    handle = JobHandle("job-x", tmp_path, spec, backend_job_id="99999999")
    assert SlurmBackend().poll(handle).status == "lost"
    (tmp_path / EXIT_RECORD).write_text(
        json.dumps({"exit_code": 4, "ended_at": "2026-01-01T00:00:00+00:00"}), encoding="utf-8"
    )
    seen = SlurmBackend().poll(handle)
    assert (seen.status, seen.exit_code) == ("failed", 4)
