"""Supervisor tool for managed workers: record a worker's transition, read what its watchdog needs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.errors import not_found
from amid.server.ledger import utcnow
from amid.server.toolkit import Created, IdempotencyKey, ToolResult, ToolSpec

WorkerState = Literal["starting", "running", "idle", "paused", "backoff", "retired"]


class RecordWorkerInput(BaseModel):
    agent_id: Annotated[str, Field(min_length=1, max_length=48, description="the managed worker's agent id")]
    backend: Annotated[
        str, Field(min_length=1, max_length=40, description="its worker backend (claude-code, codex, scripted, …)")
    ]
    state: WorkerState | None = Field(default=None, description="its new state; omit to only read")
    event: Annotated[str, Field(max_length=40, description="what happened: started, exited, stalled, paused …")] = ""
    session_id: Annotated[str | None, Field(max_length=200, description="the CLI's session id, once known")] = None
    detail: dict[str, Any] = Field(default_factory=dict, description="exit class, return code, reason …")
    idempotency_key: IdempotencyKey = None


class PendingHeartbeat(BaseModel):
    heartbeat_id: int
    kind: str
    prompt: str


class RecordWorkerResult(ToolResult):
    agent_id: str
    state: str | None
    session_id: str | None = Field(default=None, description="the CLI session last recorded (a restart resumes it)")
    undelivered_heartbeats: list[PendingHeartbeat] = Field(
        default_factory=list, description="heartbeats neither read in a tool result nor given to the CLI yet"
    )
    pending_jobs: int
    pending_reviews: int
    last_tool_call_s_ago: float | None
    created: Created = True


def record_worker(ctx: ToolContext, request: RecordWorkerInput) -> RecordWorkerResult:
    """Record a managed worker's state transition; report its session, undelivered heartbeats, pending jobs and
    reviews and its last tool call."""
    if ctx.ledger.identities.role_of(request.agent_id) != "agent":
        raise not_found(
            "agent_id", request.agent_id, "a worker's agent id, registered by its token (amid token create)"
        )
    workers = ctx.ledger.workers
    if request.state is not None:
        workers.transition(
            request.agent_id,
            request.backend,
            request.state,
            request.event or request.state,
            request.session_id,
            request.detail,
            ctx.caller.agent_id,
        )
    current = workers.state(request.agent_id)
    pending = workers.pending_work(request.agent_id)
    last = workers.last_tool_call(request.agent_id)
    return RecordWorkerResult(
        agent_id=request.agent_id,
        state=current["state"] if current else None,
        session_id=current["session_id"] if current else None,
        undelivered_heartbeats=[PendingHeartbeat(**h) for h in workers.undelivered_heartbeats(request.agent_id)],
        pending_jobs=pending["jobs"],
        pending_reviews=pending["reviews"],
        last_tool_call_s_ago=(utcnow() - last).total_seconds() if last else None,
    )


TOOL = ToolSpec(
    name="record_worker",
    title="Record a managed worker",
    input_model=RecordWorkerInput,
    output_model=RecordWorkerResult,
    run=record_worker,
    roles=frozenset({"supervisor"}),
    keyed=True,
)
