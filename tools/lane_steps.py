"""A lane's scaffold steps fitted to this server's machine: the interpreter jobs run with, the GPUs the job
scheduler can place (none: CPU steps), the CPU cores, the run's folds and task id."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from amid.server.context import ToolContext
from amid.tools.planning.facts import PlanningFacts
from amid.tools.planning.portfolio import LaneSpec, ScaffoldStep
from amid.tools.planning.steps import scaffold_steps

StepBuilder = Callable[[LaneSpec, PlanningFacts], list[ScaffoldStep]]


def machine_gpus(ctx: ToolContext) -> int:
    """GPUs the scheduler places jobs on; for a cluster backend (it places them itself), the contract's budget.

    Planning does not start the scheduler: until a job starts it, the local backend's inventory is asked."""
    scheduler = ctx.services.scheduler
    here = scheduler.gpus_here() if scheduler is not None else _local_gpus(ctx)
    return int(ctx.contract.budget.gpus) if here is None else int(here)


def _local_gpus(ctx: ToolContext) -> int | None:
    if ctx.settings.job_backend != "local":
        return None
    from amid.server.jobs.gpu import NvmlInventory  # what runtime gives the local scheduler

    return len(NvmlInventory().gpus())


def builder(ctx: ToolContext) -> StepBuilder:
    """The step builder the planner calls per lane, with this machine's devices read once."""
    gpus, cpus = machine_gpus(ctx), os.cpu_count() or 1
    k_folds, task_id = ctx.folds.k, ctx.contract.id

    def steps(lane: LaneSpec, facts: PlanningFacts) -> list[ScaffoldStep]:
        return scaffold_steps(
            lane, facts, python=sys.executable, k_folds=k_folds, task_id=task_id, gpus=gpus, cpus=cpus
        )

    return steps


def lane_steps(ctx: ToolContext, spec: dict[str, object], facts: PlanningFacts) -> list[ScaffoldStep]:
    """The steps of the lane whose ledger spec is `spec` (the ledger keeps no host paths, so they are rebuilt)."""
    lane = LaneSpec.model_validate(spec)
    return builder(ctx)(lane, facts) if lane.scaffold else []
