"""Driving a run's evidence for supervisor scenarios: lanes and reviewed attempts written straight
into the ledger (the tests stand in for the reviewer here; the supervisor under test reaches the run
only through its MCP tools)."""

from __future__ import annotations

import git

from amid.server.ledger import Ledger
from amid.server.ledger.attempts import NewAttempt
from amid.server.ledger.database import utcnow
from amid.server.ledger.lanes import LaneRow
from amid.server.ledger.reviews import CheckRow, MetricRow, ReviewOutcome, Verdict
from amid.server.repo import pin_commit, store_commit
from amid.server.workspace import Workspace


def add_lanes(ledger: Ledger, tiers: dict[str, str]) -> None:
    rows = [
        LaneRow(
            lane_id=lane_id,
            title=lane_id,
            family="test",
            tier=tier,
            origin="planner",
            rank=0.0,
            lane_file=f"memory/lanes/{lane_id}.md",
            spec={"lane_id": lane_id},
        )
        for lane_id, tier in tiers.items()
    ]
    ledger.lanes.add(rows, utcnow())


def _head(workspace: Workspace) -> str:
    with git.Repo(workspace.repo_dir) as repo:
        return str(repo.commit("main").hexsha)


def reviewed(
    ledger: Ledger,
    workspace: Workspace,
    agent_id: str,
    lane_id: str,
    fold_scores: list[float],
    *,
    verdict: Verdict = "accepted",
    budget_class: str = "real",
    codes: tuple[str, ...] = (),
    pin: bool = True,
    case_se: float | None = None,
) -> str:
    """One attempt with a finished review: verified primary scores per fold (each with the standard
    error of its per-case scores, when given) and the verdict."""
    if ledger.identities.role_of(agent_id) is None:
        ledger.identities.create_token(agent_id, "agent")
    sha = _head(workspace)
    store_commit(workspace.commit_store, workspace.repo_dir, sha)
    new = NewAttempt(
        agent_id=agent_id,
        lane_id=lane_id,
        commit_sha=sha,
        folds=list(range(len(fold_scores))),
        budget_class=budget_class,
        parent_attempt_id=None,
        inference_command=None,
        idempotency_key=None,
        summary=None,
    )

    def finish(attempt_id: str) -> str:
        if pin:
            pin_commit(workspace.commit_store, sha, attempt_id)
        return f"artifacts/manifests/{attempt_id}.json"

    attempt_id, _ = ledger.attempts.create(new, on_created=finish)
    review, _ = ledger.reviews.request(attempt_id, agent_id, agent_id)
    assert ledger.reviews.start(review["review_id"])
    metric = str(ledger.activity.get_state("primary_metric"))
    checks = [CheckRow("HOLDOUT_GAP", True, "error", "within tolerance", {})]
    checks += [CheckRow(code, False, "error", f"{code} fired", {}) for code in codes]
    metrics = [MetricRow("fold", fold, metric, value, case_se=case_se) for fold, value in enumerate(fold_scores)]
    ledger.reviews.finish(review["review_id"], ReviewOutcome(verdict=verdict, checks=checks, metrics=metrics))
    return attempt_id


def pending(ledger: Ledger, workspace: Workspace, agent_id: str, lane_id: str) -> str:
    """An attempt submitted but not yet reviewed."""
    sha = _head(workspace)
    new = NewAttempt(
        agent_id=agent_id,
        lane_id=lane_id,
        commit_sha=sha,
        folds=[0],
        budget_class="real",
        parent_attempt_id=None,
        inference_command=None,
        idempotency_key=None,
        summary=None,
    )
    return ledger.attempts.create(new)[0]
