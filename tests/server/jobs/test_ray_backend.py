"""The Ray backend against a real local Ray cluster with two logical GPUs (token auth on)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.errors import JobFailed
from amid.server.jobs.ray_cluster import LocalRayCluster
from amid.server.jobs.scheduler import JobScheduler
from amid.server.jobs.spec import JobSpec
from tests.server.jobs.helpers import eventually, python_job, wait_status

pytest.importorskip("ray.job_submission", reason="ray[default] is not installed")
pytestmark = [pytest.mark.external, pytest.mark.slow]
RAY_CLI = Path(sys.executable).parent / "ray"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """One real cluster for the module: 2 CPUs, 2 logical GPUs, token auth, its own ports."""
    if not RAY_CLI.exists():
        pytest.skip(f"the ray CLI is not installed next to {sys.executable}")
    cluster = LocalRayCluster(num_cpus=2, num_gpus=2, ray_cli=RAY_CLI).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def ray_scheduler(ray_cluster: LocalRayCluster, tmp_path: Path) -> Iterator[JobScheduler]:
    scheduler = make(ray_cluster, tmp_path)
    yield scheduler
    for state in scheduler.list():
        if not state.is_terminal:
            scheduler.cancel(state.job_id)
            scheduler.wait(state.job_id, 30)
    scheduler.close()


def make(cluster: LocalRayCluster, tmp_path: Path) -> JobScheduler:
    from amid.server.jobs.ray_backend import RayBackend

    backend = RayBackend(cluster.address, auth_token=cluster.token)
    return JobScheduler(tmp_path / "jobs", backend, None, max_concurrent=4, poll_interval_s=0.2)


def sleeper(cwd: Path, **fields: object) -> JobSpec:
    return JobSpec.create(command=["/bin/sh", "-c", "sleep 60"], cwd=str(cwd), **fields)


def test_a_gpu_job_gets_a_logical_ray_gpu_and_its_logs(ray_scheduler: JobScheduler, tmp_path: Path) -> None:
    code = "import os; print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES'], 'FOO=' + os.environ['FOO'], os.getcwd())"
    state = ray_scheduler.submit("a", python_job(tmp_path, code, gpus=1, env={"FOO": "bar"}))
    final = wait_status(ray_scheduler, state.job_id, timeout_s=120)
    assert (final.status, final.exit_code, final.backend_job_id) == ("succeeded", 0, state.job_id)
    stdout = ray_scheduler.log_tail(state.job_id).stdout
    assert f"FOO=bar {tmp_path}" in stdout
    assert "CVD=0" in stdout or "CVD=1" in stdout


def test_a_failing_ray_job_reports_its_exit_code(ray_scheduler: JobScheduler, tmp_path: Path) -> None:
    state = ray_scheduler.submit("a", python_job(tmp_path, "raise SystemExit(3)"))
    final = wait_status(ray_scheduler, state.job_id, timeout_s=120)
    assert (final.status, final.exit_code) == ("failed", 3)
    assert "exit code 3" in (final.reason or "")


def test_cancel_stops_a_ray_job(ray_scheduler: JobScheduler, tmp_path: Path) -> None:
    job_id = ray_scheduler.submit("a", sleeper(tmp_path)).job_id
    eventually(lambda: ray_scheduler.get(job_id).status == "running", timeout_s=120, what="the job to run")
    ray_scheduler.cancel(job_id)
    assert wait_status(ray_scheduler, job_id, timeout_s=60).status == "cancelled"


def test_the_scheduler_stops_a_ray_job_at_its_time_limit(ray_scheduler: JobScheduler, tmp_path: Path) -> None:
    job_id = ray_scheduler.submit("a", sleeper(tmp_path, time_limit_s=2)).job_id
    final = wait_status(ray_scheduler, job_id, timeout_s=120)
    assert final.status == "timed_out" and "time limit of 2 s" in (final.reason or "")
    assert final.wall_s is not None and final.wall_s < 30


def test_a_restart_reattaches_to_a_running_ray_job(ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    hold, marker = tmp_path / "hold", tmp_path / "marker"
    script = f'while [ ! -e "{hold}" ]; do sleep 0.1; done; echo "$AMID_JOB_ID" >> "{marker}"'
    first = make(ray_cluster, tmp_path)
    job_id = first.submit("a", JobSpec.create(command=["/bin/sh", "-c", script], cwd=str(tmp_path))).job_id
    eventually(lambda: first.get(job_id).status == "running", timeout_s=120, what="the job to run")
    first.close()
    second = make(ray_cluster, tmp_path)
    try:
        assert second.get(job_id).status == "running"
        hold.touch()
        assert wait_status(second, job_id, timeout_s=60).status == "succeeded"
        assert marker.read_text(encoding="utf-8").split() == [job_id]
    finally:
        second.close()


def test_a_wrong_token_is_refused_with_a_clear_error(ray_cluster: LocalRayCluster) -> None:
    from amid.server.jobs.ray_backend import RayBackend

    with pytest.raises(JobFailed, match="cannot reach the Ray cluster"):
        RayBackend(ray_cluster.address, auth_token="wrong")
