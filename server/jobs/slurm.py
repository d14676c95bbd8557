"""Run jobs on a Slurm cluster with its own commands: sbatch, scontrol / sacct, scancel.

Each job becomes a generated batch script in its folder (on the filesystem the cluster shares,
docs/ARCHITECTURE.md §14), submitted with `--no-requeue` so Slurm never runs it a second time. Slurm writes
stdout.log and stderr.log itself (--output/--error). Status comes from `scontrol show job` while
the controller remembers the job, then from `sacct` where accounting exists, and last from the
exit record the script writes when the command ends. The scheduler stops jobs at their time
limit to the second; `--time` (rounded up, with a margin) is Slurm's own backstop.
"""

from __future__ import annotations

import math
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from amid.server.errors import JobFailed
from amid.server.jobs import files
from amid.server.jobs.backend import JobHandle, Observation
from amid.server.jobs.boxing import JobBoxing, admit, boxed
from amid.server.jobs.spec import BackendName, JobStatus

SCRIPT = "slurm.sh"
EXIT_RECORD = "slurm_exit.json"

_STATES: dict[str, JobStatus] = {
    "PENDING": "queued",
    "CONFIGURING": "queued",
    "REQUEUED": "queued",
    "RESV_DEL_HOLD": "queued",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "COMPLETED": "succeeded",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "PREEMPTED": "failed",
    "BOOT_FAIL": "failed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timed_out",
    "DEADLINE": "timed_out",
    "NODE_FAIL": "lost",
}


class SlurmBackend:
    name: BackendName = "slurm"
    enforces_time_limit = False

    def __init__(
        self,
        *,
        partition: str | None = None,
        time_margin_s: int = 120,
        command_timeout_s: float = 30.0,
        boxing: JobBoxing | None = None,
    ) -> None:
        """`boxing`: each job's command runs in bubblewrap on the node, at the server's bwrap path (the
        node must have it there and share the workspace's filesystem); None runs it unconfined."""
        self._boxing = boxing
        self._partition = partition
        self._time_margin_s = time_margin_s
        self._timeout_s = command_timeout_s

    def start(self, handle: JobHandle) -> Observation:
        script = handle.job_dir / SCRIPT
        command, _ = boxed(self._boxing, handle)
        script.write_text(_batch_script(handle, command), encoding="utf-8")
        launch = {"launched_at": files.utc_now()}
        files.write_json_atomic(handle.job_dir / files.LAUNCH, launch)
        out = self._run(["sbatch", "--parsable", *self._sbatch_options(handle), str(script)])
        if out.returncode != 0:
            raise JobFailed(f"sbatch refused job {handle.job_id}: {out.stderr.strip() or out.stdout.strip()}")
        slurm_id = out.stdout.strip().split(";")[0]
        files.write_json_atomic(handle.job_dir / files.LAUNCH, {**launch, "slurm_job_id": slurm_id})
        return Observation("queued", slurm_id, reason="submitted to Slurm")

    def _sbatch_options(self, handle: JobHandle) -> list[str]:
        spec = handle.spec
        minutes = math.ceil((spec.time_limit_s + self._time_margin_s) / 60)
        options = [
            f"--job-name=amid-{handle.job_id}",
            "--no-requeue",
            f"--time={minutes}",
            f"--cpus-per-task={spec.cpus}",
            f"--output={handle.job_dir / files.STDOUT}",
            f"--error={handle.job_dir / files.STDERR}",
            f"--chdir={spec.cwd}",
            "--export=ALL",
        ]
        if spec.gpus:
            options.append(f"--gres=gpu:{spec.gpus}")
        if self._partition:
            options.append(f"--partition={self._partition}")
        return options

    def admit(self, spec: object) -> str:
        return admit(self._boxing)

    def poll(self, handle: JobHandle) -> Observation:
        slurm_id = handle.backend_job_id
        record = (self._scontrol(slurm_id) or self._sacct(slurm_id)) if slurm_id else None
        if slurm_id is None or record is None:
            return _from_exit_record(handle)
        return _observation(slurm_id, record)

    def cancel(self, handle: JobHandle) -> None:
        if handle.backend_job_id:
            self._run(["scancel", handle.backend_job_id])

    def reattach(self, handle: JobHandle) -> Observation | None:
        launch = files.read_json(handle.job_dir / files.LAUNCH)
        if launch is None:
            return None
        slurm_id = handle.backend_job_id or launch.get("slurm_job_id") or self._find_by_name(handle.job_id)
        return self.poll(replace(handle, backend_job_id=slurm_id))

    def sync_logs(self, handle: JobHandle) -> None:
        """Slurm writes the logs straight into the job folder."""

    def close(self) -> None:
        """Nothing is held open between commands."""

    def _find_by_name(self, job_id: str) -> str | None:
        """A job submitted just before a server stop, whose id was never written down."""
        out = self._run(["squeue", "-h", "-a", "--states=all", f"--name=amid-{job_id}", "-o", "%i"])
        ids = out.stdout.split() if out.returncode == 0 else []
        return ids[0] if ids else None

    def _scontrol(self, slurm_id: str) -> dict[str, str] | None:
        out = self._run(["scontrol", "show", "job", "-o", slurm_id])
        if out.returncode != 0 or "JobState=" not in out.stdout:
            return None  # purged from the controller's memory (after MinJobAge)
        # Values of interest hold no spaces; free-text ones (Command=...) may be split, harmlessly.
        return dict(field.split("=", 1) for field in out.stdout.split() if "=" in field)

    def _sacct(self, slurm_id: str) -> dict[str, str] | None:
        out = self._run(["sacct", "-n", "-P", "-X", "-j", slurm_id, "-o", "State,ExitCode,Start,End"])
        lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
        if not lines or lines[0].count("|") != 3:
            return None  # no accounting storage on this cluster
        state, exit_code, start, end = lines[0].split("|")
        return {"JobState": state.split()[0], "ExitCode": exit_code, "StartTime": start, "EndTime": end}

    def _run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, timeout=self._timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise JobFailed(f"{argv[0]} failed: {exc}") from exc


def _batch_script(handle: JobHandle, command: list[str]) -> str:
    """Run the argv and leave an exit record that outlives the controller's memory of the job."""
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in handle.spec.env.items())
    record = shlex.quote(str(handle.job_dir / EXIT_RECORD))
    return (
        f"#!/bin/bash\n# AMID job {handle.job_id} (generated)\n{exports}"
        f"export AMID_JOB_ID={shlex.quote(handle.job_id)}\n"
        f"{shlex.join(command)}\nrc=$?\n"
        f'printf \'{{"exit_code": %d, "ended_at": "%s"}}\\n\' "$rc" "$(date -u +%Y-%m-%dT%H:%M:%S.%6N+00:00)"'
        f" > {record}.tmp && mv {record}.tmp {record}\nexit $rc\n"
    )


def _observation(slurm_id: str, record: dict[str, str]) -> Observation:
    state = record.get("JobState", "")
    status = _STATES.get(state, "failed")
    exit_code, signal_number = (int(part) for part in (record.get("ExitCode") or "0:0").split(":"))
    ended = status not in ("queued", "running")
    reason: str | None = None
    if status == "queued":
        reason = f"pending in Slurm ({record.get('Reason', 'no reason given')})"
    elif status == "failed" or status == "lost":
        detail = f"signal {signal_number}" if signal_number else f"exit code {exit_code}"
        reason = f"Slurm state {state} ({detail})"
    return Observation(
        status=status,
        backend_job_id=slurm_id,
        exit_code=exit_code if ended else None,
        started_at=_utc(record.get("StartTime")),
        ended_at=_utc(record.get("EndTime")) if ended else None,
        reason=reason,
    )


def _from_exit_record(handle: JobHandle) -> Observation:
    record = files.read_json(handle.job_dir / EXIT_RECORD)
    if record is None:
        missing = f"Slurm has no record of job {handle.backend_job_id} and it left no exit record"
        return Observation("lost", handle.backend_job_id, reason=missing)
    exit_code = int(record["exit_code"])
    status: JobStatus = "succeeded" if exit_code == 0 else "failed"
    reason: str | None = None if exit_code == 0 else f"exited with code {exit_code}"
    return Observation(status, handle.backend_job_id, exit_code, ended_at=str(record["ended_at"]), reason=reason)


def _utc(slurm_time: str | None) -> str | None:
    """Slurm prints the controller's local time without a zone; convert it to UTC."""
    if not slurm_time or slurm_time in ("Unknown", "None", "N/A"):
        return None
    return datetime.fromisoformat(slurm_time).astimezone(UTC).isoformat(timespec="microseconds")
