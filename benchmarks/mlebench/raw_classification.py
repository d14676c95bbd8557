"""Synthetic raw data, in Kaggle's raw layout as each competition's prepare.py reads it, for the
MLE-bench medical competitions whose answers are one row per image with class columns.

Each writer fills `raw/` with tiny seeded images and the raw tables (the real file names, columns
and id forms); the competition's own prepare.py then splits them. Sizes are chosen so prepare's
90/10 split leaves a test set, and AMID's validation folds, in which every class column holds both
values (AUC is undefined otherwise, and the real graders then raise).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

RANZCR_LABELS = [
    "ETT - Abnormal",
    "ETT - Borderline",
    "ETT - Normal",
    "NGT - Abnormal",
    "NGT - Borderline",
    "NGT - Incompletely Imaged",
    "NGT - Normal",
    "CVC - Abnormal",
    "CVC - Borderline",
    "CVC - Normal",
    "Swan Ganz Catheter Present",
]


def _table(path: Path, header: list[str], rows: Sequence[Sequence[object]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _image(path: Path, rng: np.random.Generator, shape: tuple[int, ...], value: int) -> None:
    """A small image whose brightness carries its class (so a model could learn it)."""
    pixels = np.clip(rng.normal(40 + 40 * value, 10, size=shape), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def _hex(rng: np.random.Generator, length: int) -> str:
    return "".join(rng.choice(list("0123456789abcdef"), size=length))


def write_aptos(raw: Path, seed: int) -> None:
    """`train.csv` (id_code, diagnosis 0–4) and `train_images/<id_code>.png` (12-hex ids, RGB)."""
    rng = np.random.default_rng(seed)
    rows = [(_hex(rng, 12), index % 5) for index in range(50)]
    for id_code, diagnosis in rows:
        _image(raw / "train_images" / f"{id_code}.png", rng, (12, 12, 3), diagnosis)
    _table(raw / "train.csv", ["id_code", "diagnosis"], rows)


def write_histopathologic(raw: Path, seed: int) -> None:
    """`train_labels.csv` (id, label), `train/<id>.tif` (40-hex ids, RGB TIFF), and `test/*.tif`,
    whose count sets prepare's test fraction."""
    rng = np.random.default_rng(seed)
    rows = [(_hex(rng, 40), index % 2) for index in range(50)]
    for file_id, label in rows:
        _image(raw / "train" / f"{file_id}.tif", rng, (8, 8, 3), label)
    for _ in range(6):
        _image(raw / "test" / f"{_hex(rng, 40)}.tif", rng, (8, 8, 3), 0)
    _table(raw / "train_labels.csv", ["id", "label"], rows)


def write_ranzcr(raw: Path, seed: int) -> None:
    """`train.csv` (StudyInstanceUID, 11 label columns, PatientID), `train_annotations.csv` and
    `train/<uid>.jpg` (dotted DICOM UIDs, grayscale JPEG)."""
    rng = np.random.default_rng(seed)
    rows: list[list[object]] = []
    notes: list[list[str]] = []
    for _ in range(80):
        uid = "1.2.826.0.1.3680043.8.498." + "".join(str(d) for d in rng.integers(0, 10, size=38))
        labels = [int(v) for v in rng.integers(0, 2, size=len(RANZCR_LABELS))]
        rows.append([uid, *labels, f"ec{_hex(rng, 7)}"])
        _image(raw / "train" / f"{uid}.jpg", rng, (16, 16), labels[0])
        if labels[0]:
            notes.append([uid, RANZCR_LABELS[0], "[[10, 12], [11, 13]]"])
    _table(raw / "train.csv", ["StudyInstanceUID", *RANZCR_LABELS, "PatientID"], rows)
    _table(raw / "train_annotations.csv", ["StudyInstanceUID", "label", "data"], notes)


WRITERS: dict[str, Callable[[Path, int], None]] = {
    "aptos2019-blindness-detection": write_aptos,
    "histopathologic-cancer-detection": write_histopathologic,
    "ranzcr-clip-catheter-line-classification": write_ranzcr,
}
