"""The contract between the scheduler and an execution engine (local wrapper, Ray, Slurm).

The scheduler owns the queue, placement and the durable state; a backend only starts, observes,
stops and finds again what it was given. Every backend must be safe to call from the scheduler's
one dispatcher thread and must never start the same job twice: `reattach` answers "did I already
start this?" from durable evidence (files in the job folder, the engine's own record).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from amid.server.jobs.spec import BackendName, JobSpec, JobStatus


@dataclass(frozen=True)
class JobHandle:
    """Everything a backend needs to act on one job."""

    job_id: str
    job_dir: Path
    spec: JobSpec
    gpu_uuids: tuple[str, ...] = ()
    backend_job_id: str | None = None
    agent_id: str = ""  # whose job: its box shows that agent's worktree only


@dataclass(frozen=True)
class Observation:
    """What a backend saw of a job; None fields mean "not known (yet)"."""

    status: JobStatus
    backend_job_id: str | None = None
    exit_code: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    wall_s: float | None = None
    peak_gpu_mem_mb: int | None = None
    reason: str | None = None


class Backend(Protocol):
    name: BackendName
    # False: the scheduler stops jobs that outlive their time limit itself.
    enforces_time_limit: bool

    def start(self, handle: JobHandle) -> Observation:
        """Start the job: running, or queued in the engine, with the engine's id for it.

        Raises JobFailed when the engine refuses it.
        """
        ...

    def poll(self, handle: JobHandle) -> Observation:
        """The job's current status, as the engine sees it."""
        ...

    def cancel(self, handle: JobHandle) -> None:
        """Ask the engine to stop the job (the end is observed later through poll)."""
        ...

    def reattach(self, handle: JobHandle) -> Observation | None:
        """After a server restart: the job's status, or None if it was never started."""
        ...

    def sync_logs(self, handle: JobHandle) -> None:
        """Bring the job's logs into its folder (no-op where the engine writes them there)."""
        ...

    def close(self) -> None: ...

    # Optional: `admit(spec) -> str`, the sandbox the job will run in (bwrap, or none by explicit
    # setting), raising SandboxUnavailable (naming the fix) where the required one cannot run.
