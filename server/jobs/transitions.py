"""How a job's state changes when its backend reports something: pure functions."""

from __future__ import annotations

from amid.server.jobs import files
from amid.server.jobs.backend import Observation
from amid.server.jobs.spec import JobState, JobStatus


def observed(state: JobState, seen: Observation, stop_cause: str | None) -> JobState:
    """The state after the backend reported `seen`; `stop_cause` is why AMID asked it to stop."""
    backend_job_id = seen.backend_job_id or state.backend_job_id
    if seen.status == "queued":  # accepted by the engine, waiting in its queue
        return state.model_copy(update={"backend_job_id": backend_job_id, "reason": seen.reason})
    if seen.status == "running":
        started_at = state.started_at or seen.started_at or files.utc_now()
        update = {"status": "running", "backend_job_id": backend_job_id, "started_at": started_at}
        return state.model_copy(update={**update, "reason": None})
    return _finished(state, seen, backend_job_id, stop_cause)


def _finished(state: JobState, seen: Observation, backend_job_id: str | None, stop_cause: str | None) -> JobState:
    status, reason = seen.status, seen.reason
    # Engines only know "stopped"; a stop AMID requested at the time limit is a timeout.
    if status == "cancelled" and stop_cause == "timed_out":
        status, reason = "timed_out", f"time limit of {state.spec.time_limit_s} s reached; stopped"
    ended_at = seen.ended_at or files.utc_now()
    started_at = seen.started_at or state.started_at
    wall_s = seen.wall_s
    if wall_s is None and started_at is not None:
        wall_s = round(files.seconds_between(started_at, ended_at), 3)
    return state.model_copy(
        update={
            "status": status,
            "backend_job_id": backend_job_id,
            "exit_code": seen.exit_code,
            "started_at": started_at,
            "ended_at": ended_at,
            "wall_s": wall_s,
            "peak_gpu_mem_mb": seen.peak_gpu_mem_mb,
            "reason": reason,
        }
    )


def ended(state: JobState, status: JobStatus, reason: str) -> JobState:
    """A job closed by the scheduler itself (refused, cancelled while queued, lost)."""
    return state.model_copy(update={"status": status, "ended_at": files.utc_now(), "reason": reason})
