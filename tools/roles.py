"""assign_role: the supervisor records an agent's exploitation role (docs/ARCHITECTURE.md §9) as a ledger row."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.errors import invalid
from amid.server.toolkit import ToolResult, ToolSpec
from amid.tools.decisions import SUPERVISOR

RoleName = Literal["explorer", "optimizer", "challenger", "repair", "support", "finalizer"]


class AssignRoleInput(BaseModel):
    agent_id: Annotated[str, Field(min_length=1, max_length=64, description="an agent of the run")]
    stage: Literal["exploration", "exploitation", "finalization"] = Field(description="the stage the role is for")
    role: RoleName = Field(
        description="optimizer (the promoted lane), challenger (the runner-up lane), repair (a good raw score "
        "that failed checks), support (help the promoted lanes), finalizer, explorer"
    )
    lane_id: Annotated[str | None, Field(max_length=64, description="the lane the role is about")] = None
    reason: Annotated[str, Field(min_length=1, max_length=500, description="why this role")]


class AssignRoleResult(ToolResult):
    assignment_id: int
    created: bool = Field(description="false when this was already the agent's role (a repeat)")


def assign_role(ctx: ToolContext, request: AssignRoleInput) -> AssignRoleResult:
    """Record an agent's role in a stage (a repeat of its current role is a no-op); get_task shows it."""
    if ctx.ledger.identities.role_of(request.agent_id) != "agent":
        raise invalid("agent_id", request.agent_id, "the id of an agent of this run (run_evidence lists them)")
    if request.lane_id is not None and ctx.ledger.lanes.get(request.lane_id) is None:
        raise invalid("lane_id", request.lane_id, "a lane id from list_lanes, or null")
    assignment_id, created = ctx.ledger.roles.assign(
        request.agent_id, request.stage, request.role, request.lane_id, request.reason, ctx.caller.agent_id
    )
    return AssignRoleResult(assignment_id=assignment_id, created=created)


TOOL = ToolSpec(
    "assign_role", "Assign a role", AssignRoleInput, AssignRoleResult, assign_role, roles=SUPERVISOR, idempotent=True
)
