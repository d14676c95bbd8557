"""Settings, read once at the edge (CLI flags and AMID_* environment variables) and frozen.

Every setting has a name, a default and help text; `amid serve --help` and the README list them
(a test checks that each one is documented).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from amid.server.errors import InvalidInput


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace: Path = Field(description="the run's workspace folder (created by `amid init`)")
    host: str = Field(default="127.0.0.1", description="interface the HTTP server binds; loopback by default")
    port: int = Field(default=8765, ge=0, le=65535, description="TCP port of the HTTP server (0 = any free)")
    path: str = Field(default="/mcp", description="URL path of the MCP endpoint")
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="extra Host header values accepted (for remote agents behind a proxy)"
    )
    claim_lease_s: int = Field(default=1800, ge=60, description="seconds a lane claim lives without activity")
    max_claimants: int = Field(default=1, ge=1, description="agents that may hold one lane at once")
    review_workers: int = Field(default=2, ge=1, description="processes in the reviewer pool")
    max_wait_s: float = Field(default=50.0, gt=0, le=55, description="longest wait inside get_job/get_review")
    review_timeout_s: float = Field(
        default=1800.0, gt=0, description="a review running longer is killed and marked failed (seconds)"
    )
    replay_timeout_s: float = Field(
        default=600.0, gt=0, description="limit for one replay of an attempt's inference command (seconds)"
    )
    replay_sandbox: Literal["bwrap", "none", "auto"] = Field(
        default="bwrap",
        description="replay isolation: bwrap (required: no bubblewrap, no replay), none (unconfined, said in the "
        "evidence: sandbox=none); auto is an old name of bwrap",
    )
    grader_timeout_s: float = Field(default=300.0, gt=0, description="limit for a task's own grader (seconds)")
    holdout_alpha: float = Field(
        default=0.01, gt=0, lt=0.5, description="the holdout gate's false-rejection rate for an honest attempt"
    )
    job_backend: str = Field(default="local", description="job backend: local, ray or slurm")
    ray_address: str | None = Field(default=None, description="Ray cluster address for job_backend=ray")
    job_sandbox: Literal["bwrap", "none", "auto"] = Field(
        default="bwrap",
        description="run_gpu_job isolation: bwrap (required: each job in its agent's boundary, no bubblewrap, no "
        "job), none (unconfined, said in the job's record: sandbox=none); auto is an old name of bwrap",
    )
    job_network: Literal["none", "host"] = Field(
        default="none", description="a sandboxed job's network: none (its own empty namespace) or host (the host's)"
    )
    max_concurrent_jobs: int = Field(default=4, ge=1, description="jobs the local backend runs at once")
    queue_when_no_gpu: bool = Field(
        default=False, description="queue GPU jobs when no GPU fits instead of failing at once"
    )
    max_pending_reviews: int = Field(
        default=2, ge=1, description="reviews an agent may have queued or running at once; more are refused"
    )
    coverage_attempts: int = Field(
        default=2, ge=1, description="accepted `real` attempts that make a lane covered (supervisor)"
    )
    plateau_after: int = Field(
        default=5, ge=1, description="reviewed `real` attempts without improving its lane before a plateau heartbeat"
    )
    consolidate_every: int = Field(
        default=10, ge=1, description="accepted `real` attempts (all agents) between consolidation heartbeats"
    )
    exploration_fraction: float = Field(
        default=0.5, gt=0, le=1, description="fraction of the wall-clock budget after which exploration ends"
    )
    finalization_fraction: float = Field(
        default=0.85, gt=0, le=1, description="fraction of the wall-clock budget after which finalization starts"
    )
    supervisor_budget_s: float | None = Field(
        default=None, gt=0, description="wall-clock budget of the supervisor's schedule when the contract sets none (s)"
    )


ENV_PREFIX = "AMID_"


def settings_from(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    """Merge AMID_* environment values under explicit values and validate them."""
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    for name in Settings.model_fields:
        env_value = environ.get(ENV_PREFIX + name.upper())
        if env_value is not None:
            merged[name] = env_value.split(",") if name == "allowed_hosts" else env_value
    merged.update({k: v for k, v in values.items() if v is not None})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(
            f"setting {name} (--{name.replace('_', '-')} or {ENV_PREFIX}{name.upper()}): {first['msg']}",
            field=name,
        ) from None


def documented_settings() -> dict[str, str]:
    return {name: field.description or "" for name, field in Settings.model_fields.items()}
