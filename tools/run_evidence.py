"""run_evidence: everything the supervisor decides on, in one read (docs/ARCHITECTURE.md §9).

The supervisor is a separate process that never opens the ledger: it builds its whole view from this
tool at start, so a killed and restarted supervisor decides from the same state as the one before it.
Each answer ends with a `cursor`; given back as `since`, the next answer holds only the attempts,
heartbeat causes and notes that changed after it, so a tick costs what changed, not the run's history
(at 100,000 attempts the whole window was 1,000+ attempts, hundreds of KB, every few seconds).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.errors import Conflict, InvalidInput
from amid.server.ledger import utcnow
from amid.server.ledger.supervision import EvidenceCursor
from amid.server.toolkit import ToolResult, ToolSpec


class EvidenceInput(BaseModel):
    limit: Annotated[
        int, Field(ge=1, le=5000, description="the newest attempts to return (every accepted one too), oldest first")
    ] = 1000
    since: Annotated[
        str | None,
        Field(max_length=64, description="a previous answer's cursor: return only what changed after it"),
    ] = None
    page: Annotated[
        int, Field(ge=1, le=5000, description="with since: at most this many changed attempts (complete=false: more)")
    ] = 1000


class Thresholds(BaseModel):
    coverage_attempts: int
    plateau_after: int
    consolidate_every: int
    exploration_fraction: float
    finalization_fraction: float
    max_pending_reviews: int


class LaneState(BaseModel):
    lane_id: str
    tier: str
    status: str
    family: str


class AttemptEvidence(BaseModel):
    attempt_id: str
    agent_id: str
    lane_id: str | None
    budget_class: str
    status: str
    review_id: str | None
    verdict: str | None
    verified_score: float | None
    fold_spread: float | None = Field(description="sample standard deviation of the verified fold scores")
    n_folds: int | None
    score_se: float | None = Field(default=None, description="standard error of verified_score (per-case spread)")
    tries: int = Field(default=1, description="attempts its agent had scored on its lane (ranking widens for them)")
    ranked: bool = Field(default=False, description="its last review scored it on the primary metric (a try)")
    holdout_gated: bool = Field(description="the review's holdout gate did not fail")
    failed_codes: list[str]
    created_at: str


class LaneTries(BaseModel):
    agent_id: str
    lane_id: str | None
    tries: int


class Transition(BaseModel):
    from_stage: str
    to_stage: str
    reason: str
    decided_at: str


class Cause(BaseModel):
    agent_id: str
    kind: str
    cause_key: str


class FocusNote(BaseModel):
    note_id: int
    agent_id: str
    created_at: str


class CurrentRole(BaseModel):
    agent_id: str
    stage: str
    role: str
    lane_id: str | None


class EvidenceResult(ToolResult):
    stage: str
    transitions: list[Transition]
    metric: str
    higher_is_better: bool
    has_holdout: bool
    elapsed_s: float | None = Field(description="seconds since the run started")
    budget_s: float | None = Field(description="wall-clock budget (contract, else supervisor_budget_s)")
    thresholds: Thresholds
    agents: list[str] = Field(description="agents of role agent")
    lanes: list[LaneState]
    attempts: list[AttemptEvidence]
    causes_sent: list[Cause]
    plateau_heartbeats: list[Cause]
    focus_notes: list[FocusNote]
    roles: list[CurrentRole] = Field(description="each agent's current role (assign_role)")
    final_attempt_id: str | None
    cursor: str = Field(description="pass as since to get only what changes after this answer")
    changes_only: bool = Field(
        description="attempts, causes_sent, plateau_heartbeats and focus_notes hold only what changed after since"
    )
    complete: bool = Field(description="false: more changed attempts wait; call again with cursor")
    tries: list[LaneTries] = Field(
        description="scored attempts per agent and lane (the ranking's tries): every pair, when the answer holds a "
        "scored attempt; empty otherwise"
    )


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _attempt(row: dict[str, Any], tries: dict[tuple[str, str | None], int]) -> AttemptEvidence:
    ranked = row["tries"] is None  # the ledger leaves a ranked attempt's tries to its (agent, lane) count
    return AttemptEvidence(
        **{k: row[k] for k in ("attempt_id", "agent_id", "lane_id", "budget_class", "status", "review_id")},
        verdict=row["verdict"],
        verified_score=row["verified_score"],
        fold_spread=row["fold_spread"],
        n_folds=row["n_folds"],
        score_se=row["score_se"],
        tries=tries.get((row["agent_id"], row["lane_id"]), 1) if ranked else 1,
        ranked=ranked,
        holdout_gated=bool(row["holdout_gated"]),
        failed_codes=(row["failed_codes"] or "").split(",") if row["failed_codes"] else [],
        created_at=_iso(row["created_at"]),
    )


def _elapsed_s(ctx: ToolContext) -> float | None:
    from datetime import datetime

    started = ctx.ledger.activity.get_state("started_at")
    if not started:
        return None
    return (utcnow() - datetime.fromisoformat(str(started)).replace(tzinfo=None)).total_seconds()


def _budget_s(ctx: ToolContext) -> float | None:
    hours = ctx.contract.budget.wall_clock_hours
    return hours * 3600.0 if hours else ctx.settings.supervisor_budget_s


def _cursor(since: str | None) -> EvidenceCursor | None:
    if since is None:
        return None
    cursor = EvidenceCursor.parse(since)
    if cursor is None:
        raise InvalidInput(
            f"since: got {since[:80]!r}; expected the cursor of an earlier answer (a<n>.h<n>.n<n>)", field="since"
        )
    return cursor


def run_evidence(ctx: ToolContext, request: EvidenceInput) -> EvidenceResult:
    """The supervisor's whole view: stage, lanes, reviewed attempts with verified scores, fold spread,
    holdout gate and budget class, heartbeats already sent, focus notes, thresholds, final choice;
    with `since`, the changes after an earlier answer."""
    sup, db, settings, primary = ctx.ledger.supervision, ctx.ledger.db, ctx.settings, ctx.contract.primary
    since = _cursor(request.since)
    changes = sup.evidence_changes(since, request.limit, request.page)
    if since is not None and since.ahead_of(changes.cursor):
        raise Conflict(
            f"since: cursor {request.since} is ahead of this ledger's {changes.cursor} (another run's, or the "
            "ledger was restored); call run_evidence without since",
            field="since",
        )
    final = sup.final_choice()
    tries = {(row["agent_id"], row["lane_id"]): int(row["tries"]) for row in changes.tries}
    return EvidenceResult(
        stage=sup.stage(),
        transitions=[Transition(**{**t, "decided_at": _iso(t["decided_at"])}) for t in _transitions(sup)],
        metric=primary.name,
        higher_is_better=primary.direction == "higher_better",
        has_holdout=ctx.contract.validation.holdout_fraction > 0,
        elapsed_s=_elapsed_s(ctx),
        budget_s=_budget_s(ctx),
        thresholds=Thresholds(**{name: getattr(settings, name) for name in Thresholds.model_fields}),
        agents=sup.agents(),
        lanes=[LaneState(**{k: r[k] for k in LaneState.model_fields}) for r in db.cached_fetchall(_LANES)],
        attempts=[_attempt(r, tries) for r in changes.attempts],
        causes_sent=[Cause(**{k: c[k] for k in Cause.model_fields}) for c in changes.causes],
        plateau_heartbeats=[
            Cause(agent_id=h["agent_id"], kind="plateau", cause_key=h["cause_key"] or f"#{h['heartbeat_id']}")
            for h in changes.plateaus
        ],
        focus_notes=[
            FocusNote(note_id=n["note_id"], agent_id=n["agent_id"], created_at=_iso(n["created_at"]))
            for n in changes.focus_notes
        ],
        roles=[CurrentRole(**{k: r[k] for k in CurrentRole.model_fields}) for r in db.cached_fetchall(_ROLES)],
        final_attempt_id=final["attempt_id"] if final else None,
        cursor=str(changes.cursor),
        changes_only=since is not None,
        complete=changes.complete,
        tries=[LaneTries(**row) for row in changes.tries],
    )


_LANES = "SELECT lane_id, tier, status, family FROM lanes ORDER BY lane_id"
_ROLES = "SELECT agent_id, stage, role, lane_id FROM v_agent_roles WHERE current ORDER BY agent_id"


def _transitions(sup: Any) -> list[dict[str, Any]]:
    return [{k: t[k] for k in ("from_stage", "to_stage", "reason", "decided_at")} for t in sup.stage_transitions()]


TOOL = ToolSpec(
    name="run_evidence",
    title="Run evidence",
    input_model=EvidenceInput,
    output_model=EvidenceResult,
    run=run_evidence,
    roles=frozenset({"supervisor", "human"}),
    read_only=True,
)
