"""The MONAI lane's steps, fitted to the machine: the exact commands, with paths seen from a worktree.

Routes: `smoke` trains fold 0 for seconds (the same outputs as `train_fold_0`, so `predict_fold_0`,
`score_fold_0` and `package` accept it and `train_fold_0` replaces it); `full` trains every fold.
Both then run the `always` steps: per fold (fold 0 in both routes, the others in `full`) train,
predict (the fold's cases only in `predictions/fold_K/`, the fold recorded in
`predictions/training_manifest.json`) and score (the `declared_scores` for submit_attempt, computed
with the reviewer's metric code), then `package` (every trained fold), `predict_test` from the
packaged fold 0, and `replay`, the inference command.

Without a GPU every step runs on the CPU at a stated budget (CPU_EPOCHS epochs of CPU_ITERATIONS
batches): enough to be accepted, not a competitive model; with one, the configuration's epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amid.tools.planning.portfolio import Route, ScaffoldStep
from amid.tools.scaffolds import monai_seg, score
from amid.tools.scaffolds.nnunet_steps import PACKAGE_NOTE, REPLAY_NOTE
from amid.tools.scaffolds.pinning import PIN_FLAG, scaffold_digest

LANES_FROM_WORKTREE = "../../memory/lanes"
MONAI_RUNS = ".amid-local/monai"
MONAI_MODEL = ".amid-local/monai_model"  # the packaged model: declare it as artifacts.checkpoint
MANIFEST = "predictions/training_manifest.json"  # declare it as artifacts.training_manifest
SMOKE_EPOCHS, SMOKE_ITERATIONS = 1, 2
CPU_EPOCHS, CPU_ITERATIONS = 4, 4  # ~1 minute of CPU on the demo: a model that beats the empty mask
HOUR = 3600
TRAIN_LIMIT_S = {"cuda": 48 * HOUR, "cpu": HOUR}


@dataclass(frozen=True)
class Machine:
    """What the steps run on: a GPU (the steps take one) or `cpus` CPU threads."""

    gpus: int
    cpus: int

    def torch(self) -> dict[str, Any]:
        """A torch step's resources. On CPU one thread per core asked: more threads than the job's cores
        spin against each other (a 64x64x16 SegResNet step took 5x longer with 2 threads than with 1 on a
        loaded 2-core machine)."""
        if self.gpus:
            return {"gpus": self.gpus}
        return {"gpus": 0, "cpus": self.cpus, "env": {"OMP_NUM_THREADS": str(self.cpus)}}


def monai_config_name(lane_id: str) -> str:
    return f"{lane_id}.monai_config.json"


def commands(lane_id: str, python: str, k_folds: int, *, gpus_here: int = 0, cpus: int = 1) -> list[ScaffoldStep]:
    """Every step of the lane for a machine with `gpus_here` GPUs (0: CPU budgets and `--device cpu`); CPU
    steps use `cpus` threads."""
    gpus = min(gpus_here, 1)
    run = Machine(gpus, cpus)
    base = [python, "-m", monai_seg.MODULE]
    device = ["--device", "cuda" if gpus else "cpu"]
    train = [*base, "train", "--config", f"{LANES_FROM_WORKTREE}/{monai_config_name(lane_id)}", *device]
    smoke = [*train, "--fold", "0", "--out", f"{MONAI_RUNS}/fold_0"]
    steps = [
        ScaffoldStep(
            name="smoke_train_fold_0",
            argv=[*smoke, "--epochs", str(SMOKE_EPOCHS), "--iterations", str(SMOKE_ITERATIONS)],
            **run.torch(),
            route="smoke",
            note="seconds: proves the mechanics; writes what train_fold_0 writes, so predict_fold_0, score_fold_0 "
            "and package accept it (submit it as budget_class smoke); train_fold_0 replaces it",
        )
    ]
    for fold in range(k_folds):
        steps += _fold_steps(base, train, device, fold, run)
    return [*steps, *_final_steps(base, device, run)]


def _fold_steps(base: list[str], train: list[str], device: list[str], fold: int, run: Machine) -> list[ScaffoldStep]:
    gpus = run.gpus
    out, predictions = f"{MONAI_RUNS}/fold_{fold}", f"predictions/fold_{fold}"
    budget = [] if gpus else ["--epochs", str(CPU_EPOCHS), "--iterations", str(CPU_ITERATIONS)]
    why = (
        "the configuration's epochs"
        if gpus
        else f"CPU budget: {CPU_EPOCHS} epochs of {CPU_ITERATIONS} batches (the configuration's epochs need a GPU)"
    )
    route: Route = "always" if fold == 0 else "full"  # fold 0 is the smoke route's too
    predict = [*base, "predict", "--checkpoint", f"{out}/checkpoint.pt", "--split", "val", "--dest", predictions]
    scoring = [base[0], "-m", score.MODULE, "--predictions", predictions, "--fold", str(fold)]
    return [
        ScaffoldStep(
            name=f"train_fold_{fold}",
            argv=[*train, "--fold", str(fold), "--out", out, *budget],
            **run.torch(),
            time_limit_s=TRAIN_LIMIT_S["cuda" if gpus else "cpu"],
            route="full",
            note=f"{why}; writes {out}/checkpoint.pt, train_log.jsonl (declare as artifacts.logs) and "
            "training_manifest.json",
        ),
        ScaffoldStep(
            name=f"predict_fold_{fold}",
            argv=[*predict, *device],
            **run.torch(),
            route=route,
            note=f"{predictions}/ holds the fold's cases only; the fold is recorded in {MANIFEST}",
        ),
        ScaffoldStep(
            name=f"score_fold_{fold}",
            argv=[*scoring, "--out", f".amid-local/scores/fold_{fold}.json"],
            route=route,
            note="prints declared_scores for submit_attempt, computed with the reviewer's own metric code",
        ),
    ]


def _final_steps(base: list[str], device: list[str], run: Machine) -> list[ScaffoldStep]:
    replay = ["replay", "--model", "{checkpoint}", "--fold", "{fold}", "--input-dir", "{input_dir}"]
    pin = [PIN_FLAG, scaffold_digest("monai")]
    return [
        ScaffoldStep(
            name="package",
            argv=[*base, "package", "--runs", MONAI_RUNS, "--dest", MONAI_MODEL],
            note=f"{PACKAGE_NOTE} (fold_N/checkpoint.pt and monai_config.json of every trained fold or of --folds)",
        ),
        ScaffoldStep(
            name="predict_test",
            argv=[
                *base,
                "predict",
                "--checkpoint",
                MONAI_MODEL,
                "--fold",
                "0",
                "--split",
                "test",
                "--dest",
                "submission",
                *device,
            ],
            **run.torch(),
            note="from the packaged fold 0 (what the replay runs): submission/submission.csv and "
            "submission/predictions/*",
        ),
        ScaffoldStep(
            name="replay",
            argv=["{python}", "-m", monai_seg.MODULE, *replay, "--output-dir", "{output_dir}", *pin],
            job=False,
            note=REPLAY_NOTE,
        ),
    ]
