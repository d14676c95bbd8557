"""Tiny synthetic raw data and reference submissions for the ReX-MLE pathology challenges.

Covers puma-track1-task1, puma-track2-task1 (tissue segmentation), puma-track1-task2,
puma-track2-task2 (nuclei detection) and neurips-cellseg (cell instance segmentation).

``WRITERS[challenge_id](raw_dir, seed)`` writes seeded synthetic raw data in the layout the
challenge's own prepare.py reads, so that it runs without downloading anything:

* PUMA: every PUMA prepare.py ignores its own ``raw_dir`` and reads one folder shared by the four
  PUMA challenges, ``raw_dir.parent.parent / "puma-shared" / "raw"``, holding
  ``01_training_dataset_tif_ROIs/<case>.tif`` (RGB, 1024x1024: prepare rasterises the test labels
  at a fixed 1024x1024), ``01_training_dataset_geojson_tissue/<case>_tissue.geojson`` and
  ``01_training_dataset_geojson_nuclei/<case>_nuclei.geojson``. The writer fills that shared folder
  (all three parts, whichever PUMA id it is called for) and leaves a note in ``raw_dir``. Class
  names are the ones prepare.py maps (``stroma``, ``blood vessel``, ..., ``nuclei_lymphocytes``,
  ...); the published PUMA files name them ``tissue_stroma`` and ``nuclei_lymphocyte``, which that
  prepare.py does not map.
* neurips-cellseg: ``Training-labeled.zip``, ``Tuning.zip`` and ``Testing.zip`` in ``raw_dir``, each
  holding ``<Name>/images/<case>.<png|bmp|tif|tiff>`` and (not Testing) ``<Name>/labels/<case>_label.tiff``
  instance masks; prepare.py extracts them itself (it downloads when ``raw_dir`` has no ``*.zip``).

``SUBMITTERS[challenge_id](prepared_dir, out_dir, kind)`` writes ``out_dir/submission.csv`` and the
files it names, following ``prepared_dir/public/sample_submission.csv``:

* ``perfect``: each prediction is the held-out answer file from ``prepared_dir/private``;
* ``broken``: every case is listed but the first one's prediction file is missing;
* ``trivial``: empty masks (all background) or detection files without any nucleus.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image, ImageDraw

PUMA_IDS = ("puma-track1-task1", "puma-track1-task2", "puma-track2-task1", "puma-track2-task2")
CELLSEG_ID = "neurips-cellseg"
KINDS = ("perfect", "broken", "trivial")

PUMA_SIZE = 1024  # prepare.py rasterises tissue labels at 1024x1024 whatever the image size
PUMA_IMAGES = "01_training_dataset_tif_ROIs"
PUMA_TISSUE = "01_training_dataset_geojson_tissue"
PUMA_NUCLEI = "01_training_dataset_geojson_nuclei"
PUMA_CASES = tuple(f"training_set_primary_roi_{i:03d}" for i in range(1, 9)) + tuple(
    f"training_set_metastatic_roi_{i:03d}" for i in range(1, 8)
)  # 15 cases: an 80/20 split leaves 3 for test

# Tissue class names as prepare.py maps them, with the mask value it gives them, and a colour.
TISSUE_CLASSES: dict[str, tuple[int, tuple[int, int, int]]] = {
    "stroma": (1, (232, 160, 196)),
    "blood vessel": (2, (200, 70, 80)),
    "tumor": (3, (150, 86, 168)),
    "epidermis": (4, (196, 118, 176)),
    "necrosis": (5, (176, 150, 156)),
}
BACKGROUND_RGB = (242, 238, 242)
# Nucleus class names as prepare.py maps them (track 1 groups them into tumor / TILs / other).
NUCLEI_CLASSES = (
    "nuclei_tumor",
    "nuclei_lymphocytes",
    "nuclei_plasma_cells",
    "nuclei_histiocytes",
    "nuclei_melanophages",
    "nuclei_neutrophils",
    "nuclei_stromal_cells",
    "nuclei_epithelium",
    "nuclei_endothelium",
    "nuclei_apoptotic_cells",
)

CELLSEG_PARTS: dict[str, tuple[str, ...]] = {
    "Training-labeled": tuple(f"cell_{i:05d}" for i in range(1, 10)),
    "Tuning": tuple(f"cell_{i:05d}" for i in range(101, 104)),
    "Testing": tuple(f"cell_{i:05d}" for i in range(201, 203)),  # unlabeled; prepare only needs the folder
}  # 9 + 3 labeled cases: an 80/20 split leaves 3 for test
CELLSEG_FORMATS = ("png", "bmp", "tif", "tiff")
CELLSEG_SHAPES = ((96, 128), (128, 128), (112, 96), (128, 160))

Point = tuple[float, float]


# --------------------------------------------------------------------------------------------- PUMA


def _polygon(rng: np.random.Generator, cx: float, cy: float, r_min: float, r_max: float, n: int) -> list[Point]:
    """A star-shaped simple polygon around (cx, cy), as an open ring of (x, y)."""
    angles = np.sort(rng.uniform(0.0, 2.0 * np.pi, n))
    radii = rng.uniform(r_min, r_max, n)
    return [
        (round(float(cx + r * np.cos(a)), 1), round(float(cy + r * np.sin(a)), 1))
        for a, r in zip(angles, radii, strict=True)
    ]


def _feature(name: str, ring: Sequence[Point], color: tuple[int, int, int], index: int) -> dict[str, object]:
    closed = [[x, y] for x, y in ring] + [[ring[0][0], ring[0][1]]]
    return {
        "type": "Feature",
        "id": f"{index:08x}-0000-4000-8000-000000000000",
        "geometry": {"type": "Polygon", "coordinates": [closed]},
        "properties": {"objectType": "annotation", "classification": {"name": name, "color": list(color)}},
    }


def _feature_collection(features: list[dict[str, object]]) -> str:
    return json.dumps({"type": "FeatureCollection", "features": features})


def _puma_case(rng: np.random.Generator) -> tuple[np.ndarray, str, str]:
    """One ROI: an RGB image, its tissue GeoJSON and its nuclei GeoJSON (all classes present)."""
    size, block = PUMA_SIZE, PUMA_SIZE // 4
    names = list(TISSUE_CLASSES)
    # 16 blocks: every tissue class at least once, the rest random classes or background.
    slots: list[str | None] = [*names, *[None] * 3]
    slots += [names[int(i)] for i in rng.integers(0, len(names), 16 - len(slots))]
    order = rng.permutation(16)
    mask_img = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(mask_img)
    tissue: list[dict[str, object]] = []
    for slot, cell in zip(slots, order, strict=True):
        if slot is None:
            continue
        value, color = TISSUE_CLASSES[slot]
        cx = (int(cell) % 4 + 0.5) * block
        cy = (int(cell) // 4 + 0.5) * block
        ring = _polygon(rng, cx, cy, 0.55 * block / 2, 0.92 * block / 2, int(rng.integers(7, 13)))
        draw.polygon(ring, fill=value, outline=value)
        tissue.append(_feature(slot, ring, color, len(tissue)))
    mask = np.asarray(mask_img)
    palette = np.array([BACKGROUND_RGB, *[c for _, c in TISSUE_CLASSES.values()]], dtype=np.int16)
    noise = np.kron(rng.integers(-10, 11, (size // 16, size // 16, 1)), np.ones((16, 16, 1), dtype=np.int64))
    rgb = palette[mask] + noise
    # Nuclei: a jittered 6x6 grid (centroids far more than 15 px apart), each class at least twice.
    classes = [*NUCLEI_CLASSES, *NUCLEI_CLASSES]
    classes += [NUCLEI_CLASSES[int(i)] for i in rng.integers(0, len(NUCLEI_CLASSES), 30 - len(classes))]
    classes = [classes[int(i)] for i in rng.permutation(len(classes))]
    slots_xy = rng.permutation(36)[: len(classes)]
    step = size / 6
    nuclei_img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    ndraw = ImageDraw.Draw(nuclei_img)
    nuclei: list[dict[str, object]] = []
    for name, slot_xy in zip(classes, slots_xy, strict=True):
        k = NUCLEI_CLASSES.index(name)
        cx = (int(slot_xy) % 6 + 0.5) * step + rng.uniform(-40, 40)
        cy = (int(slot_xy) // 6 + 0.5) * step + rng.uniform(-40, 40)
        radius = 5.0 + (k % 5)
        ring = _polygon(rng, cx, cy, 0.8 * radius, 1.1 * radius, 10)
        shade = (50 + 12 * k, 20 + 6 * k, 90 + 5 * k)
        ndraw.polygon(ring, fill=shade)
        nuclei.append(_feature(name, ring, shade, len(nuclei)))
    return np.asarray(nuclei_img), _feature_collection(tissue), _feature_collection(nuclei)


def puma_shared_raw(raw_dir: Path) -> Path:
    """The folder every PUMA prepare.py reads instead of its own raw_dir."""
    return raw_dir.parent.parent / "puma-shared" / "raw"


def write_puma(raw_dir: Path, seed: int) -> None:
    """Fill the shared PUMA raw folder (images, tissue and nuclei GeoJSON) and mark raw_dir."""
    shared = puma_shared_raw(raw_dir)
    folders = [shared / PUMA_IMAGES, shared / PUMA_TISSUE, shared / PUMA_NUCLEI]
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for case in PUMA_CASES:
        rgb, tissue, nuclei = _puma_case(rng)
        tifffile.imwrite(folders[0] / f"{case}.tif", rgb, photometric="rgb", compression="zlib")
        (folders[1] / f"{case}_tissue.geojson").write_text(tissue, encoding="utf-8")
        (folders[2] / f"{case}_nuclei.geojson").write_text(nuclei, encoding="utf-8")
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "PUMA_SHARED_RAW.txt").write_text(
        f"The PUMA prepare.py reads {shared}, shared by {', '.join(PUMA_IDS)}.\n", encoding="utf-8"
    )


# ---------------------------------------------------------------------------------- NeurIPS CellSeg


def _ellipse(shape: tuple[int, int], cy: float, cx: float, a: float, b: float, theta: float) -> np.ndarray:
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    dy, dx = yy - cy, xx - cx
    u = dx * np.cos(theta) + dy * np.sin(theta)
    v = -dx * np.sin(theta) + dy * np.cos(theta)
    inside: np.ndarray = (u / a) ** 2 + (v / b) ** 2 <= 1.0
    return inside


def _cell_labels(rng: np.random.Generator, shape: tuple[int, int], touch_border: bool) -> np.ndarray:
    """Instance mask (uint16, 0 = background, 1..n cells), cells not touching each other."""
    labels = np.zeros(shape, dtype=np.uint16)
    count, tries = 0, 0
    target = int(rng.integers(6, 10))
    while count < target and tries < 400:
        tries += 1
        a, b = rng.uniform(5, 10), rng.uniform(4, 8)
        margin = 12.0
        cy = rng.uniform(margin, shape[0] - margin)
        cx = rng.uniform(margin, shape[1] - margin)
        if touch_border and count == 0:
            cx = 2.0  # one cell cut by the image edge: the grader drops such cells from both sides
        theta = rng.uniform(0, np.pi)
        halo = _ellipse(shape, cy, cx, a + 3, b + 3, theta)
        if labels[halo].any():
            continue
        count += 1
        labels[_ellipse(shape, cy, cx, a, b, theta)] = count
    return labels


def _cell_image(rng: np.random.Generator, labels: np.ndarray, fmt: str) -> bytes:
    cells = labels > 0
    if fmt == "tif":  # single-channel fluorescence: bright cells on a dark background
        gray = np.where(cells, 170.0, 12.0) + rng.normal(0, 8, labels.shape)
        array = np.clip(gray, 0, 255).astype(np.uint8)
    else:  # three-channel brightfield: dark cells on a light background
        base = np.where(cells[..., None], (120.0, 88.0, 140.0), (226.0, 220.0, 232.0))
        array = np.clip(base + rng.normal(0, 6, (*labels.shape, 3)), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    if fmt in ("tif", "tiff"):
        tifffile.imwrite(buffer, array, photometric="minisblack" if array.ndim == 2 else "rgb")
    else:
        Image.fromarray(array).save(buffer, format="PNG" if fmt == "png" else "BMP")
    return buffer.getvalue()


def _tiff_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, array, compression="zlib")
    return buffer.getvalue()


def write_cellseg(raw_dir: Path, seed: int) -> None:
    """Training-labeled.zip, Tuning.zip and Testing.zip, as the NeurIPS 2022 CellSeg release."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    index = 0
    for part, cases in CELLSEG_PARTS.items():
        shutil.rmtree(raw_dir / part, ignore_errors=True)  # prepare extracts only absent folders
        with zipfile.ZipFile(raw_dir / f"{part}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            for case in cases:
                shape = CELLSEG_SHAPES[index % len(CELLSEG_SHAPES)]
                fmt = CELLSEG_FORMATS[index % len(CELLSEG_FORMATS)] if part == "Training-labeled" else "tiff"
                labels = _cell_labels(rng, shape, touch_border=index % 3 == 0)
                archive.writestr(f"{part}/images/{case}.{fmt}", _cell_image(rng, labels, fmt))
                if part != "Testing":
                    archive.writestr(f"{part}/labels/{case}_label.tiff", _tiff_bytes(labels))
                index += 1


# ------------------------------------------------------------------------------------- submissions


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def _trivial_file(answer: Path, target: Path) -> None:
    """An uninformative prediction shaped like the answer: all background, or no nuclei."""
    if target.suffix.lower() == ".json":
        target.write_text(json.dumps({"polygons": []}), encoding="utf-8")
        return
    empty = np.zeros_like(tifffile.imread(answer))
    if target.suffix.lower() in (".tif", ".tiff"):
        tifffile.imwrite(target, empty)
    else:
        Image.fromarray(empty).save(target)


def submit(prepared_dir: Path, out_dir: Path, kind: str) -> None:
    """Write out_dir/submission.csv (the sample submission's columns and rows) and its files.

    The sample submission's first column is the case id, its second the prediction's path
    relative to the submission folder; private/test_labels.csv gives each id's answer file
    (``label_path``, relative to private/) under the same id column.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    columns, rows = _read_csv(prepared_dir / "public" / "sample_submission.csv")
    id_column, path_column = columns[0], columns[1]
    _, answer_rows = _read_csv(prepared_dir / "private" / "test_labels.csv")
    answers = {row[id_column]: prepared_dir / "private" / row["label_path"] for row in answer_rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    for number, row in enumerate(rows):
        target = out_dir / row[path_column]
        target.parent.mkdir(parents=True, exist_ok=True)
        answer = answers[row[id_column]]
        if kind == "trivial":
            _trivial_file(answer, target)
        elif kind == "perfect" or number > 0:
            shutil.copyfile(answer, target)
    with (out_dir / "submission.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[id_column, path_column])
        writer.writeheader()
        writer.writerows({id_column: row[id_column], path_column: row[path_column]} for row in rows)


WRITERS: dict[str, Callable[[Path, int], None]] = {
    **dict.fromkeys(PUMA_IDS, write_puma),
    CELLSEG_ID: write_cellseg,
}
SUBMITTERS: dict[str, Callable[[Path, Path, str], None]] = dict.fromkeys((*PUMA_IDS, CELLSEG_ID), submit)
