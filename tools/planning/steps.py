"""Scaffold steps of implementation-backed lanes: the exact commands, with paths seen from a worktree.

Every step runs with cwd = the agent's worktree (`workspace/worktrees/<agent>`), so the task folder
is `../../task` and the lane files are `../../memory/lanes/`; working data goes under `.amid-local/`,
which the attempts repository ignores. The last step, `replay`, is no job but the attempt's
inference command: the reviewer runs it in its sandbox, where only placeholders name paths
({checkpoint}: the folder the `package` step wrote, declared as `artifacts.checkpoint`).
"""

from __future__ import annotations

from amid.tools.planning.facts import PlanningFacts
from amid.tools.planning.portfolio import LaneSpec, ScaffoldStep
from amid.tools.scaffolds import monai_steps as monai_steps_module
from amid.tools.scaffolds import nnunet_steps
from amid.tools.scaffolds.monai_config import SUPPORTED_TASKS, config_from_facts
from amid.tools.scaffolds.monai_steps import LANES_FROM_WORKTREE, MONAI_MODEL, MONAI_RUNS, monai_config_name

__all__ = ["LANES_FROM_WORKTREE", "MONAI_MODEL", "MONAI_RUNS", "monai_config_name", "monai_steps", "scaffold_steps"]


def scaffold_steps(
    lane: LaneSpec,
    facts: PlanningFacts,
    *,
    python: str,
    k_folds: int,
    task_id: str,
    gpus: int = 1,
    cpus: int = 4,
) -> list[ScaffoldStep]:
    """Steps of the lane's scaffold for a machine with `gpus` GPUs (0: CPU steps) and `cpus` cores, or none
    when the scaffold does not cover these data."""
    if lane.scaffold == "nnunet" and facts.task_type == "segmentation":
        configuration = "3d_fullres" if facts.dims == 3 else "2d"
        return nnunet_steps.commands(python, task_id, configuration, k_folds, gpus_here=gpus, cpus=min(cpus, 4))
    if lane.scaffold == "monai" and facts.task_type in SUPPORTED_TASKS:
        return monai_steps(lane.lane_id, python, k_folds, gpus_here=gpus)
    return []


def monai_steps(lane_id: str, python: str, k_folds: int, *, gpus_here: int = 0) -> list[ScaffoldStep]:
    """Smoke-train fold 0, then train, predict and score per fold, package the model, predict the test set, and
    the replay command to declare as the attempt's inference_command; CPU budgets where `gpus_here` is 0."""
    return monai_steps_module.commands(lane_id, python, k_folds, gpus_here=gpus_here)


def monai_config_for(lane: LaneSpec, facts: PlanningFacts) -> str | None:
    """The JSON configuration file content of a MONAI lane, or None when the scaffold does not apply."""
    if lane.scaffold != "monai" or facts.task_type not in SUPPORTED_TASKS:
        return None
    return config_from_facts(facts).model_dump_json(indent=1)
