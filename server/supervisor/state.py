"""The supervisor's view of a run, rebuilt from `run_evidence` on every tick (never kept across
restarts), and the questions every policy asks of it: which attempts count, which lane is best,
has a lane or an agent stopped improving.

Only `real` attempts that the reviewer accepted, whose holdout gate passed and that carry a verified
primary score count for coverage, plateau and promotion. "Best" is the one ranking of
`server.ranking`: a pessimistic bound of the verified score, widened for the agent's tries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.ranking import bound, order_key
from tools.run_evidence import AttemptEvidence, EvidenceResult


@dataclass(frozen=True)
class RunView:
    evidence: EvidenceResult

    @classmethod
    def parse(cls, raw: dict[str, object]) -> RunView:
        return cls(EvidenceResult.model_validate(raw))

    @property
    def stage(self) -> str:
        return self.evidence.stage

    def better(self, a: float, b: float | None) -> bool:
        """Whether score `a` is strictly better than `b` in the primary metric's direction."""
        if b is None:
            return True
        return a > b if self.evidence.higher_is_better else a < b

    def counts(self, attempt: AttemptEvidence) -> bool:
        """An attempt that counts for coverage, plateau and promotion."""
        return (
            attempt.status == "accepted"
            and attempt.budget_class == "real"
            and attempt.holdout_gated
            and attempt.verified_score is not None
        )

    def reviewed_real(self, lane_id: str | None = None, agent_id: str | None = None) -> list[AttemptEvidence]:
        """Reviewed `real` attempts (accepted, rejected or revoked), oldest first."""
        return [
            a
            for a in self.evidence.attempts
            if a.budget_class == "real"
            and a.verdict is not None
            and a.status in ("accepted", "rejected", "revoked")
            and (lane_id is None or a.lane_id == lane_id)
            and (agent_id is None or a.agent_id == agent_id)
        ]

    def counted(self, lane_id: str | None = None) -> list[AttemptEvidence]:
        return [a for a in self.evidence.attempts if self.counts(a) and (lane_id is None or a.lane_id == lane_id)]

    def bound(self, attempt: AttemptEvidence) -> float:
        """The pessimistic bound the attempt is ranked by (`server.ranking`)."""
        assert attempt.verified_score is not None
        return bound(attempt.verified_score, attempt.score_se, attempt.tries, self.evidence.higher_is_better)

    def ranked(self, attempts: list[AttemptEvidence]) -> list[AttemptEvidence]:
        """Attempts with a verified score, best first by the one ranking (ties: older, then id)."""
        hib = self.evidence.higher_is_better

        def key(a: AttemptEvidence) -> tuple[Any, ...]:
            return order_key(a.verified_score or 0.0, a.score_se, a.tries, hib, a.created_at, a.attempt_id)

        return sorted((a for a in attempts if a.verified_score is not None), key=key)

    def best(self, lane_id: str) -> AttemptEvidence | None:
        """The lane's top-ranked counted attempt."""
        ranked = self.ranked(self.counted(lane_id))
        return ranked[0] if ranked else None

    def non_improving_streak(self, lane_id: str, agent_id: str | None = None, since: str | None = None) -> list[str]:
        """The trailing reviewed `real` attempts (of one agent, or anyone; created after `since`) that
        did not improve the lane's best verified score at their time; attempt ids, oldest first."""
        best: float | None = None
        streak: list[str] = []
        for attempt in self.reviewed_real(lane_id):
            improved = self.counts(attempt) and self.better(attempt.verified_score or 0.0, best)
            if improved:
                best = attempt.verified_score
            if since is not None and attempt.created_at <= since:
                continue
            if agent_id is not None and attempt.agent_id != agent_id:
                continue
            streak = [] if improved else [*streak, attempt.attempt_id]
        return streak

    def covered(self, lane_id: str) -> bool:
        return len(self.counted(lane_id)) >= self.evidence.thresholds.coverage_attempts

    def plateaued(self, lane_id: str, since: str | None = None) -> bool:
        return len(self.non_improving_streak(lane_id, since=since)) >= self.evidence.thresholds.plateau_after

    def budget_fraction(self) -> float | None:
        """Fraction of the wall-clock budget spent; None without a budget (the run goes until stopped)."""
        if not self.evidence.budget_s or self.evidence.elapsed_s is None:
            return None
        return self.evidence.elapsed_s / self.evidence.budget_s

    def lane_status(self, lane_id: str) -> str | None:
        return next((lane.status for lane in self.evidence.lanes if lane.lane_id == lane_id), None)

    def lanes_with(self, *statuses: str) -> list[str]:
        return [lane.lane_id for lane in self.evidence.lanes if lane.status in statuses]

    def entered(self, stage: str) -> str | None:
        """When the run entered `stage` (ISO time), if it did."""
        return next((t.decided_at for t in self.evidence.transitions if t.to_stage == stage), None)

    def sent(self, agent_id: str, cause_key: str) -> bool:
        return any(c.agent_id == agent_id and c.cause_key == cause_key for c in self.evidence.causes_sent)

    def role(self, agent_id: str) -> tuple[str, str, str | None] | None:
        """The agent's current (stage, role, lane) as recorded on the server."""
        found = next((r for r in self.evidence.roles if r.agent_id == agent_id), None)
        return (found.stage, found.role, found.lane_id) if found else None

    def own_attempts(self, agent_id: str) -> list[AttemptEvidence]:
        return [a for a in self.evidence.attempts if a.agent_id == agent_id]


def remaining_s(view: RunView) -> float | None:
    if view.evidence.budget_s is None or view.evidence.elapsed_s is None:
        return None
    return max(0.0, view.evidence.budget_s - view.evidence.elapsed_s)
