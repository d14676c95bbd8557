"""The MONAI model an attempt declares as its checkpoint, and the weights its replay loads.

`package` copies each trained fold out of the training runs (`<runs>/fold_N/`, as the train step
writes them) into one folder:

    fold_N/checkpoint.pt        the fold's weights with its configuration embedded (what replay loads)
    fold_N/monai_config.json    that configuration, readable

Declared as `artifacts.checkpoint`, it is mounted at `{checkpoint}` in the reviewer's sandbox; the
replay reads `{checkpoint}/fold_{fold}/checkpoint.pt` and nothing of the worktree.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from amid.server.errors import Conflict, DataUnreadable, InvalidInput
from amid.tools.scaffolds.monai_config import CONFIG_NAME, MonaiConfig
from amid.tools.scaffolds.packaging import write_package

WEIGHTS = "checkpoint.pt"
PACKAGE_FIX = "declare the package step's folder as artifacts.checkpoint and pass --model {checkpoint} --fold {fold}"


def trained_folds(runs: Path) -> list[int]:
    found = [p.parent.name.removeprefix("fold_") for p in runs.glob(f"fold_*/{WEIGHTS}")]
    return sorted(int(f) for f in found if f.isdigit())


def package(runs: Path, dest: Path, folds: list[int] | None = None) -> dict[str, object]:
    """Copy the weights (and a readable configuration) of `folds`, default every trained fold, into `dest`."""
    import torch

    chosen = trained_folds(runs) if folds is None else sorted(set(folds))
    untrained = [f for f in chosen if not (runs / f"fold_{f}" / WEIGHTS).is_file()]
    if not chosen:
        raise DataUnreadable(f"folds: no fold_N/{WEIGHTS} under {runs}; train a fold first", field="folds")
    if untrained:
        raise DataUnreadable(f"folds: {untrained} have no {WEIGHTS} under {runs}; train them first", field="folds")
    sources: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="amid-monai-package-") as tmp:
        for fold in chosen:
            weights = runs / f"fold_{fold}" / WEIGHTS
            state = torch.load(weights, map_location="cpu", weights_only=False)
            if state.get("fold") != fold:
                raise Conflict(f"{weights}: trained on fold {state.get('fold')}, found under fold_{fold}", field="runs")
            config = MonaiConfig.model_validate(state["config"]).write(Path(tmp) / f"fold_{fold}" / CONFIG_NAME)
            sources |= {f"fold_{fold}/{WEIGHTS}": weights, f"fold_{fold}/{CONFIG_NAME}": config}
        size = write_package(dest, sources, f"fold_*/{CONFIG_NAME}")
    return {"checkpoint": str(dest), "folds": chosen, "files": sorted(sources), "bytes": size}


def fold_weights(model: Path, fold: int | None) -> Path:
    """The weights a replay loads: `model` itself when one file was declared, else its fold_N/checkpoint.pt."""
    if model.is_file():
        return model
    if fold is None:
        raise InvalidInput(f"fold: none given for the packaged model {model}; {PACKAGE_FIX}", field="fold")
    weights = model / f"fold_{fold}" / WEIGHTS
    if not weights.is_file():
        raise DataUnreadable(f"model: {weights} is missing; {PACKAGE_FIX}", field="model")
    return weights
