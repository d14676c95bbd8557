"""The process pool survives a worker that dies mid-run: lost cases are retried, none is dropped."""

from __future__ import annotations

import multiprocessing
import os
import signal

from amid.tools.profiling import ProfileCase, profile_dataset
from tests.tools.profiling.conftest import ct_request


def test_a_killed_worker_loses_no_case(ct_cases: list[ProfileCase]) -> None:
    killed: list[int] = []

    def kill_a_worker_once(done: int, total: int, message: str) -> None:
        workers = multiprocessing.active_children()
        if done == 1 and workers and not killed:
            killed.append(workers[0].pid or 0)
            os.kill(killed[0], signal.SIGKILL)  # what a segfaulting reader does to its process

    profile = profile_dataset(ct_request(ct_cases, n_workers=2), progress=kill_a_worker_once)
    assert killed
    assert sorted(r.case_id for r in profile.cases) == [c.case_id for c in ct_cases]
    assert profile.issues_with("reader_crashed") == []
    assert all(r.file_type == "nifti" and r.foreground_ratio for r in profile.cases)


WORKER_SCRIPT = """
import pickle, sys
from amid.tools.profiling.casework import analyze_case
result = analyze_case(pickle.loads(sys.stdin.buffer.read()))
heavy = sorted(m for m in ("nibabel", "scipy", "pydantic", "SimpleITK", "torch", "numpy.ma") if m in sys.modules)
print(len(result.issues), result.label is not None, result.header is not None, heavy)
"""


def test_a_worker_profiles_a_nifti_case_without_nibabel_scipy_or_pydantic(ct_cases: list[ProfileCase]) -> None:
    """What a spawned worker imports is its start-up time: plain NIfTI needs none of these."""
    import pickle
    import subprocess
    import sys

    from amid.tools.profiling.profile import _jobs

    job = _jobs(ct_request(ct_cases))[0]
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SCRIPT], input=pickle.dumps(job), capture_output=True, check=True, timeout=60
    )
    assert done.stdout.decode().split() == ["0", "True", "True", "[]"], done.stderr.decode()


def test_workers_exit_after_the_profile_returns(ct_cases: list[ProfileCase]) -> None:
    """The caller does not wait for the workers' teardown, but none is left behind."""
    import time

    profile = profile_dataset(ct_request(ct_cases, n_workers=2))
    assert profile.n_workers == 2 and len(profile.cases) == len(ct_cases)
    deadline = time.monotonic() + 60
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []
