"""query_fm_registry: find foundation models by filters and keywords, with their availability here."""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import BaseModel, Field, ValidationError, WithJsonSchema

from amid.registry.loader import load_foundation_models
from amid.registry.schemas import Access, Dimensionality, Modality, TaskFamily
from amid.server.context import ToolContext
from amid.server.errors import invalid
from amid.server.toolkit import ALL_ROLES, ToolResult, ToolSpec
from amid.tools.planning.fm_query import ModelHit, query_models


def _enum(kind: Any) -> WithJsonSchema:
    # Optional choices published as a bare enum: every byte of tools/list sits in each client's context.
    return WithJsonSchema({"enum": [*get_args(kind), None]})


class QueryFmInput(BaseModel):
    keywords: Annotated[str, Field(max_length=200, description="free text, ranked (BM25)")] = ""
    modality: Annotated[Modality | None, _enum(Modality)] = None
    dimensionality: Annotated[Dimensionality | None, _enum(Dimensionality)] = None
    task_family: Annotated[TaskFamily | None, _enum(TaskFamily)] = None
    access: Annotated[Access | None, _enum(Access)] = None
    licence: Annotated[str, Field(max_length=40, description="substring, e.g. apache")] = ""
    limit: Annotated[int, Field(ge=1, le=20)] = 5


class FmHit(BaseModel):
    id: str
    name: str
    availability: str = Field(description="cached | obtainable | gated | unknown_offline")
    why: list[str]
    access: str
    licence: str
    hub_id: str | None
    card: str = Field(description="input spec, outputs, recommended use, pitfalls, source")


class QueryFmResult(ToolResult):
    hits: list[FmHit]


def _hit(hit: ModelHit) -> FmHit:
    model, spec = hit.model, hit.model.input_spec
    card = [
        f"input: channels {spec.channels}; size {spec.size}; spacing {spec.spacing}; {spec.normalisation}",
        f"outputs: {model.outputs}",
        f"use: {model.recommended_use}",
        "pitfalls: " + " ".join(model.pitfalls),
        f"source: {model.source}",
    ]
    return FmHit(
        id=model.id,
        name=model.name,
        availability=hit.availability,
        why=hit.why,
        access=model.access,
        licence=model.licence,
        hub_id=model.hub_id,
        card="\n".join(card),
    )


def query_input(raw: dict[str, Any]) -> QueryFmInput:
    """Validate a query given as plain values (the CLI), naming the first bad field."""
    try:
        return QueryFmInput.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        expected = first["msg"].removeprefix("Input should be ")
        raise invalid(".".join(str(p) for p in first["loc"]), first.get("input"), expected) from None


def search(request: QueryFmInput) -> list[FmHit]:
    """The registry hits for one query (also `amid registry search`)."""
    hits = query_models(
        load_foundation_models(),
        modality=request.modality,
        dimensionality=request.dimensionality,
        task_family=request.task_family,
        access=request.access,
        licence=request.licence or None,
        keywords=request.keywords or None,
        limit=request.limit,
    )
    return [_hit(hit) for hit in hits]


def query_fm_registry(ctx: ToolContext, request: QueryFmInput) -> QueryFmResult:
    """Find pretrained models by filters and ranked keywords, with why each matched and if its weights are here."""
    return QueryFmResult(hits=search(request))


TOOL = ToolSpec(
    "query_fm_registry",
    "Model registry",
    QueryFmInput,
    QueryFmResult,
    query_fm_registry,
    roles=ALL_ROLES,
    read_only=True,
)
