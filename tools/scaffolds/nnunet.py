"""nnU-Net lane scaffold: convert, plan and preprocess, train per fold, predict, convert back.

    python -m tools.scaffolds.nnunet convert --task-dir ../../task --out .amid-local/nnunet
    python -m tools.scaffolds.nnunet train --out … --configuration 3d_fullres --fold 0 [--epochs 1 --iterations 5]
    python -m tools.scaffolds.nnunet to-task --out … --split val --fold 0 --predictions DIR --dest predictions/fold_0

`train` runs nnU-Net's own `nnUNetTrainer` (what `nnUNetv2_train` runs) with optional shorter
epochs for smoke tests; full runs use the `nnUNetv2_train` command that `commands` lists.
nnU-Net reads its folder variables when it is imported, so `train` sets them first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from server.errors import AmidError, Conflict
from tools.planning.portfolio import ScaffoldStep
from tools.scaffolds.nnunet_back import predictions_to_task
from tools.scaffolds.nnunet_dataset import NnunetLayout, convert_task, dataset_name, write_splits
from tools.scaffolds.taskdata import TaskData

DEFAULT_ROOT = ".amid-local/nnunet"  # ignored by the attempts repository's .gitignore
DEFAULT_TASK_DIR = "../../task"  # the workspace's public task folder, seen from a worktree
DEFAULT_DATASET_ID = 501
MODULE = "tools.scaffolds.nnunet"


def commands(
    python: str, task_id: str, configuration: str, k_folds: int, *, root: str = DEFAULT_ROOT, cpus: int = 4
) -> list[ScaffoldStep]:
    """The exact steps of the nnU-Net lane, each ready for run_gpu_job with cwd = the worktree."""
    layout = NnunetLayout(Path(root), DEFAULT_DATASET_ID, dataset_name(task_id))
    env, bin_dir = layout.env(), Path(python).parent
    dataset = str(layout.dataset_id)
    results = layout.results(configuration)
    base = [python, "-m", MODULE]
    steps = [
        ScaffoldStep(
            name="convert",
            command=[*base, "convert", "--task-dir", DEFAULT_TASK_DIR, "--out", root],
            note="raw dataset (channels _0000, contiguous labels, geometry checked); splits_final.json = locked folds",
        ),
        ScaffoldStep(
            name="plan_and_preprocess",
            command=[
                str(bin_dir / "nnUNetv2_plan_and_preprocess"),
                "-d",
                dataset,
                "-c",
                configuration,
                "-np",
                str(cpus),
                "--verify_dataset_integrity",
            ],
            env=env,
            cpus=cpus,
        ),
        ScaffoldStep(
            name="smoke_train_fold_0",
            command=[
                *base,
                "train",
                "--out",
                root,
                "--configuration",
                configuration,
                "--fold",
                "0",
                "--epochs",
                "1",
                "--iterations",
                "5",
                "--disable-tta",
            ],
            env=env,
            gpus=1,
            note="minutes: proves the pipeline before a full run (add --device cpu without a GPU)",
        ),
    ]
    for fold in range(k_folds):
        steps.append(
            ScaffoldStep(
                name=f"train_fold_{fold}",
                command=[str(bin_dir / "nnUNetv2_train"), dataset, configuration, str(fold), "--npz"],
                env=env,
                gpus=1,
                cpus=cpus,
                note="nnU-Net's validation predictions land in fold_N/validation" if fold == 0 else "",
            )
        )
        steps.append(
            ScaffoldStep(
                name=f"to_task_fold_{fold}",
                command=[
                    *base,
                    "to-task",
                    "--out",
                    root,
                    "--split",
                    "val",
                    "--fold",
                    str(fold),
                    "--predictions",
                    str(results / f"fold_{fold}" / "validation"),
                    "--dest",
                    f"predictions/fold_{fold}",
                ],
                note="task labels and reference geometry, plus training_manifest.json for the reviewer",
            )
        )
    folds = [str(f) for f in range(k_folds)]
    test_out = str(Path(root) / "test_predictions")
    steps += [
        ScaffoldStep(
            name="predict_test",
            command=[
                str(bin_dir / "nnUNetv2_predict"),
                "-i",
                str(layout.raw / "imagesTs"),
                "-o",
                test_out,
                "-d",
                dataset,
                "-c",
                configuration,
                "-f",
                *folds,
            ],
            env=env,
            gpus=1,
        ),
        ScaffoldStep(
            name="to_task_test",
            command=[
                *base,
                "to-task",
                "--out",
                root,
                "--split",
                "test",
                "--predictions",
                test_out,
                "--dest",
                "submission",
            ],
            note="submission/submission.csv and submission/predictions/*",
        ),
    ]
    return steps


def train(
    layout: NnunetLayout,
    configuration: str,
    fold: int,
    *,
    device: str = "cuda",
    epochs: int | None = None,
    iterations: int | None = None,
    mirroring: bool = True,
) -> Path:
    """Train one fold with nnU-Net's standard trainer, then predict its validation cases as nnU-Net does.

    Shorter schedules (and no mirroring at validation, 8x faster in 3-D) are for smoke runs.
    Returns the fold's folder."""
    for name, value in layout.env().items():
        os.environ[name] = str(Path(value).resolve())
    import torch
    from nnunetv2.run.run_training import get_trainer_from_args

    trainer = get_trainer_from_args(str(layout.dataset_id), configuration, fold, device=torch.device(device))
    if epochs is not None:
        trainer.num_epochs = epochs
    if iterations is not None:
        trainer.num_iterations_per_epoch = iterations
        trainer.num_val_iterations_per_epoch = max(1, iterations // 5)
    splits = layout.preprocessed / "splits_final.json"
    if not splits.is_file():
        raise Conflict(f"{splits}: missing; run the convert step (it writes the locked folds)", field="out")
    trainer.run_training()
    if not mirroring:
        trainer.inference_allowed_mirroring_axes = None  # set by run_training; read by the validation
    trainer.perform_actual_validation(save_probabilities=False)
    return Path(trainer.output_folder)


def _layout(args: argparse.Namespace, task: TaskData) -> NnunetLayout:
    return NnunetLayout(Path(args.out), args.dataset_id, dataset_name(task.contract.id))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("convert", "train", "to-task", "commands"):
        p = sub.add_parser(action)
        p.add_argument("--task-dir", type=Path, default=Path(DEFAULT_TASK_DIR), help="the workspace's task/ folder")
        p.add_argument("--out", default=DEFAULT_ROOT, help="root of nnUNet_raw / _preprocessed / _results")
        p.add_argument("--dataset-id", type=int, default=DEFAULT_DATASET_ID)
    sub.choices["convert"].add_argument("--copy", action="store_true", help="copy images instead of linking")
    for action in ("train", "commands"):
        sub.choices[action].add_argument("--configuration", default="3d_fullres")
    train_parser = sub.choices["train"]
    train_parser.add_argument("--fold", type=int, required=True)
    train_parser.add_argument("--device", default="cuda", choices=["cuda", "cpu", "mps"])
    train_parser.add_argument("--epochs", type=int, default=None, help="default: nnU-Net's 1000")
    train_parser.add_argument("--iterations", type=int, default=None, help="per epoch; default: nnU-Net's 250")
    train_parser.add_argument("--disable-tta", action="store_true", help="no mirroring when predicting validation")
    back = sub.choices["to-task"]
    back.add_argument("--split", choices=["val", "test"], required=True)
    back.add_argument("--fold", type=int, default=None)
    back.add_argument("--predictions", type=Path, required=True, help="nnU-Net's prediction folder")
    back.add_argument("--dest", type=Path, required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        task = TaskData.open(args.task_dir)
        layout = _layout(args, task)
        result: dict[str, object]
        if args.action == "convert":
            conversion = convert_task(task, layout, copy_images=args.copy)
            splits = write_splits(task, layout)
            result = {
                "dataset": conversion.dataset,
                "raw": str(layout.raw),
                "splits": str(splits),
                "train_cases": len(conversion.train_cases),
                "test_cases": len(conversion.test_cases),
                "label_map": conversion.label_map,
                "env": layout.env(),
            }
        elif args.action == "train":
            folder = train(
                layout,
                args.configuration,
                args.fold,
                device=args.device,
                epochs=args.epochs,
                iterations=args.iterations,
                mirroring=not args.disable_tta,
            )
            result = {"fold_folder": str(folder)}
        elif args.action == "to-task":
            result = predictions_to_task(task, layout, args.predictions, args.dest, split=args.split, fold=args.fold)
        else:
            steps = commands(sys.executable, task.contract.id, args.configuration, task.folds.k, root=args.out)
            result = {"steps": [s.model_dump() for s in steps]}
    except AmidError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
