"""Job dispatch: latency (submit → the job's process running) and throughput of short jobs.

The same tiny job (`/bin/sh -c 'date +%s.%N > FILE'`, which stamps the moment it runs) goes
three ways:

    local       the AMID scheduler with the local backend (one detached wrapper per job)
    ray_amid    the AMID scheduler with the Ray backend, on a private local Ray cluster
    ray_direct  the reference: Ray's own JobSubmissionClient submitting the same entrypoints

For each: `idle` latency (one job at a time, median of 5) and a `burst` of N jobs submitted at
once (median/p95 latency, makespan, jobs/s). Concurrency is 8 everywhere (8 logical Ray CPUs,
max_concurrent=8). Results go to benchmarks/results/job_dispatch.json; ratios are printed.

    python benchmarks/job_dispatch.py [--jobs 200] [--quick] [--skip-ray]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.jobs.backend import Backend
from amid.server.jobs.gpu import StaticInventory
from amid.server.jobs.local import LocalBackend
from amid.server.jobs.scheduler import JobScheduler
from amid.server.jobs.spec import JobSpec
from benchmarks._common import write_result

CONCURRENCY = 8
IDLE_RUNS = 5
Submit = Callable[[list[str], Path], Callable[[], bool]]  # (argv, cwd) -> "has it ended?"


def stamp_argv(stamp: Path) -> list[str]:
    return ["/bin/sh", "-c", 'date +%s.%N > "$0"', str(stamp)]


def stamped_at(stamp: Path, timeout_s: float = 600.0) -> float:
    deadline = time.monotonic() + timeout_s
    while not (stamp.exists() and stamp.read_text(encoding="utf-8").strip()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{stamp} never appeared")
        time.sleep(0.005)
    return float(stamp.read_text(encoding="utf-8"))


def wait_all(done: list[Callable[[], bool]], timeout_s: float = 1800.0) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(done)
    while pending:
        pending = [d for d in pending if not d()]
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} jobs did not finish")
        time.sleep(0.05)


def measure(submit: Submit, workdir: Path, n_jobs: int) -> dict[str, Any]:
    idle = []
    for i in range(IDLE_RUNS):
        stamp = workdir / f"idle-{i}"
        submitted = time.time()
        done = submit(stamp_argv(stamp), workdir)
        idle.append(stamped_at(stamp) - submitted)
        wait_all([done])
    stamps, submit_times, done_checks = [workdir / f"burst-{i}" for i in range(n_jobs)], [], []
    first = time.time()
    for stamp in stamps:
        submit_times.append(time.time())
        done_checks.append(submit(stamp_argv(stamp), workdir))
    submit_wall = time.time() - first
    wait_all(done_checks)
    makespan = time.time() - first
    latencies = sorted(stamped_at(s) - t for s, t in zip(stamps, submit_times, strict=True))
    return {
        "idle_latency_s_median": round(statistics.median(idle), 4),
        "burst_jobs": n_jobs,
        "burst_submit_s_per_job": round(submit_wall / n_jobs, 5),
        "burst_latency_s_median": round(statistics.median(latencies), 4),
        "burst_latency_s_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 4),
        "burst_makespan_s": round(makespan, 3),
        "burst_jobs_per_s": round(n_jobs / makespan, 3),
    }


def via_scheduler(backend: Backend, jobs_dir: Path, inventory: StaticInventory | None) -> tuple[Submit, JobScheduler]:
    scheduler = JobScheduler(jobs_dir, backend, inventory, max_concurrent=CONCURRENCY, poll_interval_s=0.05)

    def submit(argv: list[str], cwd: Path) -> Callable[[], bool]:
        job_id = scheduler.submit("bench", JobSpec(command=argv, cwd=str(cwd))).job_id
        return lambda: scheduler.get(job_id).is_terminal

    return submit, scheduler


def run_local(workdir: Path, n_jobs: int) -> dict[str, Any]:
    backend = LocalBackend(python=sys.executable, base_env=os.environ)
    submit, scheduler = via_scheduler(backend, workdir / "jobs", StaticInventory([]))
    try:
        return measure(submit, workdir, n_jobs)
    finally:
        scheduler.close()


def run_ray(workdir: Path, n_jobs: int) -> dict[str, Any]:
    from amid.server.jobs.ray_backend import RayBackend
    from amid.server.jobs.ray_cluster import LocalRayCluster

    with LocalRayCluster(num_cpus=CONCURRENCY, num_gpus=2) as cluster:
        submit, scheduler = via_scheduler(RayBackend(cluster.address, auth_token=cluster.token), workdir / "jobs", None)
        try:
            amid = measure(submit, workdir / "amid", n_jobs)
        finally:
            scheduler.close()
        direct = measure(ray_direct_submit(cluster.address, cluster.token), workdir / "direct", n_jobs)
    return {"ray_amid": amid, "ray_direct": direct}


def ray_direct_submit(address: str, token: str) -> Submit:
    import shlex

    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(address, headers={"Authorization": f"Bearer {token}"})

    def submit(argv: list[str], cwd: Path) -> Callable[[], bool]:
        entrypoint = f"cd {shlex.quote(str(cwd))} && exec {shlex.join(argv)}"
        submission_id = client.submit_job(entrypoint=entrypoint, entrypoint_num_cpus=1)
        return lambda: client.get_job_status(submission_id).is_terminal()

    return submit


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs in the burst")
    parser.add_argument("--quick", action="store_true", help="a 20-job burst")
    parser.add_argument("--skip-ray", action="store_true", help="measure the local backend only")
    args = parser.parse_args()
    n_jobs = 20 if args.quick else args.jobs
    results: dict[str, Any] = {"concurrency": CONCURRENCY}
    with tempfile.TemporaryDirectory(prefix="amid-dispatch-") as tmp:
        (Path(tmp) / "amid").mkdir()
        (Path(tmp) / "direct").mkdir()
        results["local"] = run_local(Path(tmp), n_jobs)
        if not args.skip_ray:
            results.update(run_ray(Path(tmp), n_jobs))
    results["ratios"] = ratios(results)
    path = write_result("job_dispatch", results)
    print_summary(results, path)
    return 0


def ratios(results: dict[str, Any]) -> dict[str, float]:
    if "ray_direct" not in results:
        return {}
    direct, out = results["ray_direct"], {}
    for way in ("local", "ray_amid"):
        out[f"{way}_vs_ray_direct_idle_latency"] = ratio(
            results[way]["idle_latency_s_median"], direct["idle_latency_s_median"]
        )
        out[f"{way}_vs_ray_direct_burst_latency"] = ratio(
            results[way]["burst_latency_s_median"], direct["burst_latency_s_median"]
        )
        out[f"{way}_vs_ray_direct_throughput"] = ratio(results[way]["burst_jobs_per_s"], direct["burst_jobs_per_s"])
    return out


def print_summary(results: dict[str, Any], path: Path) -> None:
    for way in ("local", "ray_amid", "ray_direct"):
        if way in results:
            r = results[way]
            print(
                f"{way:>10}: idle latency {r['idle_latency_s_median']:.3f} s | burst of {r['burst_jobs']}: "
                f"latency median {r['burst_latency_s_median']:.3f} s, p95 {r['burst_latency_s_p95']:.3f} s, "
                f"{r['burst_jobs_per_s']:.2f} jobs/s"
            )
    for name, value in results["ratios"].items():
        print(f"  {name}: {value}")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
