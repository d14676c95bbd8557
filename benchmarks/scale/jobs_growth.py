"""Jobs at 10x: 100 vs 1,000 queued short jobs through the AMID scheduler, local and Ray backends.

Each size runs on a fresh scheduler (concurrency 8, as in benchmarks/job_dispatch.py, whose job,
stamping and scheduler pieces this reuses): one job alone (`idle`), then N jobs submitted at once
(`burst`), then one job alone again (`idle_after`, with the burst's N finished jobs in the
scheduler's memory: history must not slow a dispatch down). Reported per size:

    submit_ms            p50/p99 of `submit` itself (the agent waits for this)
    queue_latency_s      p50/p99 submit -> the job's process running (grows with N: it waits its turn)
    jobs_per_s           N / makespan (must not fall as N grows: no per-job cost that grows with the queue)
    tick_ms              the dispatcher's own work per tick (poll + plan), mean and max, and per
                         job held in memory: a scan of every job per tick shows up here
    memory               the process's RSS before/after, the peak, and the deep size of the
                         scheduler's in-memory structures (states, idempotency keys, launching set)

The reference in the same run is the other backend and the other size: the growth ratios
(1,000 / 100) are printed. Ray drains ~0.3 jobs/s on 2 cores (Ray's own per-job JobSupervisor
actor: benchmarks/job_dispatch.py measured the same for Ray's JobSubmissionClient), so 1,000 Ray
jobs cannot finish in a sized run: the Ray burst gets a drain window (--ray-window-s); jobs still
queued when it closes are cancelled and counted, latencies are over the jobs that ran.

    python benchmarks/scale/jobs_growth.py [--sizes 100 1000] [--ray-sizes 100 1000] [--skip-ray]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from amid.server.jobs.backend import Backend
from amid.server.jobs.gpu import StaticInventory
from amid.server.jobs.local import LocalBackend
from amid.server.jobs.scheduler import JobScheduler
from amid.server.jobs.spec import JobSpec
from benchmarks._common import write_result
from benchmarks.job_dispatch import CONCURRENCY, stamp_argv, stamped_at, via_scheduler, wait_all


def rss_mb() -> dict[str, float]:
    """This process's resident set now and its peak (VmRSS, VmHWM), in MiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss": fields.get("VmRSS", 0.0), "peak": fields.get("VmHWM", 0.0)}


def deep_size(obj: object, seen: set[int] | None = None) -> int:
    """Bytes held by `obj` and everything it references (dicts, sequences, pydantic models)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    children: Iterable[object] = ()
    if isinstance(obj, dict):
        children = [*obj.keys(), *obj.values()]
    elif isinstance(obj, list | tuple | set | frozenset):
        children = obj
    elif hasattr(obj, "__dict__"):
        children = [vars(obj)]
        extra = getattr(obj, "__pydantic_fields_set__", None)
        if extra is not None:
            children = [vars(obj), extra]
    return size + sum(deep_size(child, seen) for child in children)


def structures(scheduler: JobScheduler) -> dict[str, Any]:
    """The scheduler's in-memory structures: their entry counts and deep size."""
    s: Any = scheduler
    with s._lock:
        held = {"states": s._states, "ended": s._ended, "by_key": s._by_key, "launching": s._launching}
        counts = {name: len(value) for name, value in held.items()}
        total = deep_size(held)
    return {**counts, "deep_kib": round(total / 1024, 1), "per_job_bytes": round(total / max(1, counts["states"]))}


class TickMeter:
    """Times the dispatcher's two steps on this scheduler instance (the loop looks them up on `self`)."""

    def __init__(self, scheduler: JobScheduler) -> None:
        self.ticks: list[tuple[float, float, int]] = []  # (seconds of poll, of plan, jobs held in memory)
        s: Any = scheduler
        poll, plan = s._poll_active, s._dispatch_queued

        def dispatch() -> None:
            started = time.perf_counter()
            plan()
            self.ticks.append((self._poll_s, time.perf_counter() - started, len(s._states)))

        def poll_active() -> None:
            started = time.perf_counter()
            poll()
            self._poll_s = time.perf_counter() - started

        self._poll_s = 0.0
        s._poll_active, s._dispatch_queued = poll_active, dispatch

    def summary(self, since: int = 0, until: int | None = None) -> dict[str, float]:
        ticks = self.ticks[since:until]
        if not ticks:
            return {"ticks": 0}
        seconds = [p + q for p, q, _ in ticks]
        return {
            "ticks": len(ticks),
            "mean_ms": round(1000 * statistics.fmean(seconds), 3),
            "max_ms": round(1000 * max(seconds), 3),
            "poll_mean_ms": round(1000 * statistics.fmean(p for p, _, _ in ticks), 3),
            "plan_mean_ms": round(1000 * statistics.fmean(q for _, q, _ in ticks), 3),
            "jobs_held_max": max(n for _, _, n in ticks),
        }


def quantiles(values: list[float], scale: float = 1.0, digits: int = 4) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]  # noqa: E731
    return {"p50": round(scale * pick(0.5), digits), "p99": round(scale * pick(0.99), digits), "n": len(ordered)}


def idle_latency(submit: Callable[..., Callable[[], bool]], workdir: Path, tag: str) -> float:
    stamp = workdir / f"idle-{tag}"
    submitted = time.time()
    done = submit(stamp_argv(stamp), workdir)
    latency = stamped_at(stamp) - submitted
    wait_all([done])
    return round(latency, 4)


def burst(
    backend: Backend, workdir: Path, n_jobs: int, window_s: float | None, inventory: StaticInventory | None
) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    before = rss_mb()
    submit, scheduler = via_scheduler(backend, workdir / "jobs", inventory)
    meter = TickMeter(scheduler)
    try:
        idle = idle_latency(submit, workdir, "before")
        empty = structures(scheduler)
        stamps = [workdir / f"burst-{i}" for i in range(n_jobs)]
        submit_s, submitted_at, ids = [], [], []
        first_tick, first = len(meter.ticks), time.time()
        for stamp in stamps:
            submitted_at.append(time.time())
            started = time.perf_counter()
            ids.append(submit(stamp_argv(stamp), workdir))
            submit_s.append(time.perf_counter() - started)
        full = structures(scheduler)  # every burst job held, most of them queued
        queued_rss = rss_mb()
        cancelled = drain(scheduler, ids, window_s)
        makespan = time.time() - first
        ran = [(s, t) for s, t in zip(stamps, submitted_at, strict=True) if s.exists() and s.read_text().strip()]
        latencies = [stamped_at(s) - t for s, t in ran]
        burst_ticks, after_tick = meter.summary(first_tick), len(meter.ticks)
        idle_after = idle_latency(submit, workdir, "after")
        idle_ticks = meter.summary(after_tick)
        after_structures = structures(scheduler)
    finally:
        scheduler.close()
    after = rss_mb()
    return {
        "jobs": n_jobs,
        "ran": len(ran),
        "cancelled_at_window": cancelled,
        "drain_window_s": window_s,
        "submit_ms": quantiles(submit_s, 1000, 3),
        "queue_latency_s": quantiles(latencies),
        "makespan_s": round(makespan, 2),
        "jobs_per_s": round(len(ran) / makespan, 3),
        "idle_latency_s": {"empty_scheduler": idle, "after_burst": idle_after},
        "tick": burst_ticks,
        "tick_idle_after_burst": idle_ticks,  # one job running, the burst's N held: the cost of history
        "memory": {
            "rss_mb_before": before["rss"],
            "rss_mb_all_queued": queued_rss["rss"],
            "rss_mb_after": after["rss"],
            "rss_growth_mb": round(after["rss"] - before["rss"], 1),
            "peak_rss_mb": after["peak"],
            "structures_empty": empty,
            "structures_all_queued": full,
            "structures_after": after_structures,
        },
    }


def drain(scheduler: JobScheduler, dones: list[Callable[[], bool]], window_s: float | None) -> int:
    """Wait for every job; past `window_s`, cancel the ones not yet started and wait for the rest."""
    deadline = None if window_s is None else time.monotonic() + window_s
    pending = list(range(len(dones)))
    while pending:
        # From the oldest job, stopping at the first still running (they end about in order): asking
        # the scheduler about all 1,000 every 50 ms would be the harness's own O(N) load on it.
        while pending and dones[pending[0]]():
            pending.pop(0)
        if pending and deadline is not None and time.monotonic() > deadline:
            break
        time.sleep(0.05)
    cancelled = 0
    if pending:
        for state in scheduler.list():
            if state.status == "queued" and state.backend_job_id is None:
                try:
                    scheduler.cancel(state.job_id)
                    cancelled += 1
                except Exception:  # it started in the meantime: wait for it below
                    pass
        wait_all([dones[i] for i in pending])
    return cancelled


def tick_cost(root: Path, n_jobs: int, scheduler_class: type[JobScheduler] = JobScheduler) -> dict[str, Any]:
    """The dispatcher's own work per tick with `n_jobs` queued, then with them all ended (held as
    history), timed directly: a scheduler with no free slot (max_concurrent=0) never launches, so
    the figures are the queue scan and plan alone, not the cost of spawning a job."""
    backend = LocalBackend(python=sys.executable, base_env=os.environ)
    scheduler = scheduler_class(root / f"ticks-{n_jobs}", backend, StaticInventory([]), max_concurrent=0)
    s: Any = scheduler
    spec = JobSpec(command=["true"], cwd=str(root))
    try:
        started = time.perf_counter()
        for _ in range(n_jobs):
            scheduler.submit("bench", spec)
        submit_s = time.perf_counter() - started
        s._dispatch_queued()  # every job told why it waits (one write each, once)

        def timed(step: Callable[[], None], rounds: int = 20) -> float:
            began = time.perf_counter()
            for _ in range(rounds):
                step()
            return round(1000 * (time.perf_counter() - began) / rounds, 3)

        queued = {"plan_ms": timed(s._dispatch_queued), "poll_ms": timed(s._poll_active)}
        for state in scheduler.list():
            scheduler.cancel(state.job_id)
        held = {"plan_ms": timed(s._dispatch_queued), "poll_ms": timed(s._poll_active)}
    finally:
        scheduler.close()
    return {"jobs": n_jobs, "submit_ms_per_job": round(1000 * submit_s / n_jobs, 3), "queued": queued, "held": held}


def run_local(root: Path, sizes: list[int]) -> dict[str, Any]:
    backend = LocalBackend(python=sys.executable, base_env=os.environ)
    return {str(n): burst(backend, root / f"local-{n}", n, None, StaticInventory([])) for n in sizes}


def run_ray(root: Path, sizes: list[int], window_s: float) -> dict[str, Any]:
    from amid.server.jobs.ray_backend import RayBackend
    from amid.server.jobs.ray_cluster import LocalRayCluster

    out: dict[str, Any] = {}
    with LocalRayCluster(num_cpus=CONCURRENCY, num_gpus=2) as cluster:
        backend = RayBackend(cluster.address, auth_token=cluster.token)
        for n in sizes:
            out[str(n)] = burst(backend, root / f"ray-{n}", n, window_s, None)
    return out


def growth(per_size: dict[str, Any]) -> dict[str, Any]:
    """Largest size over smallest: per-job figures that should stay flat."""
    sizes = sorted(per_size, key=int)
    if len(sizes) < 2:
        return {}
    small, large = per_size[sizes[0]], per_size[sizes[-1]]

    def r(a: float, b: float) -> float:
        return round(a / b, 3) if b else float("nan")

    return {
        "sizes": f"{sizes[-1]}/{sizes[0]}",
        "jobs_per_s": r(large["jobs_per_s"], small["jobs_per_s"]),
        "submit_ms_p50": r(large["submit_ms"]["p50"], small["submit_ms"]["p50"]),
        "tick_mean_ms": r(large["tick"].get("mean_ms", 0), small["tick"].get("mean_ms", 0)),
        "tick_idle_after_burst_ms": r(
            large["tick_idle_after_burst"].get("mean_ms", 0), small["tick_idle_after_burst"].get("mean_ms", 0)
        ),
        "idle_after_burst_latency": r(large["idle_latency_s"]["after_burst"], small["idle_latency_s"]["after_burst"]),
        "structures_per_job_bytes": r(
            large["memory"]["structures_after"]["per_job_bytes"], small["memory"]["structures_after"]["per_job_bytes"]
        ),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="local burst sizes")
    parser.add_argument("--ray-sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--ray-window-s", type=float, default=150.0, help="drain window of a Ray burst")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--name", default="jobs_growth", help="result file name (benchmarks/results/NAME.json)")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"concurrency": CONCURRENCY, "job": "/bin/sh -c 'date +%s.%N > FILE'"}
    with tempfile.TemporaryDirectory(prefix="amid-jobs-growth-") as tmp:
        results["tick_cost"] = {str(n): tick_cost(Path(tmp), n) for n in args.sizes}
        results["local"] = run_local(Path(tmp), args.sizes)
        if not args.skip_ray:
            results["ray"] = run_ray(Path(tmp), args.ray_sizes, args.ray_window_s)
    results["growth"] = {way: growth(results[way]) for way in ("local", "ray") if way in results}
    results["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    path = write_result(args.name, results)
    print_summary(results, path)
    return results


def print_summary(results: dict[str, Any], path: Path) -> None:
    for way in ("local", "ray"):
        for n, r in results.get(way, {}).items():
            print(
                f"{way:>5} {n:>5}: ran {r['ran']}, submit p50 {r['submit_ms'].get('p50')} ms, queue latency "
                f"p50 {r['queue_latency_s'].get('p50')} s p99 {r['queue_latency_s'].get('p99')} s, "
                f"{r['jobs_per_s']} jobs/s, tick {r['tick'].get('mean_ms')} ms mean "
                f"(idle after {r['tick_idle_after_burst'].get('mean_ms')} ms), idle {r['idle_latency_s']}, "
                f"rss {r['memory']['rss_mb_before']} -> {r['memory']['rss_mb_after']} MiB, "
                f"structures {r['memory']['structures_after']['deep_kib']} KiB"
            )
    for n, t in results["tick_cost"].items():
        print(f"tick cost {n:>5}: submit {t['submit_ms_per_job']} ms/job, queued {t['queued']}, held {t['held']}")
    for way, g in results["growth"].items():
        print(f"growth {way}: {g}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
