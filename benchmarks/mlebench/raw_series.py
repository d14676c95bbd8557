"""Synthetic raw data for MLE-bench's RSNA-MICCAI brain tumour competition, in Kaggle's raw layout
as its prepare.py reads it: `train_labels.csv` (five-digit zero-padded BraTS21ID, MGMT_value) and
`train/<BraTS21ID>/{FLAIR,T1w,T1wCE,T2w}/Image-N.dcm`, each sequence a real DICOM series of two
slices (one Series Instance UID per folder, positions 1 mm apart)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
import SimpleITK as sitk

SEQUENCES = ("FLAIR", "T1w", "T1wCE", "T2w")


def write_series(folder: Path, pixels: np.ndarray, series_uid: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(2):
        image = sitk.GetImageFromArray(pixels.astype(np.int16))
        tags = {
            "0020|000e": series_uid,
            "0008|0018": f"{series_uid}.{index + 1}",
            "0008|0060": "MR",
            "0020|0032": f"0\\0\\{index}",
            "0020|0037": "1\\0\\0\\0\\1\\0",
            "0020|0013": str(index + 1),
        }
        for tag, value in tags.items():
            image.SetMetaData(tag, value)
        writer = sitk.ImageFileWriter()
        writer.KeepOriginalImageUIDOn()  # else GDCM gives every file a series of its own
        writer.SetFileName(str(folder / f"Image-{index + 1}.dcm"))
        writer.Execute(image)


def write_rsna_miccai(raw: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for index, number in enumerate(sorted(rng.choice(1000, size=40, replace=False))):
        case_id, value = f"{number:05d}", index % 2
        rows.append([case_id, value])
        for offset, sequence in enumerate(SEQUENCES):
            pixels = np.clip(rng.normal(100 + 60 * value, 10, size=(6, 6)), 0, 4000)
            write_series(raw / "train" / case_id / sequence, pixels, f"1.2.826.0.1.3680043.8.498.{number}.{offset}")
    with (raw / "train_labels.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["BraTS21ID", "MGMT_value"])
        writer.writerows(rows)


WRITERS: dict[str, Callable[[Path, int], None]] = {
    "rsna-miccai-brain-tumor-radiogenomic-classification": write_rsna_miccai,
}
