"""Run jobs on a Ray cluster through Ray's own Jobs API (JobSubmissionClient).

The entrypoint runs the job's argv in its `cwd`, which must be on a filesystem the cluster shares
(docs/ARCHITECTURE.md §14). GPUs and CPUs are requested as Ray entrypoint resources, so Ray places the job and
sets CUDA_VISIBLE_DEVICES. The Ray submission id is the AMID job id: after a server restart the
job is found again by its own name, and a second submission under that id is refused by Ray.
Ray does not limit wall-clock time, so the scheduler stops overdue jobs (`stop_job`). Ray merges
stdout and stderr; the merged log is copied into stdout.log. `ray` is imported lazily.
"""

from __future__ import annotations

import logging
import shlex
import threading
from datetime import UTC, datetime
from typing import Any

from amid.server.errors import JobFailed
from amid.server.jobs import files
from amid.server.jobs.backend import JobHandle, Observation
from amid.server.jobs.boxing import JobBoxing, admit, boxed
from amid.server.jobs.spec import BackendName, JobStatus

log = logging.getLogger(__name__)

_STATUS: dict[str, JobStatus] = {
    "PENDING": "queued",
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "STOPPED": "cancelled",
}


class RayBackend:
    name: BackendName = "ray"
    enforces_time_limit = False

    def __init__(self, address: str, *, auth_token: str | None = None, boxing: JobBoxing | None = None) -> None:
        """`address`: the dashboard URL (http://host:8265); `auth_token` when the cluster uses tokens.
        `boxing`: each entrypoint runs its command in bubblewrap on the node, at the server's bwrap
        path (the node must have it there and share the workspace's filesystem); None: unconfined."""
        self._boxing = boxing
        from ray.job_submission import JobSubmissionClient

        headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else None
        self._logs_lock = threading.Lock()  # the dispatcher and tool threads both refresh logs
        try:
            self._client = JobSubmissionClient(address, headers=headers)
        except Exception as exc:  # connection, HTTP and AuthenticationError (not a RuntimeError)
            raise JobFailed(f"cannot reach the Ray cluster at {address}: {exc}") from exc

    def start(self, handle: JobHandle) -> Observation:
        spec = handle.spec
        env = {**spec.env, "AMID_JOB_ID": handle.job_id}
        command, _ = boxed(self._boxing, handle)
        try:
            self._client.submit_job(
                entrypoint=entrypoint(spec.cwd, command),
                submission_id=handle.job_id,
                entrypoint_num_gpus=spec.gpus,
                entrypoint_num_cpus=spec.cpus,
                runtime_env={"env_vars": env},
                metadata={"amid_job_id": handle.job_id, **spec.tags},
            )
        except RuntimeError as exc:
            raise JobFailed(f"Ray refused job {handle.job_id}: {exc}") from exc
        return Observation("queued", handle.job_id, reason="submitted to Ray; waiting for resources")

    def admit(self, spec: object) -> str:
        return admit(self._boxing)

    def poll(self, handle: JobHandle) -> Observation:
        details = self._details(handle.job_id)
        if details is None:
            return Observation("lost", handle.backend_job_id, reason="the Ray cluster has no record of this job")
        status = _STATUS.get(str(details.status), "lost")
        return Observation(
            status=status,
            backend_job_id=handle.job_id,
            exit_code=details.driver_exit_code,
            ended_at=_iso(details.end_time) if status not in ("queued", "running") else None,
            reason=_reason(status, details),
        )

    def _details(self, job_id: str) -> Any:
        try:
            return self._client.get_job_info(job_id)
        except RuntimeError as exc:
            if "status code 404" in str(exc):
                return None
            raise

    def cancel(self, handle: JobHandle) -> None:
        try:
            self._client.stop_job(handle.job_id)
        except RuntimeError as exc:  # already finished or gone: the next poll tells which
            log.info("stop_job(%s) was refused: %s", handle.job_id, exc)

    def reattach(self, handle: JobHandle) -> Observation | None:
        """The submission id is the job id, so a job Ray knows was started by us, exactly once."""
        if self._details(handle.job_id) is None:
            return None
        return self.poll(handle)

    def sync_logs(self, handle: JobHandle) -> None:
        try:
            text = self._client.get_job_logs(handle.job_id)
        except RuntimeError as exc:
            log.info("could not fetch Ray logs of %s: %s", handle.job_id, exc)
            return
        with self._logs_lock:
            _replace_text(handle, files.STDOUT, text)
            if not (handle.job_dir / files.STDERR).exists():
                _replace_text(handle, files.STDERR, "")

    def close(self) -> None:
        """The client holds no connection between calls."""


def _reason(status: JobStatus, details: Any) -> str | None:
    if status in ("succeeded", "running"):
        return None
    if status == "queued":
        return "pending in the Ray cluster (waiting for CPUs/GPUs)"
    first_line = (details.message or "").splitlines()[0] if details.message else ""
    return f"Ray: {first_line}" if first_line else f"Ray reported {details.status}"


def _iso(epoch_ms: int | None) -> str | None:
    if not epoch_ms:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="microseconds")


def _replace_text(handle: JobHandle, name: str, text: str) -> None:
    tmp = handle.job_dir / f".{name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(handle.job_dir / name)


def entrypoint(cwd: str, command: list[str]) -> str:
    """The shell line Ray runs on the node: the (boxed) argv in the job's cwd."""
    return f"cd {shlex.quote(cwd)} && exec {shlex.join(command)}"
