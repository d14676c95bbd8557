"""get_task: the contract, locked folds, rules, stage and budget left, and this agent's inbox."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from amid.server.context import ToolContext
from amid.server.job_environment import JobEnvironment, job_environment, job_rule
from amid.server.ledger import utcnow
from amid.server.protocol import LOOP, RULES
from amid.server.toolkit import ALL_ROLES, ToolResult, ToolSpec


class GetTaskInput(BaseModel):
    include_case_ids: bool = Field(
        default=True, description="list the validation case ids of every fold (false: counts only)"
    )


class MetricView(BaseModel):
    name: str
    direction: str
    convention: dict[str, object]
    primary: bool


class FoldView(BaseModel):
    fold: int
    n_val: int
    n_train: int
    val_cases: list[str]


class BudgetView(BaseModel):
    wall_clock_hours: float | None
    hours_left: float | None
    gpus: int


class GetTaskResult(ToolResult):
    task_id: str
    title: str
    task_type: str
    modality: str
    anatomy: str
    description: str
    metrics: list[MetricView]
    primary_metric: str
    layout: dict[str, object]
    prediction: dict[str, object]
    submission: dict[str, object]
    task_dir: str = Field(description="absolute path of the public task folder on the server's host")
    worktree: str | None = Field(description="your git worktree, if `amid connect` created one")
    k_folds: int
    group_key: str | None
    folds: list[FoldView]
    stage: str
    role: str | None  # "ROLE in STAGE on LANE: reason", from the supervisor's assign_role
    budget: BudgetView
    jobs: JobEnvironment = Field(description="the interpreter and environment your run_gpu_job commands run with")
    loop: list[str]
    rules: list[str]
    contract_hash: str


def _hours_left(started_at: str | None, wall_clock_hours: float | None) -> float | None:
    if not started_at or wall_clock_hours is None:
        return None
    deadline = datetime.fromisoformat(started_at) + timedelta(hours=wall_clock_hours)
    return round(max(0.0, (deadline - utcnow()).total_seconds() / 3600), 3)


def run(ctx: ToolContext, request: GetTaskInput) -> GetTaskResult:
    """Read the task contract, the locked folds, the rules, the stage, budget left and your inbox.
    Call it first, and again whenever you are unsure what to do next."""
    contract, folds, state = ctx.contract, ctx.folds, ctx.ledger.activity
    worktree = ctx.workspace.worktrees_dir / ctx.caller.agent_id
    role = ctx.ledger.roles.current(ctx.caller.agent_id)
    jobs = job_environment(ctx.settings.job_backend, ctx.settings.job_sandbox, ctx.settings.job_network)
    return GetTaskResult(
        task_id=contract.id,
        title=contract.title,
        task_type=contract.task_type,
        modality=contract.modality,
        anatomy=contract.anatomy,
        description=contract.description,
        metrics=[
            MetricView(
                name=m.name, direction=m.direction, convention=m.convention, primary=m.name == contract.primary_metric
            )
            for m in contract.metrics
        ],
        primary_metric=contract.primary_metric,
        layout=contract.layout.model_dump(mode="json"),
        prediction=contract.prediction.model_dump(mode="json"),
        submission=contract.submission.model_dump(mode="json"),
        task_dir=str(ctx.workspace.task_dir),
        worktree=str(worktree) if worktree.is_dir() else None,
        k_folds=folds.k,
        group_key=folds.group_key,
        folds=[
            FoldView(
                fold=f.fold,
                n_val=len(f.val_cases),
                n_train=len(f.train_cases),
                val_cases=f.val_cases if request.include_case_ids else [],
            )
            for f in folds.folds
        ],
        stage=state.get_state("stage", "exploration"),
        role=f"{role['role']} in {role['stage']} on {role['lane_id'] or 'no lane'}: {role['reason']}" if role else None,
        budget=BudgetView(
            wall_clock_hours=contract.budget.wall_clock_hours,
            gpus=contract.budget.gpus,
            hours_left=_hours_left(state.get_state("started_at"), contract.budget.wall_clock_hours),
        ),
        jobs=jobs,
        loop=list(LOOP),
        rules=[*RULES, job_rule(jobs)],
        contract_hash=state.get_state("contract_hash", ""),
    )


TOOL = ToolSpec(
    name="get_task",
    title="Get the task",
    input_model=GetTaskInput,
    output_model=GetTaskResult,
    run=run,
    roles=ALL_ROLES,
    read_only=True,
)
