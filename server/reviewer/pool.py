"""The reviewer pool: `review_workers` threads in the server, each driving one review process, so a
crashed, slow or runaway review never blocks a tool call or another review.

A review process is long-lived (it imports numpy, nibabel and the metrics library once) and takes
one job at a time over a pipe; it runs in its own process group. When a review exceeds
`review_timeout_s`, or its process dies, the process is stopped (SIGTERM, which kills its replay or
grader subprocesses, then SIGKILL to the group), the review is marked failed, and the next job gets
a fresh process. Review processes never open the ledger: the pool gathers their input
(`build_job`) and commits their report (`Reviews.finish`) in one transaction. Reviews left
`running` by a stopped or killed server are re-queued when the pool starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from typing import Any

from amid.server.ledger import Ledger
from amid.server.ledger.reviews import CheckRow, MetricRow, ReviewOutcome
from amid.server.repo import prune_worktrees
from amid.server.reviewer.job import build_job, report_paths
from amid.server.reviewer.report import ReviewReport
from amid.server.settings import Settings
from amid.server.workspace import Workspace

LOG = logging.getLogger(__name__)

STOP_GRACE_S = 5.0
# Imported once by the fork server; every review process starts with them loaded.
PRELOAD = ["amid.server.reviewer.run", "nibabel", "git", "yaml", "imageio.v3"]


def _worker_entry(connection: Any, server_pid: int) -> None:
    """A review process's start: the review code (scoring, scipy) loads there, or in the fork
    server that preloads it, never in the server, where importing it took a second of the GIL."""
    from amid.server.reviewer.run import worker_main

    worker_main(connection, server_pid)


class ReviewProcess:
    """One long-lived review process and the pipe to it."""

    def __init__(self, mp: Any, name: str) -> None:
        self.connection, child = mp.Pipe()
        self.process = mp.Process(target=_worker_entry, args=(child, os.getpid()), name=name, daemon=True)
        self.process.start()
        child.close()
        self._stopping = threading.Lock()  # the pool's close() and the worker's thread may both stop it

    def review(self, job_json: str, timeout_s: float) -> str:
        """'done' (a report or an error file was written), 'timeout' or 'died'."""
        try:
            self.connection.send(job_json)
            if not self.connection.poll(timeout_s):
                return "timeout"
            self.connection.recv()
        except (EOFError, OSError, TypeError, ValueError):  # also: closed under us by the pool's close()
            return "died"
        return "done"

    def stop(self) -> None:
        """Hang up; SIGTERM if it does not leave (it kills its own subprocesses), then SIGKILL."""
        if not self._stopping.acquire(blocking=False):
            return
        with contextlib.suppress(OSError):
            self.connection.send(None)
        with contextlib.suppress(OSError):
            self.connection.close()
        process = self.process
        process.join(timeout=0.5)
        if process.is_alive():
            process.terminate()
            process.join(timeout=STOP_GRACE_S)
        if process.is_alive() and process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.join(timeout=STOP_GRACE_S)


def stop_forkserver(grace_s: float = 3.0) -> None:
    """Stop this process's fork server with the pool: left alone, it outlived the server by seconds
    (until it noticed its parent was gone). Closing its "alive" pipe asks it to exit; a process forked
    meanwhile may hold that pipe open, so after `grace_s` it is killed, never waited on unbounded (the
    standard library's own `_stop` waits forever). The next pool starts a fresh one."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if server is None or pid is None:
        return
    with server._lock:
        with contextlib.suppress(OSError, TypeError):
            os.close(server._forkserver_alive_fd)
        _reap(pid, grace_s)
        address = server._forkserver_address
        server._forkserver_alive_fd = server._forkserver_pid = server._forkserver_address = None
    if isinstance(address, str) and not address.startswith("\0"):
        with contextlib.suppress(OSError):
            os.unlink(address)


def _reap(pid: int, grace_s: float) -> None:
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            time.sleep(0.02)


class ReviewerPool:
    def __init__(self, ledger: Ledger, workspace: Workspace, settings: Settings) -> None:
        self.ledger, self.workspace, self.settings = ledger, workspace, settings
        self.reviews_dir = workspace.sub("reviews")
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._processes: dict[int, ReviewProcess] = {}
        self._finished: set[str] = set()
        self._changed = threading.Condition()
        self._closed = False
        self._mp = multiprocessing.get_context("forkserver")
        self._mp.set_forkserver_preload(PRELOAD)

    def start(self) -> None:
        """Recover interrupted reviews, start the workers and queue every waiting review."""
        if self._threads:
            return
        self.reviews_dir.mkdir(exist_ok=True)
        prune_worktrees(self.workspace.repo_dir)
        requeued = self.ledger.reviews.requeue_interrupted()
        if requeued:
            self.ledger.activity.log("reviews_requeued", agent_id=None, payload={"n": requeued})
        for index in range(self.settings.review_workers):
            thread = threading.Thread(target=self._work, args=(index,), name=f"amid-reviewer-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for review_id in self.ledger.reviews.queued():
            self._queue.put(review_id)

    def submit(self, review_id: str) -> None:
        self._queue.put(review_id)

    def wait(self, review_id: str, timeout_s: float) -> bool:
        """Wait until this pool has finished the review (done or failed), at most `timeout_s`."""
        with self._changed:
            return self._changed.wait_for(lambda: review_id in self._finished, timeout=timeout_s)

    def progress(self, review_id: str) -> dict[str, Any]:
        path = report_paths(self.reviews_dir, review_id)[1]
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}

    def close(self) -> None:
        """Stop the workers; running reviews are stopped and go back to the queue for the next start."""
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for process in list(self._processes.values()):
            process.stop()
        for thread in self._threads:
            thread.join(timeout=STOP_GRACE_S * 2)
        self._threads.clear()
        stop_forkserver()
        self.ledger.reviews.requeue_interrupted()

    def _work(self, index: int) -> None:
        with contextlib.suppress(Exception):  # boot the review process now, not at the first review
            self._process(index)
        while (review_id := self._queue.get()) is not None:
            try:
                if self._closed or not self.ledger.reviews.start(review_id):
                    continue
            except Exception:  # the ledger closed under us: the server is stopping; the review stays queued
                break
            try:
                self._review(index, review_id)
            except Exception as exc:
                if not self._closed:
                    self._fail_quietly(review_id, f"reviewer error: {type(exc).__name__}: {exc}")
            with self._changed:
                self._finished.add(review_id)
                self._changed.notify_all()
        worker = self._processes.pop(index, None)
        if worker is not None:
            worker.stop()

    def _fail_quietly(self, review_id: str, error: str) -> None:
        """Record the failure; if the ledger itself is gone (a stop racing this thread), the review
        is re-queued by the next start, so there is nothing to record and nothing to raise."""
        try:
            self._fail(review_id, error)
        except Exception as exc:
            LOG.warning(
                "review %s: could not record its failure (%s); it is re-queued at the next start", review_id, exc
            )

    def _review(self, index: int, review_id: str) -> None:
        job = build_job(self.ledger, self.workspace, self.settings, review_id)
        report_path, progress_path, error_path = report_paths(self.reviews_dir, review_id)
        for stale in (report_path, progress_path, error_path):
            stale.unlink(missing_ok=True)
        worker = self._process(index)
        outcome = worker.review(job.model_dump_json(), self.settings.review_timeout_s)
        if outcome != "done":
            self._processes.pop(index, None)
            worker.stop()
        if self._closed:
            return
        if outcome == "timeout":
            self._fail(review_id, f"review timed out after {self.settings.review_timeout_s:.0f} s")
        elif report_path.is_file():
            self._commit(review_id, ReviewReport.model_validate_json(report_path.read_text(encoding="utf-8")))
        else:
            exit_code = worker.process.exitcode
            error = (
                error_path.read_text(encoding="utf-8")
                if error_path.is_file()
                else f"review process died (exit {exit_code})"
            )
            self._fail(review_id, error)

    def _process(self, index: int) -> ReviewProcess:
        worker = self._processes.get(index)
        if worker is None or not worker.process.is_alive():
            worker = self._processes[index] = ReviewProcess(self._mp, f"amid-reviewer-{index}")
        return worker

    def _commit(self, review_id: str, report: ReviewReport) -> None:
        outcome = ReviewOutcome(
            verdict=report.verdict,
            checks=[CheckRow(c.code, c.passed, c.severity, c.message, c.evidence) for c in report.checks],
            metrics=[MetricRow(**m.model_dump()) for m in report.metrics],
            baselines=[MetricRow(scope="baseline", **b.model_dump()) for b in report.baselines],
            value_hashes=sorted(report.value_hashes.items()),
            report_path=f"reviews/{review_id}.json",
        )
        self.ledger.reviews.finish(review_id, outcome)
        failed = [c.code for c in report.checks if not c.passed]
        self.ledger.activity.log(
            "review_done",
            agent_id=None,
            subject_type="attempt",
            subject_id=report.attempt_id,
            payload={"review_id": review_id, "verdict": report.verdict, "failed": failed, "s": report.seconds},
        )

    def _fail(self, review_id: str, error: str) -> None:
        self.ledger.reviews.fail(review_id, error)
        self.ledger.activity.log(
            "review_failed", agent_id=None, subject_type="review", subject_id=review_id, payload={"error": error[:500]}
        )
