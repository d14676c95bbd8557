"""Long-lived subsystems of a server (job scheduler, reviewer pool): built once, lazily, and
stopped with the server. They live in `Services` so tools reach them through their context."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from amid.server.context import Services
from amid.server.errors import InvalidInput
from amid.server.settings import Settings

_lock = threading.Lock()


def scheduler(services: Services) -> Any:
    """The job scheduler of this server, created on first use and mirrored into the ledger."""
    with _lock:
        if services.scheduler is None:
            services.scheduler = _build_scheduler(services)
        return services.scheduler


def check_backend(settings: Settings) -> None:
    """Refuse job-backend settings that cannot work, at start (the scheduler itself is built beside
    the first calls, where an error would only surface at the first job)."""
    if settings.job_backend not in ("local", "ray", "slurm"):
        raise InvalidInput(f"setting job_backend: got {settings.job_backend!r}; expected local, ray or slurm")
    if settings.job_backend == "ray" and not settings.ray_address:
        raise InvalidInput("setting ray_address: needed for job_backend=ray (AMID_RAY_ADDRESS)")


def _backend(services: Services) -> tuple[Any, Any]:
    from amid.server.jobs.boxing import JobBoxing

    settings = services.settings
    check_backend(settings)
    boxing = JobBoxing(services.workspace, settings.job_sandbox, settings.job_network)
    if settings.job_backend == "local":
        from amid.server.jobs.gpu import NvmlInventory
        from amid.server.jobs.local import LocalBackend

        return LocalBackend(python=sys.executable, base_env=dict(os.environ), boxing=boxing), NvmlInventory()
    if settings.job_backend == "ray":
        from amid.server.jobs.ray_backend import RayBackend

        token = os.environ.get("RAY_AUTH_TOKEN")
        return RayBackend(str(settings.ray_address), auth_token=token, boxing=boxing), None
    from amid.server.jobs.slurm import SlurmBackend

    return SlurmBackend(boxing=boxing), None


def _build_scheduler(services: Services) -> Any:
    from amid.server.jobs.scheduler import JobScheduler
    from amid.server.jobs.spec import JobState, ledger_row

    backend, inventory = _backend(services)
    root = services.workspace.root

    def mirror(state: JobState) -> None:
        services.ledger.jobs.upsert(ledger_row(state, root))

    return JobScheduler(
        services.workspace.sub("jobs"),
        backend,
        inventory,
        max_concurrent=services.settings.max_concurrent_jobs,
        on_change=mirror,
        queue_when_unplaceable=services.settings.queue_when_no_gpu,
    )


def shutdown(services: Services) -> None:
    """Stop background subsystems; running jobs keep running (their wrappers survive)."""
    reviewer, scheduler = services.reviewer, services.scheduler
    services.reviewer = services.scheduler = None
    for subsystem in (reviewer, scheduler):
        if subsystem is not None:
            subsystem.close()
