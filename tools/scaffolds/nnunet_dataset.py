"""Convert a task into an nnU-Net raw dataset, and write nnU-Net's splits from the locked folds.

nnU-Net raw format: `DatasetXXX_Name/{dataset.json, imagesTr, labelsTr, imagesTs}`, images named
`{CASE}_{XXXX}{ending}` (4-digit channel), labels `{CASE}{ending}` with contiguous values 0..n-1.
Images are linked (not copied) unless asked; labels are rewritten only when their values need
remapping. Geometry is checked from headers before anything is written: every channel and the label
of a case must share shape and affine, or the conversion stops naming the cases.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from amid.server.errors import DataUnreadable, InvalidInput
from amid.tools.scaffolds.taskdata import TaskData

SUPPORTED_ENDINGS = (".nii.gz", ".nii", ".nrrd", ".mha", ".png")
CONVERSION_FILE = "amid_conversion.json"
AFFINE_TOLERANCE = 1e-3  # mm: header round-off, not a different grid


@dataclass(frozen=True)
class NnunetLayout:
    """Where one task's nnU-Net folders live (relative paths stay relative to the job's cwd)."""

    root: Path
    dataset_id: int
    name: str

    @property
    def dataset(self) -> str:
        return f"Dataset{self.dataset_id:03d}_{self.name}"

    @property
    def raw(self) -> Path:
        return self.root / "raw" / self.dataset

    @property
    def preprocessed(self) -> Path:
        return self.root / "preprocessed" / self.dataset

    def results(self, configuration: str, trainer: str = "nnUNetTrainer", plans: str = "nnUNetPlans") -> Path:
        return self.root / "results" / self.dataset / f"{trainer}__{plans}__{configuration}"

    def env(self) -> dict[str, str]:
        return {
            "nnUNet_raw": str(self.root / "raw"),
            "nnUNet_preprocessed": str(self.root / "preprocessed"),
            "nnUNet_results": str(self.root / "results"),
        }


def dataset_name(task_id: str) -> str:
    """nnU-Net dataset names are one word: 'demo-liver-lesion-ct' -> 'DemoLiverLesionCt'."""
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", task_id) if part) or "Task"


class Conversion(BaseModel):
    """What the conversion did, kept beside dataset.json so predictions can be converted back."""

    task_id: str
    dataset: str
    file_ending: str
    channel_names: dict[str, str]
    label_map: dict[int, int]  # task value -> nnU-Net value
    train_cases: list[str]
    test_cases: list[str]
    relabelled_cases: int

    def inverse_label_map(self) -> dict[int, int]:
        return {nnunet: task for task, nnunet in self.label_map.items()}


def contiguous_label_map(values: list[int]) -> dict[int, int]:
    """Task label values (background 0 first) -> nnU-Net's 0..n-1."""
    ordered = sorted(values)
    if not ordered or ordered[0] != 0:
        raise InvalidInput(f"label_values: got {ordered}; expected 0 (background) among them", field="label_values")
    return {value: index for index, value in enumerate(ordered)}


def convert_task(task: TaskData, layout: NnunetLayout, *, copy_images: bool = False) -> Conversion:
    """Write the raw dataset (dataset.json, imagesTr, labelsTr, imagesTs) and the conversion record."""
    contract = task.contract
    ending = contract.layout.file_ending
    if contract.task_type != "segmentation" or ending not in SUPPORTED_ENDINGS:
        raise InvalidInput(
            f"task: nnU-Net scaffold needs a segmentation task with one of {SUPPORTED_ENDINGS}; "
            f"got {contract.task_type} with {ending!r}",
            field="task_type",
        )
    label_map = contiguous_label_map(task.label_values())
    _check_geometry(task)
    if layout.raw.exists():
        shutil.rmtree(layout.raw)
    for sub in ("imagesTr", "labelsTr", "imagesTs"):
        (layout.raw / sub).mkdir(parents=True)
    relabelled = 0
    for case_id, case in task.train_cases.items():
        _place_images(task, case.image_paths, layout.raw / "imagesTr", case_id, ending, copy_images)
        relabelled += _place_label(
            task.path(case.label_path or ""), layout.raw / "labelsTr" / f"{case_id}{ending}", label_map
        )
    for case_id, case in task.test_cases.items():
        _place_images(task, case.image_paths, layout.raw / "imagesTs", case_id, ending, copy_images)
    channel_names = _channel_names(task)
    conversion = Conversion(
        task_id=contract.id,
        dataset=layout.dataset,
        file_ending=ending,
        channel_names=channel_names,
        label_map=label_map,
        train_cases=sorted(task.train_cases),
        test_cases=sorted(task.test_cases),
        relabelled_cases=relabelled,
    )
    _write_dataset_json(task, layout, conversion)
    (layout.raw / CONVERSION_FILE).write_text(conversion.model_dump_json(indent=1), encoding="utf-8")
    return conversion


def write_splits(task: TaskData, layout: NnunetLayout) -> Path:
    """splits_final.json from the locked, group-aware folds (nnU-Net's own split ignores patients)."""
    splits = [{"train": sorted(f.train_cases), "val": sorted(f.val_cases)} for f in task.folds.folds]
    layout.preprocessed.mkdir(parents=True, exist_ok=True)
    path = layout.preprocessed / "splits_final.json"
    path.write_text(json.dumps(splits, indent=1), encoding="utf-8")
    return path


def read_conversion(folder: Path, *, field: str = "out", fix: str = "run the convert step first") -> Conversion:
    """The conversion record kept in `folder` (the raw dataset, or a packaged model)."""
    path = folder / CONVERSION_FILE
    if not path.is_file():
        raise DataUnreadable(f"{path}: missing; {fix}", field=field)
    return Conversion.model_validate_json(path.read_text(encoding="utf-8"))


def _channel_names(task: TaskData) -> dict[str, str]:
    contract = task.contract
    names = list(contract.layout.channels)
    if contract.layout.file_ending == ".png" and _is_rgb(task):
        return {"0": "R", "1": "G", "2": "B"}
    if contract.modality == "CT" and len(names) == 1:
        names = ["CT"]  # nnU-Net picks its CT normalisation (percentile clip + global z-score) by this name
    return {str(i): name for i, name in enumerate(names)}


def _is_rgb(task: TaskData) -> bool:
    from PIL import Image

    first = next(iter(task.train_cases.values()))
    with Image.open(task.path(first.image_paths[0])) as image:
        return image.mode in ("RGB", "RGBA")


def _write_dataset_json(task: TaskData, layout: NnunetLayout, conversion: Conversion) -> None:
    names = task.contract.layout.label_values
    labels: dict[str, int] = {}
    for value, index in conversion.label_map.items():
        name = (
            "background" if index == 0 else re.sub(r"\W+", "_", names.get(value, f"label_{value}")) or f"label_{value}"
        )
        labels[name if name not in labels else f"{name}_{value}"] = index
    spec = {
        "channel_names": conversion.channel_names,
        "labels": labels,
        "numTraining": len(conversion.train_cases),
        "file_ending": conversion.file_ending,
        "name": layout.name,
        "description": f"converted by AMID from task {conversion.task_id}",
    }
    (layout.raw / "dataset.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")


def _place_images(task: TaskData, images: tuple[str, ...], folder: Path, case_id: str, ending: str, copy: bool) -> None:
    for channel, relative in enumerate(images):
        source = task.path(relative).resolve()
        target = folder / f"{case_id}_{channel:04d}{ending}"
        if copy:
            shutil.copy2(source, target)
        else:
            os.symlink(source, target)


def _place_label(source: Path, target: Path, label_map: dict[int, int]) -> int:
    """Write the label with nnU-Net values; 1 when values changed, 0 when linked as is."""
    array, save = _read_label(source)
    values = {int(v) for v in np.unique(array)}
    unknown = sorted(values - set(label_map))
    if unknown:
        raise DataUnreadable(
            f"{source.name}: label values {unknown} are not declared; expected values in {sorted(label_map)}",
            field="label_values",
        )
    if all(label_map[v] == v for v in values):
        os.symlink(source.resolve(), target)
        return 0
    lookup = np.zeros(max(label_map) + 1, dtype=np.uint8)
    for value, index in label_map.items():
        lookup[value] = index
    save(lookup[array], target)
    return 1


def _read_label(path: Path) -> tuple[np.ndarray, Callable[[np.ndarray, Path], None]]:
    """The label's values and a writer that keeps its geometry."""
    if path.name.endswith(".png"):
        from PIL import Image

        with Image.open(path) as picture:
            array = np.asarray(picture)
        return array, lambda data, target: Image.fromarray(data).save(target)
    import SimpleITK as sitk

    volume = sitk.ReadImage(str(path))

    def save(data: np.ndarray, target: Path) -> None:
        out = sitk.GetImageFromArray(data)
        out.CopyInformation(volume)
        sitk.WriteImage(out, str(target), useCompression=True)

    return sitk.GetArrayFromImage(volume), save


def _check_geometry(task: TaskData) -> None:
    """Every channel and the label of a case share shape and affine (headers only)."""
    problems = []
    for case_id, case in task.train_cases.items():
        files = [*case.image_paths, *([case.label_path] if case.label_path else [])]
        problems += [f"{case_id}: {p}" for p in _mismatch([task.path(f) for f in files])]
    for case_id, case in task.test_cases.items():
        problems += [f"{case_id}: {p}" for p in _mismatch([task.path(f) for f in case.image_paths])]
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise DataUnreadable(f"geometry differs within cases (nnU-Net would reject them): {shown}", field="geometry")


def _mismatch(paths: list[Path]) -> list[str]:
    geometries = [_geometry(p) for p in paths]
    shape0, affine0 = geometries[0]
    found = []
    for path, (shape, affine) in zip(paths[1:], geometries[1:], strict=True):
        if shape != shape0:
            found.append(f"{path.name} has shape {shape}, {paths[0].name} {shape0}")
        elif affine is not None and affine0 is not None and not np.allclose(affine, affine0, atol=AFFINE_TOLERANCE):
            found.append(f"{path.name} has a different affine than {paths[0].name}")
    return found


def _geometry(path: Path) -> tuple[tuple[int, ...], np.ndarray | None]:
    if path.name.endswith(".png"):
        from PIL import Image

        with Image.open(path) as image:
            return (image.size[1], image.size[0]), None
    if path.name.endswith((".nii", ".nii.gz")):
        import nibabel as nib

        header: Any = nib.load(path)
        return tuple(int(s) for s in header.shape[:3]), np.asarray(header.affine)
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.ReadImageInformation()
    return tuple(reader.GetSize()), np.asarray(reader.GetOrigin() + reader.GetSpacing() + reader.GetDirection())
