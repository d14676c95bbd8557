"""Agent-proposed lanes: the agent gives the idea, the planner fills every other lane field.

A proposal starts downranked (tier `fallback`) until accepted attempts support it. Its data
conditions are checked against the profile; a condition the data do not show is recorded, not hidden.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from pydantic import BaseModel, ConfigDict, Field

from amid.registry.schemas import Budget, FoundationModel, LaneFamily, LaneTemplate, Predicate, Resource
from amid.server.errors import invalid
from amid.tools.planning.facts import PlanningFacts
from amid.tools.planning.portfolio import DataCondition, LaneSpec
from amid.tools.planning.resources import Environment, resource_status

PROPOSAL_RANK = 50.0  # below every planner lane: a proposal earns its place with accepted attempts

# What every lane of a family owes the reviewer and produces, when no base template says more.
FAMILY_OBLIGATIONS = [
    "Train only on the locked fold's training cases; the training manifest lists them (no SPLIT_LEAK).",
    "Predictions for every case of the declared fold in the contract's prediction schema.",
    "Beats the calibration lane's trivial predictor on the same fold.",
]
FAMILY_ARTIFACTS = ["training manifest", "validation predictions", "training log", "checkpoint"]
FAMILY_FAILURE_MODES = ["The idea does not beat its parent or the baseline on the same fold (abandon it then)."]
DEFAULT_BUDGET = Budget(gpu_hours=4, wall_hours=6)


class LaneProposal(BaseModel):
    """An agent's lane idea: the fields only the agent can know."""

    model_config = ConfigDict(frozen=True)

    title: str = Field(min_length=3, max_length=120)
    family: LaneFamily
    hypothesis: str = Field(min_length=10, max_length=2000)
    motivation: str = Field(default="", max_length=2000)
    predicates: list[Predicate] = Field(default_factory=list)
    base_template: str | None = None
    implementation_plan: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)


def lane_id_for(title: str, taken: Collection[str]) -> str:
    """`agent-<slug of title>`, with -2, -3… when taken."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.casefold()).strip("-")[:48].strip("-") or "lane"
    base = f"agent-{slug}"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def complete_proposal(
    proposal: LaneProposal,
    proposed_by: str,
    facts: PlanningFacts,
    templates: Sequence[LaneTemplate],
    models: Sequence[FoundationModel],
    environment: Environment,
    taken: Collection[str],
) -> LaneSpec:
    """The full lane for a proposal: fields from its base template (if any) and the family defaults."""
    base = _base(proposal, templates)
    resources = [*(base.resources if base else [])]
    resources += [Resource(kind="python_package", name=name, required=True) for name in proposal.packages]
    resources += [Resource(kind="registry_model", name=name, required=False) for name in proposal.models]
    conditions = [
        DataCondition(predicate=p, required=True, value=facts.holds(p), evidence=facts.evidence.get(p, {}))
        for p in proposal.predicates
    ]
    downranked = ["agent-proposed lanes start downranked until accepted attempts support them"]
    downranked += [f"claimed condition does not hold: {facts.describe(c.predicate)}" for c in conditions if not c.value]
    return LaneSpec(
        lane_id=lane_id_for(proposal.title, taken),
        title=proposal.title,
        family=proposal.family,
        tier="fallback",
        rank=PROPOSAL_RANK,
        origin="agent",
        proposed_by=proposed_by,
        template_id=base.id if base else None,
        hypothesis=proposal.hypothesis,
        motivation=_motivation(proposal, facts),
        data_conditions=conditions,
        resources=[resource_status(r, models, environment) for r in resources],
        implementation_plan=proposal.implementation_plan
        or (list(base.implementation_plan) if base else [])
        or ["Write the plan as the first note of this lane (post_note), then implement it on fold 0."],
        preprocessing_assumptions=list(base.preprocessing_assumptions) if base else [],
        validation_obligations=_merged(FAMILY_OBLIGATIONS, base.validation_obligations if base else []),
        budget_estimate=base.budget_estimate if base else DEFAULT_BUDGET,
        expected_artifacts=_merged(base.expected_artifacts if base else [], FAMILY_ARTIFACTS),
        failure_modes=_merged(base.failure_modes if base else [], FAMILY_FAILURE_MODES),
        scaffold=base.scaffold if base else None,
        downranked=downranked,
    )


def _base(proposal: LaneProposal, templates: Sequence[LaneTemplate]) -> LaneTemplate | None:
    if proposal.base_template is None:
        return None
    for template in templates:
        if template.id == proposal.base_template:
            return template
    known = ", ".join(t.id for t in templates)
    raise invalid("base_template", proposal.base_template, f"one of the lane templates: {known}")


def _motivation(proposal: LaneProposal, facts: PlanningFacts) -> str:
    conditions = "; ".join(facts.describe(p) for p in proposal.predicates) or "no data condition named"
    text = proposal.motivation.strip() or "Proposed by an agent."
    return f"{text} Conditions: {conditions}. Profile: {facts.summary()}."


def _merged(first: Sequence[str], second: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))
