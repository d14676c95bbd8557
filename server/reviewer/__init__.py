"""The independent reviewer (docs/ARCHITECTURE.md §7): a pool in the server that re-scores every attempt from its
frozen evidence and decides accepted / rejected, with a check code, message and evidence for each rule.

The pool lives in `Services.reviewer`; `reviewer(services)` builds and starts it on
first use (so tools and tests need no wiring), `start_reviewer` does so at server start (which
re-queues reviews a killed server left running), and `stop_reviewer` (or `runtime.shutdown`,
which calls `close()`) stops it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from amid.server.context import Services

if TYPE_CHECKING:
    from amid.server.reviewer.pool import ReviewerPool

_lock = threading.Lock()


def reviewer(services: Services) -> ReviewerPool:
    """The server's reviewer pool, built and started on first use."""
    with _lock:
        pool = services.reviewer
        if pool is None:
            from amid.server.reviewer.pool import ReviewerPool

            pool = ReviewerPool(services.ledger, services.workspace, services.settings)
            pool.start()
            services.reviewer = pool
        return pool


def start_reviewer(services: Services) -> ReviewerPool:
    """Call at server start: recovers interrupted reviews and starts the workers."""
    return reviewer(services)


def stop_reviewer(services: Services) -> None:
    pool, services.reviewer = services.reviewer, None
    if pool is not None:
        pool.close()
