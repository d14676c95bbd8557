"""Seeded factories of tiny real tasks of every type, written to a folder, returned as ProfileCases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
from PIL import Image

from amid.tools.profiling import ProfileCase

CT_SHAPE = (24, 24, 8)
CT_SPACING = (0.8, 0.8, 4.0)
CT_CUBE = (3, 3, 2)  # planted foreground per case: 18 voxels of 4608
TILE = 48


def write_nifti(path: Path, array: np.ndarray, spacing: tuple[float, ...], affine: np.ndarray | None = None) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, affine if affine is not None else np.diag([*spacing, 1.0])), path)
    return str(path)


def load_voxels(path: str) -> np.ndarray:
    """Every voxel of a NIfTI file through nibabel (the reference the profile is checked against)."""
    image: Any = nib.load(path)
    return np.asanyarray(image.dataobj)


def write_png(path: Path, array: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
    return str(path)


def ct_volume(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """CT-like int16 volume: air around an elliptic body of soft tissue, one 3 x 3 x 2 cube of label 1."""
    rows, columns = np.ogrid[: CT_SHAPE[0], : CT_SHAPE[1]]
    a, b, cx, cy = rng.uniform(6, 11), rng.uniform(6, 11), rng.uniform(10, 14), rng.uniform(10, 14)
    body = ((rows - cx) / a) ** 2 + ((columns - cy) / b) ** 2 <= 1
    image = np.where(body[..., None], 40.0, -1000.0) + rng.normal(0, 10, CT_SHAPE)
    image = image.round().astype(np.int16)
    label = np.zeros(CT_SHAPE, np.uint8)
    x, y, z = (int(rng.integers(2, s - 4)) for s in CT_SHAPE)
    label[x : x + 3, y : y + 3, z : z + 2] = 1
    image[label == 1] = rng.normal(120, 5, 18).round().astype(np.int16)
    return image, label


def make_ct_segmentation(root: Path, n_cases: int = 6, seed: int = 0) -> list[ProfileCase]:
    """3-D anisotropic NIfTI (0.8 x 0.8 x 4 mm) with a small foreground; two cases per patient."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        image, label = ct_volume(rng)
        cases.append(
            ProfileCase(
                case_id=f"ct_{i:03d}",
                image_paths=[write_nifti(root / "imagesTr" / f"ct_{i:03d}_0000.nii.gz", image, CT_SPACING)],
                label_path=write_nifti(root / "labelsTr" / f"ct_{i:03d}.nii.gz", label, CT_SPACING),
                group=f"patient_{i // 2}",
                extra={"site": f"site_{i % 2}"},
            )
        )
    return cases


def make_tissue_segmentation(root: Path, n_cases: int = 4, seed: int = 0) -> list[ProfileCase]:
    """2-D RGB H&E-like tiles (pink stroma, purple nuclei) with masks 0 background, 1 stroma, 2 nucleus."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        mask = np.zeros((TILE, TILE), np.uint8)
        mask[:, : TILE // 2] = 1
        for _ in range(4):
            r, c = (int(v) for v in rng.integers(4, TILE - 6, 2))
            mask[r : r + 3, c : c + 3] = 2
        colours = np.array([[245, 240, 245], [230, 150, 190], [90, 50, 150]], np.float64)
        rgb = colours[mask] + rng.normal(0, 4, (TILE, TILE, 3))
        rgb = np.clip(rgb, 0, 255).astype(np.uint8)
        cases.append(
            ProfileCase(
                case_id=f"tile_{i}",
                image_paths=[write_png(root / "images" / f"tile_{i}.png", rgb)],
                label_path=write_png(root / "masks" / f"tile_{i}.png", mask),
            )
        )
    return cases


def make_detection(root: Path, n_cases: int = 4, seed: int = 0) -> tuple[list[ProfileCase], str]:
    """Grey 64 x 64 PNGs with 3 small bright squares each, and a COCO file of their boxes."""
    rng = np.random.default_rng(seed)
    cases: list[ProfileCase] = []
    images: list[dict[str, object]] = []
    annotations: list[dict[str, object]] = []
    for i in range(n_cases):
        pixels = rng.normal(60, 5, (64, 64)).clip(0, 255)
        for _ in range(3):
            r, c = (int(v) for v in rng.integers(0, 56, 2))
            pixels[r : r + 6, c : c + 8] = 200
            annotations.append({"id": len(annotations), "image_id": i, "category_id": 1, "bbox": [c, r, 8, 6]})
        name = f"scan_{i}.png"
        images.append({"id": i, "file_name": name, "width": 64, "height": 64})
        cases.append(ProfileCase(case_id=f"scan_{i}", image_paths=[write_png(root / name, pixels.astype(np.uint8))]))
    coco = {"images": images, "annotations": annotations, "categories": [{"id": 1, "name": "nodule"}]}
    path = root / "boxes.json"
    path.write_text(json.dumps(coco), encoding="utf-8")
    return cases, str(path)


def make_classification(root: Path, counts: dict[str, int], seed: int = 0) -> tuple[list[ProfileCase], str]:
    """Grey 32 x 32 PNGs and a labels.csv (case_id,label) with the given number of cases per class."""
    rng = np.random.default_rng(seed)
    cases: list[ProfileCase] = []
    rows = ["case_id,label"]
    for name, n in counts.items():
        for _ in range(n):
            case_id = f"img_{len(cases):02d}"
            pixels = rng.integers(0, 255, (32, 32), dtype=np.uint8)
            cases.append(ProfileCase(case_id=case_id, image_paths=[write_png(root / f"{case_id}.png", pixels)]))
            rows.append(f"{case_id},{name}")
    table = root / "labels.csv"
    table.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return cases, str(table)


def make_enhancement(root: Path, n_cases: int = 3, seed: int = 0) -> list[ProfileCase]:
    """Low-dose-like noisy inputs and smooth targets (3-D float NIfTI), aligned voxel for voxel."""
    rng = np.random.default_rng(seed)
    cases = []
    x, y, z = np.meshgrid(*(np.linspace(-1, 1, s) for s in (32, 32, 6)), indexing="ij")
    for i in range(n_cases):
        target = (100 * np.exp(-(x**2 + y**2) * rng.uniform(1, 3)) + 10 * z).astype(np.float32)
        noisy = (target + rng.normal(0, 8, target.shape)).astype(np.float32)
        cases.append(
            ProfileCase(
                case_id=f"pair_{i}",
                image_paths=[write_nifti(root / "low" / f"pair_{i}.nii.gz", noisy, (1.0, 1.0, 2.0))],
                label_path=write_nifti(root / "full" / f"pair_{i}.nii.gz", target, (1.0, 1.0, 2.0)),
            )
        )
    return cases


def make_instances(root: Path, n_cases: int = 3, objects: int = 6, seed: int = 0) -> list[ProfileCase]:
    """2-D grey images with `objects` separate cells, each with its own instance id in the mask."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        mask = np.zeros((64, 64), np.uint16)
        for k in range(objects):
            r, c = 4 + 10 * (k // 3) * 2, 4 + 20 * (k % 3)
            mask[r : r + 5, c : c + 5] = k + 1
        pixels = (rng.normal(30, 3, mask.shape) + 150 * (mask > 0)).clip(0, 255).astype(np.uint8)
        cases.append(
            ProfileCase(
                case_id=f"cells_{i}",
                image_paths=[write_png(root / "images" / f"cells_{i}.png", pixels)],
                label_path=write_png(root / "masks" / f"cells_{i}.png", mask),
            )
        )
    return cases
