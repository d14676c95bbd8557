"""The exact commands of the nnU-Net lane, each ready for `run_gpu_job` with cwd = the agent's worktree,
except `replay`: the attempt's inference command, run by the reviewer with only placeholder paths."""

from __future__ import annotations

from pathlib import Path

from tools.planning.portfolio import ScaffoldStep
from tools.scaffolds.nnunet_dataset import NnunetLayout, dataset_name

DEFAULT_ROOT = ".amid-local/nnunet"  # ignored by the attempts repository's .gitignore
DEFAULT_TASK_DIR = "../../task"  # the workspace's public task folder, seen from a worktree
DEFAULT_DATASET_ID = 501
DEFAULT_MODEL = ".amid-local/nnunet_model"  # the packaged model: declare it as artifacts.checkpoint
MODULE = "tools.scaffolds.nnunet"
MANIFEST_NOTE = "task labels and reference geometry, plus training_manifest.json for the reviewer"
REPLAY_NOTE = (
    "not a job: this is the attempt's inference_command (submit_attempt). The reviewer runs it in its sandbox "
    "for the validation replay ({fold}: each declared fold) and the holdout replay ({fold}: the first one), "
    "with only the frozen commit, the inputs and your declared checkpoint at {checkpoint}: no worktree paths"
)
PACKAGE_NOTE = "the folder to declare as artifacts.checkpoint: everything the replay reads, nothing else"


def commands(
    python: str, task_id: str, configuration: str, k_folds: int, *, root: str = DEFAULT_ROOT, cpus: int = 4
) -> list[ScaffoldStep]:
    """Convert, plan and preprocess, smoke-train, then train and convert back per fold, package the model,
    predict the test set, and the replay command to declare as the attempt's inference_command."""
    layout = NnunetLayout(Path(root), DEFAULT_DATASET_ID, dataset_name(task_id))
    steps = _prepare(python, layout, configuration, cpus)
    for fold in range(k_folds):
        steps += _fold(python, layout, configuration, fold, cpus)
    return [*steps, _package(python, layout, configuration), *_test(python, layout, configuration, k_folds)]


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


def _package(python: str, layout: NnunetLayout, configuration: str) -> ScaffoldStep:
    package = ["package", "--out", str(layout.root), "--configuration", configuration, "--dest", DEFAULT_MODEL]
    return ScaffoldStep(
        name="package",
        command=[python, "-m", MODULE, *package],
        note=f"{PACKAGE_NOTE} (plans, dataset.json, fingerprint, fold_N/checkpoint_final.pth of every trained fold "
        "or of --folds, the label map); re-run after training more folds",
    )


def _test(python: str, layout: NnunetLayout, configuration: str, k_folds: int) -> list[ScaffoldStep]:
    folds = [str(f) for f in range(k_folds)]
    out = str(layout.root / "test_predictions")
    predict = [_nnunet(python, "nnUNetv2_predict"), "-i", str(layout.raw / "imagesTs"), "-o", out]
    back = [python, "-m", MODULE, "to-task", "--out", str(layout.root), "--split", "test", "--predictions", out]
    replay = ["replay", "--model", "{checkpoint}", "--folds", "{fold}"]
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
            name="replay",
            command=["{python}", "-m", MODULE, *replay, "--input-dir", "{input_dir}", "--output-dir", "{output_dir}"],
            note=REPLAY_NOTE,
        ),
    ]
