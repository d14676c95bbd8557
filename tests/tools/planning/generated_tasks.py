"""Seeded tiny tasks of different types, profiled for real and reduced to planning facts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

from amid.tools.planning.facts import PlanningFacts, facts_from_profile
from amid.tools.profiling import LabelsTable, ProfileCase, ProfileRequest, profile_dataset


def _nifti(path: Path, array: np.ndarray, spacing: tuple[float, ...]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, np.diag([*spacing, 1.0])), path)
    return str(path)


def _png(path: Path, array: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
    return str(path)


def _profile(request: ProfileRequest, modality: str, labels: dict[int, str] | None = None) -> PlanningFacts:
    return facts_from_profile(profile_dataset(request), modality, label_values=labels)


def sparse_ct_segmentation(root: Path) -> PlanningFacts:
    """3-D CT, 0.8 x 0.8 x 4 mm, an 18-voxel lesion in 4608 voxels (0.4 % foreground), two scans per patient."""
    rng = np.random.default_rng(0)
    cases = []
    for i in range(8):
        image = rng.normal(40, 10, (24, 24, 8)).round().astype(np.int16)
        label = np.zeros(image.shape, np.uint8)
        x, y, z = (int(rng.integers(2, s - 4)) for s in image.shape)
        label[x : x + 3, y : y + 3, z : z + 2] = 1
        image[label == 1] = 120
        cases.append(
            ProfileCase(
                case_id=f"ct{i}",
                group=f"patient{i // 2}",
                image_paths=[_nifti(root / f"img/ct{i}_0000.nii.gz", image, (0.8, 0.8, 4.0))],
                label_path=_nifti(root / f"lab/ct{i}.nii.gz", label, (0.8, 0.8, 4.0)),
            )
        )
    request = ProfileRequest(task_type="segmentation", cases=cases, channel_names={0: "CT"}, n_workers=1)
    return _profile(request, "CT", {0: "background", 1: "lesion"})


def pathology_tiles(root: Path) -> PlanningFacts:
    """RGB H&E-like tiles (pink stroma, purple nuclei) with tissue masks."""
    rng = np.random.default_rng(1)
    cases = []
    colours = np.array([[245, 240, 245], [230, 150, 190], [90, 50, 150]], np.float64)
    for i in range(6):
        mask = np.zeros((48, 48), np.uint8)
        mask[:, :24] = 1
        for _ in range(4):
            r, c = (int(v) for v in rng.integers(4, 42, 2))
            mask[r : r + 3, c : c + 3] = 2
        rgb = np.clip(colours[mask] + rng.normal(0, 4, (48, 48, 3)), 0, 255).astype(np.uint8)
        cases.append(
            ProfileCase(
                case_id=f"tile{i}",
                image_paths=[_png(root / f"img/tile{i}.png", rgb)],
                label_path=_png(root / f"mask/tile{i}.png", mask),
            )
        )
    request = ProfileRequest(task_type="segmentation", cases=cases, n_workers=1)
    return _profile(request, "pathology", {0: "background", 1: "stroma", 2: "nucleus"})


def xray_detection(root: Path) -> PlanningFacts:
    """Grey 64 x 64 radiographs with three small boxes each (COCO file)."""
    rng = np.random.default_rng(2)
    cases, images, boxes = [], [], []
    for i in range(6):
        pixels = rng.normal(60, 5, (64, 64)).clip(0, 255)
        for _ in range(3):
            r, c = (int(v) for v in rng.integers(0, 56, 2))
            pixels[r : r + 6, c : c + 8] = 200
            boxes.append({"id": len(boxes), "image_id": i, "category_id": 1, "bbox": [c, r, 8, 6], "area": 48})
        images.append({"id": i, "file_name": f"scan{i}.png", "width": 64, "height": 64})
        cases.append(
            ProfileCase(case_id=f"scan{i}", image_paths=[_png(root / f"scan{i}.png", pixels.astype(np.uint8))])
        )
    coco = root / "boxes.json"
    coco.write_text(
        json.dumps({"images": images, "annotations": boxes, "categories": [{"id": 1, "name": "nodule"}]}),
        encoding="utf-8",
    )
    request = ProfileRequest(task_type="detection", cases=cases, boxes_json=str(coco), n_workers=1)
    return _profile(request, "X-ray")


def ct_enhancement(root: Path) -> PlanningFacts:
    """Paired low-dose-like (noisy) and full-dose (smooth) 3-D CT volumes, aligned voxel for voxel."""
    rng = np.random.default_rng(3)
    x, y, z = np.meshgrid(*(np.linspace(-1, 1, s) for s in (32, 32, 6)), indexing="ij")
    cases = []
    for i in range(4):
        target = (100 * np.exp(-(x**2 + y**2) * rng.uniform(1, 3)) + 10 * z).astype(np.float32)
        noisy = (target + rng.normal(0, 8, target.shape)).astype(np.float32)
        cases.append(
            ProfileCase(
                case_id=f"pair{i}",
                image_paths=[_nifti(root / f"low/pair{i}.nii.gz", noisy, (1.0, 1.0, 2.0))],
                label_path=_nifti(root / f"full/pair{i}.nii.gz", target, (1.0, 1.0, 2.0)),
            )
        )
    return _profile(ProfileRequest(task_type="enhancement", cases=cases, n_workers=1), "CT")


def xray_classification(root: Path) -> PlanningFacts:
    """Grey radiographs with an imbalanced label table (12 normal, 3 abnormal)."""
    rng = np.random.default_rng(4)
    cases, rows = [], ["case_id,label"]
    for i, name in enumerate(["normal"] * 12 + ["abnormal"] * 3):
        pixels = rng.integers(0, 255, (32, 32), dtype=np.uint8)
        cases.append(ProfileCase(case_id=f"cxr{i}", image_paths=[_png(root / f"cxr{i}.png", pixels)]))
        rows.append(f"cxr{i},{name}")
    (root / "labels.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    table = LabelsTable(path=str(root / "labels.csv"))
    return _profile(ProfileRequest(task_type="classification", cases=cases, labels_table=table, n_workers=1), "X-ray")


def cell_instances(root: Path) -> PlanningFacts:
    """Fluorescence-like images with six separate cells, each its own instance id."""
    rng = np.random.default_rng(5)
    cases = []
    for i in range(4):
        mask = np.zeros((64, 64), np.uint16)
        for k in range(6):
            r, c = 4 + 20 * (k // 3), 4 + 20 * (k % 3)
            mask[r : r + 5, c : c + 5] = k + 1
        pixels = (rng.normal(30, 3, mask.shape) + 150 * (mask > 0)).clip(0, 255).astype(np.uint8)
        cases.append(
            ProfileCase(
                case_id=f"cells{i}",
                image_paths=[_png(root / f"img/cells{i}.png", pixels)],
                label_path=_png(root / f"mask/cells{i}.png", mask),
            )
        )
    return _profile(ProfileRequest(task_type="instance_segmentation", cases=cases, n_workers=1), "microscopy")


GENERATED: dict[str, Callable[[Path], PlanningFacts]] = {
    "sparse_ct_segmentation": sparse_ct_segmentation,
    "pathology_tiles": pathology_tiles,
    "xray_detection": xray_detection,
    "ct_enhancement": ct_enhancement,
    "xray_classification": xray_classification,
    "cell_instances": cell_instances,
}
