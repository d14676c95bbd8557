"""The lane portfolio: instantiated lanes with every field of docs/ARCHITECTURE.md §8, and the ideas left out,
with reasons."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from amid.registry.schemas import Budget, LaneFamily, Scaffold, Tier
from amid.tools.planning.facts import EvidenceValue, PlanningFacts

Origin = Literal["planner", "agent"]
TIER_ORDER: dict[str, int] = {"primary": 0, "secondary": 1, "fallback": 2}


class DataCondition(BaseModel):
    """A predicate that decided the lane, with the profile values behind it."""

    model_config = ConfigDict(frozen=True)

    predicate: str
    required: bool = Field(description="true: must hold for the lane; false: must not hold")
    value: bool
    evidence: dict[str, EvidenceValue] = Field(default_factory=dict)


class ResourceStatus(BaseModel):
    """A resource the lane needs and whether it is usable on this machine."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["python_package", "registry_model", "toolkit"]
    name: str
    required: bool
    available: bool
    detail: str = Field(description="installed version, hub availability, or why it is missing")


class CandidateModel(BaseModel):
    """A registry model a foundation-model lane may adapt."""

    model_config = ConfigDict(frozen=True)

    model_id: str
    name: str
    availability: str
    access: str
    licence: str
    hub_id: str | None = None
    input_spec: str
    why: list[str] = Field(default_factory=list)


Route = Literal["always", "smoke", "full"]
DEFAULT_TIME_LIMIT_S = 3600


class JobArguments(BaseModel):
    """The `run_gpu_job` arguments of a step, to pass as they are (cwd: your worktree)."""

    model_config = ConfigDict(frozen=True)

    command: list[str]
    env: dict[str, str]
    gpus: int
    cpus: int
    time_limit_s: int


class ScaffoldStep(BaseModel):
    """One command of a lane's scaffold: argv (no shell) and env, fitted to this machine's devices.

    `route`: `smoke` steps prove the mechanics in minutes, `full` steps are the real training; `always`
    steps belong to both (run every `always` step and those of one route, in order). `job` false: the
    step is no job but the attempt's inference_command, which the reviewer runs."""

    model_config = ConfigDict(frozen=True)

    name: str
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    gpus: int = 0
    cpus: int = 1
    time_limit_s: int = DEFAULT_TIME_LIMIT_S
    route: Route = "always"
    job: bool = True
    gpu_only: str | None = Field(default=None, description="why the step needs a GPU this machine lacks")
    note: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def run_gpu_job(self) -> JobArguments | None:
        """What to pass to run_gpu_job; None for the inference command and for GPU-only steps here."""
        if not self.job or self.gpu_only:
            return None
        return JobArguments(
            command=self.argv, env=self.env, gpus=self.gpus, cpus=self.cpus, time_limit_s=self.time_limit_s
        )


class LaneSpec(BaseModel):
    """One method lane: what to try, why these data call for it, with what, and how it is checked."""

    model_config = ConfigDict(frozen=True)

    lane_id: str
    title: str
    family: LaneFamily
    tier: Tier
    rank: float = Field(description="higher is tried first")
    origin: Origin = "planner"
    proposed_by: str | None = None
    template_id: str | None = None
    hypothesis: str
    motivation: str
    data_conditions: list[DataCondition] = Field(default_factory=list)
    resources: list[ResourceStatus] = Field(default_factory=list)
    candidate_models: list[CandidateModel] = Field(default_factory=list)
    implementation_plan: list[str]
    preprocessing_assumptions: list[str] = Field(default_factory=list)
    validation_obligations: list[str]
    budget_estimate: Budget
    expected_artifacts: list[str]
    failure_modes: list[str]
    scaffold: Scaffold | None = None
    scaffold_steps: list[ScaffoldStep] = Field(default_factory=list)
    downranked: list[str] = Field(default_factory=list, description="why the tier was lowered")
    promoted: list[str] = Field(default_factory=list, description="why the tier was raised")


class ExcludedIdea(BaseModel):
    """A template the planner did not instantiate, kept with the reason (never silently dropped)."""

    model_config = ConfigDict(frozen=True)

    template_id: str
    title: str
    reason: str


class Portfolio(BaseModel):
    """Lanes best first, the ideas left out, and the facts they were planned from."""

    model_config = ConfigDict(frozen=True)

    facts: PlanningFacts
    lanes: list[LaneSpec]
    excluded: list[ExcludedIdea]

    def lane(self, lane_id: str) -> LaneSpec:
        for lane in self.lanes:
            if lane.lane_id == lane_id:
                return lane
        raise KeyError(lane_id)


def ordered(lanes: list[LaneSpec]) -> list[LaneSpec]:
    """Tier first, then rank (highest first), then id for a stable order."""
    return sorted(lanes, key=lambda lane: (TIER_ORDER[lane.tier], -lane.rank, lane.lane_id))
