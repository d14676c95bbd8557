"""Fixtures for the job-runner tests: schedulers over real wrapper processes in tmp_path."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amid.server.errors import Conflict
from amid.server.jobs.gpu import GpuInventory, StaticInventory
from amid.server.jobs.local import LocalBackend
from amid.server.jobs.scheduler import JobScheduler
from tests.server.jobs.helpers import PY, SchedulerFactory


@pytest.fixture
def make_scheduler(tmp_path: Path) -> Iterator[SchedulerFactory]:
    """Build schedulers on tmp_path/jobs with a real local backend; stop leftover jobs afterwards."""
    made: list[JobScheduler] = []

    def build(
        inventory: GpuInventory | None = None,
        *,
        max_concurrent: int = 8,
        kill_grace_s: float = 1.0,
        **options: Any,
    ) -> JobScheduler:
        backend = LocalBackend(python=PY, base_env=os.environ, kill_grace_s=kill_grace_s)
        scheduler = JobScheduler(
            tmp_path / "jobs",
            backend,
            StaticInventory([]) if inventory is None else inventory,
            max_concurrent=max_concurrent,
            poll_interval_s=0.05,
            **options,
        )
        made.append(scheduler)
        return scheduler

    yield build
    for scheduler in made:
        for state in scheduler.list():
            if not state.is_terminal:
                with contextlib.suppress(Conflict):  # it may end between list() and cancel()
                    scheduler.cancel(state.job_id)
                scheduler.wait(state.job_id, 15)
        scheduler.close()
