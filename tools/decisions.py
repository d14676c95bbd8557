"""Supervisor decisions (docs/ARCHITECTURE.md §9): move the stage, set a lane's state, re-audit the evidence,
record the final attempt. Each carries its reason into the ledger; each is safe to repeat.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.errors import Conflict, invalid
from amid.server.finality import final_problems
from amid.server.ledger import Role
from amid.server.toolkit import ToolResult, ToolSpec

SUPERVISOR: frozenset[Role] = frozenset({"supervisor"})
Reason = Annotated[str, Field(min_length=3, max_length=2000, description="why, for the humans reading the ledger")]


class SetStageInput(BaseModel):
    from_stage: Literal["exploration", "exploitation", "finalization"]
    to_stage: Literal["exploitation", "finalization", "done"]
    reason: Reason


class SetStageResult(ToolResult):
    stage: str
    changed: bool = Field(description="false: the run was already in to_stage")


def set_stage(ctx: ToolContext, request: SetStageInput) -> SetStageResult:
    """Move the run forward one or more stages (exploration → exploitation → finalization → done)."""
    changed = ctx.ledger.supervision.set_stage(
        request.from_stage, request.to_stage, request.reason, ctx.caller.agent_id
    )
    if changed:
        ctx.ledger.activity.log(
            "stage_changed",
            agent_id=ctx.caller.agent_id,
            subject_type="stage",
            subject_id=request.to_stage,
            payload={"from": request.from_stage, "reason": request.reason},
        )
    return SetStageResult(stage=request.to_stage, changed=changed)


class SetLaneInput(BaseModel):
    lane_id: Annotated[str, Field(min_length=1)]
    status: Literal["covered", "plateaued", "promoted", "challenger", "waived", "retired"]
    reason: Reason
    evidence: dict[str, Any] = Field(default_factory=dict, description="the numbers behind the decision")


class SetLaneResult(ToolResult):
    lane_id: str
    status: str
    changed: bool


def set_lane_state(ctx: ToolContext, request: SetLaneInput) -> SetLaneResult:
    """Record a supervisor decision on a lane (covered, plateaued, promoted, challenger, waived, retired)."""
    changed = ctx.ledger.supervision.decide_lane(
        request.lane_id, request.status, request.reason, request.evidence, ctx.caller.agent_id
    )
    return SetLaneResult(lane_id=request.lane_id, status=request.status, changed=changed)


class AuditInput(BaseModel):
    pass


class AuditResult(ToolResult):
    audit_id: str
    n_checked: int
    revoked: list[str] = Field(description="attempts this audit moved accepted → revoked")


def audit_evidence(ctx: ToolContext, request: AuditInput) -> AuditResult:
    """Re-audit every accepted attempt (frozen files re-hashed, stored commits checked); failures are revoked."""
    from amid.server.reviewer.audit import audit

    report = audit(ctx.ledger, ctx.workspace, requested_by=ctx.caller.agent_id)
    revoked = [a.attempt_id for a in report.attempts if a.revoked]
    return AuditResult(audit_id=report.audit_id, n_checked=report.n_checked, revoked=revoked)


class ChooseFinalInput(BaseModel):
    attempt_id: Annotated[str, Field(min_length=1)]
    reason: Reason
    audit_id: str | None = Field(default=None, description="the audit_evidence run this choice follows")


class ChooseFinalResult(ToolResult):
    choice_id: int
    attempt_id: str
    created: bool = Field(description="false: a final choice existed already (it is returned)")
    package_path: str | None = Field(description="built package, workspace-relative; null when no builder")


def choose_final(ctx: ToolContext, request: ChooseFinalInput) -> ChooseFinalResult:
    """Record the final attempt (accepted, real, holdout-gated, on a promoted or challenger lane) and
    build the package when a builder is installed."""
    known = ctx.ledger.supervision.final_choice()
    if known is not None:
        return ChooseFinalResult(
            choice_id=known["choice_id"],
            attempt_id=known["attempt_id"],
            created=False,
            package_path=known["package_path"],
        )
    row = _eligible(ctx, request.attempt_id)
    builder = ctx.services.build_package
    package = builder(ctx, request.attempt_id) if builder else None
    choice = {**row, "reason": request.reason, "audit_id": request.audit_id, "package_path": package}
    choice_id, created = ctx.ledger.supervision.choose_final(choice, ctx.caller.agent_id)
    return ChooseFinalResult(choice_id=choice_id, attempt_id=request.attempt_id, created=created, package_path=package)


def _eligible(ctx: ToolContext, attempt_id: str) -> dict[str, Any]:
    """The attempt's v_evidence row if it may be final (the package builder's own rule), else Conflict."""
    row = ctx.ledger.db.fetchone("SELECT * FROM v_evidence WHERE attempt_id = ?", [attempt_id])
    if row is None:
        raise invalid("attempt_id", attempt_id, "an attempt id from run_evidence")
    lane = ctx.ledger.lanes.get(row["lane_id"]) if row["lane_id"] else None
    problems = final_problems(row, lane["status"] if lane else None)
    if problems:
        raise Conflict(f"attempt_id: {attempt_id} cannot be final: {'; '.join(problems)}")
    return row


SET_STAGE = ToolSpec("set_stage", "Set the stage", SetStageInput, SetStageResult, set_stage, roles=SUPERVISOR)
SET_LANE = ToolSpec(
    "set_lane_state",
    "Set a lane's state",
    SetLaneInput,
    SetLaneResult,
    set_lane_state,
    roles=SUPERVISOR,
    idempotent=True,
)
AUDIT = ToolSpec("audit_evidence", "Re-audit evidence", AuditInput, AuditResult, audit_evidence, roles=SUPERVISOR)
CHOOSE_FINAL = ToolSpec(
    "choose_final",
    "Choose the final attempt",
    ChooseFinalInput,
    ChooseFinalResult,
    choose_final,
    roles=SUPERVISOR,
    idempotent=True,
)
TOOLS = [SET_STAGE, SET_LANE, AUDIT, CHOOSE_FINAL]
