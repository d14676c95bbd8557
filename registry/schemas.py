"""Schemas of the registry data: foundation models, method-lane templates and benchmark label adapters.

Every YAML entry under `registry/` is parsed by one of these models; a field the schema does not
know is an error, so a typo in the data fails loudly instead of being ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints, model_validator

from amid.server.errors import InvalidInput
from amid.tools.task.contract import TaskType  # one vocabulary of task types
from amid.tools.task.label_adapters import ADAPTERS
from amid.tools.task.modality import ImagedModality

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=80)]
Url = Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]
HubId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")]
Text = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]

Modality = ImagedModality  # a model or template images one of these (tools/task/modality.py)
Dimensionality = Literal["2d", "3d"]
TaskFamily = Literal[
    "segmentation",
    "instance_segmentation",
    "detection",
    "classification",
    "regression",
    "enhancement",
    "feature_extraction",
    "promptable_segmentation",
    "report_generation",
    "registration",
]
Domain = Literal[
    "radiology",
    "pathology",
    "cell-microscopy",
    "ophthalmology",
    "dermatology",
    "endoscopy",
    "general-medical",
    "general-vision",
]
Access = Literal["open", "gated", "on_request"]
ModelKind = Literal["model", "bundle", "toolkit"]

# The data-profile predicates of docs/ARCHITECTURE.md §8; the planner computes them, templates refer to them.
Predicate = Literal[
    "dims_2d",
    "dims_3d",
    "anisotropic",
    "sparse_foreground",
    "small_structures",
    "tiles",
    "rgb_stain",
    "paired_enhancement",
    "boxes",
    "class_imbalance",
    "few_cases",
    "group_leak_risk",
    "multi_channel",
    "large_images",
    "instances",
]
LaneFamily = Literal[
    "baseline",
    "foundation_model",
    "task_specific",
    "preprocessing",
    "postprocessing",
    "ensemble",
    "calibration",
]
Tier = Literal["primary", "secondary", "fallback"]
Scaffold = Literal["nnunet", "monai"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputSpec(_Frozen):
    """What the model expects to be fed, as the model card states it."""

    channels: Text = Field(description="Channel count and order, e.g. '3 (RGB)' or '1 (CT HU)'.")
    size: Text = Field(description="Input size in pixels/voxels, or 'any' with the tiling rule.")
    spacing: Text = Field(description="Physical spacing or magnification the weights assume.")
    normalisation: Text = Field(description="Intensity normalisation the weights assume.")


class FoundationModel(_Frozen):
    """One pretrained model, model-zoo bundle or toolkit, with every fact tied to `source`."""

    id: Slug
    name: Text
    kind: ModelKind = "model"
    domain: Domain
    modalities: list[Modality] = Field(min_length=1)
    dimensionality: list[Dimensionality] = Field(min_length=1)
    task_families: list[TaskFamily] = Field(min_length=1)
    input_spec: InputSpec
    outputs: Text
    access: Access
    licence: Text
    repository: Url
    hub_id: HubId | None = Field(default=None, description="Hugging Face repo id of the weights.")
    files: list[Text] = Field(default_factory=list, description="Weight file names expected.")
    size_mb: float | None = Field(default=None, ge=0)
    paper: Text
    recommended_use: Text
    pitfalls: list[Text] = Field(min_length=1)
    source: Url = Field(description="The public model card or README each fact was checked against.")
    keywords: list[Text] = Field(default_factory=list)
    unverified_fields: list[Text] = Field(
        default_factory=list, description="Fields whose value could not be confirmed at the source."
    )

    @model_validator(mode="after")
    def _unverified_names_real_fields(self) -> FoundationModel:
        unknown = sorted(set(self.unverified_fields) - set(type(self).model_fields))
        if unknown:
            raise ValueError(f"unverified_fields names unknown fields {unknown}")
        return self


class Resource(_Frozen):
    """Something a lane needs: a Python package, a registry model or an external toolkit."""

    kind: Literal["python_package", "registry_model", "toolkit"]
    name: Text
    required: bool = True


class Budget(_Frozen):
    """Rough cost of one full exploration of the lane on a typical task."""

    gpu_hours: float = Field(ge=0)
    wall_hours: float = Field(gt=0)


class FmQuery(_Frozen):
    """Filter that picks registry models for a foundation-model lane (all given lists must match)."""

    modalities: list[Modality] = Field(default_factory=list)
    task_families: list[TaskFamily] = Field(default_factory=list)
    dimensionality: list[Dimensionality] = Field(default_factory=list)
    domains: list[Domain] = Field(default_factory=list)


class LaneTemplate(_Frozen):
    """A method lane the planner may instantiate; it applies when every `applies_when` predicate
    holds and no `excluded_when` predicate does."""

    id: Slug
    title: Text
    family: LaneFamily
    tier: Tier
    applies_when: list[Predicate] = Field(default_factory=list)
    excluded_when: list[Predicate] = Field(default_factory=list)
    task_types: list[TaskType] = Field(min_length=1)
    hypothesis: Text
    motivation_template: Text = Field(
        description="Why the lane fits; '{predicates}' and '{profile}' are filled in by the planner."
    )
    resources: list[Resource] = Field(default_factory=list)
    implementation_plan: list[Text] = Field(min_length=1)
    preprocessing_assumptions: list[Text] = Field(default_factory=list)
    validation_obligations: list[Text] = Field(min_length=1)
    budget_estimate: Budget
    expected_artifacts: list[Text] = Field(min_length=1)
    failure_modes: list[Text] = Field(min_length=1)
    scaffold: Scaffold | None = None
    fm_query: FmQuery | None = None

    @model_validator(mode="after")
    def _conditions_are_consistent(self) -> LaneTemplate:
        both = sorted(set(self.applies_when) & set(self.excluded_when))
        if both:
            raise ValueError(f"predicates {both} are both in applies_when and excluded_when")
        if self.family == "foundation_model" and self.fm_query is None:
            raise ValueError("a foundation_model lane needs an fm_query to pick registry models")
        return self


class LabelAdapterEntry(_Frozen):
    """How one answers column of a benchmark challenge is built from a training label: the label
    `train_label` (relative to the public folder, `{case}` the case id) goes through `adapter`."""

    adapter: Text = Field(description="A name in tools/task/label_adapters.ADAPTERS.")
    train_label: Annotated[str, StringConstraints(pattern=r"^[^/{}][^{}]*\{case\}[^{}]*$")] = Field(
        description="Training label template relative to the public folder, with one '{case}'."
    )
    options: dict[str, Any] = Field(default_factory=dict, description="The adapter's options, checked by it.")

    @model_validator(mode="after")
    def _adapter_accepts_options(self) -> LabelAdapterEntry:
        if self.adapter not in ADAPTERS:
            raise ValueError(f"adapter {self.adapter!r} is not one of {sorted(ADAPTERS)}")
        if "image" in self.options:
            raise ValueError("options.image is the case's image, given per case by the caller; not registry data")
        try:
            ADAPTERS[self.adapter].parse_options(self.options)
        except InvalidInput as error:
            raise ValueError(f"adapter {self.adapter!r}: {error}") from None
        return self


# Challenge id → answers column (of the grader's test_labels.csv) → how to convert.
LabelAdapterTable = RootModel[dict[Slug, dict[Text, LabelAdapterEntry]]]


# --- worker backends: how one headless coding-agent CLI is started, resumed and read (docs/ARCHITECTURE.md §9) ---

Placeholder = Annotated[str, StringConstraints(min_length=1)]


class SessionIdRule(BaseModel):
    """Where a CLI's JSON output names its session: events whose fields equal `match` carry it at `field`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: dict[str, str] = Field(default_factory=dict, description="event fields that must have these values")
    field: Text = Field(description="dotted path of the session id inside the event")


class WorkerConfigFile(BaseModel):
    """A configuration file the CLI reads from the worktree (or the worker's home); string leaves are templates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Text = Field(description="where the file goes, relative to the worktree; '~/' for the worker's home")
    format: Literal["json", "toml"]
    content: dict[str, Any]


class WorkerBackend(BaseModel):
    """One headless agent CLI as data: a new CLI is a YAML file under registry/worker_backends/."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Slug
    title: Text
    binary: Text = Field(description="program looked up on PATH, then in the npm prefix; {python} = this interpreter")
    install: Text = Field(description="how a user installs the CLI (named when it is missing)")
    start: list[Placeholder] = Field(min_length=1, description="argv of a first run; {prompt} is the task prompt")
    resume: list[Placeholder] = Field(min_length=1, description="argv that resumes {session_id} with {prompt}")
    session_id: list[SessionIdRule] = Field(min_length=1, description="how to read the session id from JSON lines")
    result_event: dict[str, str] | None = Field(
        default=None, description="fields of the event that ends a finished turn; None: the CLI prints no such marker"
    )
    config_files: list[WorkerConfigFile] = Field(default_factory=list)
    deny_tools: list[Text] = Field(default_factory=list, description="tools that wait for a human: denied")
    token_env: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]*$")] = "AMID_TOKEN"
    env: dict[str, str] = Field(default_factory=dict, description="fixed environment of the CLI (templates)")
    login_files: list[Text] = Field(
        default_factory=list, description="files under the user's home copied into the worker's home (the login)"
    )
    usage_limit_patterns: list[Text] = Field(default_factory=list, description="regexes of a usage-limit exit")
    session_error_patterns: list[Text] = Field(default_factory=list, description="regexes of a failed resume")

    @model_validator(mode="after")
    def _resume_names_the_session(self) -> WorkerBackend:
        if not any("{session_id}" in arg for arg in self.resume):
            raise ValueError("resume must contain {session_id}")
        if not any("{prompt}" in arg for arg in [*self.start, *self.resume]):
            raise ValueError("start and resume must pass {prompt}")
        return self
