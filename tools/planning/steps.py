"""Scaffold steps of implementation-backed lanes: the exact commands, with paths seen from a worktree.

Every step runs with cwd = the agent's worktree (`workspace/worktrees/<agent>`), so the task folder
is `../../task` and the lane files are `../../memory/lanes/`; working data goes under `.amid-local/`,
which the attempts repository ignores. The last step, `replay`, is no job but the attempt's
inference command: the reviewer runs it in its sandbox, where only placeholders name paths
({checkpoint}: the folder the `package` step wrote, declared as `artifacts.checkpoint`).
"""

from __future__ import annotations

from tools.planning.facts import PlanningFacts
from tools.planning.portfolio import LaneSpec, ScaffoldStep
from tools.scaffolds import monai_seg, nnunet_steps
from tools.scaffolds.monai_config import SUPPORTED_TASKS, config_from_facts
from tools.scaffolds.nnunet_steps import PACKAGE_NOTE, REPLAY_NOTE

LANES_FROM_WORKTREE = "../../memory/lanes"
MONAI_RUNS = ".amid-local/monai"
MONAI_MODEL = ".amid-local/monai_model"  # the packaged model: declare it as artifacts.checkpoint


def monai_config_name(lane_id: str) -> str:
    return f"{lane_id}.monai_config.json"


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
        return monai_steps(lane.lane_id, python, k_folds)
    return []


def monai_steps(lane_id: str, python: str, k_folds: int) -> list[ScaffoldStep]:
    """Smoke-train, then train and predict per fold, package the model, predict the test set, and the replay
    command to declare as the attempt's inference_command."""
    base = [python, "-m", monai_seg.MODULE]
    train = [*base, "train", "--config", f"{LANES_FROM_WORKTREE}/{monai_config_name(lane_id)}"]
    smoke = ["--fold", "0", "--out", f"{MONAI_RUNS}/smoke", "--epochs", "1", "--iterations", "2"]
    steps = [
        ScaffoldStep(name="smoke_train_fold_0", command=[*train, *smoke], gpus=1, note="seconds: proves the mechanics")
    ]
    for fold in range(k_folds):
        run = f"{MONAI_RUNS}/fold_{fold}"
        predict = [*base, "predict", "--checkpoint", f"{run}/checkpoint.pt", "--split", "val"]
        steps += [
            ScaffoldStep(
                name=f"train_fold_{fold}",
                command=[*train, "--fold", str(fold), "--out", run],
                gpus=1,
                note="writes checkpoint.pt, train_log.jsonl, training_manifest.json" if fold == 0 else "",
            ),
            ScaffoldStep(name=f"predict_fold_{fold}", command=[*predict, "--dest", f"predictions/fold_{fold}"], gpus=1),
        ]
    checkpoint = f"{MONAI_RUNS}/fold_0/checkpoint.pt"
    replay = ["replay", "--model", "{checkpoint}", "--fold", "{fold}", "--input-dir", "{input_dir}"]
    return [
        *steps,
        ScaffoldStep(
            name="package",
            command=[*base, "package", "--runs", MONAI_RUNS, "--dest", MONAI_MODEL],
            note=f"{PACKAGE_NOTE} (fold_N/checkpoint.pt and monai_config.json of every trained fold or of --folds)",
        ),
        ScaffoldStep(
            name="predict_test",
            command=[*base, "predict", "--checkpoint", checkpoint, "--split", "test", "--dest", "submission"],
            gpus=1,
            note="submission/submission.csv and submission/predictions/*",
        ),
        ScaffoldStep(
            name="replay",
            command=["{python}", "-m", monai_seg.MODULE, *replay, "--output-dir", "{output_dir}"],
            note=REPLAY_NOTE,
        ),
    ]


def monai_config_for(lane: LaneSpec, facts: PlanningFacts) -> str | None:
    """The JSON configuration file content of a MONAI lane, or None when the scaffold does not apply."""
    if lane.scaffold != "monai" or facts.task_type not in SUPPORTED_TASKS:
        return None
    return config_from_facts(facts).model_dump_json(indent=1)
