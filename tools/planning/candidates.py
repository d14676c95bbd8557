"""Registry models for a foundation-model lane: matching the task's modality and dimensionality.

A model is a candidate when it lists the task's modality (or is a general 'multi' model), supports the
task's dimensionality and one of the lane's task families. Candidates whose weights are usable here
(cached or open) come first; gated or on-request ones are kept apart so the plan can say so.
"""

from __future__ import annotations

from collections.abc import Sequence

from amid.registry.schemas import FmQuery, FoundationModel
from amid.tools.planning.facts import PlanningFacts
from amid.tools.planning.portfolio import CandidateModel
from amid.tools.planning.resources import USABLE, Environment, model_availability

AVAILABILITY_ORDER = {"cached": 0, "obtainable": 1, "gated": 2, "unknown_offline": 3}
UNSPECIFIC_MODALITIES = frozenset({"multi", "other"})


def modality_mismatch(query: FmQuery, facts: PlanningFacts) -> str | None:
    """Why the lane's modalities exclude this task, or None when they fit."""
    if query.modalities and facts.modality not in UNSPECIFIC_MODALITIES and facts.modality not in query.modalities:
        return f"task modality {facts.modality} is not one of the lane's modalities {list(query.modalities)}"
    dims = f"{facts.dims}d"
    if query.dimensionality and dims not in query.dimensionality:
        return f"task is {dims}; the lane needs {list(query.dimensionality)}"
    return None


def candidate_models(
    query: FmQuery, facts: PlanningFacts, models: Sequence[FoundationModel], environment: Environment
) -> tuple[list[CandidateModel], list[CandidateModel]]:
    """(usable here, matching but not usable: gated, on request), each best first."""
    matched = [(model, why) for model in models if (why := _match(model, query, facts)) is not None]
    scored = []
    for index, (model, why) in enumerate(matched):
        availability = model_availability(model, environment)
        specific = 0 if facts.modality in model.modalities else 1
        scored.append(((specific, AVAILABILITY_ORDER[availability], index), _candidate(model, availability, why)))
    scored.sort(key=lambda item: item[0])
    usable = [c for _, c in scored if c.availability in USABLE]
    blocked = [c for _, c in scored if c.availability not in USABLE]
    return usable, blocked


def _match(model: FoundationModel, query: FmQuery, facts: PlanningFacts) -> list[str] | None:
    dims = f"{facts.dims}d"
    if dims not in model.dimensionality:
        return None
    families = [f for f in model.task_families if not query.task_families or f in query.task_families]
    if not families:
        return None
    if query.domains and model.domain not in query.domains:
        return None
    if facts.modality in UNSPECIFIC_MODALITIES:
        shared = [m for m in model.modalities if not query.modalities or m in query.modalities]
        if not shared:
            return None
        modality_reason = f"modality {shared[0]}"
    elif facts.modality in model.modalities:
        modality_reason = f"modality {facts.modality}"
    elif "multi" in model.modalities:
        modality_reason = "general model (multi-modality)"
    else:
        return None
    return [modality_reason, dims, f"task family {families[0]}"]


def _candidate(model: FoundationModel, availability: str, why: list[str]) -> CandidateModel:
    spec = model.input_spec
    return CandidateModel(
        model_id=model.id,
        name=model.name,
        availability=availability,
        access=model.access,
        licence=model.licence,
        hub_id=model.hub_id,
        input_spec=f"channels {spec.channels}; size {spec.size}; spacing {spec.spacing}; {spec.normalisation}",
        why=[*why, f"availability {availability}"],
    )
