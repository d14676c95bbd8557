"""Seeded factories for tiny real task folders of each importable format."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import yaml


def write_nifti(path: Path, array: np.ndarray, spacing: tuple[float, ...] = (1.0, 1.0, 3.0)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(array, np.diag([*spacing, 1.0]))
    nib.save(image, path)


def _case(rng: np.random.Generator, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    image = rng.normal(0, 1, shape).astype(np.float32)
    label = np.zeros(shape, np.uint8)
    x, y, z = (int(rng.integers(1, s - 3)) for s in shape)
    label[x : x + 3, y : y + 3, z : z + 2] = 1
    image[label == 1] += 3
    return image, label


def make_nnunet_dataset(root: Path, n_cases: int = 6, seed: int = 0, channels: int = 1) -> Path:
    """An nnU-Net raw dataset: dataset.json, imagesTr/CASE_XXXX.nii.gz, labelsTr/CASE.nii.gz."""
    rng = np.random.default_rng(seed)
    folder = root / "Dataset042_Tiny"
    for i in range(n_cases):
        image, label = _case(rng, (12, 12, 6))
        for c in range(channels):
            write_nifti(folder / "imagesTr" / f"tiny_{i:03d}_{c:04d}.nii.gz", image + c)
        write_nifti(folder / "labelsTr" / f"tiny_{i:03d}.nii.gz", label)
    spec = {
        "channel_names": {str(c): ("T2" if c == 0 else "ADC") for c in range(channels)},
        "labels": {"background": 0, "lesion": 1},
        "numTraining": n_cases,
        "file_ending": ".nii.gz",
        "name": "Tiny",
    }
    (folder / "dataset.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder


def native_task_dict() -> dict:
    return {
        "id": "tiny-native",
        "title": "Tiny native task",
        "modality": "MRI",
        "task_type": "segmentation",
        "layout": {
            "train_images": "data/images",
            "train_labels": "data/labels",
            "groups_table": "data/groups.csv",
            "group_key": "site",
            "label_values": {0: "background", 1: "lesion"},
        },
        "metrics": [{"name": "dice", "direction": "higher_better"}],
        "primary_metric": "dice",
        "prediction": {"file_type": "nifti", "label_values": [0, 1]},
        "submission": {"columns": ["case_id", "prediction_path"], "file_column": "prediction_path"},
        "validation": {"k_folds": 3, "seed": 1},
    }


def make_native_task(root: Path, n_cases: int = 9, seed: int = 0, data: dict | None = None) -> Path:
    """A native task.yaml with images, labels and a groups table (three sites)."""
    rng = np.random.default_rng(seed)
    rows = ["case_id,site"]
    for i in range(n_cases):
        image, label = _case(rng, (10, 10, 5))
        write_nifti(root / "data/images" / f"c{i:02d}_0000.nii.gz", image)
        write_nifti(root / "data/labels" / f"c{i:02d}.nii.gz", label)
        rows.append(f"c{i:02d},site{i % 3}")
    (root / "data/groups.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "task.yaml").write_text(yaml.safe_dump(data or native_task_dict()), encoding="utf-8")
    return root / "task.yaml"
