"""The nnU-Net model an attempt declares as its checkpoint, and the replay that reads only that.

`package` copies what nnU-Net's predictor reads out of the results folder into one folder:

    dataset.json, plans.json, dataset_fingerprint.json   the trained configuration's, as nnU-Net wrote them
    fold_N/checkpoint_final.pth                          each packaged fold's final weights
    amid_conversion.json                                 task label values and file ending, to convert back

and nothing else (no raw or preprocessed data, no logs, no validation outputs). Declared as
`artifacts.checkpoint`, it is frozen at submit and mounted read-only at `{checkpoint}` when the
reviewer replays the attempt's inference command in its sandbox, which shows no worktree.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from amid.server.errors import DataUnreadable
from amid.tools.scaffolds.nnunet_back import write_in_task_format
from amid.tools.scaffolds.nnunet_dataset import CONVERSION_FILE, NnunetLayout, read_conversion
from amid.tools.scaffolds.packaging import write_package
from amid.tools.scaffolds.taskdata import TaskData, write_submission

MODEL_FILES = ("dataset.json", "plans.json", "dataset_fingerprint.json")
WEIGHTS = "checkpoint_final.pth"
NNUNET_RECORDS = ("dataset.json", "plans.json", "predict_from_raw_data_args.json")  # predict_from_files writes them
PACKAGE_FIX = "declare the package step's folder as artifacts.checkpoint and pass {checkpoint} as --model"


def trained_folds(results: Path) -> list[int]:
    """Folds whose final checkpoint exists (nnU-Net writes it when a fold's training ends)."""
    found = [p.parent.name.removeprefix("fold_") for p in results.glob(f"fold_*/{WEIGHTS}")]
    return sorted(int(f) for f in found if f.isdigit())


def package(layout: NnunetLayout, configuration: str, dest: Path, folds: list[int] | None = None) -> dict[str, object]:
    """Copy the inference files of `folds` (default: every trained fold) into `dest`, replacing an
    earlier package there."""
    results = layout.results(configuration)
    chosen = trained_folds(results) if folds is None else sorted(set(folds))
    untrained = [f for f in chosen if not (results / f"fold_{f}" / WEIGHTS).is_file()]
    if not chosen:
        raise DataUnreadable(f"folds: no fold under {results} has {WEIGHTS}; train a fold first", field="folds")
    if untrained:
        raise DataUnreadable(
            f"folds: {untrained} have no {WEIGHTS} under {results}; train them or package other --folds", field="folds"
        )
    sources = {name: results / name for name in MODEL_FILES} | {CONVERSION_FILE: layout.raw / CONVERSION_FILE}
    missing = [str(path) for path in sources.values() if not path.is_file()]
    if missing:
        raise DataUnreadable(f"model files missing: {missing}; run convert and train first", field="out")
    sources |= {f"fold_{f}/{WEIGHTS}": results / f"fold_{f}" / WEIGHTS for f in chosen}
    size = write_package(dest, sources, CONVERSION_FILE)
    return {"checkpoint": str(dest), "folds": chosen, "files": sorted(sources), "bytes": size}


def replay(model: Path, folds: list[int], input_dir: Path, output_dir: Path, *, device: str) -> dict[str, object]:
    """nnU-Net predicts every `CASE_0000<ending>` of input_dir from the packaged `model` alone;
    outputs get the task's label values and each input's geometry."""
    conversion = read_conversion(model, field="model", fix=PACKAGE_FIX)
    missing = [name for name in (*MODEL_FILES, *(f"fold_{f}/{WEIGHTS}" for f in folds)) if not (model / name).is_file()]
    if missing:
        raise DataUnreadable(f"model: {model} lacks {missing}; {PACKAGE_FIX}", field="model")
    predictor = _predictor(model, folds, device)
    output_dir.mkdir(parents=True, exist_ok=True)
    predictor.predict_from_files(
        str(input_dir),
        str(output_dir),
        save_probabilities=False,
        overwrite=True,
        num_processes_preprocessing=1,
        num_processes_segmentation_export=1,
    )
    for record in NNUNET_RECORDS:
        (output_dir / record).unlink(missing_ok=True)
    inverse, ending = conversion.inverse_label_map(), conversion.file_ending
    outputs = sorted(output_dir.glob(f"*{ending}"))
    for output in outputs:
        reference = input_dir / f"{output.name.removesuffix(ending)}_0000{ending}"
        write_in_task_format(output, reference, output, inverse)
    return {"cases": len(outputs), "output_dir": str(output_dir), "folds": folds}


def predict_test(task: TaskData, model: Path, dest: Path, *, device: str) -> dict[str, object]:
    """Every test case predicted by the packaged `model` (each fold in it, ensembled) exactly as the replay
    predicts, into dest/predictions, and dest/submission.csv indexing them."""
    folds = trained_folds(model)
    if not folds:
        raise DataUnreadable(f"model: {model} holds no fold_N/{WEIGHTS}; run the package step first", field="model")
    ending = read_conversion(model, field="model", fix=PACKAGE_FIX).file_ending
    with tempfile.TemporaryDirectory(prefix="amid-nnunet-test-") as tmp:
        for case_id, case in task.test_cases.items():  # named as nnU-Net and the replay expect: CASE_000C
            for channel, image in enumerate(case.image_paths):
                (Path(tmp) / f"{case_id}_{channel:04d}{ending}").symlink_to(task.path(image).resolve())
        replay(model, folds, Path(tmp), dest / "predictions", device=device)
    written = {case_id: f"predictions/{case_id}{ending}" for case_id in task.test_cases}
    missing = [case_id for case_id, rel in written.items() if not (dest / rel).is_file()]
    if missing:
        raise DataUnreadable(f"predictions: {len(missing)} test case(s) were not predicted: {missing[:5]}")
    return {"cases": len(written), "folds": folds, "submission": str(write_submission(task, dest, written))}


def _predictor(model: Path, folds: list[int], device: str) -> Any:
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    if device == "auto":  # the reviewer's sandbox shows no GPU unless the replay was given one
        device = "cuda" if torch.cuda.is_available() else "cpu"
    predictor = nnUNetPredictor(device=torch.device(device), perform_everything_on_device=device == "cuda")
    # Mirroring as the checkpoint records it: the axes nnU-Net validated with (None after --disable-tta).
    predictor.initialize_from_trained_model_folder(str(model), use_folds=tuple(folds))
    return predictor
