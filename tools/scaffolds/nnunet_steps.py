"""The exact commands of the nnU-Net lane as argv and env, each ready for `run_gpu_job` with cwd = the
agent's worktree, fitted to the machine's devices; except `replay`: the attempt's inference command,
run by the reviewer with only placeholder paths.

Without a GPU every step runs on CPU (`--device cpu` / `-device cpu`, gpus=0): nnU-Net supports it, and
the smoke route (1 epoch of 2 iterations, fold 0) ends in minutes with a model the `package`,
`predict_test`, `score` and replay steps accept. The full route's `nnUNetv2_train` runs nnU-Net's own
1000-epoch schedule, which takes days on CPU: its note says so.
"""

from __future__ import annotations

from pathlib import Path

from amid.tools.planning.portfolio import Route, ScaffoldStep
from amid.tools.scaffolds.nnunet_dataset import NnunetLayout, dataset_name
from amid.tools.scaffolds.nnunet_paths import (
    DEFAULT_DATASET_ID,
    DEFAULT_MODEL,
    DEFAULT_ROOT,
    DEFAULT_TASK_DIR,
    LOGS,
    MODULE,
)
from amid.tools.scaffolds.pinning import PIN_FLAG, scaffold_digest

__all__ = ["DEFAULT_DATASET_ID", "DEFAULT_MODEL", "DEFAULT_ROOT", "DEFAULT_TASK_DIR", "LOGS", "MODULE", "commands"]
SCORE_MODULE = "amid.tools.scaffolds.score"
PREDICTIONS = "predictions"
MANIFEST_NOTE = (
    f"task labels and reference geometry; the fold is recorded in {PREDICTIONS}/training_manifest.json and its "
    f"nnU-Net training log copied to {LOGS}/fold_N"
)
REPLAY_NOTE = (
    "not a job: this is the attempt's inference_command (submit_attempt). The reviewer runs it in its sandbox "
    "for the validation replay ({fold}: each declared fold) and the holdout replay ({fold}: the first one), "
    "with only the frozen commit, the inputs and your declared checkpoint at {checkpoint}: no worktree paths"
)
NNUNET_REPLAY_NOTE = (
    f"{REPLAY_NOTE}. {PIN_FLAG} pins the scaffold's source: a replay by another version of it refuses. "
    f'Declare artifacts: predictions {{"N": "{PREDICTIONS}/fold_N"}} per scored fold, training_manifest '
    f'"{PREDICTIONS}/training_manifest.json", checkpoint "{DEFAULT_MODEL}", logs ["{LOGS}"], submission "submission"'
)
SCORE_NOTE = "prints declared_scores for submit_attempt, computed with the reviewer's own metric code"
PACKAGE_NOTE = "the folder to declare as artifacts.checkpoint: everything the replay reads, nothing else"
# Smoke budget: minutes on CPU, and a model the reviewer accepts. 1 epoch of 2 iterations passed every check
# but PRED_UNSTABLE (near-uniform outputs flip on perturbed copies: foreground agreement 0.65 < 0.95).
SMOKE_EPOCHS, SMOKE_ITERATIONS = 1, 16
HOUR = 3600
FULL_TRAIN_LIMIT_S = {"cuda": 48 * HOUR, "cpu": 7 * 24 * HOUR}
CPU_FULL_NOTE = "on CPU nnU-Net's full schedule (1000 epochs x 250 iterations) takes days; a GPU makes it hours"


def commands(
    python: str,
    task_id: str,
    configuration: str,
    k_folds: int,
    *,
    gpus_here: int = 1,
    root: str = DEFAULT_ROOT,
    cpus: int = 4,
) -> list[ScaffoldStep]:
    """Convert, plan and preprocess; smoke-train fold 0 (route smoke) or train every fold (route full) and
    convert back and score each fold's validation; package the model, predict the test set from it,
    and the replay command to declare as the attempt's inference_command."""
    layout = NnunetLayout(Path(root), DEFAULT_DATASET_ID, dataset_name(task_id))
    device = "cuda" if gpus_here > 0 else "cpu"
    steps = _prepare(python, layout, configuration, cpus, device)
    for fold in range(k_folds):
        steps += _fold(python, layout, configuration, fold, cpus, device)
    return [*steps, _package(python, layout, configuration), *_finish(python, device)]


def _nnunet(python: str, program: str) -> str:
    return str(Path(python).parent / program)


def _env(layout: NnunetLayout, cpus: int) -> dict[str, str]:
    """nnU-Net's folders, and its worker pools (validation export, fingerprints: 8 by default) sized to the cores."""
    return {**layout.env(), "nnUNet_def_n_proc": str(cpus)}


def _gpus(device: str) -> int:
    return 1 if device == "cuda" else 0


def _prepare(python: str, layout: NnunetLayout, configuration: str, cpus: int, device: str) -> list[ScaffoldStep]:
    root, dataset = str(layout.root), str(layout.dataset_id)
    # -npfp too: fingerprint extraction starts 8 processes by default, whatever the machine has
    plan = [_nnunet(python, "nnUNetv2_plan_and_preprocess"), "-d", dataset, "-c", configuration]
    plan += ["-np", str(cpus), "-npfp", str(cpus)]
    smoke = ["train", "--out", root, "--configuration", configuration, "--fold", "0", "--device", device]
    budget = ["--epochs", str(SMOKE_EPOCHS), "--iterations", str(SMOKE_ITERATIONS), "--disable-tta"]
    # On CPU, augmentation worker processes only compete with the trainer for the same cores.
    smoke_env = {**_env(layout, cpus), **({} if device == "cuda" else {"nnUNet_n_proc_DA": "0"})}
    return [
        ScaffoldStep(
            name="convert",
            argv=[python, "-m", MODULE, "convert", "--task-dir", DEFAULT_TASK_DIR, "--out", root],
            note="raw dataset (channels _0000, contiguous labels, geometry checked); splits_final.json = locked folds",
        ),
        ScaffoldStep(
            name="plan_and_preprocess",
            argv=[*plan, "--verify_dataset_integrity"],
            env=_env(layout, cpus),
            cpus=cpus,
            time_limit_s=2 * HOUR,
        ),
        ScaffoldStep(
            name="smoke_train_fold_0",
            argv=[python, "-m", MODULE, *smoke, *budget],
            env=smoke_env,
            gpus=_gpus(device),
            cpus=cpus,
            route="smoke",
            note=f"minutes: proves the pipeline end to end (fold 0, {SMOKE_EPOCHS} epoch of {SMOKE_ITERATIONS} "
            "iterations), then to_task_fold_0 and the rest",
        ),
    ]


def _fold(
    python: str, layout: NnunetLayout, configuration: str, fold: int, cpus: int, device: str
) -> list[ScaffoldStep]:
    validation = layout.results(configuration) / f"fold_{fold}" / "validation"
    back = [python, "-m", MODULE, "to-task", "--out", str(layout.root), "--split", "val", "--fold", str(fold)]
    train = [_nnunet(python, "nnUNetv2_train"), str(layout.dataset_id), configuration, str(fold), "--npz"]
    predictions = f"{PREDICTIONS}/fold_{fold}"
    route: Route = "always" if fold == 0 else "full"
    score = [
        python,
        "-m",
        SCORE_MODULE,
        "--task-dir",
        DEFAULT_TASK_DIR,
        "--predictions",
        predictions,
        "--fold",
        str(fold),
    ]
    notes = ["nnU-Net's validation predictions land in fold_N/validation" if fold == 0 else ""]
    notes += [CPU_FULL_NOTE] if device == "cpu" else []
    return [
        ScaffoldStep(
            name=f"train_fold_{fold}",
            argv=[*train, *([] if device == "cuda" else ["-device", "cpu"])],
            env=_env(layout, cpus),
            gpus=_gpus(device),
            cpus=cpus,
            time_limit_s=FULL_TRAIN_LIMIT_S[device],
            route="full",
            note="; ".join(n for n in notes if n),
        ),
        ScaffoldStep(
            name=f"to_task_fold_{fold}",
            argv=[*back, "--predictions", str(validation), "--dest", predictions],
            route=route,
            note=MANIFEST_NOTE if fold == 0 else "",
        ),
        ScaffoldStep(
            name=f"score_fold_{fold}",
            argv=[*score, "--out", f".amid-local/scores/fold_{fold}.json"],
            route=route,
            note=SCORE_NOTE if fold == 0 else "",
        ),
    ]


def _package(python: str, layout: NnunetLayout, configuration: str) -> ScaffoldStep:
    package = ["package", "--out", str(layout.root), "--configuration", configuration, "--dest", DEFAULT_MODEL]
    return ScaffoldStep(
        name="package",
        argv=[python, "-m", MODULE, *package],
        note=f"{PACKAGE_NOTE} (plans, dataset.json, fingerprint, fold_N/checkpoint_final.pth of every trained fold "
        "or of --folds, the label map); re-run after training more folds",
    )


def _finish(python: str, device: str) -> list[ScaffoldStep]:
    test = ["predict-test", "--model", DEFAULT_MODEL, "--dest", "submission", "--device", device]
    replay = ["replay", "--model", "{checkpoint}", "--folds", "{fold}", "--input-dir", "{input_dir}"]
    pin = [PIN_FLAG, scaffold_digest("nnunet")]
    return [
        ScaffoldStep(
            name="predict_test",
            argv=[python, "-m", MODULE, *test],
            gpus=_gpus(device),
            note="the packaged model (every fold in it) on the test images: submission/submission.csv and "
            "submission/predictions/*",
        ),
        ScaffoldStep(
            name="replay",
            argv=["{python}", "-m", MODULE, *replay, "--output-dir", "{output_dir}", *pin],
            job=False,
            note=NNUNET_REPLAY_NOTE,
        ),
    ]
