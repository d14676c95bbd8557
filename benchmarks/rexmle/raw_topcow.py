"""Tiny synthetic raw data and reference submissions for the ReX-MLE TopCoW / TopBrain challenges.

`WRITERS[challenge_id](raw_dir, seed)` writes a few seeded 32x32x16 angiography-like volumes with
thin labelled vessel trees in the layout the challenge's own prepare.py reads. Those prepare.py
files do not read their own ``raw_dir``: every TopCoW challenge reads
``raw_dir/../../topcow-shared/raw`` and every TopBrain challenge ``raw_dir/../../topbrain-shared/raw``.
The writers therefore fill ``raw_dir`` and mirror the same files into that shared folder.

TopCoW raw (shared by the six topcow-* challenges, CTA ``ct`` and MRA ``mr``, ids 001..012)::

    imagesTr/topcow_{ct|mr}_{id}_0000.nii.gz        int16 image
    cow_seg_labelsTr/topcow_{ct|mr}_{id}.nii.gz     uint8 CoW labels 1..12, 15
    roi_loc_labelsTr/topcow_{ct|mr}_{id}.txt        ElementSpacing / Size / Origin (voxel box)
    antpos_edges_labelsTr/topcow_{ct|mr}_{id}.yml   anterior / posterior edge flags, from the labels

TopBrain raw (shared by topbrain-track1 / -track2)::

    imagesTr_topbrain_{ct|mr}/topcow_{ct|mr}_{id}_0000.nii.gz
    labelsTr_topbrain_{ct|mr}/topcow_{ct|mr}_{id}.nii.gz   uint8, labels 1..40 (ct) / 1..42 (mr)

`SUBMITTERS[challenge_id](prepared_dir, out_dir, kind)` writes ``out_dir/submission.csv`` and the
files it names, for kind "perfect" (from prepared/private), "broken" (format violation) or
"trivial" (valid but uninformative).
"""

from __future__ import annotations

import csv
import itertools
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import nibabel as nib
import numpy as np
import yaml
from scipy import ndimage

Point = tuple[int, int, int]
Polyline = Sequence[Point]

SHAPE: tuple[int, int, int] = (32, 32, 16)
N_CASES = 12  # prepare.py splits 80/20 with train_test_split: 9 train, 3 test per modality
MODALITIES: tuple[str, ...] = ("ct", "mr")
SPACING: dict[str, tuple[float, float, float]] = {"ct": (0.45, 0.45, 0.7), "mr": (0.3, 0.3, 0.6)}
INTENSITY: dict[str, tuple[float, float, float]] = {"ct": (40.0, 12.0, 350.0), "mr": (60.0, 15.0, 420.0)}

TOPCOW_IDS: tuple[str, ...] = tuple(f"topcow-track{t}-task{k}" for t in (1, 2) for k in (1, 2, 3))
TOPBRAIN_IDS: tuple[str, ...] = ("topbrain-track1", "topbrain-track2")
KINDS: tuple[str, ...] = ("perfect", "broken", "trivial")

# TopCoW label values (TopCoW 2024 multiclass map)
BA, R_PCA, L_PCA, R_ICA, R_MCA, L_ICA, L_MCA, R_PCOM, L_PCOM, ACOM, R_ACA, L_ACA, THIRD_A2 = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    15,
)


# ----------------------------------------------------------------------------- shared helpers


def _rasterise(vol: np.ndarray, label: int, line: Polyline) -> None:
    """Draw a 26-connected one-voxel-thick polyline with value `label`."""
    for start, end in itertools.pairwise(line):
        a, b = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        steps = int(np.abs(b - a).max())
        for t in np.linspace(0.0, 1.0, steps + 1):
            x, y, z = np.rint(a + t * (b - a)).astype(int)
            vol[x, y, z] = label


def _touches(vol: np.ndarray, first: int, second: int) -> bool:
    """Whether any voxel of `first` is a 26-neighbour of a voxel of `second`."""
    grown = ndimage.binary_dilation(vol == first, structure=np.ones((3, 3, 3), dtype=bool))
    return bool(np.any(grown & (vol == second)))


def _affine(modality: str) -> np.ndarray:
    spacing = SPACING[modality]
    affine = np.diag([*spacing, 1.0])
    affine[:3, 3] = [-(n - 1) * s / 2.0 for n, s in zip(SHAPE, spacing, strict=True)]
    return affine


def _save_nifti(path: Path, data: np.ndarray, modality: str) -> None:
    image = nib.Nifti1Image(data, _affine(modality))
    image.header.set_xyzt_units("mm")
    image.set_qform(image.affine, code=1)
    image.set_sform(image.affine, code=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(image, str(path))


def _image_for(labels: np.ndarray, modality: str, rng: np.random.Generator) -> np.ndarray:
    """An angiography-like image: noisy background, bright blurred vessels where the labels are."""
    background, noise, vessel = INTENSITY[modality]
    bright = ndimage.gaussian_filter((labels > 0).astype(np.float32), sigma=0.6) * 2.5
    image = background + vessel * np.clip(bright, 0.0, 1.0) + rng.normal(0.0, noise, SHAPE)
    return np.rint(image).astype(np.int16)


def _mirror(path: Path, shared: Path, folders: Sequence[str]) -> None:
    """Replace `folders` of the shared raw folder (the one prepare.py reads) by those of `path`."""
    for folder in folders:
        target = shared / folder
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(path / folder, target)


def _case_ids() -> list[str]:
    return [f"{i + 1:03d}" for i in range(N_CASES)]


# ----------------------------------------------------------------------------- TopCoW raw

TOPCOW_FOLDERS: tuple[str, ...] = ("imagesTr", "cow_seg_labelsTr", "roi_loc_labelsTr", "antpos_edges_labelsTr")


def _cow_variant(index: int) -> dict[str, bool]:
    """Which optional segments a case has; fixed by case index so every split sees several variants."""
    return {
        "L-A1": index % 3 != 1,
        "R-A1": index % 3 != 2,
        "3rd-A2": index % 2 == 0,
        "L-P1": index % 4 != 2,
        "R-P1": index % 4 != 1,
        "L-Pcom": index % 5 != 3,
        "R-Pcom": index % 5 != 4,
    }


def _cow_labels(variant: dict[str, bool], shift: Point) -> np.ndarray:
    """A schematic Circle of Willis, right side at high x, anterior at high y, superior at high z."""
    vol = np.zeros(SHAPE, dtype=np.uint8)

    def draw(label: int, line: Polyline, right: bool = True) -> None:
        pts = [(x if right else 32 - x, y, z) for x, y, z in line]
        _rasterise(vol, label, [(x + shift[0], y + shift[1], z + shift[2]) for x, y, z in pts])

    draw(BA, [(16, 6, 0), (16, 9, 6)])
    for right, side in ((True, "R"), (False, "L")):
        pca, ica, mca, pcom, aca = (
            (R_PCA, R_ICA, R_MCA, R_PCOM, R_ACA) if right else (L_PCA, L_ICA, L_MCA, L_PCOM, L_ACA)
        )
        p1_start = (17, 9, 6) if variant[f"{side}-P1"] else (20, 10, 6)
        draw(pca, [p1_start, (21, 10, 6), (26, 5, 8)], right)
        draw(ica, [(22, 18, 0), (22, 18, 8)], right)
        draw(mca, [(23, 18, 8), (29, 20, 9)], right)
        if variant[f"{side}-Pcom"]:
            draw(pcom, [(22, 17, 6), (21, 11, 6)], right)
        a1 = [(21, 19, 9), (18, 24, 10)] if variant[f"{side}-A1"] else [(18, 23, 10)]
        draw(aca, [*a1, (18, 24, 10), (18, 29, 14)], right)
    draw(ACOM, [(17, 24, 10), (15, 24, 10)])
    if variant["3rd-A2"]:
        draw(THIRD_A2, [(16, 25, 11), (16, 29, 14)])
    return vol


def _cow_edges(vol: np.ndarray) -> dict[str, dict[str, int]]:
    """Anterior/posterior edge flags derived from the label volume (TopCoW Task-3 definition)."""
    present = set(np.unique(vol).tolist())
    return {
        "anterior": {
            "L-A1": int(L_ACA in present and _touches(vol, L_ACA, L_ICA)),
            "Acom": int(ACOM in present),
            "3rd-A2": int(THIRD_A2 in present),
            "R-A1": int(R_ACA in present and _touches(vol, R_ACA, R_ICA)),
        },
        "posterior": {
            "L-Pcom": int(L_PCOM in present),
            "L-P1": int(L_PCA in present and _touches(vol, L_PCA, BA)),
            "R-P1": int(R_PCA in present and _touches(vol, R_PCA, BA)),
            "R-Pcom": int(R_PCOM in present),
        },
    }


def _roi_box(vol: np.ndarray, margin: int = 1) -> tuple[list[int], list[int]]:
    """(size, location) in voxels (x, y, z) of the box around all CoW labels."""
    coords = np.argwhere(vol > 0)
    low = np.maximum(coords.min(axis=0) - margin, 0)
    high = np.minimum(coords.max(axis=0) + margin, np.asarray(SHAPE) - 1)
    return [int(v) for v in high - low + 1], [int(v) for v in low]


def write_topcow_raw(raw_dir: Path, seed: int) -> None:
    """The TopCoW 2024 release layout (both modalities, all four label kinds), mirrored into the shared raw."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    for m_index, modality in enumerate(MODALITIES):
        for index, case_id in enumerate(_case_ids()):
            rng = np.random.default_rng([seed, m_index, index])
            variant = _cow_variant(index)
            shift = (int(rng.integers(-1, 2)), int(rng.integers(-1, 2)), int(rng.integers(0, 2)))
            labels = _cow_labels(variant, shift)
            edges = _cow_edges(labels)
            expected = {k: int(v) for k, v in variant.items() if k not in ("L-Pcom", "R-Pcom", "3rd-A2")}
            derived = {k: v for part in edges.values() for k, v in part.items() if k in expected}
            if derived != expected:  # the geometry must realise the intended variant
                raise AssertionError(f"topcow {modality} {case_id}: edges {derived} != variant {expected}")
            stem = f"topcow_{modality}_{case_id}"
            _save_nifti(raw_dir / "imagesTr" / f"{stem}_0000.nii.gz", _image_for(labels, modality, rng), modality)
            _save_nifti(raw_dir / "cow_seg_labelsTr" / f"{stem}.nii.gz", labels, modality)
            size, location = _roi_box(labels)
            spacing = " ".join(f"{s:g}" for s in SPACING[modality])
            roi = f"ElementSpacing = {spacing}\nSize = {' '.join(map(str, size))}\n"
            roi += f"Origin = {' '.join(map(str, location))}\n"
            (raw_dir / "roi_loc_labelsTr").mkdir(parents=True, exist_ok=True)
            (raw_dir / "roi_loc_labelsTr" / f"{stem}.txt").write_text(roi)
            (raw_dir / "antpos_edges_labelsTr").mkdir(parents=True, exist_ok=True)
            (raw_dir / "antpos_edges_labelsTr" / f"{stem}.yml").write_text(yaml.safe_dump(edges, sort_keys=False))
    _mirror(raw_dir, raw_dir.parent.parent / "topcow-shared" / "raw", TOPCOW_FOLDERS)


# ----------------------------------------------------------------------------- TopBrain raw

# Chains of labels drawn end to end along x; consecutive labels touch and every touching pair is
# listed in the grader's valid_neighbors_{ct,mr}_all.json. Chains are 2 voxels apart.
_TOPBRAIN_COMMON: tuple[tuple[int, ...], ...] = (
    (23, 1, 24),  # R-VA, BA, L-VA
    (27, 29, 30, 28),  # R-AICA, R-PICA, L-PICA, L-AICA
    (25, 2, 4, 5, 17, 18),  # R-SCA, R-P1P2, R-ICA, R-M1, R-M2, R-M3
    (26, 3, 6, 7, 19, 20),  # left counterpart
    (8, 31),  # R-Pcom, R-AChA
    (9, 32),  # L-Pcom, L-AChA
    (11, 10, 12),  # R-A1A2, Acom, L-A1A2
    (13, 15, 14, 16),  # R-A3, 3rd-A2, L-A3, 3rd-A3
    (33,),
    (34,),
)
TOPBRAIN_CHAINS: dict[str, tuple[tuple[int, ...], ...]] = {
    "ct": (*_TOPBRAIN_COMMON, (38, 35, 39), (21, 36, 22), (37,), (40,)),
    "mr": (*_TOPBRAIN_COMMON, (37, 35, 41, 39), (38, 36, 42, 40), (21,), (22,)),
}
TOPBRAIN_FOLDERS: dict[str, tuple[str, str]] = {
    m: (f"imagesTr_topbrain_{m}", f"labelsTr_topbrain_{m}") for m in MODALITIES
}


def _topbrain_labels(modality: str, rng: np.random.Generator) -> np.ndarray:
    vol = np.zeros(SHAPE, dtype=np.uint8)
    slots = [(y, z) for z in range(2, SHAPE[2] - 1, 3) for y in range(2, SHAPE[1] - 1, 3)]
    order = rng.permutation(len(slots))
    for chain, slot_index in zip(TOPBRAIN_CHAINS[modality], order, strict=False):
        y, z = slots[int(slot_index)]
        lengths = [int(rng.integers(3, 5)) for _ in chain]
        x = int(rng.integers(1, SHAPE[0] - sum(lengths)))
        for label, length in zip(chain, lengths, strict=True):
            vol[x : x + length, y, z] = label
            x += length
    return vol


def write_topbrain_raw(raw_dir: Path, seed: int) -> None:
    """The TopBrain 2025 batch 1+2 layout (both modalities), mirrored into the shared raw."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    for m_index, modality in enumerate(MODALITIES):
        images, labels_folder = TOPBRAIN_FOLDERS[modality]
        for index, case_id in enumerate(_case_ids()):
            rng = np.random.default_rng([seed, 100 + m_index, index])
            labels = _topbrain_labels(modality, rng)
            stem = f"topcow_{modality}_{case_id}"
            _save_nifti(raw_dir / images / f"{stem}_0000.nii.gz", _image_for(labels, modality, rng), modality)
            _save_nifti(raw_dir / labels_folder / f"{stem}.nii.gz", labels, modality)
    folders = [f for pair in TOPBRAIN_FOLDERS.values() for f in pair]
    _mirror(raw_dir, raw_dir.parent.parent / "topbrain-shared" / "raw", folders)


# ----------------------------------------------------------------------------- submissions


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _plan(prepared_dir: Path, column: str) -> list[tuple[dict[str, str], Path, Path]]:
    """(sample row, private answer file, public test image) per test case, in sample_submission order."""
    answers = {row["image_id"]: row for row in _rows(prepared_dir / "private" / "test_labels.csv")}
    plan = []
    for row in _rows(prepared_dir / "public" / "sample_submission.csv"):
        answer = answers[row["image_id"]]
        private, public = prepared_dir / "private", prepared_dir / "public"
        plan.append((row, private / answer["label_path"], public / answer["image_path"]))
        if column not in row:
            raise KeyError(f"sample_submission.csv has no {column!r} column")
    return plan


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def submit_segmentation(prepared_dir: Path, out_dir: Path, kind: str) -> None:
    """Masks at predictions/topcow_{m}_{id}_0000.nii.gz. broken: one named mask file is missing."""
    _check_kind(kind)
    plan = _plan(prepared_dir, "predicted_mask_path")
    for number, (row, answer, image_path) in enumerate(plan):
        target = out_dir / row["predicted_mask_path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "broken" and number == len(plan) - 1:
            target.unlink(missing_ok=True)
            continue
        if kind == "trivial":
            image = nib.nifti1.Nifti1Image.from_filename(str(image_path))
            empty = nib.Nifti1Image(np.zeros(image.shape, dtype=np.uint8), image.affine)
            nib.save(empty, str(target))
        else:
            shutil.copyfile(answer, target)
    _write_csv(out_dir / "submission.csv", [row for row, _, _ in plan])


def submit_bbox(prepared_dir: Path, out_dir: Path, kind: str) -> None:
    """Boxes {"size", "location"} at predictions/topcow_{m}_{id}_bbox.json. broken: a case row is missing."""
    _check_kind(kind)
    plan = _plan(prepared_dir, "predicted_bbox_path")
    for row, answer, _ in plan:
        target = out_dir / row["predicted_bbox_path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "trivial":
            centre = [n // 2 for n in SHAPE]
            box = {"size": [8, 8, 4], "location": [centre[0] - 4, centre[1] - 4, centre[2] - 2]}
            target.write_text(json.dumps(box))
        else:
            shutil.copyfile(answer, target)
    rows = [row for row, _, _ in plan]
    _write_csv(out_dir / "submission.csv", rows[:-1] if kind == "broken" else rows)


def submit_edges(prepared_dir: Path, out_dir: Path, kind: str) -> None:
    """Edge flags as JSON at predictions/topcow_{m}_{id}_edges.json. broken: one JSON lacks 'posterior'."""
    _check_kind(kind)
    plan = _plan(prepared_dir, "predicted_edges_path")
    for number, (row, answer, _) in enumerate(plan):
        target = out_dir / row["predicted_edges_path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        edges = yaml.safe_load(answer.read_text())
        prediction = {part: {k: int(v) for k, v in edges[part].items()} for part in ("anterior", "posterior")}
        if kind == "trivial":
            prediction = {part: dict.fromkeys(flags, 0) for part, flags in prediction.items()}
        if kind == "broken" and number == 0:
            del prediction["posterior"]
        target.write_text(json.dumps(prediction, indent=2))
    _write_csv(out_dir / "submission.csv", [row for row, _, _ in plan])


# ----------------------------------------------------------------------------- registries

WRITERS: dict[str, Callable[[Path, int], None]] = {
    **dict.fromkeys(TOPCOW_IDS, write_topcow_raw),
    **dict.fromkeys(TOPBRAIN_IDS, write_topbrain_raw),
}

SUBMITTERS: dict[str, Callable[[Path, Path, str], None]] = {
    "topcow-track1-task1": submit_segmentation,
    "topcow-track2-task1": submit_segmentation,
    "topcow-track1-task2": submit_bbox,
    "topcow-track2-task2": submit_bbox,
    "topcow-track1-task3": submit_edges,
    "topcow-track2-task3": submit_edges,
    "topbrain-track1": submit_segmentation,
    "topbrain-track2": submit_segmentation,
}
