"""Data-conditioned method planning (DCMP): profile facts + lane templates + resources -> a lane portfolio.

A template becomes a lane when the task type is one it serves, every `applies_when` predicate holds
and no `excluded_when` predicate does; a foundation-model template also needs a registry model that
matches the task's modality and dimensionality. A lane whose required resource is missing here, or
whose matching models are all gated, is kept but downranked to `fallback`; when no primary baseline
is usable, the best usable baseline is promoted. Every template that does not become a lane is kept
as an excluded idea with the reason, so nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from amid.registry.schemas import FoundationModel, LaneTemplate
from amid.tools.planning.candidates import candidate_models, modality_mismatch
from amid.tools.planning.facts import PlanningFacts
from amid.tools.planning.portfolio import (
    CandidateModel,
    DataCondition,
    ExcludedIdea,
    LaneSpec,
    Portfolio,
    ScaffoldStep,
    ordered,
)
from amid.tools.planning.resources import Environment, resource_status

StepBuilder = Callable[[LaneSpec, PlanningFacts], list[ScaffoldStep]]

MAX_CANDIDATES = 5
TIER_BASE = {"primary": 300.0, "secondary": 200.0, "fallback": 100.0}
SPECIFICITY = 10.0  # per applies_when predicate that holds: a lane made for these data beats a generic one
CALIBRATION_FIRST = 50.0  # cheap, and every other lane relies on the mechanics it proves
FEW_CASES_PRETRAINED = 15.0  # few labelled cases favour pretrained weights
CACHED_WEIGHTS = 5.0  # weights already here cost no download


def plan_portfolio(
    facts: PlanningFacts,
    templates: Sequence[LaneTemplate],
    models: Sequence[FoundationModel],
    environment: Environment,
    steps: StepBuilder | None = None,
) -> Portfolio:
    """The lanes for these facts, best first, and every template left out with its reason."""
    lanes: list[LaneSpec] = []
    excluded: list[ExcludedIdea] = []
    for index, template in enumerate(templates):
        reason = exclusion_reason(template, facts)
        outcome = _excluded(template, reason) if reason else _instantiate(template, index, facts, models, environment)
        (excluded if isinstance(outcome, ExcludedIdea) else lanes).append(outcome)  # type: ignore[arg-type]
    lanes = _ensure_primary_baseline(lanes)
    if steps is not None:
        lanes = [
            lane.model_copy(update={"scaffold_steps": steps(lane, facts)}) if lane.scaffold else lane for lane in lanes
        ]
    return Portfolio(facts=facts, lanes=ordered(lanes), excluded=excluded)


def exclusion_reason(template: LaneTemplate, facts: PlanningFacts) -> str | None:
    """Why the template does not apply to these facts, or None when it does."""
    if facts.task_type not in template.task_types:
        return f"task type {facts.task_type} is not one the lane serves ({', '.join(template.task_types)})"
    missing = [p for p in template.applies_when if not facts.holds(p)]
    if missing:
        return "needs " + "; ".join(facts.describe(p) for p in missing)
    blocking = [p for p in template.excluded_when if facts.holds(p)]
    if blocking:
        return "excluded when " + "; ".join(facts.describe(p) for p in blocking)
    if template.fm_query is not None:
        return modality_mismatch(template.fm_query, facts)
    return None


def _excluded(template: LaneTemplate, reason: str) -> ExcludedIdea:
    return ExcludedIdea(template_id=template.id, title=template.title, reason=reason)


def _instantiate(
    template: LaneTemplate,
    index: int,
    facts: PlanningFacts,
    models: Sequence[FoundationModel],
    environment: Environment,
) -> LaneSpec | ExcludedIdea:
    resources = [resource_status(r, models, environment) for r in template.resources]
    downranked = [
        f"required {r.name} is unavailable here: {r.detail}" for r in resources if r.required and not r.available
    ]
    candidates: list[CandidateModel] = []
    if template.fm_query is not None:
        usable, blocked = candidate_models(template.fm_query, facts, models, environment)
        if not usable and not blocked:
            return _excluded(template, _no_model_reason(template, facts))
        if not usable:
            names = ", ".join(c.model_id for c in blocked[:MAX_CANDIDATES])
            downranked.append(f"only gated or on-request weights match ({names}): request access first")
        candidates = (usable or blocked)[:MAX_CANDIDATES]
    tier = "fallback" if downranked else template.tier
    return LaneSpec(
        lane_id=template.id,
        title=template.title,
        family=template.family,
        tier=tier,
        rank=_rank(template, tier, index, facts, candidates),
        template_id=template.id,
        hypothesis=template.hypothesis,
        motivation=_motivation(template, facts),
        data_conditions=_conditions(template, facts),
        resources=resources,
        candidate_models=candidates,
        implementation_plan=list(template.implementation_plan),
        preprocessing_assumptions=list(template.preprocessing_assumptions),
        validation_obligations=list(template.validation_obligations),
        budget_estimate=template.budget_estimate,
        expected_artifacts=list(template.expected_artifacts),
        failure_modes=list(template.failure_modes),
        scaffold=template.scaffold,
        downranked=downranked,
    )


def _no_model_reason(template: LaneTemplate, facts: PlanningFacts) -> str:
    query = template.fm_query
    families = ", ".join(query.task_families) if query and query.task_families else "any task family"
    return f"no registry model matches modality {facts.modality}, {facts.dims}d and {families}"


def _rank(
    template: LaneTemplate, tier: str, index: int, facts: PlanningFacts, candidates: list[CandidateModel]
) -> float:
    rank = TIER_BASE[tier] + SPECIFICITY * len(template.applies_when) - index / 100
    if template.family == "calibration":
        rank += CALIBRATION_FIRST
    if template.family == "foundation_model" and facts.holds("few_cases"):
        rank += FEW_CASES_PRETRAINED
    if any(c.availability == "cached" for c in candidates):
        rank += CACHED_WEIGHTS
    return round(rank, 3)


def _motivation(template: LaneTemplate, facts: PlanningFacts) -> str:
    conditions = "; ".join(facts.describe(p) for p in template.applies_when)
    conditions = conditions or f"no data condition: applies to every {facts.task_type} task"
    return template.motivation_template.replace("{predicates}", conditions).replace("{profile}", facts.summary())


def _conditions(template: LaneTemplate, facts: PlanningFacts) -> list[DataCondition]:
    wanted = [(p, True) for p in template.applies_when] + [(p, False) for p in template.excluded_when]
    return [
        DataCondition(predicate=p, required=required, value=facts.holds(p), evidence=facts.evidence.get(p, {}))
        for p, required in wanted
    ]


def _ensure_primary_baseline(lanes: list[LaneSpec]) -> list[LaneSpec]:
    """Promote the best usable baseline when no primary baseline is usable here."""
    baselines = [lane for lane in lanes if lane.family == "baseline"]
    if not baselines or any(lane.tier == "primary" for lane in baselines):
        return lanes
    usable = [lane for lane in baselines if not lane.downranked]
    if not usable:
        return lanes
    best = max(usable, key=lambda lane: lane.rank)
    blocked = "; ".join(f"{lane.lane_id}: {lane.downranked[0]}" for lane in baselines if lane.downranked)
    reason = "promoted to primary: no primary baseline is usable here" + (f" ({blocked})" if blocked else "")
    promoted = best.model_copy(
        update={
            "tier": "primary",
            "rank": best.rank + TIER_BASE["primary"] - TIER_BASE[best.tier],
            "promoted": [reason],
        }
    )
    return [promoted if lane is best else lane for lane in lanes]
