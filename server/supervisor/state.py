"""The supervisor's view of a run, kept current from `run_evidence` (`EvidenceSync`: the whole window
at start, then only what changed; never kept across restarts), and the questions every policy asks of
it: which attempts count, which lane is best, has a lane or an agent stopped improving.

Only `real` attempts that the reviewer accepted, whose holdout gate passed and that carry a verified
primary score count for coverage, plateau and promotion. "Best" is the one ranking of
`amid.server.ranking`: a pessimistic bound of the verified score, widened for the agent's tries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from amid.server.finality import counts
from amid.server.ranking import bound, order_key
from amid.tools.run_evidence import AttemptEvidence, Cause, EvidenceResult, FocusNote

ToolCaller = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class EvidenceSync:
    """The supervisor's copy of `run_evidence`: the first read is the whole window (the newest `limit`
    attempts and every accepted one, every heartbeat cause), each later read asks only for what changed
    since the last answer's cursor and merges it. Attempts that leave the window (neither accepted nor
    among the newest `limit`) are dropped, as the server's window drops them, so the copy stays the
    size of the window however long the run."""

    def __init__(self, limit: int = 1000) -> None:
        self.limit = limit
        self.cursor: str | None = None
        self.attempts: dict[str, AttemptEvidence] = {}
        self.causes: list[Cause] = []
        self.plateaus: list[Cause] = []
        self.focus_notes: list[FocusNote] = []
        self.tries: dict[tuple[str, str | None], int] = {}

    async def refresh(self, call: ToolCaller) -> RunView:
        while True:
            answer = EvidenceResult.model_validate(await self._read(call))
            self._merge(answer)
            if answer.complete:
                return RunView(self._whole(answer))

    async def _read(self, call: ToolCaller) -> dict[str, Any]:
        if self.cursor is None:
            return await call("run_evidence", {"limit": self.limit})
        try:
            return await call("run_evidence", {"limit": self.limit, "since": self.cursor})
        except Exception as error:
            if "without since" not in str(error):
                raise
            self.cursor = None  # the server refused the cursor (a restored ledger): read the whole window again
            return await call("run_evidence", {"limit": self.limit})

    def _merge(self, answer: EvidenceResult) -> None:
        if not answer.changes_only:
            self.attempts, self.causes, self.plateaus, self.focus_notes, self.tries = {}, [], [], [], {}
        self.tries.update(((t.agent_id, t.lane_id), t.tries) for t in answer.tries)
        self.attempts.update((a.attempt_id, a) for a in answer.attempts)
        self.causes += answer.causes_sent
        self.plateaus += answer.plateau_heartbeats
        self.focus_notes += answer.focus_notes
        self.cursor = answer.cursor
        if answer.attempts and len(self.attempts) > self.limit:
            self._drop_outside_window()

    def _drop_outside_window(self) -> None:
        ordered = sorted(self.attempts.values(), key=lambda a: (a.created_at, a.attempt_id))
        newest = {a.attempt_id for a in ordered[-self.limit :]}
        self.attempts = {a.attempt_id: a for a in ordered if a.attempt_id in newest or a.status == "accepted"}

    def _whole(self, answer: EvidenceResult) -> EvidenceResult:
        """The answer with the copy's whole lists; each ranked attempt's tries as the server counts them now
        (another try of the same agent on the same lane, scored later, widens an older one's bound)."""
        attempts = []
        for a in sorted(self.attempts.values(), key=lambda a: (a.created_at, a.attempt_id)):
            now = self.tries.get((a.agent_id, a.lane_id), a.tries) if a.ranked else a.tries
            attempts.append(a if now == a.tries else a.model_copy(update={"tries": now}))
        self.attempts = {a.attempt_id: a for a in attempts}
        return answer.model_copy(
            update={
                "attempts": attempts,
                "causes_sent": list(self.causes),
                "plateau_heartbeats": list(self.plateaus),
                "focus_notes": list(self.focus_notes),
                "changes_only": False,
            }
        )


@dataclass(frozen=True)
class RunView:
    evidence: EvidenceResult

    @cached_property
    def _sent(self) -> frozenset[tuple[str, str]]:
        return frozenset((c.agent_id, c.cause_key) for c in self.evidence.causes_sent)

    @property
    def stage(self) -> str:
        return self.evidence.stage

    def better(self, a: float, b: float | None) -> bool:
        """Whether score `a` is strictly better than `b` in the primary metric's direction."""
        if b is None:
            return True
        return a > b if self.evidence.higher_is_better else a < b

    def counts(self, attempt: AttemptEvidence) -> bool:
        """An attempt that counts for coverage, plateau and promotion (`amid.server.finality`)."""
        return counts(vars(attempt))

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
        """The pessimistic bound the attempt is ranked by (`amid.server.ranking`)."""
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
        return (agent_id, cause_key) in self._sent

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
