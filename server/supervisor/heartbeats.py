"""Heartbeats (docs/ARCHITECTURE.md §9): prompts, each keyed by its cause so it is sent once per agent and cause,
however often the supervisor (or a restarted one) decides it again.

- reflection:<review_id>          after a verdict on the agent's attempt
- consolidation:<n>               every `consolidate_every` counted attempts of the run, to every agent
- plateau:<agent>:<lane>:<first>:<k>  the agent's last `plateau_after` reviewed real attempts on its lane
                                  did not improve it; demands a focus note
- stage:<stage>                   the run moved on, with the agent's role in the new stage

A prompt carries only the receiving agent's own attempts and public state (stage, lane statuses,
budget left): never another agent's attempt ids, scores or notes. CORAL leaked one agent's score
into another's resume prompt; `test_a_heartbeat_carries_only_the_receivers_own_results` guards this.
"""

from __future__ import annotations

from dataclasses import dataclass

from amid.server.supervisor.state import RunView, remaining_s
from amid.tools.run_evidence import AttemptEvidence

FOCUS = (
    "post_note kind=focus with focus (what you try next), evidence (your verified results behind it), "
    "remaining_budget and abandon_condition; until then your next real attempts are not reviewed"
)


@dataclass(frozen=True)
class RoleAssignment:
    """An agent's role in a stage (docs/ARCHITECTURE.md §9 exploitation roles), recorded with `assign_role`."""

    agent_id: str
    stage: str
    role: str
    lane_id: str | None
    reason: str


@dataclass(frozen=True)
class Heartbeat:
    agent_id: str
    kind: str
    cause_key: str
    prompt: str
    role: RoleAssignment | None = None  # a stage heartbeat assigns the role it names


def _score(view: RunView, a: AttemptEvidence) -> str:
    if a.verified_score is None:
        return "no verified score"
    return f"verified {view.evidence.metric}={a.verified_score:.4g} (fold spread {a.fold_spread or 0:.3g})"


def _public(view: RunView) -> str:
    left = remaining_s(view)
    budget = f"{left / 60:.0f} min of budget left" if left is not None else "no wall-clock budget"
    return f"Stage {view.stage}; {budget}."


def _own_summary(view: RunView, agent_id: str) -> str:
    mine = [a for a in view.own_attempts(agent_id) if a.verdict]
    best = [a for a in mine if view.counts(a)]
    if not mine:
        return "You have no reviewed attempt yet."
    top: AttemptEvidence | None = None
    for a in best:
        if top is None or view.better(a.verified_score or 0.0, top.verified_score):
            top = a
    line = f"You have {len(mine)} reviewed attempt(s), {len(best)} counted"
    return line + (f"; your best is {top.attempt_id}, {_score(view, top)}." if top else ".")


def reflections(view: RunView) -> list[Heartbeat]:
    beats = []
    for a in view.evidence.attempts:
        if a.verdict is None or a.review_id is None or view.sent(a.agent_id, f"reflection:{a.review_id}"):
            continue  # a prompt is built only for a verdict not yet reflected on (the window holds thousands)
        codes = f" with {', '.join(a.failed_codes)}" if a.failed_codes else ""
        prompt = (
            f"Your attempt {a.attempt_id} (lane {a.lane_id}, {a.budget_class}) was {a.verdict}{codes}; "
            f"{_score(view, a)}. {_public(view)} Write a reflection note (post_note kind=reflection): what the "
            "verdict and the checks tell you, and what you will change next."
        )
        beats.append(Heartbeat(a.agent_id, "reflection", f"reflection:{a.review_id}", prompt))
    return beats


def consolidations(view: RunView) -> list[Heartbeat]:
    """At every `consolidate_every` counted attempts, to every agent: the latest mark only (a supervisor
    that was down while several passed sends one, not a prompt per mark: that grew with the run)."""
    every = view.evidence.thresholds.consolidate_every
    mark = len(view.counted()) // every * every
    beats = []
    if mark:
        for agent_id in view.evidence.agents:
            if view.sent(agent_id, f"consolidation:{mark}"):
                continue
            prompt = (
                f"The run has {mark} accepted real attempts. {_public(view)} {_own_summary(view, agent_id)} "
                "Consolidate: read_notes, write down what worked and what did not (post_note), and save_skill "
                "any procedure worth reusing."
            )
            beats.append(Heartbeat(agent_id, "consolidation", f"consolidation:{mark}", prompt))
    return beats


def _current_lane(view: RunView, agent_id: str) -> str | None:
    mine = view.reviewed_real(agent_id=agent_id)
    return mine[-1].lane_id if mine else None


def plateaus(view: RunView) -> list[Heartbeat]:
    k = view.evidence.thresholds.plateau_after
    beats = []
    for agent_id in view.evidence.agents:
        lane_id = _current_lane(view, agent_id)
        if lane_id is None:
            continue
        streak = view.non_improving_streak(lane_id, agent_id=agent_id)
        for block in range(1, len(streak) // k + 1):
            key = f"plateau:{agent_id}:{lane_id}:{streak[0]}:{block}"
            if view.sent(agent_id, key):
                continue  # a prompt is built only for a block not yet sent (a long streak has hundreds)
            tried = ", ".join(streak[(block - 1) * k : block * k])
            prompt = (
                f"Plateau on lane {lane_id}: your last {k} reviewed real attempts ({tried}) did not improve it. "
                f"{_public(view)} {_own_summary(view, agent_id)} Before going on, {FOCUS}. Consider a different "
                "approach or another open lane (list_lanes)."
            )
            beats.append(Heartbeat(agent_id, "plateau", key, prompt))
    return beats


def _blocked_gain(view: RunView, agent_id: str) -> AttemptEvidence | None:
    """The agent's latest rejected attempt whose raw verified score beats every counted attempt on its
    lane: a good result the checks blocked (a rejected duplicate of a counted attempt is not one)."""
    for a in reversed(view.own_attempts(agent_id)):
        if a.verdict != "rejected" or a.verified_score is None:
            continue
        counted = [b.verified_score for b in view.evidence.attempts if b.lane_id == a.lane_id and view.counts(b)]
        if all(view.better(a.verified_score, score) for score in counted):
            return a
    return None


def role_of(view: RunView, agent_id: str, stage: str) -> RoleAssignment:
    lane_id = _current_lane(view, agent_id)
    status = view.lane_status(lane_id) if lane_id else None

    def made(role: str, lane: str | None, reason: str) -> RoleAssignment:
        return RoleAssignment(agent_id, stage, role, lane, reason)

    if stage == "finalization":
        return made("finalizer", lane_id, "make sure your best attempt's evidence is complete; start no new lane")
    if status == "promoted":
        return made("optimizer", lane_id, f"optimizer of the promoted lane {lane_id}: improve its verified score")
    if status == "challenger":
        return made("challenger", lane_id, f"challenger on lane {lane_id}: try to overtake the promoted lane")
    blocked = _blocked_gain(view, agent_id)
    if blocked is not None:
        return made(
            "repair",
            blocked.lane_id,
            f"repair: your attempt {blocked.attempt_id} scored better than anything "
            "counted on its lane but failed checks; fix its evidence",
        )
    promoted = view.lanes_with("promoted", "challenger")
    return made(
        "support",
        promoted[0] if promoted else None,
        f"support the promoted lane(s) {', '.join(promoted) or 'none'}: claim one or help with ablations",
    )


def roles_due(view: RunView) -> list[RoleAssignment]:
    """Every agent's role in the current stage, re-decided each tick (a lane promoted later, an
    attempt to repair); stage heartbeats carry the role of the stage they announce."""
    if view.stage not in ("exploitation", "finalization"):
        return []
    return [role_of(view, agent_id, view.stage) for agent_id in view.evidence.agents]


def stage_notices(view: RunView) -> list[Heartbeat]:
    beats = []
    for t in view.evidence.transitions:
        if t.to_stage == "done":
            continue
        for agent_id in view.evidence.agents:
            role = role_of(view, agent_id, t.to_stage)
            prompt = (
                f"The run moved from {t.from_stage} to {t.to_stage}: {t.reason}. {_public(view)} "
                f"Your role now: {role.reason}."
            )
            beats.append(Heartbeat(agent_id, "stage", f"stage:{t.to_stage}", prompt, role))
    return beats


def due(view: RunView) -> list[Heartbeat]:
    """Every heartbeat the evidence calls for that has not been sent yet."""
    every = [*reflections(view), *consolidations(view), *plateaus(view), *stage_notices(view)]
    return [b for b in every if not view.sent(b.agent_id, b.cause_key)]
