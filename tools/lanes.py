"""Lane tools: list the portfolio, claim a lane (a lease), give it back, propose a new one."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, ValidationError

from amid.registry.schemas import LaneFamily, Predicate
from amid.server.context import ToolContext
from amid.server.errors import conflict, invalid
from amid.server.ledger import utcnow
from amid.server.toolkit import ALL_ROLES, WORKERS, Created, IdempotencyKey, ToolResult, ToolSpec, receipt_for
from amid.server.untrusted import AGENT_TRUST, frame
from amid.tools.planning.portfolio import ScaffoldStep
from amid.tools.planning.proposals import LaneProposal
from amid.tools.planning.render import PORTFOLIO_FILE

if TYPE_CHECKING:
    from types import ModuleType

LaneId = Annotated[str, Field(description="from list_lanes")]
RELEASE_LANE = "release_lane"


class ListLanesInput(BaseModel):
    include_excluded: bool = Field(default=False, description="also list ideas the planner left out, with why")


class LaneView(BaseModel):
    lane_id: str
    title: str
    family: str
    tier: str
    status: str
    claimants: list[str]
    n_accepted: int
    best_verified: float | None


def _plan() -> ModuleType:
    """The planner (profile, templates, scaffolds: numpy and more), imported at the first lane call
    rather than at server start."""
    from amid.tools import lane_plan

    return lane_plan


class ListLanesResult(ToolResult):
    lanes: list[LaneView]
    excluded: list[str]
    n_excluded: int
    portfolio: str


def list_lanes(ctx: ToolContext, request: ListLanesInput) -> ListLanesResult:
    """The lane portfolio planned from the data profile, best first; lane files: memory/lanes/<lane_id>.md."""
    _plan().ensure_portfolio(ctx)
    descending = ctx.contract.primary.direction == "higher_better"
    rows = ctx.ledger.lanes.summaries(utcnow(), ctx.settings.claim_lease_s, descending)
    excluded = _plan().excluded_ideas(ctx)
    return ListLanesResult(
        lanes=[LaneView(**{name: row[name] for name in LaneView.model_fields}) for row in rows],
        excluded=[f"{idea.template_id}: {idea.reason}" for idea in excluded] if request.include_excluded else [],
        n_excluded=len(excluded),
        portfolio=ctx.workspace.relative(ctx.workspace.memory_dir / "lanes" / PORTFOLIO_FILE),
    )


class ClaimLaneInput(BaseModel):
    lane_id: LaneId
    idempotency_key: IdempotencyKey = None


class ClaimLaneResult(ToolResult):
    lane_id: str
    expires_at: str
    released: list[str]
    lane_file: str
    steps: list[ScaffoldStep] = Field(
        description="the lane's scaffold steps for this machine, in order: pass a step's run_gpu_job to run_gpu_job "
        "as it is; the replay step (job false) is the inference_command to submit"
    )
    tried: list[str]
    created: Created = True


def claim_lane(ctx: ToolContext, request: ClaimLaneInput) -> ClaimLaneResult:
    """Claim a lane (one per agent; a lease your tool calls renew); returns its lane file and what was tried."""
    _plan().ensure_portfolio(ctx)
    now = utcnow()
    outcome = ctx.ledger.lanes.claim(
        request.lane_id,
        ctx.caller.agent_id,
        now=now,
        lease_s=ctx.settings.claim_lease_s,
        max_claimants=ctx.settings.max_claimants,
    )
    ctx.ledger.activity.log(
        "lane_claimed",
        agent_id=ctx.caller.agent_id,
        subject_type="lane",
        subject_id=request.lane_id,
        payload={"renewed": outcome.renewed, "released": outcome.released},
    )
    path = ctx.workspace.root / _plan().lane_file(ctx, request.lane_id)
    return ClaimLaneResult(
        lane_id=request.lane_id,
        expires_at=_iso(now + timedelta(seconds=ctx.settings.claim_lease_s)),
        released=outcome.released,
        lane_file=path.read_text(encoding="utf-8") if path.is_file() else f"(lane file {path.name} is missing)",
        steps=_steps(ctx, request.lane_id),
        tried=_tried(ctx.ledger.lanes.history(request.lane_id), ctx.caller.agent_id),
    )


def _steps(ctx: ToolContext, lane_id: str) -> list[ScaffoldStep]:
    """Rebuilt from the lane's spec (the ledger keeps no host paths) for this machine's devices."""
    from amid.tools import lane_steps

    row = ctx.ledger.lanes.get(lane_id)
    if row is None:
        return []
    spec = json.loads(row["spec"]) if isinstance(row["spec"], str) else row["spec"]
    return lane_steps.lane_steps(ctx, spec, _plan().planned_facts(ctx))


def _iso(moment: datetime) -> str:
    return moment.replace(microsecond=0).isoformat() + "Z"


def _tried(history: dict[str, list[dict[str, Any]]], me: str) -> list[str]:
    lines = []
    for a in history["attempts"]:
        score = f", verified {a['verified_score']:.4g}" if a["verified_score"] is not None else ""
        summary = f": {a['summary']}" if a["summary"] else ""
        lines.append(f"attempt {a['attempt_id']} by {a['agent_id']} ({a['status']}{score}){summary}")
    # a note's title is another agent's text: served as data, in the untrusted-content frame
    lines += [
        f"note {n['note_id']} by {n['agent_id']} ({n['kind']}; {AGENT_TRUST}): {frame(n['title'])}"
        for n in history["notes"]
    ]
    lines += [
        f"claimed by {c['agent_id']} {_iso(c['claimed_at'])} until {_iso(c['released_at'])}"
        for c in history["claims"]
        if c["agent_id"] != me
    ]
    return lines or ["nothing yet: you are the first in this lane"]


class ReleaseLaneInput(BaseModel):
    lane_id: LaneId
    idempotency_key: IdempotencyKey = None


class ReleaseLaneResult(ToolResult):
    lane_id: str
    status: str
    created: Created = True


def release_lane(ctx: ToolContext, request: ReleaseLaneInput) -> ReleaseLaneResult:
    """Give your lane back (post a note on what you learned first)."""
    receipt = receipt_for(RELEASE_LANE, ctx, request)
    status = ctx.ledger.lanes.release(request.lane_id, ctx.caller.agent_id, utcnow(), receipt=receipt)
    if status is None:
        raise conflict("lane_id", request.lane_id, "a lane you hold a claim on (claim_lane first)")
    ctx.ledger.activity.log(
        "lane_released", agent_id=ctx.caller.agent_id, subject_type="lane", subject_id=request.lane_id
    )
    return ReleaseLaneResult(lane_id=request.lane_id, status=status)


class ProposeLaneInput(BaseModel):
    title: str
    family: LaneFamily
    hypothesis: str = Field(description="what should improve, and why")
    motivation: str = Field(default="", description="the evidence behind it")
    predicates: list[Predicate] = Field(default_factory=list, description="profile predicates behind it")
    base_template: str | None = Field(default=None, description="a planner lane_id to start from")


class ProposeLaneResult(ToolResult):
    lane_id: str
    tier: str
    lane_file: str
    notes: list[str]


def propose_lane(ctx: ToolContext, request: ProposeLaneInput) -> ProposeLaneResult:
    """Add a lane idea; it starts downranked and the planner completes its fields."""
    lane = _plan().add_proposal(ctx, _proposal(request))
    ctx.ledger.activity.log("lane_proposed", agent_id=ctx.caller.agent_id, subject_type="lane", subject_id=lane.lane_id)
    return ProposeLaneResult(
        lane_id=lane.lane_id, tier=lane.tier, lane_file=_plan().lane_file(ctx, lane.lane_id), notes=lane.downranked
    )


def _proposal(request: ProposeLaneInput) -> LaneProposal:
    try:
        return LaneProposal.model_validate(request.model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise invalid(field, first.get("input"), first["msg"]) from None


LIST = ToolSpec(
    "list_lanes", "List lanes", ListLanesInput, ListLanesResult, list_lanes, roles=ALL_ROLES, read_only=True
)
CLAIM = ToolSpec("claim_lane", "Claim lane", ClaimLaneInput, ClaimLaneResult, claim_lane, roles=WORKERS, keyed=True)
RELEASE = ToolSpec(
    RELEASE_LANE, "Release lane", ReleaseLaneInput, ReleaseLaneResult, release_lane, roles=WORKERS, keyed=True
)
PROPOSE = ToolSpec("propose_lane", "Propose lane", ProposeLaneInput, ProposeLaneResult, propose_lane, roles=WORKERS)
TOOLS = [LIST, CLAIM, RELEASE, PROPOSE]
