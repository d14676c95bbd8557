"""MONAI lane entry point: train on a locked fold, predict in the task's format.

    python -m amid.tools.scaffolds.monai_seg train --config CONFIG.json --fold 0 --out runs/monai_fold_0
    python -m amid.tools.scaffolds.monai_seg predict --checkpoint runs/monai_fold_0/checkpoint.pt --split val --fold 0 \
        --dest predictions/fold_0
    python -m amid.tools.scaffolds.monai_seg predict --checkpoint .amid-local/monai_model --fold 0 --split test \
        --dest submission
    python -m amid.tools.scaffolds.monai_seg package --runs .amid-local/monai --dest .amid-local/monai_model
    python -m amid.tools.scaffolds.monai_seg replay --model {checkpoint} --fold {fold} --input-dir IN --output-dir OUT

`train` writes `checkpoint.pt`, `train_log.jsonl` and `training_manifest.json` (the case ids it
trained on, for the reviewer's SPLIT_LEAK check) to `--out`. `predict --split val` writes the
fold's cases only to `--dest` (the reviewer rejects any other file there) and records the fold in
`predictions/training_manifest.json` beside it: the file to declare as `artifacts.training_manifest`.
`--checkpoint` is a train step's `checkpoint.pt` or the packaged folder with `--fold`. The
configuration comes from the lane (`memory/lanes/<lane>.monai_config.json`, chosen from the data
profile); copy and edit it freely.
`package` writes the folder to declare as `artifacts.checkpoint` (tools/scaffolds/monai_model.py);
`replay` is the attempt's inference command: it reads the weights from that folder alone, and refuses
(SCAFFOLD_CHANGED) when `--scaffold-sha256` names other scaffold code than the installed one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amid.server.errors import AmidError, Conflict, DataUnreadable, InvalidInput
from amid.tools.scaffolds.monai_config import MonaiConfig
from amid.tools.scaffolds.monai_data import (
    denormalise,
    inference_transforms,
    items,
    items_from_folder,
    train_transforms,
    write_prediction,
)
from amid.tools.scaffolds.monai_model import fold_weights, package
from amid.tools.scaffolds.pinning import PIN_FLAG, check_pin
from amid.tools.scaffolds.taskdata import (
    MANIFEST_NAME,
    STRAY_FIX,
    TaskData,
    manifest_beside,
    stray_files,
    write_manifest,
    write_submission,
)

MODULE = "amid.tools.scaffolds.monai_seg"


def build_network(cfg: MonaiConfig) -> Any:
    from monai.networks import nets

    if cfg.network == "SegResNet":
        return nets.SegResNet(
            spatial_dims=cfg.spatial_dims, in_channels=cfg.in_channels, out_channels=cfg.out_channels, init_filters=16
        )
    return nets.BasicUNet(
        spatial_dims=cfg.spatial_dims,
        in_channels=cfg.in_channels,
        out_channels=cfg.out_channels,
        features=(16, 32, 64, 128, 256, 16),
    )


def build_loss(cfg: MonaiConfig) -> Any:
    import torch
    from monai import losses

    if cfg.loss == "L1":
        return torch.nn.L1Loss()
    if cfg.loss == "DiceFocal":
        return losses.DiceFocalLoss(to_onehot_y=True, softmax=True)
    return losses.DiceCELoss(to_onehot_y=True, softmax=True)


def _device(name: str) -> Any:
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def train(task: TaskData, cfg: MonaiConfig, fold: int, out: Path, *, device: str = "auto") -> dict[str, object]:
    """Train on the fold's training cases only; checkpoint, log and manifest go to `out`."""
    import torch
    from monai.data import DataLoader, Dataset
    from monai.utils import set_determinism

    set_determinism(seed=cfg.seed)
    train_ids, val_ids = task.fold(fold)
    data = items(task, train_ids, with_label=True)
    loader = DataLoader(
        Dataset(data, train_transforms(cfg, data[0]["image"][0])),
        batch_size=cfg.batch_size,
        shuffle=True,
        num_workers=0,
    )
    run_on = _device(device)
    model, loss_fn = build_network(cfg).to(run_on), build_loss(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=1e-5)
    steps = cfg.iterations_per_epoch or len(loader)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "train_log.jsonl").open("w", encoding="utf-8") as log:
        for epoch in range(cfg.epochs):
            started, losses = time.monotonic(), []
            model.train()
            for batch in itertools.islice(itertools.cycle(loader), steps):
                image, target = batch["image"].to(run_on), batch["label"].to(run_on)
                optimizer.zero_grad()
                output = model(image)
                loss = loss_fn(image + output if cfg.task == "enhancement" else output, target)
                loss.backward()
                optimizer.step()
                losses.append(float(loss.item()))
            entry = {"epoch": epoch, "loss": float(np.mean(losses)), "seconds": round(time.monotonic() - started, 2)}
            log.write(json.dumps(entry) + "\n")
    torch.save({"state_dict": model.state_dict(), "config": cfg.model_dump(), "fold": fold}, out / "checkpoint.pt")
    manifest = write_manifest(
        out / MANIFEST_NAME,
        fold=fold,
        train_cases=train_ids,
        val_cases=val_ids,
        source="amid.tools.scaffolds.monai_seg",
    )
    return {"checkpoint": str(out / "checkpoint.pt"), "manifest": str(manifest), "epochs": cfg.epochs}


def predict(
    task: TaskData,
    checkpoint: Path,
    dest: Path,
    *,
    split: Literal["val", "test"],
    fold: int | None = None,
    device: str = "auto",
    manifest: Path | None = None,
) -> dict[str, object]:
    """Predict every case of the fold's validation set (or the test set) in the task's format. `dest`
    for a fold holds its cases only; the fold's training manifest entry goes to `manifest`
    (default: beside `dest`, `predictions/training_manifest.json`)."""
    cfg, model, run_on, state = _load(fold_weights(checkpoint, fold), device)
    ending = task.contract.layout.file_ending
    if split == "test":
        if not task.test_cases:
            raise InvalidInput("split: test has no cases in this task", field="split")
        written = _predict_all(
            cfg, model, run_on, items(task, sorted(task.test_cases), with_label=False), dest / "predictions", ending
        )
        files = {case_id: str(path.relative_to(dest)) for case_id, path in written.items()}
        return {
            "split": split,
            "cases": len(files),
            "dest": str(dest),
            "submission": str(write_submission(task, dest, files)),
        }
    val_fold: int = state["fold"] if fold is None else fold
    case_ids, trained_on = task.fold(val_fold)[1], _trained_on(checkpoint, val_fold)
    stray = stray_files(dest, case_ids, ending)
    if stray:
        raise Conflict(f"dest: {dest} holds files that are not fold {val_fold}'s cases {stray[:5]}; {STRAY_FIX}")
    written = _predict_all(cfg, model, run_on, items(task, case_ids, with_label=False), dest, ending)
    recorded = write_manifest(
        manifest or manifest_beside(dest),
        fold=val_fold,
        train_cases=trained_on,
        val_cases=case_ids,
        source=f"{MODULE} {checkpoint}",
    )
    return {"split": split, "cases": len(written), "dest": str(dest), "manifest": str(recorded)}


def _trained_on(checkpoint: Path, fold: int) -> list[str]:
    """The case ids the train step recorded beside the checkpoint (the evidence travels with the weights)."""
    recorded = checkpoint.parent / MANIFEST_NAME
    try:
        return list(json.loads(recorded.read_text(encoding="utf-8"))["folds"][str(fold)])
    except (OSError, ValueError, KeyError, TypeError):
        raise DataUnreadable(
            f"checkpoint: {recorded} has no fold {fold} entry; predict a fold from its train step's checkpoint.pt",
            field="checkpoint",
        ) from None


def replay(
    model: Path, fold: int | None, input_dir: Path, output_dir: Path, *, device: str = "auto"
) -> dict[str, object]:
    """The inference command: predict every `CASE_0000<ending>` in input_dir to `output_dir/CASE<ending>`
    with the packaged model's fold (or the one checkpoint file `model` names)."""
    cfg, network, run_on, _ = _load(fold_weights(model, fold), device)
    cases, ending = items_from_folder(input_dir)
    written = _predict_all(cfg, network, run_on, cases, output_dir, ending)
    return {"cases": len(written), "output_dir": str(output_dir)}


def _load(checkpoint: Path, device: str) -> tuple[MonaiConfig, Any, Any, dict[str, Any]]:
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    cfg = MonaiConfig.model_validate(state["config"])
    run_on = _device(device)
    model = build_network(cfg).to(run_on)
    model.load_state_dict(state["state_dict"])
    model.eval()
    return cfg, model, run_on, state


def _predict_all(
    cfg: MonaiConfig, model: Any, device: Any, cases: list[dict[str, Any]], folder: Path, ending: str
) -> dict[str, Path]:
    written = {}
    for item in cases:
        target = folder / f"{item['case_id']}{ending}"
        write_prediction(_predict_case(cfg, model, item, device), item["image"][0], target)
        written[item["case_id"]] = target
    return written


def _predict_case(cfg: MonaiConfig, model: Any, item: dict[str, Any], device: Any) -> np.ndarray:
    import torch
    from monai.data import MetaTensor
    from monai.inferers import sliding_window_inference
    from monai.transforms import Invertd

    pre = inference_transforms(cfg, item["image"][0])
    data = pre(item)
    image = data["image"]
    with torch.no_grad():
        output = sliding_window_inference(image[None].to(device), cfg.patch_size, 2, model, overlap=0.25)[0].cpu()
    if cfg.task == "enhancement":
        output = image + output
    data["pred"] = MetaTensor(output, meta=image.meta, applied_operations=image.applied_operations)
    restored = Invertd(keys="pred", transform=pre, orig_keys="image", nearest_interp=False)(data)["pred"]
    restored = np.asarray(restored.detach().cpu())
    if cfg.task == "enhancement":
        values = denormalise(cfg, restored).astype(np.float32)
        return values[0] if values.shape[0] == 1 else np.moveaxis(values, 0, -1)
    lookup = np.asarray(cfg.label_values, dtype=np.uint8 if max(cfg.label_values) < 256 else np.uint16)
    return lookup[np.argmax(restored, axis=0)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("train", "predict", "replay", "package"):
        p = sub.add_parser(action)
        p.add_argument("--task-dir", type=Path, default=Path("../../task"), help="the workspace's task/ folder")
        p.add_argument("--device", default="auto", help="auto, cuda, cpu")
        p.add_argument("--fold", type=int, default=None)
    train_parser = sub.choices["train"]
    train_parser.add_argument("--config", type=Path, required=True)
    train_parser.add_argument("--out", type=Path, required=True)
    train_parser.add_argument("--epochs", type=int, default=None, help="override the configuration's epochs")
    train_parser.add_argument("--iterations", type=int, default=None, help="batches per epoch")
    predict_parser = sub.choices["predict"]
    predict_parser.add_argument("--checkpoint", type=Path, required=True)
    predict_parser.add_argument("--split", choices=["val", "test"], required=True)
    predict_parser.add_argument("--dest", type=Path, required=True)
    predict_parser.add_argument(
        "--manifest", type=Path, default=None, help="training manifest (default: beside --dest) to record the fold in"
    )
    replay_parser = sub.choices["replay"]
    replay_parser.add_argument("--model", type=Path, required=True, help="{checkpoint}: the packaged folder")
    replay_parser.add_argument("--input-dir", type=Path, required=True)
    replay_parser.add_argument("--output-dir", type=Path, required=True)
    replay_parser.add_argument(PIN_FLAG, dest="scaffold_sha256", default=None, help="the scaffold code pinned")
    package_parser = sub.choices["package"]
    package_parser.add_argument("--runs", type=Path, required=True, help="the train step's fold_N/ folders")
    package_parser.add_argument("--folds", nargs="+", type=int, default=None, help="default: every trained fold")
    package_parser.add_argument("--dest", type=Path, required=True, help="the folder to declare as checkpoint")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.action in ("replay", "package"):
            print(json.dumps(_model_action(args), indent=1))
            return 0
        task = TaskData.open(args.task_dir)
        if args.action == "train":
            cfg = MonaiConfig.read(args.config)
            overrides = {"epochs": args.epochs, "iterations_per_epoch": args.iterations}
            cfg = cfg.model_copy(update={k: v for k, v in overrides.items() if v is not None})
            result = train(task, cfg, 0 if args.fold is None else args.fold, args.out, device=args.device)
        else:
            result = predict(
                task,
                args.checkpoint,
                args.dest,
                split=args.split,
                fold=args.fold,
                device=args.device,
                manifest=args.manifest,
            )
    except AmidError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    return 0


def _model_action(args: argparse.Namespace) -> dict[str, object]:
    """The actions that need no task folder (the replay's sandbox has none)."""
    if args.action == "package":
        return package(args.runs, args.dest, args.folds)
    check_pin("monai", args.scaffold_sha256)  # a replay by other scaffold code than the attempt's refuses
    return replay(args.model, args.fold, args.input_dir, args.output_dir, device=args.device)


if __name__ == "__main__":
    sys.exit(main())
