"""nnU-Net lane scaffold: convert, plan and preprocess, train per fold, predict, convert back.

    python -m amid.tools.scaffolds.nnunet convert --task-dir ../../task --out .amid-local/nnunet
    python -m amid.tools.scaffolds.nnunet train --out … --configuration 3d_fullres --fold 0 [--epochs 1 --iterations 5]
    python -m amid.tools.scaffolds.nnunet to-task --out … --split val --fold 0 --predictions DIR \
        --dest predictions/fold_0
    python -m amid.tools.scaffolds.nnunet package --out … --configuration 3d_fullres --dest .amid-local/nnunet_model
    python -m amid.tools.scaffolds.nnunet predict-test --model .amid-local/nnunet_model --dest submission [--device cpu]
    python -m amid.tools.scaffolds.nnunet replay --model {checkpoint} --folds {fold} --input-dir IN --output-dir OUT \
        [--scaffold-sha256 DIGEST]

`package` writes the folder to declare as `artifacts.checkpoint` (tools/scaffolds/nnunet_model.py);
`replay` is the attempt's inference command: it reads the model from that folder alone, and refuses
when `--scaffold-sha256` names other scaffold code than the installed one (tools/scaffolds/pinning.py).
`predict-test` predicts the task's test images with the packaged model (every fold in it), as the replay
does, and writes the submission.

`train` runs nnU-Net's own `nnUNetTrainer` (what `nnUNetv2_train` runs) with optional shorter
epochs for smoke tests; full runs use the `nnUNetv2_train` command that `commands` lists.
nnU-Net reads its folder variables when it is imported, so `train` sets them first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from amid.server.errors import AmidError, Conflict
from amid.tools.scaffolds.nnunet_back import predictions_to_task
from amid.tools.scaffolds.nnunet_dataset import NnunetLayout, convert_task, dataset_name, write_splits
from amid.tools.scaffolds.nnunet_model import package, predict_test, replay
from amid.tools.scaffolds.nnunet_paths import (
    DEFAULT_DATASET_ID,
    DEFAULT_MODEL,
    DEFAULT_ROOT,
    DEFAULT_TASK_DIR,
    LOGS,
    MODULE,
)
from amid.tools.scaffolds.pinning import PIN_FLAG, check_pin
from amid.tools.scaffolds.taskdata import TaskData

__all__ = ["main", "train"]


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
    folder = Path(trainer.output_folder)
    if not mirroring:
        trainer.inference_allowed_mirroring_axes = None  # set by run_training; read by the validation
        _record_no_mirroring(folder / "checkpoint_final.pth")
    trainer.perform_actual_validation(save_probabilities=False)
    return folder


def copy_training_logs(fold_folder: Path, dest: Path) -> Path:
    """nnU-Net's training log and debug record of one fold, copied where the attempt declares its logs
    (the log's name carries a timestamp; the copy's folder does not)."""
    logs = sorted(fold_folder.glob("training_log_*.txt")) + sorted(fold_folder.glob("debug.json"))
    if not logs:
        raise Conflict(f"predictions: {fold_folder} holds no nnU-Net training log; train the fold first", field="fold")
    dest.mkdir(parents=True, exist_ok=True)
    for log in logs:
        shutil.copyfile(log, dest / log.name)
    return dest


def _record_no_mirroring(checkpoint: Path) -> None:
    """The checkpoint says its fold was validated without mirroring, so a replay predicts the same way."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state["inference_allowed_mirroring_axes"] = None
    torch.save(state, checkpoint)


def _layout(args: argparse.Namespace, task: TaskData) -> NnunetLayout:
    return NnunetLayout(Path(args.out), args.dataset_id, dataset_name(task.contract.id))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("convert", "train", "to-task", "commands", "package", "predict-test"):
        p = sub.add_parser(action)
        p.add_argument("--task-dir", type=Path, default=Path(DEFAULT_TASK_DIR), help="the workspace's task/ folder")
        p.add_argument("--out", default=DEFAULT_ROOT, help="root of nnUNet_raw / _preprocessed / _results")
        p.add_argument("--dataset-id", type=int, default=DEFAULT_DATASET_ID)
    sub.choices["convert"].add_argument("--copy", action="store_true", help="copy images instead of linking")
    for action in ("train", "commands", "package"):
        sub.choices[action].add_argument("--configuration", default="3d_fullres")
    sub.choices["train"].add_argument("--device", default="cuda", choices=["cuda", "cpu", "mps"])
    package_parser = sub.choices["package"]
    package_parser.add_argument("--folds", nargs="+", type=int, default=None, help="default: every trained fold")
    package_parser.add_argument("--dest", type=Path, default=Path(DEFAULT_MODEL), help="the folder to declare")
    sub.choices["commands"].add_argument("--gpus", type=int, default=1, help="GPUs here (0: CPU steps)")
    test_parser = sub.choices["predict-test"]
    test_parser.add_argument("--model", type=Path, default=Path(DEFAULT_MODEL), help="the packaged model folder")
    test_parser.add_argument("--dest", type=Path, required=True, help="submission.csv and predictions/ go here")
    test_parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu", "mps"])
    replay_parser = sub.add_parser("replay", help="the inference command: predicts from the packaged model only")
    replay_parser.add_argument(PIN_FLAG, dest="scaffold_sha256", default=None, help="the scaffold code pinned")
    replay_parser.add_argument("--model", type=Path, required=True, help="the packaged model folder: {checkpoint}")
    replay_parser.add_argument("--folds", nargs="+", type=int, required=True, help="{fold}, or folds to ensemble")
    replay_parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu", "mps"])
    replay_parser.add_argument("--input-dir", type=Path, required=True, help="CASE_0000<ending> files")
    replay_parser.add_argument("--output-dir", type=Path, required=True, help="CASE<ending> predictions go here")
    train_parser = sub.choices["train"]
    train_parser.add_argument("--fold", type=int, required=True)
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
        result = _replay(args) if args.action == "replay" else _run(args, TaskData.open(args.task_dir))
    except AmidError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1, default=str))
    return 0


def _replay(args: argparse.Namespace) -> dict[str, object]:
    check_pin("nnunet", args.scaffold_sha256)
    return replay(args.model, args.folds, args.input_dir, args.output_dir, device=args.device)


def _run(args: argparse.Namespace, task: TaskData) -> dict[str, object]:
    layout = _layout(args, task)
    if args.action == "convert":
        conversion = convert_task(task, layout, copy_images=args.copy)
        splits = write_splits(task, layout)
        counts = {"train_cases": len(conversion.train_cases), "test_cases": len(conversion.test_cases)}
        return {
            "dataset": conversion.dataset,
            "raw": str(layout.raw),
            "splits": str(splits),
            **counts,
            "label_map": conversion.label_map,
            "env": layout.env(),
        }
    if args.action == "train":
        options = {"epochs": args.epochs, "iterations": args.iterations, "mirroring": not args.disable_tta}
        folder = train(layout, args.configuration, args.fold, device=args.device, **options)
        return {"fold_folder": str(folder)}
    if args.action == "to-task":
        result = predictions_to_task(task, layout, args.predictions, args.dest, split=args.split, fold=args.fold)
        if args.split == "val":
            result["logs"] = str(copy_training_logs(args.predictions.parent, Path(LOGS) / f"fold_{args.fold}"))
        return result
    if args.action == "package":
        return package(layout, args.configuration, args.dest, args.folds)
    if args.action == "predict-test":
        return predict_test(task, args.model, args.dest, device=args.device)
    from amid.tools.scaffolds.nnunet_steps import commands  # planning code: only this action needs it

    steps = commands(
        sys.executable, task.contract.id, args.configuration, task.folds.k, gpus_here=args.gpus, root=args.out
    )
    return {"steps": [s.model_dump() for s in steps]}


if __name__ == "__main__":
    sys.exit(main())
