"""What a job asks for (JobSpec) and what became of it (JobState).

Both are pydantic models and both are persisted as JSON in the job's folder. `JobState` is
immutable: every transition makes a new one, so a reader never sees a half-updated state.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from amid.server.errors import InvalidInput, invalid

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "timed_out", "lost"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed_out", "lost"})
BackendName = Literal["local", "ray", "slurm"]

MAX_TIME_LIMIT_S = 7 * 24 * 3600
# The runner pins devices itself (by UUID, in PCI bus order); a job may not undo that.
RESERVED_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TAG_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class JobSpec(BaseModel):
    """A command to run, where, with which resources and for how long."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: list[str] = Field(min_length=1, description="argv of the job; no shell is involved")
    cwd: str = Field(description="absolute working directory (inside the agent's worktree)")
    gpus: int = Field(default=0, ge=0, le=16, description="GPUs to pin to the job")
    min_free_gpu_mb: int = Field(default=0, ge=0, description="free memory each chosen GPU must have, MiB")
    cpus: int = Field(default=1, ge=1, le=1024, description="CPU cores the job needs")
    time_limit_s: int = Field(default=3600, ge=1, le=MAX_TIME_LIMIT_S, description="wall-clock limit, s")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    tags: dict[str, str] = Field(default_factory=dict, description="labels such as lane and attempt")

    @field_validator("command")
    @classmethod
    def _command_is_executable(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("the program (first element) must not be empty")
        if any("\x00" in part for part in command):
            raise ValueError("arguments must not contain NUL bytes")
        return command

    @field_validator("cwd")
    @classmethod
    def _cwd_is_absolute(cls, cwd: str) -> str:
        if not Path(cwd).is_absolute():
            raise ValueError("an absolute path")
        return cwd

    @field_validator("env")
    @classmethod
    def _env_names_are_valid(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"variable names like NAME_1 ({name!r} is not one)")
            if name in RESERVED_ENV:
                raise ValueError(f"{name} is set by the job runner and cannot be overridden")
            if "\x00" in value:
                raise ValueError(f"the value of {name} must not contain NUL bytes")
        return env

    @field_validator("tags")
    @classmethod
    def _tags_are_short(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            if not _TAG_KEY.match(key) or len(value) > 256:
                raise ValueError(f"keys of 1-64 characters [A-Za-z0-9_.:-] and values ≤ 256 chars ({key!r})")
        return tags

    @classmethod
    def create(cls, **fields: Any) -> JobSpec:
        """Validate `fields`, raising InvalidInput that names the first bad field."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise _as_invalid_input(exc) from None


def _as_invalid_input(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "spec"
    expected = first["msg"].removeprefix("Value error, ")
    return invalid(field, first.get("input"), expected)


class JobState(BaseModel):
    """Where a job stands; the durable copy is jobs/<job_id>/state.json."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str
    agent_id: str
    spec: JobSpec
    status: JobStatus
    backend: BackendName
    backend_job_id: str | None = None
    gpu_uuids: list[str] = Field(default_factory=list)
    created_at: str
    started_at: str | None = None
    ended_at: str | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    peak_gpu_mem_mb: int | None = None
    reason: str | None = None
    # a keyed submission: the agent's idempotency key and the digest of its request, kept with the
    # job so a retry after any restart finds this job (server/jobs/scheduler.py, submit_keyed)
    idempotency_key: str | None = None
    request_digest: str | None = None
    # the sandbox the job runs in: bwrap (the agent's boundary) or none (job_sandbox=none, or a job
    # recorded before jobs were boxed)
    sandbox: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL


def ledger_row(state: JobState, workspace: Path) -> dict[str, Any]:
    """The state as one row of the ledger's `jobs` table, with the cwd made workspace-relative."""
    return {
        "job_id": state.job_id,
        "agent_id": state.agent_id,
        "status": state.status,
        "backend": state.backend,
        "backend_job_id": state.backend_job_id,
        "command": list(state.spec.command),
        "cwd": workspace_relative(Path(state.spec.cwd), workspace),
        "gpus": state.spec.gpus,
        "gpu_uuids": list(state.gpu_uuids),
        # the ledger's jobs table has no sandbox column: the job's record carries it as a tag
        "tags": {**state.spec.tags, "sandbox": state.sandbox or "none"},
        "created_at": state.created_at,
        "started_at": state.started_at,
        "ended_at": state.ended_at,
        "exit_code": state.exit_code,
        "wall_s": state.wall_s,
        "peak_gpu_mem_mb": state.peak_gpu_mem_mb,
        "reason": state.reason,
    }


def workspace_relative(path: Path, workspace: Path) -> str:
    """`path` relative to the workspace when it lies inside it, else unchanged (docs/ARCHITECTURE.md §14)."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
