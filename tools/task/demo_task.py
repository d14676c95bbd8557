"""The embedded demo task: a small, deterministic, real-looking 3-D CT segmentation challenge.

It is written in the ReX-MLE / MLE-bench challenge layout so that `amid demo` and the tests go
through the same importer a real benchmark task would. The volumes are synthetic but shaped like
contrast CT: an LPS-oriented NIfTI with anisotropic voxels (0.8 × 0.8 × 4 mm), air around a soft
tissue body, an enhancing organ (label 1) and one to three hypodense lesions (label 2). Each
patient has two scans (follow-up), so grouping by patient matters; two scanners differ in noise.
`scale` writes the same patients on a finer grid (the large-volume task of the review benchmarks).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from amid.server.errors import InvalidInput

SHAPE = (64, 64, 20)
SPACING = (0.8, 0.8, 4.0)
N_TRAIN_PATIENTS = 10
N_TEST_PATIENTS = 3
SCANS_PER_PATIENT = 2
TASK_ID = "demo-liver-lesion-ct"


def make_demo_task(target: Path, seed: int = 7, scale: int = 1) -> Path:
    """Write the challenge folder into `target` (must be absent or empty) and return it.

    `scale` k writes the same patients (anatomy in millimetres, contrast, scanner noise level) on a
    grid k times finer along every axis: shape (64k, 64k, 20k), spacing divided by k, k³ times the
    voxels (the large-volume task of the review benchmarks). scale=1 is the demo, byte for byte."""
    if target.exists() and any(target.iterdir()):
        raise InvalidInput(f"DIR: {target} exists and is not empty; choose a new folder", field="DIR")
    if scale < 1:
        raise InvalidInput(f"scale: {scale} must be a positive integer", field="scale")
    rng = np.random.default_rng(seed)
    grid = Grid(SHAPE, SPACING, scale, np.random.default_rng([seed, scale]))
    for sub in ("public/train/images", "public/train/labels", "public/test/images", "private/labels"):
        (target / sub).mkdir(parents=True, exist_ok=True)
    patients = _write_cases(target, rng, grid)
    _write_tables(target, patients)
    _write_challenge_files(target)
    return target


class Grid:
    """The voxel grid of one scale, as world coordinates in mm (voxel index × spacing, as the affine)
    per axis, broadcastable to the volume: the full (x, y, z, 3) grid is 120 MB at scale 4."""

    def __init__(self, shape: tuple[int, ...], spacing: tuple[float, ...], scale: int, noise: np.random.Generator):
        self.scale, self.noise = scale, noise
        self.shape = tuple(n * scale for n in shape)
        self.spacing = tuple(s / scale for s in spacing)
        self.axes_mm = [
            (np.arange(n, dtype=float) * s).reshape([-1 if axis == i else 1 for i in range(3)])
            for axis, (n, s) in enumerate(zip(self.shape, self.spacing, strict=True))
        ]

    def inside(self, center_mm: np.ndarray, radii_mm: np.ndarray) -> np.ndarray:
        """The ellipsoid (or, with two centre coordinates, the elliptic cylinder along z) as a mask."""
        terms = [((axis - c) / r) ** 2 for axis, c, r in zip(self.axes_mm, center_mm, radii_mm, strict=False)]
        return np.broadcast_to(sum(terms[1:], terms[0]) <= 1, self.shape)


def _patient_anatomy(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "organ_center": np.array([32.0, 30.0, 10.0]) + rng.normal(0, 2.0, 3),  # voxels of the scale-1 grid
        "organ_radii_mm": np.array([16.0, 13.0, 30.0]) * rng.uniform(0.85, 1.15, 3),
        "lesions": rng.uniform(-0.5, 0.5, (int(rng.integers(1, 4)), 3)),
        "lesion_radii_mm": rng.uniform(3.0, 6.0, 3),
        "body_radii_mm": np.array([23.0, 19.0]) * rng.uniform(0.75, 1.08, 2),
        "body_center_mm": np.array([25.6, 25.6]) + rng.normal(0, 1.5, 2),
        "fat_hu": np.array([rng.uniform(-110.0, -60.0)]),
    }


def _volume(
    anatomy: dict[str, np.ndarray], scan: int, noise_hu: float, rng: np.random.Generator, grid: Grid
) -> tuple[np.ndarray, np.ndarray]:
    # Positions are converted to mm with the scale-1 spacing: the anatomy is drawn in its voxels.
    center_mm = (anatomy["organ_center"] + rng.normal(0, 0.7, 3)) * np.array(SPACING)
    body = grid.inside(anatomy["body_center_mm"], anatomy["body_radii_mm"])
    fat = ~grid.inside(anatomy["body_center_mm"], anatomy["body_radii_mm"] - 2.5)
    organ = grid.inside(center_mm, anatomy["organ_radii_mm"])
    label = organ.astype(np.uint8)
    growth = 1.0 + 0.25 * scan
    for offset, radius in zip(anatomy["lesions"], anatomy["lesion_radii_mm"], strict=False):
        lesion_center = center_mm + offset * anatomy["organ_radii_mm"]
        lesion = grid.inside(lesion_center, np.full(3, radius * growth))
        label[lesion & organ] = 2
    enhancement = rng.uniform(95.0, 135.0)  # contrast timing differs between scans
    image = np.full(grid.shape, -1000.0)
    image[body] = 40.0
    image[body & fat] = anatomy["fat_hu"][0]
    image[label == 1] = enhancement
    image[label == 2] = enhancement - rng.uniform(45.0, 65.0)
    image += _noise(noise_hu, rng, grid)
    return image.astype(np.int16), label


def _noise(noise_hu: float, rng: np.random.Generator, grid: Grid) -> np.ndarray:
    """Scanner noise per voxel. The scale-1 draw is always taken from the patients' generator, so that
    every later patient and scan draws the same anatomy and contrast whatever the scale; a finer
    grid's own noise comes from the grid's generator."""
    coarse = rng.normal(0, noise_hu, SHAPE)
    return coarse if grid.scale == 1 else grid.noise.normal(0, noise_hu, grid.shape)


def _save(array: np.ndarray, path: Path, spacing: tuple[float, ...]) -> None:
    import nibabel as nib

    affine = np.diag([-spacing[0], -spacing[1], spacing[2], 1.0])  # LPS, as DICOM-derived CT
    image = nib.Nifti1Image(array, affine)
    image.header.set_zooms(spacing)
    nib.save(image, path)


def _write_cases(target: Path, rng: np.random.Generator, grid: Grid) -> list[dict[str, str]]:
    rows = []
    for index in range(N_TRAIN_PATIENTS + N_TEST_PATIENTS):
        patient = f"P{index:03d}"
        split = "train" if index < N_TRAIN_PATIENTS else "test"
        scanner = "scannerA" if index % 2 == 0 else "scannerB"
        anatomy = _patient_anatomy(rng)
        for scan in range(SCANS_PER_PATIENT):
            case_id = f"{patient.lower()}s{scan}"
            image, label = _volume(anatomy, scan, 12.0 if scanner == "scannerA" else 25.0, rng, grid)
            _save(image, target / f"public/{split}/images/{case_id}_0000.nii.gz", grid.spacing)
            label_dir = "public/train/labels" if split == "train" else "private/labels"
            _save(label, target / label_dir / f"{case_id}.nii.gz", grid.spacing)
            rows.append({"case_id": case_id, "patient_id": patient, "scanner": scanner, "split": split})
    return rows


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _write_tables(target: Path, patients: list[dict[str, str]]) -> None:
    train = [p for p in patients if p["split"] == "train"]
    test = [p for p in patients if p["split"] == "test"]
    _write_csv(
        target / "public/train/patients.csv",
        ["case_id", "patient_id", "scanner"],
        [[p["case_id"], p["patient_id"], p["scanner"]] for p in train],
    )
    _write_csv(
        target / "public/sample_submission.csv",
        ["case_id", "prediction_path"],
        [[p["case_id"], f"predictions/{p['case_id']}.nii.gz"] for p in test],
    )
    _write_csv(
        target / "private/answers.csv",
        ["case_id", "label_path"],
        [[p["case_id"], f"labels/{p['case_id']}.nii.gz"] for p in test],
    )


CONFIG_YAML = f"""\
id: {TASK_ID}
name: Demo liver and lesion segmentation in contrast CT
competition_type: simple
awards_medals: false
description: description.md
dataset:
  answers: private/answers.csv
  answers_dir: private/labels
  sample_submission: public/sample_submission.csv
grader:
  name: dice
  grade_fn: grade:grade
preparer: prepare:prepare
metadata:
  modality: CT
  anatomy: liver
  task_type: segmentation
  submission_format: submission.csv with case_id, prediction_path (NIfTI label map per case)
  layout:
    train_images: public/train/images
    train_labels: public/train/labels
    test_images: public/test/images
    groups_table: public/train/patients.csv
    group_key: patient_id
    file_ending: .nii.gz
    channels: [CT]
    label_values: {{0: background, 1: liver, 2: lesion}}
"""

DESCRIPTION_MD = """\
# Demo: liver and lesion segmentation in contrast CT

Segment the liver (label 1) and hypodense lesions (label 2) in portal-venous CT. Volumes are
0.8 × 0.8 × 4 mm (anisotropic), LPS-oriented NIfTI. Each patient has a baseline and a follow-up
scan; cases of one patient must stay on one side of any split. Two scanners differ in noise.

Evaluation: mean Dice over labels 1 and 2 (primary, higher is better) and the 95th-percentile
Hausdorff distance in mm (lower is better; an empty prediction for a present class counts as 100 mm).

Submission: `submission.csv` with columns `case_id, prediction_path`, each path relative to the
submission folder and pointing to a NIfTI label map with the geometry of the test image.
"""

GRADE_PY = '''\
"""Grader of the demo challenge (ReX-MLE convention): grade(submission, answers, dirs) -> dict."""

from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

LABELS = (1, 2)
HD_CAP_MM = 100.0


class InvalidSubmissionError(Exception):
    pass


def _dice(pred, ref):
    total = pred.sum() + ref.sum()
    return 1.0 if total == 0 else 2.0 * np.logical_and(pred, ref).sum() / total


def _surface_distances(a, b, spacing):
    border_a = a & ~ndimage.binary_erosion(a)
    dist_to_b = ndimage.distance_transform_edt(~b, sampling=spacing)
    return dist_to_b[border_a]


def _hd95(pred, ref, spacing):
    if not pred.any() and not ref.any():
        return 0.0
    if not pred.any() or not ref.any():
        return HD_CAP_MM
    forward = np.percentile(_surface_distances(pred, ref, spacing), 95)
    backward = np.percentile(_surface_distances(ref, pred, spacing), 95)
    return float(min(max(forward, backward), HD_CAP_MM))


def grade(submission, answers, submission_dir=None, answers_dir=None):
    if list(submission.columns[:2]) != ["case_id", "prediction_path"]:
        raise InvalidSubmissionError("columns must be case_id, prediction_path")
    missing = set(answers["case_id"]) - set(submission["case_id"])
    if missing:
        raise InvalidSubmissionError(f"missing cases: {sorted(missing)}")
    paths = dict(zip(submission["case_id"], submission["prediction_path"]))
    dice, hd95 = [], []
    for case_id, label_path in zip(answers["case_id"], answers["label_path"]):
        ref_img = nib.load(Path(answers_dir).parent / label_path if answers_dir else label_path)
        pred_img = nib.load(Path(submission_dir) / paths[case_id])
        if pred_img.shape != ref_img.shape:
            raise InvalidSubmissionError(f"{case_id}: shape {pred_img.shape} != {ref_img.shape}")
        ref = np.asarray(ref_img.dataobj)
        pred = np.asarray(pred_img.dataobj)
        spacing = ref_img.header.get_zooms()[:3]
        for label in LABELS:
            dice.append(_dice(pred == label, ref == label))
            hd95.append(_hd95(pred == label, ref == label, spacing))
    return {"dice": float(np.mean(dice)), "hd95": float(np.mean(hd95))}
'''

PREPARE_PY = '''\
"""The demo data is generated by `amid make-demo-task`; there is nothing to prepare."""


def prepare(raw, public, private):
    raise NotImplementedError("generated by amid make-demo-task")
'''


def _write_challenge_files(target: Path) -> None:
    (target / "config.yaml").write_text(CONFIG_YAML, encoding="utf-8")
    (target / "description.md").write_text(DESCRIPTION_MD, encoding="utf-8")
    (target / "grade.py").write_text(GRADE_PY, encoding="utf-8")
    (target / "prepare.py").write_text(PREPARE_PY, encoding="utf-8")
    metric_config = {"metric_directions": {"dice": "higher_better", "hd95": "lower_better"}}
    (target / "metric_config.json").write_text(json.dumps(metric_config, indent=2) + "\n", encoding="utf-8")
    _write_csv(
        target / "leaderboard.csv",
        ["rank", "team", "mean_position", "dice", "dice_position", "hd95", "hd95_position"],
        [
            [1, "team-aurora", 1.0, 0.912, 1, 4.1, 1],
            [2, "team-borealis", 2.5, 0.884, 2, 6.3, 3],
            [3, "team-cirrus", 2.5, 0.861, 3, 5.2, 2],
            [4, "team-dune", 4.0, 0.790, 4, 9.8, 4],
        ],
    )
