"""Deliver job state changes to one listener, in order, from one thread.

The listener (the server's ledger mirror) never runs under the scheduler's lock, so it may call
back into the scheduler or take its time; states reach it in the order they were committed.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from amid.server.jobs.spec import JobState

log = logging.getLogger(__name__)

Listener = Callable[[JobState], None]


class Notifier:
    def __init__(self, listener: Listener | None) -> None:
        self._listener = listener
        self._queue: queue.SimpleQueue[tuple[int, JobState | None]] = queue.SimpleQueue()
        self._published = 0
        self._delivered = 0
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._deliver, name="amid-job-notifier", daemon=True)
        self._thread.start()

    def publish(self, state: JobState) -> int:
        """Queue `state`; call under the lock that orders the transitions. Returns its sequence."""
        self._published += 1
        self._queue.put((self._published, state))
        return self._published

    @property
    def published(self) -> int:
        """The sequence of the latest published state (read under the lock that orders them)."""
        return self._published

    def flush(self, sequence: int, timeout_s: float) -> bool:
        """Wait until the state with `sequence` (and all before it) reached the listener."""
        with self._done:
            return self._done.wait_for(lambda: self._delivered >= sequence, timeout=timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        self._queue.put((0, None))
        self._thread.join(timeout=timeout_s)

    def _deliver(self) -> None:
        while True:
            sequence, state = self._queue.get()
            if state is None:
                return
            if self._listener is not None:
                try:
                    self._listener(state)
                except Exception:  # a failing mirror must not stop the job runner
                    log.exception("job state listener failed on %s (%s)", state.job_id, state.status)
            with self._done:
                self._delivered = sequence
                self._done.notify_all()
