"""The job folders on disk: ids, spec.json and state.json, stop requests and log tails.

State files are the durable truth; the scheduler keeps a copy in memory and writes through.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from amid.server.errors import DataUnreadable
from amid.server.jobs import files
from amid.server.jobs.spec import JobState, JobStatus


class LogTail(BaseModel):
    """The end of a job's logs; the byte counts are the full sizes of the log files."""

    model_config = ConfigDict(frozen=True)

    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int


_JOB_ID = re.compile(r"job-\d{8}T\d{12}Z-[0-9a-f]{8}")


def new_job_id() -> str:
    """`job-<UTC time to the microsecond>-<random>`: sorts by submission time, unique without a lock."""
    return f"job-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}-{secrets.token_hex(4)}"


class JobStore:
    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = jobs_dir
        jobs_dir.mkdir(parents=True, exist_ok=True)

    def job_dir(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    def create(self, state_for: Callable[[str], JobState]) -> JobState:
        """Make the job's folder (the mkdir is what makes the id unique), write state.json, then
        spec.json. A kill at any point leaves an empty folder (no job: it was never acknowledged)
        or a state, which holds the spec and, for a keyed submission, its key."""
        while True:
            job_id = new_job_id()
            try:
                self.job_dir(job_id).mkdir()
            except FileExistsError:
                continue
            state = state_for(job_id)
            self.save(state)
            files.write_json_atomic(self.job_dir(job_id) / files.SPEC, state.spec.model_dump(mode="json"))
            return state

    def save(self, state: JobState) -> None:
        files.write_json_atomic(self.job_dir(state.job_id) / files.STATE, state.model_dump(mode="json"))

    def load(self, job_id: str) -> JobState | None:
        """One job's state from its folder; None for an id that is not a job's (or names no folder)."""
        if not _JOB_ID.fullmatch(job_id) or not self.job_dir(job_id).is_dir():
            return None
        return self._load(self.job_dir(job_id))

    def load_all(self) -> list[JobState]:
        """Every job on disk; a folder left empty by an interrupted submission is not a job."""
        states = []
        for job_dir in sorted(p for p in self.jobs_dir.iterdir() if p.is_dir() and p.name.startswith("job-")):
            state = self._load(job_dir)
            if state is not None:
                states.append(state)
        return states

    def _load(self, job_dir: Path) -> JobState | None:
        try:
            payload = files.read_json(job_dir / files.STATE)
            state = None if payload is None else JobState.model_validate(payload)
        except (ValueError, ValidationError) as exc:
            raise DataUnreadable(f"{job_dir}: unreadable job state: {exc}") from exc
        if state is not None and not (job_dir / files.SPEC).exists():  # killed between the two writes
            files.write_json_atomic(job_dir / files.SPEC, state.spec.model_dump(mode="json"))
        return state

    def request_stop(self, job_id: str, cause: JobStatus) -> None:
        """Record why a job is being stopped; the first cause wins (a timeout stays a timeout)."""
        path = self.job_dir(job_id) / files.STOP
        if not path.exists():
            files.write_json_atomic(path, {"cause": cause, "requested_at": files.utc_now()})

    def stop_cause(self, job_id: str) -> str | None:
        request = files.read_json(self.job_dir(job_id) / files.STOP)
        return None if request is None else str(request.get("cause"))

    def log_tail(self, job_id: str, n_bytes: int) -> LogTail:
        stdout, stdout_bytes = files.read_tail(self.job_dir(job_id) / files.STDOUT, n_bytes)
        stderr, stderr_bytes = files.read_tail(self.job_dir(job_id) / files.STDERR, n_bytes)
        return LogTail(stdout=stdout, stderr=stderr, stdout_bytes=stdout_bytes, stderr_bytes=stderr_bytes)
