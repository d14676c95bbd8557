"""Promotion: rank lanes by their top-ranked counted attempt (accepted, `real`, holdout-gated,
verified primary score) through the one ranking of `amid.server.ranking` — a pessimistic bound of the
verified score, widened for the tries its agent made on the lane, in the metric's direction. The
runner-up is kept as challenger when the gap between the two raw scores is within noise: the
standard errors of the two scores, combined. A score's standard error comes from its per-case
spread (so one-fold attempts have noise too); without one, from its fold scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from amid.server.supervisor.state import RunView
from amid.tools.run_evidence import AttemptEvidence


@dataclass(frozen=True)
class LaneEvidence:
    lane_id: str
    best: AttemptEvidence
    bound: float

    @property
    def score(self) -> float:
        assert self.best.verified_score is not None
        return self.best.verified_score

    @property
    def spread(self) -> float:
        """Standard error of the verified score (per-case spread; else fold scores over √folds)."""
        if self.best.score_se is not None:
            return self.best.score_se
        folds = self.best.n_folds or 1
        return (self.best.fold_spread or 0.0) / math.sqrt(folds)

    def describe(self, metric: str) -> str:
        return (
            f"lane {self.lane_id}: {self.best.attempt_id} {metric}={self.score:.4g} ± {self.spread:.3g} "
            f"(bound {self.bound:.4g} after {self.best.tries} tries, {self.best.n_folds} fold(s))"
        )


@dataclass(frozen=True)
class Promotion:
    promoted: LaneEvidence
    challenger: LaneEvidence | None
    reason: str
    ranking: list[LaneEvidence] = field(default_factory=list)


def rank_lanes(view: RunView) -> list[LaneEvidence]:
    """Lanes with counted evidence, best first, in the order their top attempts rank."""
    tops = [best for lane in view.evidence.lanes if (best := view.best(lane.lane_id))]
    return [LaneEvidence(str(a.lane_id), a, view.bound(a)) for a in view.ranked(tops)]


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
