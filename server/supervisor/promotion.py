"""Promotion (DESIGN §9): rank lanes by their best counted attempt (accepted, `real`, holdout-gated,
verified primary score), in the metric's direction. The runner-up is kept as challenger when the gap
between the two is within noise: the fold spreads of the two best attempts, combined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from server.supervisor.state import RunView
from tools.run_evidence import AttemptEvidence


@dataclass(frozen=True)
class LaneEvidence:
    lane_id: str
    best: AttemptEvidence

    @property
    def score(self) -> float:
        assert self.best.verified_score is not None
        return self.best.verified_score

    @property
    def spread(self) -> float:
        return self.best.fold_spread or 0.0

    def describe(self, metric: str) -> str:
        return (
            f"lane {self.lane_id}: {self.best.attempt_id} {metric}={self.score:.4g} "
            f"(fold spread {self.spread:.3g} over {self.best.n_folds} fold(s))"
        )


@dataclass(frozen=True)
class Promotion:
    promoted: LaneEvidence
    challenger: LaneEvidence | None
    reason: str
    ranking: list[LaneEvidence] = field(default_factory=list)


def rank_lanes(view: RunView) -> list[LaneEvidence]:
    """Lanes with counted evidence, best first (ties: fewer fold spread, then lane id)."""
    found = [LaneEvidence(lane.lane_id, best) for lane in view.evidence.lanes if (best := view.best(lane.lane_id))]
    sign = -1.0 if view.evidence.higher_is_better else 1.0
    return sorted(found, key=lambda lane: (sign * lane.score, lane.spread, lane.lane_id))


def noise(a: LaneEvidence, b: LaneEvidence) -> float:
    return math.hypot(a.spread, b.spread)


def promote(view: RunView) -> Promotion | None:
    """The promotion the evidence supports; None while no lane has counted evidence."""
    ranking = rank_lanes(view)
    if not ranking:
        return None
    metric, first = view.evidence.metric, ranking[0]
    if len(ranking) == 1:
        return Promotion(first, None, f"promoted {first.describe(metric)}; the only lane with evidence", ranking)
    second = ranking[1]
    gap, within = abs(first.score - second.score), noise(first, second)
    verdict = (
        f"gap {gap:.3g} ≤ noise {within:.3g}: {second.lane_id} kept as challenger"
        if gap <= within
        else f"gap {gap:.3g} > noise {within:.3g}: no challenger"
    )
    reason = f"promoted {first.describe(metric)} over {second.describe(metric)}; {verdict}"
    return Promotion(first, second if gap <= within else None, reason, ranking)
