"""Tiny synthetic raw data and reference submissions for seven ReX-MLE challenges.

For each challenge id, ``WRITERS[id](raw_dir, seed)`` writes a few seeded cases into ``raw_dir`` in the
file layout, names and formats the challenge's own prepare.py reads (so it skips its download step), and
``SUBMITTERS[id](prepared_dir, out_dir, kind)`` writes ``out_dir/submission.csv`` plus the files it
references, for ``kind`` in:

* ``"perfect"``: built from ``prepared_dir/private`` answers; the real grader gives its best scores;
* ``"broken"``: one test case is missing (its row and its file), so the real grader rejects it;
* ``"trivial"``: valid but uninformative (empty masks, one whole-image box, noise scores, the low-quality
  input as the enhanced image); it scores clearly worse than ``"perfect"``.

Everything here is written from scratch: only numpy, nibabel, SimpleITK, tifffile and Pillow are used.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import nibabel as nib
import numpy as np
import SimpleITK as sitk
import tifffile
from PIL import Image

KINDS = ("perfect", "broken", "trivial")
Row = dict[str, str]


# ----------------------------------------------------------------------------------------------------------
# small shared helpers
# ----------------------------------------------------------------------------------------------------------


def _rng(seed: int, salt: str) -> np.random.Generator:
    return np.random.default_rng([seed, sum(ord(c) * (i + 1) for i, c in enumerate(salt))])


def _ellipsoid(shape: Sequence[int], center: Sequence[float], radii: Sequence[float]) -> np.ndarray:
    """Boolean ellipsoid (or ellipse, for two axes) in an array of ``shape``."""
    grids = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    dist = sum(((g - c) / r) ** 2 for g, c, r in zip(grids, center, radii, strict=True))
    return np.asarray(dist <= 1.0)


def _random_blob(rng: np.random.Generator, shape: Sequence[int], lo: float, hi: float) -> np.ndarray:
    radii = [float(rng.uniform(lo, hi)) * (n / max(shape)) ** 0.5 for n in shape]
    center = [float(rng.uniform(r + 1, n - r - 2)) for r, n in zip(radii, shape, strict=True)]
    return _ellipsoid(shape, center, radii)


def _write_nifti(path: Path, xyz: np.ndarray, spacing: Sequence[float]) -> None:
    """NIfTI with array axes (x, y, z) and a diagonal affine carrying the voxel spacing in mm."""
    path.parent.mkdir(parents=True, exist_ok=True)
    affine = np.diag([*map(float, spacing), 1.0])
    image = nib.Nifti1Image(xyz, affine)
    image.header.set_xyzt_units("mm", "sec")
    nib.save(image, str(path))


def _write_sitk(path: Path, zyx: np.ndarray, spacing_xyz: Sequence[float], origin: Sequence[float]) -> None:
    """MHA / NRRD through SimpleITK: numpy (z, y, x), spacing and origin (x, y, z)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = sitk.GetImageFromArray(zyx)
    image.SetSpacing([float(s) for s in spacing_xyz])
    image.SetOrigin([float(o) for o in origin])
    sitk.WriteImage(image, str(path), True)


def _read_csv(path: Path) -> list[Row]:
    with path.open(newline="") as handle:
        return [dict(row) for row in csv.DictReader(handle)]


def _write_csv(path: Path, fieldnames: Sequence[str], rows: Iterable[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fieldnames), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _keep(rows: list[Row], kind: str) -> list[Row]:
    """The answer rows a submission covers: all of them, or (broken) all but the last one."""
    _check_kind(kind)
    if kind == "broken":
        if len(rows) < 2:
            raise ValueError("a broken submission needs at least two test cases to drop one")
        return rows[:-1]
    return rows


def _mask_submission(
    prepared: Path,
    out: Path,
    kind: str,
    id_column: str,
    gt_column: str,
    write_mask: Callable[[Path, Path, bool], None],
    name: Callable[[str], str],
) -> None:
    """Shared submitter for mask challenges: CSV ``id_column,predicted_mask_path`` and one mask per case.

    ``write_mask(gt_path, out_path, empty)`` writes the perfect (``empty=False``) or the empty mask."""
    answers = _read_csv(prepared / "private" / "test_labels.csv")
    rows: list[Row] = []
    for answer in _keep(answers, kind):
        rel = f"predictions/{name(answer[id_column])}"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        write_mask(prepared / "private" / answer[gt_column], out / rel, kind == "trivial")
        rows.append({id_column: answer[id_column], "predicted_mask_path": rel})
    _write_csv(out / "submission.csv", [id_column, "predicted_mask_path"], rows)


# ----------------------------------------------------------------------------------------------------------
# DENTEX: panoramic X-ray PNGs + one COCO JSON with three category levels (quadrant, tooth, diagnosis)
# ----------------------------------------------------------------------------------------------------------

DENTEX_DIAGNOSES = ("Impacted", "Caries", "Periapical Lesion", "Deep Caries")


def write_dentex(raw: Path, seed: int) -> None:
    """raw/training_data/quadrant-enumeration-disease/{xrays/train_K.png, train_quadrant_enumeration_disease.json}.

    Category ids are 0-based as in the released DENTEX JSON (categories_1: quadrants 1-4 as ids 0-3,
    categories_2: teeth 1-8 as ids 0-7, categories_3: the four diagnoses as ids 0-3)."""
    rng = _rng(seed, "dentex")
    root = raw / "training_data" / "quadrant-enumeration-disease"
    (root / "xrays").mkdir(parents=True, exist_ok=True)
    height, width, n_images = 64, 128, 15
    names = rng.permutation(n_images) + 100
    images: list[dict[str, object]] = []
    annotations: list[dict[str, object]] = []
    for index in range(n_images):
        image_id = index + 1
        file_name = f"train_{int(names[index])}.png"
        yy = np.mgrid[0:height, 0:width][0]
        jaw = np.exp(-(((yy - height / 2) / (height / 3)) ** 2)) * 120.0
        pixels = jaw + rng.normal(0.0, 8.0, (height, width))
        for _ in range(int(rng.integers(3, 6))):
            w, h = int(rng.integers(6, 16)), int(rng.integers(8, 20))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            pixels[y : y + h, x : x + w] += 90.0
            quadrant = int(rng.integers(0, 4))
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                    "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
                    "category_id_1": quadrant,
                    "category_id_2": int(rng.integers(0, 8)),
                    "category_id_3": int(rng.integers(0, 4)),
                }
            )
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(root / "xrays" / file_name)
        images.append({"id": image_id, "file_name": file_name, "height": height, "width": width})
    coco = {
        "images": images,
        "annotations": annotations,
        "categories_1": [{"id": i, "name": str(i + 1), "supercategory": str(i + 1)} for i in range(4)],
        "categories_2": [{"id": i, "name": str(i + 1), "supercategory": str(i + 1)} for i in range(8)],
        "categories_3": [{"id": i, "name": n, "supercategory": n} for i, n in enumerate(DENTEX_DIAGNOSES)],
    }
    (root / "train_quadrant_enumeration_disease.json").write_text(json.dumps(coco, indent=1))


def _dentex_box(bbox: Sequence[float]) -> list[float]:
    """A COCO [x, y, w, h] box in the form that survives the grader's corner-format guess unchanged.

    The grader rewrites [a, b, c, d] as corners when c > a, d > b and (c > a + 50 or d > b + 50); a box for
    which that guess would fire is sent as corners, which the guess then turns back into [x, y, w, h]."""
    x, y, w, h = (float(v) for v in bbox)
    if w > x and h > y and (w > x + 50 or h > y + 50):
        return [x, y, x + w, y + h]
    return [x, y, w, h]


def submit_dentex(prepared: Path, out: Path, kind: str) -> None:
    """submission.csv ``image_id,predictions_json`` + predictions/<image_id>.json (a list of COCO boxes)."""
    answers = _read_csv(prepared / "private" / "test_labels.csv")
    rows: list[Row] = []
    for answer in _keep(answers, kind):
        gt = json.loads((prepared / "private" / answer["ground_truth_json"]).read_text())
        image = gt["images"][0]
        if kind == "trivial":
            predictions = [
                {
                    "image_id": image["id"],
                    "bbox": [0.0, 0.0, float(image["width"]), float(image["height"])],
                    "category_id_1": 1,
                    "category_id_2": 1,
                    "category_id_3": 1,
                    "score": 0.01,
                }
            ]
        else:
            predictions = [
                {
                    "image_id": ann["image_id"],
                    "bbox": _dentex_box(ann["bbox"]),
                    "category_id_1": ann["category_id_1"],
                    "category_id_2": ann["category_id_2"],
                    "category_id_3": ann["category_id_3"],
                    "score": 1.0,
                }
                for ann in gt["annotations"]
            ]
        rel = f"predictions/{answer['image_id']}.json"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(json.dumps(predictions))
        rows.append({"image_id": answer["image_id"], "predictions_json": rel})
    _write_csv(out / "submission.csv", ["image_id", "predictions_json"], rows)


# ----------------------------------------------------------------------------------------------------------
# ISLES'22: BIDS tree, DWI + ADC (same grid as the mask) and FLAIR (own, finer grid) per case
# ----------------------------------------------------------------------------------------------------------


def write_isles22(raw: Path, seed: int) -> None:
    """raw/ISLES-2022/sub-strokecaseNNNN/ses-0001/{anat/*_FLAIR.nii.gz, dwi/*_dwi.nii.gz, dwi/*_adc.nii.gz}
    and raw/ISLES-2022/derivatives/sub-strokecaseNNNN/ses-0001/*_msk.nii.gz."""
    rng = _rng(seed, "isles22")
    root = raw / "ISLES-2022"
    shape, spacing = (32, 32, 16), (2.0, 2.0, 4.0)
    flair_shape, flair_spacing = (40, 40, 20), (1.6, 1.6, 3.2)
    for number in range(1, 13):
        case = f"sub-strokecase{number:04d}_ses-0001"
        subject = case.split("_")[0]
        brain = _ellipsoid(shape, [15.5, 15.5, 7.5], [14, 15, 7.5])
        lesion = np.zeros(shape, dtype=bool)
        for _ in range(int(rng.integers(1, 4))):
            lesion |= _random_blob(rng, shape, 1.5, 4.0)
        lesion &= brain
        if not lesion.any():
            lesion[16, 16, 8] = True
        dwi = brain * rng.normal(300.0, 30.0, shape) + lesion * 500.0
        adc = brain * rng.normal(800.0, 60.0, shape) - lesion * 400.0
        flair_brain = _ellipsoid(flair_shape, [19.5, 19.5, 9.5], [17.5, 18.8, 9.4])
        flair = flair_brain * rng.normal(400.0, 40.0, flair_shape)
        session = root / subject / "ses-0001"
        _write_nifti(session / "dwi" / f"{case}_dwi.nii.gz", dwi.astype(np.float32), spacing)
        _write_nifti(session / "dwi" / f"{case}_adc.nii.gz", np.clip(adc, 0, None).astype(np.float32), spacing)
        _write_nifti(session / "anat" / f"{case}_FLAIR.nii.gz", flair.astype(np.float32), flair_spacing)
        mask_path = root / "derivatives" / subject / "ses-0001" / f"{case}_msk.nii.gz"
        _write_nifti(mask_path, lesion.astype(np.uint8), spacing)


def _isles_mask(gt: Path, out: Path, empty: bool) -> None:
    image = nib.Nifti1Image.from_filename(str(gt))
    data = np.asarray(image.dataobj)
    mask = np.zeros(data.shape, np.uint8) if empty else (data > 0).astype(np.uint8)
    nib.save(nib.Nifti1Image(mask, image.affine, image.header), str(out))


def submit_isles22(prepared: Path, out: Path, kind: str) -> None:
    """submission.csv ``case_id,predicted_mask_path`` + predictions/<case_id>_pred.nii.gz (binary, DWI grid)."""
    _mask_submission(prepared, out, kind, "case_id", "mask_path", _isles_mask, lambda c: f"{c}_pred.nii.gz")


# ----------------------------------------------------------------------------------------------------------
# LDCT-IQA: 2-D float32 TIFF slices + JSON {file name: radiologist quality score 0..4}
# ----------------------------------------------------------------------------------------------------------


def _ldct_split(folder: Path, json_name: str, suffix: str, count: int, rng: np.random.Generator) -> None:
    images = folder / ("image" if suffix == ".tif" else "images")
    images.mkdir(parents=True, exist_ok=True)
    scores: dict[str, float] = {}
    body = _ellipsoid((64, 64), [31.5, 31.5], [26, 29])
    organ = _ellipsoid((64, 64), [28, 36], [9, 7])
    for index in range(count):
        score = round(float(rng.uniform(0.0, 4.0)), 1)
        noise = (4.2 - score) * 0.04
        pixels = body * 0.45 + organ * 0.1 + rng.normal(0.0, noise, (64, 64))
        name = f"{index:04d}{suffix}"
        tifffile.imwrite(images / name, pixels.astype(np.float32))
        scores[name] = score
    (folder / json_name).write_text(json.dumps(scores, indent=1))


def write_ldct_iqa(raw: Path, seed: int) -> None:
    """raw/LDCTIQAG2023_train/{image/NNNN.tif, train.json} and raw/LDCTIQAC_test/{images/NNNN.tiff, test.json}."""
    rng = _rng(seed, "ldct-iqa")
    _ldct_split(raw / "LDCTIQAG2023_train", "train.json", ".tif", 15, rng)  # folds of 3: a correlation baseline
    _ldct_split(raw / "LDCTIQAC_test", "test.json", ".tiff", 12, rng)


def submit_ldct_iqa(prepared: Path, out: Path, kind: str) -> None:
    """submission.csv ``image_id,quality_score`` only (no files). Trivial: seeded noise scores (a constant
    score makes every correlation NaN)."""
    answers = _keep(_read_csv(prepared / "private" / "test_labels.csv"), kind)
    noise = np.random.default_rng(0).uniform(0.0, 4.0, len(answers))
    rows = [
        {"image_id": a["image_id"], "quality_score": f"{noise[i]:.3f}" if kind == "trivial" else a["quality_score"]}
        for i, a in enumerate(answers)
    ]
    _write_csv(out / "submission.csv", ["image_id", "quality_score"], rows)


# ----------------------------------------------------------------------------------------------------------
# PANTHER tasks 1 and 2: MHA volumes, labels 0 background / 1 tumour / 2 pancreas
# ----------------------------------------------------------------------------------------------------------


def _panther_case(rng: np.random.Generator, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(image, label) in numpy (z, y, x): a body, a pancreas (2) and a tumour (1) inside it."""
    depth, rows, cols = shape
    body = _ellipsoid(shape, [depth / 2 - 0.5, rows / 2 - 0.5, cols / 2 - 0.5], [depth / 2, rows / 2.3, cols / 2.1])
    center = [depth / 2 + rng.uniform(-1, 1), rows / 2 + rng.uniform(-2, 2), cols / 2 + rng.uniform(-3, 3)]
    pancreas = _ellipsoid(shape, center, [depth / 5, rows / 8, cols / 3.5])
    tumour_center = [center[0], center[1], center[2] + rng.uniform(-3, 3)]
    tumour = _ellipsoid(shape, tumour_center, [rng.uniform(1.5, 2.5), rng.uniform(2, 3), rng.uniform(2, 3)])
    tumour &= pancreas
    if not tumour.any():
        tumour[tuple(int(c) for c in center)] = True
    label = np.zeros(shape, np.uint8)
    label[pancreas] = 2
    label[tumour] = 1
    image = body * rng.normal(400.0, 40.0, shape) + pancreas * 200.0 - tumour * 150.0
    return np.clip(image, 0, None).astype(np.int16), label


def write_panther_task1(raw: Path, seed: int) -> None:
    """raw/ImagesTr/<pid>_0001_0000.mha (arterial T1), raw/LabelsTr/<pid>_0001.mha, and two unlabelled other
    sequences in raw/ImagesTr_unlabeled/<pid>_0001_000K.mha."""
    rng = _rng(seed, "panther-task1")
    shape, spacing = (16, 32, 32), (1.5, 1.5, 3.0)
    for index in range(15):
        pid = 10000 + index
        image, label = _panther_case(rng, shape)
        _write_sitk(raw / "ImagesTr" / f"{pid}_0001_0000.mha", image, spacing, (0.0, 0.0, 0.0))
        _write_sitk(raw / "LabelsTr" / f"{pid}_0001.mha", label, spacing, (0.0, 0.0, 0.0))
    for index in range(2):
        image, _ = _panther_case(rng, shape)
        name = f"{10100 + index}_0001_{index + 1:04d}.mha"
        _write_sitk(raw / "ImagesTr_unlabeled" / name, image, spacing, (0.0, 0.0, 0.0))


def write_panther_task2(raw: Path, seed: int) -> None:
    """raw/ImagesTr/<pid>_0000.mha (MR-Linac T2) and raw/LabelsTr/<pid>.mha."""
    rng = _rng(seed, "panther-task2")
    shape, spacing = (20, 32, 32), (1.6, 1.6, 1.6)
    for index in range(15):
        pid = 10303 + index
        image, label = _panther_case(rng, shape)
        _write_sitk(raw / "ImagesTr" / f"{pid}_0000.mha", image, spacing, (-25.6, -25.6, -16.0))
        _write_sitk(raw / "LabelsTr" / f"{pid}.mha", label, spacing, (-25.6, -25.6, -16.0))


def _sitk_mask(value: int | None) -> Callable[[Path, Path, bool], None]:
    """A writer of the binary mask ``label == value`` (``label > 0`` for None), on the label's own grid."""

    def write(gt: Path, out: Path, empty: bool) -> None:
        image = sitk.ReadImage(str(gt))
        label = sitk.GetArrayFromImage(image)
        mask = np.zeros(label.shape, np.uint8) if empty else (label == value if value else label > 0).astype(np.uint8)
        result = sitk.GetImageFromArray(mask)
        result.CopyInformation(image)
        sitk.WriteImage(result, str(out), True)

    return write


def submit_panther(prepared: Path, out: Path, kind: str) -> None:
    """submission.csv ``image_id,predicted_mask_path`` + predictions/<image_id>.mha (binary tumour mask)."""
    _mask_submission(prepared, out, kind, "image_id", "label_path", _sitk_mask(1), lambda c: f"{c}.mha")


# ----------------------------------------------------------------------------------------------------------
# SEG.A. 2023: AVT CTA volumes as NRRD, aorta masks as .seg.nrrd, in <institution>/<institution>/<case>/
# ----------------------------------------------------------------------------------------------------------


def _aorta(shape: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """Numpy (z, y, x) vessel tree: a trunk along z that forks into two iliac branches near the bottom."""
    depth, rows, cols = shape
    zz, yy, xx = np.mgrid[0:depth, 0:rows, 0:cols].astype(np.float64)
    cy, cx, radius = rows / 2 + rng.uniform(-2, 2), cols / 2 + rng.uniform(-2, 2), rng.uniform(2.5, 3.5)
    fork = int(depth * 0.35)
    trunk = (zz >= fork) & ((yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2)
    spread = np.clip(fork - zz, 0, None) * 0.6
    branches = np.zeros(shape, dtype=bool)
    for side in (-1.0, 1.0):
        branches |= (zz < fork + 1) & ((yy - cy) ** 2 + (xx - cx - side * spread) ** 2 <= (radius * 0.7) ** 2)
    return np.asarray(trunk | branches)


def write_seg_a(raw: Path, seed: int) -> None:
    """raw/{Dongyang,KiTS,Rider}/<same>/<case>/<case>.nrrd (CTA, int16 HU) and <case>.seg.nrrd (0/1), cases
    D1-D5, K1-K5, R1-R5 (the nested folder mirrors the extracted per-institution zips)."""
    rng = _rng(seed, "seg_a")
    shape, spacing = (24, 32, 32), (0.8, 0.8, 1.5)
    for institution, letter in (("Dongyang", "D"), ("KiTS", "K"), ("Rider", "R")):
        for number in range(1, 6):
            case = f"{letter}{number}"
            folder = raw / institution / institution / case
            vessel = _aorta(shape, rng)
            body = _ellipsoid(shape, [11.5, 15.5, 15.5], [14, 14, 15.5])
            hu = np.where(body, rng.normal(40.0, 20.0, shape), -1000.0) + vessel * 300.0
            origin = (-12.8, -12.8, -18.0)
            _write_sitk(folder / f"{case}.nrrd", hu.astype(np.int16), spacing, origin)
            _write_sitk(folder / f"{case}.seg.nrrd", vessel.astype(np.uint8), spacing, origin)


def submit_seg_a(prepared: Path, out: Path, kind: str) -> None:
    """submission.csv ``image_id,predicted_mask_path`` + predictions/<image_id>.seg.nrrd (binary)."""
    _mask_submission(prepared, out, kind, "image_id", "label_path", _sitk_mask(None), lambda c: f"{c}.seg.nrrd")


# ----------------------------------------------------------------------------------------------------------
# USenhance 2023: paired low / high quality ultrasound PNGs per organ
# ----------------------------------------------------------------------------------------------------------

US_ORGANS = ("breast", "carotid", "kidney", "liver", "thyroid")


def write_usenhance(raw: Path, seed: int) -> None:
    """raw/train_datasets/<organ>/{low_quality,high_quality}/<n>.png (same name = one pair), 8-bit grey."""
    rng = _rng(seed, "usenhance")
    height, width = 64, 128
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    for organ in US_ORGANS:
        for number in range(1, 4):
            speckle = rng.rayleigh(1.0, (height, width))
            fan = np.exp(-yy / (height * 1.5))
            structure = np.zeros((height, width))
            for _ in range(3):
                cy, cx = rng.uniform(10, height - 10), rng.uniform(15, width - 15)
                ry, rx = rng.uniform(4, 10), rng.uniform(6, 18)
                structure += (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1) * rng.uniform(-60, 60)
            high = np.clip(120.0 * fan * speckle + structure, 0, 255)
            blurred = high.copy()
            for axis in (0, 1):
                blurred = (np.roll(blurred, 1, axis) + blurred + np.roll(blurred, -1, axis)) / 3.0
            low = np.clip(0.7 * blurred + rng.normal(0.0, 25.0, (height, width)) + 20.0, 0, 255)
            for quality, pixels in (("high_quality", high), ("low_quality", low)):
                folder = raw / "train_datasets" / organ / quality
                folder.mkdir(parents=True, exist_ok=True)
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{number}.png")


def submit_usenhance(prepared: Path, out: Path, kind: str) -> None:
    """submission.csv ``image_id,enhanced_image_path`` + enhanced/<image_id>.png. Trivial: the public
    low-quality test input itself."""
    answers = _read_csv(prepared / "private" / "test_labels.csv")
    rows: list[Row] = []
    for answer in _keep(answers, kind):
        rel = f"enhanced/{answer['image_id']}.png"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        if kind == "trivial":
            source = prepared / "public" / "test" / "low_quality" / f"{answer['image_id']}.png"
        else:
            source = prepared / "private" / answer["ground_truth_path"]
        shutil.copyfile(source, out / rel)
        rows.append({"image_id": answer["image_id"], "enhanced_image_path": rel})
    _write_csv(out / "submission.csv", ["image_id", "enhanced_image_path"], rows)


# ----------------------------------------------------------------------------------------------------------

WRITERS: dict[str, Callable[[Path, int], None]] = {
    "dentex": write_dentex,
    "isles22": write_isles22,
    "ldct-iqa": write_ldct_iqa,
    "panther-task1": write_panther_task1,
    "panther-task2": write_panther_task2,
    "seg_a": write_seg_a,
    "usenhance": write_usenhance,
}

SUBMITTERS: dict[str, Callable[[Path, Path, str], None]] = {
    "dentex": submit_dentex,
    "isles22": submit_isles22,
    "ldct-iqa": submit_ldct_iqa,
    "panther-task1": submit_panther,
    "panther-task2": submit_panther,
    "seg_a": submit_seg_a,
    "usenhance": submit_usenhance,
}
