"""Run case jobs in a process pool sized to the CPUs and the memory, surviving workers that die.

Readers are C libraries; a malformed file can kill a worker outright (a segfault is no exception).
The pool then breaks, so unfinished cases are retried one per task, and a case that still kills its
worker is profiled alone and reported as a crash, never taking the whole profile down.

Results come back through files, with only their path on the pool's result pipe: a result is
hundreds of KB (voxel samples), and a worker killed while writing one into the pipe left a partial
message there, on which the executor's reader blocked forever (CPython's ProcessPoolExecutor, seen
in 3.11) instead of noticing the dead worker. A path is written in one atomic write.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from amid.tools.profiling.casework import CaseJob, CaseResult, analyze_case

Progress = Callable[[int, int, str], None]

# Several batches per worker keep all workers busy to the end when cases differ in size, while
# batching keeps the per-task overhead small for datasets of many small 2-D images.
BATCHES_PER_WORKER = 16
MAX_BATCH = 64
# Share of the available memory the workers may fill together; the rest is for the caller.
MEMORY_SHARE = 0.5


def available_memory_bytes() -> int:
    """Memory available to new processes (MemAvailable), or physical memory when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def workers_within_memory(requested: int, bytes_per_case: int, n_cases: int) -> int:
    """Workers that fit: no more than requested, cases, or the memory share allows (at least one)."""
    fit = int(available_memory_bytes() * MEMORY_SHARE // max(bytes_per_case, 1))
    return max(1, min(requested, n_cases, fit))


# glibc's malloc options (mallopt): blocks above the first are mapped apart and unmapped on free,
# free memory above the second is handed back to the kernel.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
KEEP_BLOCKS_BELOW = 32 << 20  # glibc's largest mmap threshold on 64-bit machines
KEEP_FREE_BELOW = 256 << 20


def _quiet_worker() -> None:
    """One thread per worker: the pool already uses every CPU, ITK's own threads would oversubscribe.
    ITK reads this when SimpleITK is first imported; importing it here would cost each worker's
    start a third of a second, for NIfTI files that never need it (`nifti_memory`)."""
    os.environ["ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS"] = "1"
    _keep_freed_memory()


def _keep_freed_memory() -> None:
    """Let a worker reuse the memory its last case freed instead of returning it to the kernel.

    Every case allocates the same few arrays of several MB (file bytes, volume, label map, masks);
    by default glibc unmaps them on free, so the next case gets fresh pages, each faulted in and
    zeroed: a sixth of a worker's time on CT volumes. A worker holds its peak anyway (the memory
    sizing counts it). Elsewhere than glibc this does nothing.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return
    mallopt(M_MMAP_THRESHOLD, KEEP_BLOCKS_BELOW)
    mallopt(M_TRIM_THRESHOLD, KEEP_FREE_BELOW)


class PoolUnavailable(RuntimeError):
    """Worker processes cannot start here (e.g. a __main__ that spawned children cannot re-import)."""


def _ready() -> bool:
    return True


def _analyze_batch(batch: list[CaseJob], folder: str) -> str:
    """Analyze a batch in a worker; the results go to a file in `folder`, its path back to the caller."""
    results = [analyze_case(job) for job in batch]
    handle, path = tempfile.mkstemp(suffix=".pickle", dir=folder)
    with os.fdopen(handle, "wb") as out:
        pickle.dump(results, out, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _load_results(path: str) -> list[CaseResult]:
    with open(path, "rb") as handle:
        results: list[CaseResult] = pickle.load(handle)  # written by our own worker, in this run's folder
    os.unlink(path)
    return results


def _crashed(job: CaseJob) -> CaseResult:
    result = CaseResult(index=job.index, case_id=job.case.case_id, split=job.case.split)
    paths = [*job.case.image_paths, job.case.label_path]
    result.add_issue("reader_crashed", "error", job.case.image_paths[0], f"a reader died on this case's files: {paths}")
    return result


class _Runner:
    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self.progress = progress
        self.results: list[CaseResult] = []

    def collect(self, results: list[CaseResult]) -> None:
        self.results.extend(results)
        if self.progress is not None:
            self.progress(len(self.results), self.total, f"profiled {results[-1].case_id}")

    def run_pool(self, batches: list[list[CaseJob]], n_workers: int) -> list[list[CaseJob]]:
        """Run batches; return those lost to a broken pool."""
        broken: list[list[CaseJob]] = []
        context = multiprocessing.get_context("spawn")  # fork is unsafe in a threaded server
        pool = ProcessPoolExecutor(n_workers, mp_context=context, initializer=_quiet_worker)
        folder = tempfile.mkdtemp(prefix="amid-profile-results-")
        try:
            # one probe per worker: a spawning pool starts a process per pending task, so all start at
            # once (one probe would start the others only after the first was up, a start-up later)
            probes = [pool.submit(_ready) for _ in range(n_workers)]
            try:
                next(as_completed(probes)).result()
            except BrokenProcessPool as error:
                raise PoolUnavailable(str(error)) from error
            futures: dict[Future[str], list[CaseJob]] = {
                pool.submit(_analyze_batch, batch, folder): batch for batch in batches
            }
            for future in as_completed(futures):
                try:
                    self.collect(_load_results(future.result()))
                except BrokenProcessPool:
                    broken.append(futures[future])
        finally:
            # every result is in (or the pool is lost): the workers exit on their own, beside the
            # caller's next steps, instead of the caller waiting for each interpreter to tear down
            pool.shutdown(wait=False, cancel_futures=True)
            shutil.rmtree(folder, ignore_errors=True)
        return broken


def run_cases(jobs: list[CaseJob], n_workers: int, progress: Progress | None = None) -> list[CaseResult]:
    """Analyze every job (in order of completion), in-process for one worker, else in a spawned pool."""
    runner = _Runner(len(jobs), progress)
    if n_workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            runner.collect([analyze_case(job)])
        return runner.results
    size = min(MAX_BATCH, max(1, len(jobs) // (n_workers * BATCHES_PER_WORKER)))
    batches = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    try:
        broken = runner.run_pool(batches, n_workers)
    except PoolUnavailable:
        return run_cases(jobs, 1, progress)
    if broken:
        singles = [[job] for batch in broken for job in batch]
        for lost in runner.run_pool(singles, n_workers):
            isolated = runner.run_pool([lost], 1)
            if isolated:
                runner.collect([_crashed(lost[0])])
    return runner.results
