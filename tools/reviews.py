"""request_review, get_review and leaderboard: the independent review of attempts and its results.

`request_review` queues the review and returns at once; a finished review is reused unless the
attempt's frozen files or stored commit changed since its verdict, or it was revoked. `get_review`
waits at most `wait_s` (never past the server's max_wait_s) and reports progress; `leaderboard`
ranks accepted attempts by the reviewer's verified primary metric only.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.errors import Conflict, invalid
from amid.server.reviewer import reviewer
from amid.server.reviewer.audit import evidence_changed
from amid.server.toolkit import ALL_ROLES, WORKERS, Progress, ToolResult, ToolSpec

POLL_S = 5.0


class RequestReviewInput(BaseModel):
    attempt_id: Annotated[str, Field(min_length=1)]


class ReviewQueued(ToolResult):
    review_id: str
    attempt_id: str
    status: str


def request_review(ctx: ToolContext, request: RequestReviewInput) -> ReviewQueued:
    """Queue the independent review of your attempt; returns review_id at once. Poll get_review."""
    owner = ctx.caller.agent_id if ctx.caller.role == "agent" else None
    pool = reviewer(ctx.services)
    again = ctx.ledger.attempts.exists(request.attempt_id) and evidence_changed(
        ctx.ledger, ctx.workspace, request.attempt_id
    )
    # admission is for a new review only: asking again for one queued or given returns it (an agent
    # resumed after its review finished reads the verdict even if that verdict plateaued its lane)
    admit = None if owner is None else (lambda: _check_admission(ctx, owner, request.attempt_id))
    review, created = ctx.ledger.reviews.request(
        request.attempt_id, ctx.caller.agent_id, owner, again=again, admit=admit
    )
    if created:
        pool.submit(review["review_id"])
    return ReviewQueued(review_id=review["review_id"], attempt_id=request.attempt_id, status=review["status"])


def _check_admission(ctx: ToolContext, agent_id: str, attempt_id: str) -> None:
    """The per-agent cap on reviews in flight, and the focus note a plateau heartbeat demands
    before more of this agent's `real` attempts are reviewed (and so count)."""
    pending = ctx.ledger.supervision.pending_reviews(agent_id, except_attempt=attempt_id)
    cap = ctx.settings.max_pending_reviews
    if len(pending) >= cap:
        raise Conflict(
            f"attempt_id: you have {len(pending)} reviews in flight ({', '.join(pending)}; at most {cap}); "
            "wait for a verdict with get_review, then request this one",
            field="attempt_id",
        )
    if ctx.ledger.attempts.get(attempt_id)["budget_class"] not in (None, "real"):
        return
    plateau = ctx.ledger.supervision.focus_required(agent_id)
    if plateau is not None:
        raise Conflict(
            f"attempt_id: your lane plateaued (heartbeat #{plateau['heartbeat_id']}); post_note kind=focus with "
            "focus, evidence, remaining_budget and abandon_condition before more real attempts are reviewed",
            field="attempt_id",
        )


class GetReviewInput(BaseModel):
    review_id: str | None = Field(default=None, description="from request_review")
    attempt_id: str | None = Field(default=None, description="or the attempt (its latest review)")
    wait_s: Annotated[float, Field(ge=0, le=55, description="wait up to this long for the verdict")] = 30


class CheckView(BaseModel):
    code: str
    severity: str
    message: str
    evidence: dict[str, Any]


class MetricView(BaseModel):
    scope: str
    fold: int | None
    metric: str
    verified: float | None
    declared: float | None
    n_cases: int
    n_valid: int
    n_nan: int
    n_capped: int


class ReviewView(ToolResult):
    review_id: str
    attempt_id: str
    status: str = Field(description="queued, running, done or failed")
    verdict: str | None
    attempt_status: str
    progress: float | None
    stage: str | None
    failed_checks: list[CheckView] = Field(description="errors reject the attempt; warnings do not")
    passed_checks: list[str]
    metrics: list[MetricView]
    error: str | None
    report: str | None = Field(description="full report, workspace-relative")


def get_review(ctx: ToolContext, request: GetReviewInput, progress: Progress | None = None) -> ReviewView:
    """Status, verdict, failed checks (code, message, evidence) and verified vs declared metrics of a
    review; waits up to wait_s for the verdict."""
    review = _find(ctx, request)
    deadline = time.monotonic() + min(request.wait_s, ctx.settings.max_wait_s)
    while review["status"] in ("queued", "running") and (left := deadline - time.monotonic()) > 0:
        pool = reviewer(ctx.services)
        pool.wait(review["review_id"], min(POLL_S, left))
        review = ctx.ledger.reviews.get(review["review_id"])
        if progress and review["status"] == "running":
            state = pool.progress(review["review_id"])
            progress(float(state.get("fraction", 0.0)), 1.0, str(state.get("stage", "running")))
    return _view(ctx, review)


def _find(ctx: ToolContext, request: GetReviewInput) -> dict[str, Any]:
    if request.review_id:
        return ctx.ledger.reviews.get(request.review_id)
    if request.attempt_id:
        return ctx.ledger.reviews.latest_for(request.attempt_id)
    raise invalid("review_id", None, "a review_id (from request_review) or an attempt_id")


def _view(ctx: ToolContext, review: dict[str, Any]) -> ReviewView:
    review_id, attempt_id = review["review_id"], review["attempt_id"]
    checks = ctx.ledger.reviews.checks(review_id)
    state = reviewer(ctx.services).progress(review_id) if review["status"] == "running" else {}
    return ReviewView(
        review_id=review_id,
        attempt_id=attempt_id,
        status=review["status"],
        verdict=review["verdict"],
        attempt_status=ctx.ledger.attempts.get(attempt_id)["status"],
        progress=1.0 if review["status"] == "done" else state.get("fraction"),
        stage=state.get("stage"),
        failed_checks=[CheckView(**{k: c[k] for k in CheckView.model_fields}) for c in checks if not c["passed"]],
        passed_checks=[c["code"] for c in checks if c["passed"]],
        metrics=_metrics(ctx, attempt_id),
        error=review["error"],
        report=review["report_path"],
    )


def _metrics(ctx: ToolContext, attempt_id: str) -> list[MetricView]:
    declared = ctx.ledger.attempts.scores(attempt_id, "agent")
    views = []
    for row in ctx.ledger.reviews.verified(attempt_id):
        claimed = declared.get(row["fold"], {}).get(row["metric"]) if row["scope"] == "fold" else None
        views.append(MetricView(verified=row.pop("value"), declared=claimed, **row))
    return views


class LeaderboardInput(BaseModel):
    lane_id: str | None = Field(default=None, description="one lane only (default: every lane)")
    per_lane: Annotated[int, Field(ge=1, le=50)] = 5


class LeaderboardRow(BaseModel):
    lane_id: str | None
    rank: int
    attempt_id: str
    agent_id: str
    commit: str
    verified_score: float
    score_se: float | None = Field(description="standard error of verified_score from its per-case scores")
    tries: int = Field(description="attempts the same agent had scored on the same lane")
    ranked_by: float = Field(
        description="the bound ranked on: verified_score less z·score_se (plus, if lower "
        "is better), z widened for the tries (Bonferroni at 5 %)"
    )
    n_folds: int


class Leaderboard(ToolResult):
    metric: str
    direction: str
    rows: list[LeaderboardRow]


def leaderboard(ctx: ToolContext, request: LeaderboardInput) -> Leaderboard:
    """Accepted attempts ranked per lane by a pessimistic bound of the reviewer's verified primary metric
    (mean over folds), widened for the agent's number of tries on the lane, so a lucky repeat is no win."""
    primary = ctx.contract.primary
    rows = ctx.ledger.reviews.leaderboard(primary.direction == "higher_better", request.lane_id, request.per_lane)
    return Leaderboard(
        metric=primary.name,
        direction=primary.direction,
        rows=[
            LeaderboardRow(
                lane_id=r["lane_id"],
                rank=r["rank"],
                attempt_id=r["attempt_id"],
                agent_id=r["agent_id"],
                commit=r["commit_sha"][:12],
                verified_score=r["verified_score"],
                score_se=r["score_se"],
                tries=r["tries"],
                ranked_by=r["score_bound"],
                n_folds=r["n_folds"],
            )
            for r in rows
        ],
    )


REQUEST = ToolSpec(
    "request_review", "Request a review", RequestReviewInput, ReviewQueued, request_review, roles=WORKERS
)
GET = ToolSpec(
    "get_review",
    "Get a review",
    GetReviewInput,
    ReviewView,
    get_review,
    roles=ALL_ROLES,
    read_only=True,
    wants_progress=True,
)
LEADERBOARD = ToolSpec(
    "leaderboard", "Leaderboard", LeaderboardInput, Leaderboard, leaderboard, roles=ALL_ROLES, read_only=True
)
TOOLS = [REQUEST, GET, LEADERBOARD]
