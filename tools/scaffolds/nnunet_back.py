"""nnU-Net predictions back to the task's format: task label values and the reference image's geometry.

Validation folds also record their fold in `training_manifest.json` beside the fold folders (the case
ids nnU-Net trained on, read from the splits_final.json it used, after checking those splits are the
locked folds; never inside `predictions/fold_K/`, which holds the fold's cases only); the test split gets
`submission.csv` and `predictions/` as the contract's submission expects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amid.server.errors import Conflict, DataUnreadable, InvalidInput
from amid.tools.scaffolds.nnunet_dataset import AFFINE_TOLERANCE, NnunetLayout, read_conversion
from amid.tools.scaffolds.taskdata import TaskData, manifest_beside, write_manifest, write_submission


def predictions_to_task(
    task: TaskData,
    layout: NnunetLayout,
    predictions: Path,
    dest: Path,
    *,
    split: Literal["val", "test"],
    fold: int | None = None,
) -> dict[str, object]:
    """Convert every expected case's prediction; fail naming the cases that have none."""
    conversion = read_conversion(layout.raw)
    inverse = conversion.inverse_label_map()
    if split == "val":
        if fold is None:
            raise InvalidInput("fold: got None; expected the fold whose validation predictions these are", field="fold")
        train_cases, cases = _locked_split(task, layout, fold)
        folder = dest
    else:
        cases, folder = conversion.test_cases, dest / "predictions"
    missing = [c for c in cases if not (predictions / f"{c}{conversion.file_ending}").is_file()]
    if missing:
        raise DataUnreadable(f"predictions: {len(missing)} case(s) have no file in {predictions}: {missing[:5]}")
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for case_id in cases:
        reference = _reference(task, case_id)
        target = folder / f"{case_id}{conversion.file_ending}"
        write_in_task_format(predictions / target.name, reference, target, inverse)
        written[case_id] = str(target.relative_to(dest))
    result: dict[str, object] = {"split": split, "cases": len(written), "dest": str(dest)}
    if split == "val":
        manifest = write_manifest(
            manifest_beside(dest),
            fold=fold or 0,
            train_cases=train_cases,
            val_cases=cases,
            source="nnU-Net splits_final.json",
        )
        result["manifest"] = str(manifest)
    else:
        result["submission"] = str(write_submission(task, dest, written))
    return result


def _locked_split(task: TaskData, layout: NnunetLayout, fold: int) -> tuple[list[str], list[str]]:
    """The fold's (train, val) ids as nnU-Net used them, checked against the locked folds."""
    locked_train, locked_val = task.fold(fold)
    path = layout.preprocessed / "splits_final.json"
    if not path.is_file():
        raise DataUnreadable(f"{path}: missing; nnU-Net was not trained from the converted dataset", field="out")
    used = json.loads(path.read_text(encoding="utf-8"))[fold]
    if sorted(used["train"]) != sorted(locked_train) or sorted(used["val"]) != sorted(locked_val):
        raise Conflict(f"{path}: fold {fold} differs from the locked folds; re-run the convert step", field="fold")
    return sorted(used["train"]), sorted(used["val"])


def _reference(task: TaskData, case_id: str) -> Path:
    case = task.train_cases.get(case_id) or task.test_cases.get(case_id)
    if case is None:
        raise DataUnreadable(f"case {case_id!r}: not in the task's public cases", field="predictions")
    return task.path(case.image_paths[0])


def write_in_task_format(prediction: Path, reference: Path, target: Path, inverse: dict[int, int]) -> None:
    """Map labels back to task values and write with exactly the reference image's geometry."""
    lookup = np.zeros(max(inverse) + 1, dtype=np.int64)
    for nnunet_value, task_value in inverse.items():
        lookup[nnunet_value] = task_value
    dtype = np.uint8 if max(inverse.values()) < 256 else np.uint16
    if reference.name.endswith(".png"):
        _write_png(prediction, target, lookup, dtype)
    elif reference.name.endswith((".nii", ".nii.gz")):
        _write_nifti(prediction, reference, target, lookup, dtype)
    else:
        _write_sitk(prediction, reference, target, lookup, dtype)


def _write_png(prediction: Path, target: Path, lookup: np.ndarray, dtype: type) -> None:
    from PIL import Image

    with Image.open(prediction) as image:
        array = np.asarray(image)
    Image.fromarray(lookup[array].astype(dtype)).save(target)


def _write_nifti(prediction: Path, reference: Path, target: Path, lookup: np.ndarray, dtype: type) -> None:
    import nibabel as nib

    ref: Any = nib.load(reference)
    pred: Any = nib.load(prediction)
    if pred.shape[:3] != ref.shape[:3] or not np.allclose(pred.affine, ref.affine, atol=AFFINE_TOLERANCE):
        raise DataUnreadable(f"{prediction.name}: geometry differs from {reference.name}", field="predictions")
    labels: np.ndarray = lookup[np.asarray(pred.dataobj).astype(np.int64)].astype(dtype)
    header = ref.header.copy()
    header.set_data_dtype(dtype)
    image = nib.Nifti1Image(labels, ref.affine, header)
    image.header.set_slope_inter(1, 0)
    nib.save(image, target)


def _write_sitk(prediction: Path, reference: Path, target: Path, lookup: np.ndarray, dtype: type) -> None:
    import SimpleITK as sitk

    ref, pred = sitk.ReadImage(str(reference)), sitk.ReadImage(str(prediction))
    if pred.GetSize() != ref.GetSize():
        raise DataUnreadable(f"{prediction.name}: size differs from {reference.name}", field="predictions")
    out = sitk.GetImageFromArray(lookup[sitk.GetArrayFromImage(pred).astype(np.int64)].astype(dtype))
    out.CopyInformation(ref)
    sitk.WriteImage(out, str(target), useCompression=True)
