"""The scheduler under concurrency and across restarts: nothing lost, nothing run twice."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from amid.server.errors import Conflict, NotFound
from amid.server.jobs.spec import JobSpec, JobState
from tests.server.jobs.helpers import SchedulerFactory, eventually, process_running, text_when_written, wait_status


def marker_job(cwd: Path, marker: Path, hold: Path | None = None) -> JobSpec:
    """Append the job id to `marker` (one line per run), after `hold` appears if given."""
    wait = f'while [ ! -e "{hold}" ]; do sleep 0.05; done; ' if hold else ""
    script = f'{wait}echo "$AMID_JOB_ID" >> "{marker}"'
    return JobSpec.create(command=["/bin/sh", "-c", script], cwd=str(cwd))


def runs(marker: Path) -> Counter[str]:
    return Counter(marker.read_text(encoding="utf-8").split()) if marker.exists() else Counter()


def dedupe(statuses: list[str]) -> list[str]:
    return [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]


def test_five_agents_submitting_fifty_jobs_run_each_exactly_once(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    scheduler = make_scheduler(max_concurrent=6, on_change=lambda s: seen[s.job_id].append(s.status))
    marker, submitted, slowest = tmp_path / "marker", [], [0.0]
    lock = threading.Lock()

    def agent(name: str) -> None:
        for _ in range(10):
            started = time.monotonic()
            state = scheduler.submit(name, marker_job(tmp_path, marker))
            with lock:
                submitted.append(state.job_id)
                slowest[0] = max(slowest[0], time.monotonic() - started)

    threads = [threading.Thread(target=agent, args=(f"agent-{i}",)) for i in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finals = [wait_status(scheduler, job_id, timeout_s=60) for job_id in submitted]
    assert len(set(submitted)) == 50 and slowest[0] < 1.0
    assert all(state.status == "succeeded" for state in finals)
    assert runs(marker) == Counter({job_id: 1 for job_id in submitted})
    eventually(lambda: all(seen[j][-1:] == ["succeeded"] for j in submitted), what="all notifications")
    # A queued job may be re-published when its wait reason changes; the statuses stay in order.
    assert all(dedupe(seen[j]) == ["queued", "running", "succeeded"] for j in submitted), dict(seen)
    assert {s.agent_id for s in scheduler.list()} == {f"agent-{i}" for i in range(5)}
    assert len(scheduler.list("agent-3")) == 10


def test_a_restart_while_jobs_run_loses_none_and_runs_none_twice(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    marker, hold = tmp_path / "marker", tmp_path / "hold"
    first = make_scheduler(max_concurrent=3)
    job_ids = [first.submit("a", marker_job(tmp_path, marker, hold)).job_id for _ in range(5)]
    eventually(lambda: sum(s.status == "running" for s in first.list()) == 3, what="three running jobs")
    first.close()  # the server stops: three jobs run on, two are still queued
    hold.touch()
    eventually(lambda: len(runs(marker)) == 3, what="the running jobs to finish while no server runs")

    replayed: list[JobState] = []
    second = make_scheduler(max_concurrent=3, on_change=replayed.append)
    finals = [wait_status(second, job_id) for job_id in job_ids]
    assert [s.status for s in finals] == ["succeeded"] * 5
    assert runs(marker) == Counter({job_id: 1 for job_id in job_ids})
    assert {s.job_id for s in replayed} == set(job_ids)  # every job is replayed to the ledger


def test_a_restart_reattaches_to_a_job_that_is_still_running(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    marker, hold = tmp_path / "marker", tmp_path / "hold"
    first = make_scheduler()
    job_id = first.submit("a", marker_job(tmp_path, marker, hold)).job_id
    eventually(lambda: first.get(job_id).status == "running", what="the job to run")
    first.close()
    second = make_scheduler()
    assert second.get(job_id).status == "running"
    hold.touch()
    assert wait_status(second, job_id).status == "succeeded"
    assert runs(marker) == Counter({job_id: 1})


def test_a_job_whose_wrapper_died_while_the_server_was_down_is_lost(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    first = make_scheduler()
    script = "echo $$ > child.pid; sleep 60"
    job_id = first.submit("a", JobSpec.create(command=["/bin/sh", "-c", script], cwd=str(tmp_path))).job_id
    child = int(text_when_written(tmp_path / "child.pid"))
    first.close()
    # The wrapper names the job's process group in child.json right after starting it.
    eventually(lambda: (tmp_path / "jobs" / job_id / "child.json").exists(), what="child.json")
    wrapper = json.loads((tmp_path / "jobs" / job_id / "wrapper.json").read_text(encoding="utf-8"))["pid"]
    os.kill(wrapper, signal.SIGKILL)
    eventually(lambda: not process_running(wrapper), what="the wrapper to die")

    second = make_scheduler()
    state = second.get(job_id)
    assert state.status == "lost" and "without recording an outcome" in (state.reason or "")
    assert not process_running(child)  # the orphan is stopped, not left holding a GPU


def test_a_cancel_while_the_server_was_down_is_not_undone(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    first = make_scheduler(max_concurrent=1)
    blocker = first.submit("a", marker_job(tmp_path, tmp_path / "m", tmp_path / "hold")).job_id
    queued = first.submit("a", marker_job(tmp_path, tmp_path / "never")).job_id
    first.cancel(queued)
    first.close()
    second = make_scheduler(max_concurrent=1)
    assert second.get(queued).status == "cancelled"
    (tmp_path / "hold").touch()
    assert wait_status(second, blocker).status == "succeeded"
    assert not (tmp_path / "never").exists()


def test_a_keyed_submission_is_one_job_across_a_restart_and_other_arguments_conflict(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    """The server dies after recording a keyed job and before the ledger recorded the key (the
    window the crash suite hit): the client's retry with the same key gets that job, not a second."""
    marker = tmp_path / "marker"
    first = make_scheduler()
    job, created = first.submit_keyed("a", marker_job(tmp_path, marker), "run-1", "digest-1")
    assert created and job.idempotency_key == "run-1"
    again, created = first.submit_keyed("a", marker_job(tmp_path, marker), "run-1", "digest-1")
    assert (again.job_id, created) == (job.job_id, False)
    first.close()

    second = make_scheduler()
    retried, created = second.submit_keyed("a", marker_job(tmp_path, marker), "run-1", "digest-1")
    assert (retried.job_id, created) == (job.job_id, False)
    other, created = second.submit_keyed("b", marker_job(tmp_path, marker), "run-1", "digest-1")
    assert created and other.job_id != job.job_id  # keys belong to one agent
    with pytest.raises(Conflict, match=f"idempotency_key: 'run-1' was used for job {job.job_id}"):
        second.submit_keyed("a", marker_job(tmp_path, marker), "run-1", "digest-2")
    assert wait_status(second, job.job_id).status == "succeeded"
    assert wait_status(second, other.job_id).status == "succeeded"
    assert runs(marker) == Counter({job.job_id: 1, other.job_id: 1})
    assert len(second.list("a")) == 1


def test_a_submission_killed_between_its_two_files_is_a_job_or_nothing(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    """state.json is written before spec.json: a folder holding only the state (with its key) is a
    queued job whose spec is restored from it; an empty folder (a kill right after the mkdir) is none."""
    marker = tmp_path / "marker"
    first = make_scheduler(max_concurrent=1)
    blocker = first.submit("a", marker_job(tmp_path, tmp_path / "m", tmp_path / "hold")).job_id
    job, _ = first.submit_keyed("a", marker_job(tmp_path, marker), "run-1", "digest-1")
    first.close()
    (tmp_path / "jobs" / job.job_id / "spec.json").unlink()
    (tmp_path / "jobs" / "job-20260101T000000000000Z-00000000").mkdir()

    second = make_scheduler()
    assert {s.job_id for s in second.list()} == {blocker, job.job_id}
    retried, created = second.submit_keyed("a", marker_job(tmp_path, marker), "run-1", "digest-1")
    assert (retried.job_id, created) == (job.job_id, False)
    (tmp_path / "hold").touch()
    assert wait_status(second, job.job_id).status == "succeeded"
    assert runs(marker) == Counter({job.job_id: 1})


def test_ended_jobs_beyond_the_kept_ones_leave_memory_and_are_read_back_from_their_folders(
    make_scheduler: SchedulerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every ended job's state held for the whole run was the scheduler's memory growing with each job.
    from amid.server.jobs import scheduler as module

    monkeypatch.setattr(module, "KEEP_ENDED", 2)
    scheduler = make_scheduler(max_concurrent=2)
    marker = tmp_path / "marker"
    submitted = [scheduler.submit("agent-1", marker_job(tmp_path, marker)).job_id for _ in range(5)]
    finals = [wait_status(scheduler, job_id, timeout_s=60) for job_id in submitted]
    assert [s.status for s in finals] == ["succeeded"] * 5
    eventually(lambda: len(scheduler.list()) == 2, what="only the two newest ended jobs held")
    oldest = scheduler.get(submitted[0])  # from its folder
    assert (oldest.job_id, oldest.status, oldest.agent_id) == (submitted[0], "succeeded", "agent-1")
    assert scheduler.wait(submitted[0], timeout_s=0).status == "succeeded"
    with pytest.raises(Conflict):
        scheduler.cancel(submitted[1])
    for bad in ("job-../../etc", "nope", f"{submitted[0]}x"):
        with pytest.raises(NotFound):
            scheduler.get(bad)
