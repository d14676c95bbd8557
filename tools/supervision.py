"""Supervisor tools: a snapshot of the run, and heartbeats (prompts delivered to an agent's inbox)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.errors import NotFound
from amid.server.toolkit import ToolResult, ToolSpec


class SnapshotInput(BaseModel):
    recent_events: Annotated[int, Field(ge=0, le=200, description="how many recent events to include")] = 20


class AgentView(BaseModel):
    agent_id: str
    n_tool_calls: int
    last_seen: str | None


class SnapshotResult(ToolResult):
    stage: str
    task_id: str
    agents: list[AgentView]
    attempts_by_status: dict[str, int]
    lanes_by_status: dict[str, int]
    jobs_by_status: dict[str, int]
    pending_heartbeats: int
    recent_events: list[dict[str, object]]


def _counts(ctx: ToolContext, table: str) -> dict[str, int]:
    return ctx.ledger.counts_by_status(table)


def snapshot(ctx: ToolContext, request: SnapshotInput) -> SnapshotResult:
    """Snapshot of the whole run for the supervisor: stage, agents, attempts, lanes, jobs, recent events."""
    ledger = ctx.ledger
    agents = [
        AgentView(
            agent_id=r["agent_id"],
            n_tool_calls=r["n_tool_calls"],
            last_seen=r["last_seen"].isoformat() if r["last_seen"] else None,
        )
        for r in ledger.db.fetchall("SELECT * FROM v_agent_activity ORDER BY agent_id")
    ]
    events = [
        {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in e.items()}
        for e in ledger.activity.events(limit=request.recent_events)
    ]
    return SnapshotResult(
        stage=ledger.activity.get_state("stage", "exploration"),
        task_id=ctx.contract.id,
        agents=agents,
        attempts_by_status=_counts(ctx, "attempts"),
        lanes_by_status=_counts(ctx, "lanes"),
        jobs_by_status=_counts(ctx, "jobs"),
        pending_heartbeats=ledger.activity.pending_heartbeats(),
        recent_events=events,
    )


class HeartbeatInput(BaseModel):
    agent_id: Annotated[str, Field(min_length=1, description="the agent that receives the prompt")]
    kind: Literal["reflection", "consolidation", "plateau", "stage", "custom"]
    prompt: Annotated[str, Field(min_length=1, max_length=4000, description="what the agent should do now")]
    cause_key: str | None = Field(
        default=None, max_length=200, description="idempotency: one heartbeat per agent and cause"
    )


class HeartbeatResult(ToolResult):
    heartbeat_id: int
    agent_id: str
    created: bool = Field(default=True, description="false: this cause was already sent (the first one is returned)")


def send_heartbeat(ctx: ToolContext, request: HeartbeatInput) -> HeartbeatResult:
    """Queue a heartbeat prompt for one agent; it arrives in that agent's next tool result and get_task."""
    role = ctx.ledger.identities.role_of(request.agent_id)
    if role is None:
        raise NotFound(f"agent_id: no agent {request.agent_id!r}; see run_snapshot", field="agent_id")
    heartbeat_id, created = ctx.ledger.supervision.heartbeat_once(
        request.agent_id, request.kind, request.prompt, ctx.caller.agent_id, request.cause_key
    )
    return HeartbeatResult(heartbeat_id=heartbeat_id, agent_id=request.agent_id, created=created)


SNAPSHOT = ToolSpec(
    name="run_snapshot",
    title="Run snapshot",
    input_model=SnapshotInput,
    output_model=SnapshotResult,
    run=snapshot,
    roles=frozenset({"supervisor", "human"}),
    read_only=True,
)
HEARTBEAT = ToolSpec(
    name="send_heartbeat",
    title="Send a heartbeat",
    input_model=HeartbeatInput,
    output_model=HeartbeatResult,
    run=send_heartbeat,
    roles=frozenset({"supervisor"}),
)
