"""When a stage ends (docs/ARCHITECTURE.md §9), as pure functions of the run's view.

- exploration → exploitation: every primary lane is covered (≥ coverage_attempts counted attempts)
  and plateaued, or waived; or exploration_fraction of the wall-clock budget is spent. Either way
  only once some lane has counted evidence to promote.
- exploitation → finalization: the promoted (and challenger) lanes plateaued since promotion, or
  finalization_fraction of the budget is spent. Without a budget and without a plateau the run
  stays in exploitation until stopped.
- finalization → done: once the final attempt is recorded.

Lane states the supervisor records on the way: covered, plateaued, and waived for primary lanes
without counted evidence when the budget ends exploration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amid.server.supervisor.promotion import promote
from amid.server.supervisor.state import RunView

SETTLED = frozenset({"promoted", "challenger", "waived", "retired"})


@dataclass(frozen=True)
class StageChange:
    from_stage: str
    to_stage: str
    reason: str


@dataclass(frozen=True)
class LaneChange:
    lane_id: str
    status: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def primary_lanes(view: RunView) -> list[str]:
    return [lane.lane_id for lane in view.evidence.lanes if lane.tier == "primary"]


def lane_progress(view: RunView) -> list[LaneChange]:
    """covered / plateaued, for lanes the supervisor has not settled yet."""
    changes = []
    for lane in view.evidence.lanes:
        if lane.status in SETTLED or not view.covered(lane.lane_id):
            continue
        n = len(view.counted(lane.lane_id))
        streak = view.non_improving_streak(lane.lane_id)
        numbers = {"accepted_real": n, "non_improving": streak}
        if view.plateaued(lane.lane_id) and lane.status != "plateaued":
            reason = f"{n} accepted real attempt(s); last {len(streak)} reviewed did not improve it"
            changes.append(LaneChange(lane.lane_id, "plateaued", reason, numbers))
        elif not view.plateaued(lane.lane_id) and lane.status not in ("covered", "plateaued"):
            reason = f"{n} accepted real attempt(s) (coverage needs {view.evidence.thresholds.coverage_attempts})"
            changes.append(LaneChange(lane.lane_id, "covered", reason, numbers))
    return changes


def _exploration_done(view: RunView) -> str | None:
    fraction = view.budget_fraction()
    limit = view.evidence.thresholds.exploration_fraction
    if fraction is not None and fraction >= limit:
        return f"{fraction:.0%} of the wall-clock budget spent (exploration ends at {limit:.0%})"
    lanes = primary_lanes(view)
    open_lanes = [
        lane_id
        for lane_id in lanes
        if view.lane_status(lane_id) != "waived" and not (view.covered(lane_id) and view.plateaued(lane_id))
    ]
    if lanes and not open_lanes:
        return f"every primary lane is covered and plateaued, or waived ({len(lanes)} lanes)"
    return None


def waivers(view: RunView, why: str) -> list[LaneChange]:
    """Primary lanes with no counted evidence when exploration ends by the budget."""
    return [
        LaneChange(lane_id, "waived", f"no accepted real attempt when exploration ended: {why}")
        for lane_id in primary_lanes(view)
        if view.lane_status(lane_id) not in SETTLED and not view.counted(lane_id)
    ]


def _exploitation_done(view: RunView) -> str | None:
    fraction = view.budget_fraction()
    limit = view.evidence.thresholds.finalization_fraction
    if fraction is not None and fraction >= limit:
        return f"{fraction:.0%} of the wall-clock budget spent (finalization starts at {limit:.0%})"
    since = view.entered("exploitation")
    lanes = view.lanes_with("promoted", "challenger")
    if lanes and all(view.plateaued(lane_id, since=since) for lane_id in lanes):
        return f"the promoted lane(s) {', '.join(lanes)} plateaued since promotion"
    return None


def next_change(view: RunView) -> StageChange | None:
    """The stage change the evidence calls for now, if any (finalization → done is the loop's)."""
    if view.stage == "exploration":
        why = _exploration_done(view)
        if why and promote(view) is not None:
            return StageChange("exploration", "exploitation", why)
    if view.stage == "exploitation":
        why = _exploitation_done(view)
        if why:
            return StageChange("exploitation", "finalization", why)
    return None
