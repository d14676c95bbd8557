"""The exact commands of the nnU-Net lane, each ready for `run_gpu_job` with cwd = the agent's worktree."""

from __future__ import annotations

from pathlib import Path

from tools.planning.portfolio import ScaffoldStep
from tools.scaffolds.nnunet_dataset import NnunetLayout, dataset_name

DEFAULT_ROOT = ".amid-local/nnunet"  # ignored by the attempts repository's .gitignore
DEFAULT_TASK_DIR = "../../task"  # the workspace's public task folder, seen from a worktree
DEFAULT_DATASET_ID = 501
MODULE = "tools.scaffolds.nnunet"
WORKTREE = "<your-worktree>"  # replaced by the agent: replay runs in a detached checkout of the commit
MANIFEST_NOTE = "task labels and reference geometry, plus training_manifest.json for the reviewer"
REPLAY_NOTE = f"not a job: declare it as submit_attempt's inference_command ({WORKTREE}: your worktree's absolute path)"


def commands(
    python: str, task_id: str, configuration: str, k_folds: int, *, root: str = DEFAULT_ROOT, cpus: int = 4
) -> list[ScaffoldStep]:
    """Convert, plan and preprocess, smoke-train, then train and convert back per fold, predict the test set,
    and the holdout-replay command to declare with the attempt."""
    layout = NnunetLayout(Path(root), DEFAULT_DATASET_ID, dataset_name(task_id))
    steps = _prepare(python, layout, configuration, cpus)
    for fold in range(k_folds):
        steps += _fold(python, layout, configuration, fold, cpus)
    return steps + _test(python, layout, configuration, k_folds)


def _nnunet(python: str, program: str) -> str:
    return str(Path(python).parent / program)


def _prepare(python: str, layout: NnunetLayout, configuration: str, cpus: int) -> list[ScaffoldStep]:
    root, dataset = str(layout.root), str(layout.dataset_id)
    plan = [_nnunet(python, "nnUNetv2_plan_and_preprocess"), "-d", dataset, "-c", configuration, "-np", str(cpus)]
    smoke = ["train", "--out", root, "--configuration", configuration, "--fold", "0"]
    return [
        ScaffoldStep(
            name="convert",
            command=[python, "-m", MODULE, "convert", "--task-dir", DEFAULT_TASK_DIR, "--out", root],
            note="raw dataset (channels _0000, contiguous labels, geometry checked); splits_final.json = locked folds",
        ),
        ScaffoldStep(
            name="plan_and_preprocess", command=[*plan, "--verify_dataset_integrity"], env=layout.env(), cpus=cpus
        ),
        ScaffoldStep(
            name="smoke_train_fold_0",
            command=[python, "-m", MODULE, *smoke, "--epochs", "1", "--iterations", "5", "--disable-tta"],
            env=layout.env(),
            gpus=1,
            note="minutes: proves the pipeline before a full run (add --device cpu without a GPU)",
        ),
    ]


def _fold(python: str, layout: NnunetLayout, configuration: str, fold: int, cpus: int) -> list[ScaffoldStep]:
    validation = layout.results(configuration) / f"fold_{fold}" / "validation"
    back = [python, "-m", MODULE, "to-task", "--out", str(layout.root), "--split", "val", "--fold", str(fold)]
    return [
        ScaffoldStep(
            name=f"train_fold_{fold}",
            command=[_nnunet(python, "nnUNetv2_train"), str(layout.dataset_id), configuration, str(fold), "--npz"],
            env=layout.env(),
            gpus=1,
            cpus=cpus,
            note="nnU-Net's validation predictions land in fold_N/validation" if fold == 0 else "",
        ),
        ScaffoldStep(
            name=f"to_task_fold_{fold}",
            command=[*back, "--predictions", str(validation), "--dest", f"predictions/fold_{fold}"],
            note=MANIFEST_NOTE if fold == 0 else "",
        ),
    ]


def _test(python: str, layout: NnunetLayout, configuration: str, k_folds: int) -> list[ScaffoldStep]:
    folds = [str(f) for f in range(k_folds)]
    out = str(layout.root / "test_predictions")
    predict = [_nnunet(python, "nnUNetv2_predict"), "-i", str(layout.raw / "imagesTs"), "-o", out]
    back = [python, "-m", MODULE, "to-task", "--out", str(layout.root), "--split", "test", "--predictions", out]
    replay = ["replay", "--out", f"{WORKTREE}/{layout.root}", "--configuration", configuration, "--folds", *folds]
    return [
        ScaffoldStep(
            name="predict_test",
            command=[*predict, "-d", str(layout.dataset_id), "-c", configuration, "-f", *folds],
            env=layout.env(),
            gpus=1,
        ),
        ScaffoldStep(
            name="to_task_test",
            command=[*back, "--dest", "submission"],
            note="submission/submission.csv and submission/predictions/*",
        ),
        ScaffoldStep(
            name="holdout_replay",
            command=["{python}", "-m", MODULE, *replay, "--input-dir", "{input_dir}", "--output-dir", "{output_dir}"],
            gpus=1,
            note=REPLAY_NOTE,
        ),
    ]
