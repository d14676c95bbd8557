"""Jobs: run_gpu_job returns a job id at once; get_job waits (bounded) and reports; cancel_job stops.

Long work never blocks a tool call: the scheduler runs the job detached, and `get_job` waits at
most `wait_s` (≤ the server's max_wait_s, under the ~60 s client timeout).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from amid.server import runtime
from amid.server.context import ToolContext
from amid.server.errors import NotFound, forbidden, not_found
from amid.server.paths import confine
from amid.server.toolkit import ALL_ROLES, WORKERS, Created, IdempotencyKey, Progress, ToolResult, ToolSpec, receipt_for

RUN_GPU_JOB = "run_gpu_job"

# What Linux can start (one argument ≤ 128 KiB, argv + environment ≤ ARG_MAX), with room to spare:
# anything larger would create a job that can only fail, so it is refused at the door.
MAX_ARG_CHARS = 32768
MAX_ARGS = 4096
MAX_ENV = 256
MAX_TOTAL_CHARS = 1 << 20
Arg = Annotated[str, Field(max_length=MAX_ARG_CHARS)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class RunJobInput(BaseModel):
    command: Annotated[
        list[Arg], Field(min_length=1, max_length=MAX_ARGS, description="argv, no shell; e.g. ['python','train.py']")
    ]
    cwd: str = Field(default=".", description="working directory, relative to your worktree")
    gpus: Annotated[int, Field(ge=0, le=16)] = 0
    min_free_gpu_mb: Annotated[int, Field(ge=0, description="free memory each GPU must have, MiB")] = 0
    cpus: Annotated[int, Field(ge=1, le=1024)] = 1
    time_limit_s: Annotated[int, Field(ge=1, le=7 * 24 * 3600)] = 3600
    env: Annotated[dict[EnvName, Arg], Field(max_length=MAX_ENV, description="extra environment variables")] = {}
    lane_id: str | None = None
    attempt_id: str | None = None
    idempotency_key: IdempotencyKey = None

    @model_validator(mode="after")
    def _fits_exec(self) -> RunJobInput:
        total = sum(len(a) + 1 for a in self.command) + sum(len(k) + len(v) + 2 for k, v in self.env.items())
        if total > MAX_TOTAL_CHARS:
            raise ValueError(
                f"command and env together are {total} characters; at most {MAX_TOTAL_CHARS} can be started"
            )
        return self


class JobView(ToolResult):
    job_id: str
    status: str
    backend: str
    gpu_uuids: list[str]
    exit_code: int | None
    wall_s: float | None
    peak_gpu_mem_mb: int | None
    reason: str | None
    sandbox: str = "none"  # bwrap: the job ran in its agent's boundary; none: unconfined (job_sandbox=none)
    stdout_tail: str = ""
    stderr_tail: str = ""
    log_dir: str


def _view(ctx: ToolContext, state: Any, tail_bytes: int = 0) -> JobView:
    tail = runtime.scheduler(ctx.services).log_tail(state.job_id, tail_bytes) if tail_bytes else None
    return JobView(
        job_id=state.job_id,
        status=state.status,
        backend=state.backend,
        gpu_uuids=list(state.gpu_uuids),
        exit_code=state.exit_code,
        wall_s=state.wall_s,
        peak_gpu_mem_mb=state.peak_gpu_mem_mb,
        reason=state.reason,
        sandbox=state.sandbox or "none",
        stdout_tail=tail.stdout if tail else "",
        stderr_tail=tail.stderr if tail else "",
        log_dir=f"jobs/{state.job_id}",
    )


class StartedJob(JobView):
    created: Created = True


def run_gpu_job(ctx: ToolContext, request: RunJobInput) -> StartedJob:
    """Start a command as a detached job in your worktree (GPUs pinned by UUID); returns job_id at once.
    Poll get_job."""
    from amid.server.jobs.spec import JobSpec

    cwd = confine(ctx.workspace, ctx.caller.agent_id, request.cwd, "cwd")
    tags = {k: v for k, v in (("lane", request.lane_id), ("attempt", request.attempt_id)) if v}
    spec = JobSpec.create(
        command=request.command,
        cwd=str(cwd),
        gpus=request.gpus,
        min_free_gpu_mb=request.min_free_gpu_mb,
        cpus=request.cpus,
        time_limit_s=request.time_limit_s,
        env=request.env,
        tags=tags,
    )
    scheduler, receipt = runtime.scheduler(ctx.services), receipt_for(RUN_GPU_JOB, ctx, request)
    if receipt is None:
        return StartedJob(**_view(ctx, scheduler.submit(ctx.caller.agent_id, spec)).model_dump())
    # the key goes into the job's own record: a kill before the ledger recorded it loses nothing
    state, created = scheduler.submit_keyed(ctx.caller.agent_id, spec, receipt.key, receipt.request_digest)
    return StartedJob(**_view(ctx, state).model_dump(), created=created)


class JobRef(BaseModel):
    job_id: Annotated[str, Field(min_length=1)]


class GetJobInput(JobRef):
    wait_s: Annotated[float, Field(ge=0, le=55, description="wait up to this long for the job to end")] = 0
    tail_bytes: Annotated[int, Field(ge=0, le=20000, description="bytes of each log to return")] = 2000


def _own(ctx: ToolContext, job_id: str) -> Any:
    try:
        state = runtime.scheduler(ctx.services).get(job_id)
    except (KeyError, NotFound):
        raise not_found("job_id", job_id, "a job id from run_job or list_jobs") from None
    if ctx.caller.role == "agent" and state.agent_id != ctx.caller.agent_id:
        raise forbidden("job_id", job_id, "one of your own jobs (this one is another agent's)")
    return state


def get_job(ctx: ToolContext, request: GetJobInput, progress: Progress | None = None) -> JobView:
    """Status, exit code, wall time, peak GPU memory and log tails of a job; waits up to wait_s for it to end."""
    state = _own(ctx, request.job_id)
    deadline = time.monotonic() + min(request.wait_s, ctx.settings.max_wait_s)
    scheduler = runtime.scheduler(ctx.services)
    while not state.is_terminal and time.monotonic() < deadline:
        state = scheduler.wait(request.job_id, min(5.0, max(0.0, deadline - time.monotonic())))
        if progress and not state.is_terminal:
            progress(0, None, f"{state.status}")
    if state.is_terminal:  # what the reply says has ended is in the ledger before the reply
        state = scheduler.settled(request.job_id)
    return _view(ctx, state, request.tail_bytes)


def cancel_job(ctx: ToolContext, request: JobRef) -> JobView:
    """Stop a queued or running job (TERM to its process group, then KILL)."""
    _own(ctx, request.job_id)
    return _view(ctx, runtime.scheduler(ctx.services).cancel(request.job_id))


class ListJobsInput(BaseModel):
    status: Literal["queued", "running", "succeeded", "failed", "cancelled", "timed_out", "lost"] | None = None
    limit: Annotated[int, Field(ge=1, le=200)] = 50


class JobList(ToolResult):
    jobs: list[JobView]
    total: int


def list_jobs(ctx: ToolContext, request: ListJobsInput) -> JobList:
    """Your jobs, newest first (supervisors and humans see every job)."""
    agent = ctx.caller.agent_id if ctx.caller.role == "agent" else None
    runtime.scheduler(ctx.services)  # started: the ledger mirrors every job it holds
    rows, total = ctx.ledger.jobs.page(agent, request.status, request.limit)
    return JobList(jobs=[_row_view(row) for row in rows], total=total)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _row_view(row: dict[str, Any]) -> JobView:
    """A job as the ledger mirrors it (server/jobs/spec.py: ledger_row; the sandbox is a tag there)."""
    return JobView(
        job_id=row["job_id"],
        status=row["status"],
        backend=row["backend"],
        gpu_uuids=list(row["gpu_uuids"] or []),
        exit_code=row["exit_code"],
        wall_s=row["wall_s"],
        peak_gpu_mem_mb=_int(row["peak_gpu_mem_mb"]),
        reason=row["reason"],
        sandbox=(row["tags"] or {}).get("sandbox", "none"),
        stdout_tail="",
        stderr_tail="",
        log_dir=f"jobs/{row['job_id']}",
    )


RUN = ToolSpec(RUN_GPU_JOB, "Run a job", RunJobInput, StartedJob, run_gpu_job, roles=WORKERS, keyed=True)
GET = ToolSpec(
    "get_job", "Get a job", GetJobInput, JobView, get_job, roles=ALL_ROLES, read_only=True, wants_progress=True
)
CANCEL = ToolSpec("cancel_job", "Cancel a job", JobRef, JobView, cancel_job, roles=WORKERS, destructive=True)
LIST = ToolSpec("list_jobs", "List jobs", ListJobsInput, JobList, list_jobs, roles=ALL_ROLES, read_only=True)
TOOLS = [RUN, GET, CANCEL, LIST]
