"""Imperceptibly perturbed, re-encoded copies of input images, for the memorisation check
(server/reviewer/stability.py): pure file-to-file functions, seeded.

Each copy differs from its source in every way a lookup could key on, and in none a model of the
image should care about:
- bytes and file hash: new intensity noise and a new encoding (NIfTI: float32 data, gzip level 9,
  a new header description; PNG / TIFF: another compression), so no hash or byte prefix matches;
- values: Gaussian noise of `NOISE_FRACTION` of the image's own noise floor (estimated from
  neighbouring-voxel differences, robustly), and never less than one grey level of an integer
  image, so rounding or re-quantising the copy does not give the source back;
- geometry: none. The shape, affine, spacing and orientation stay as they were, so a prediction of
  the copy is compared voxel by voxel with the frozen prediction of the source.
The noise is well below what separates tissues (the demo's honest threshold model moves a few
boundary voxels of 80 000), so an honest model's output barely changes.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np

NOISE_FRACTION = 0.05
SUFFIXES = (".nii.gz", ".nii", ".png", ".tif", ".tiff")


def can_perturb(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def noise_floor(array: np.ndarray) -> float:
    """Robust standard deviation of the image noise: MAD of first differences along the first axis
    (structure edges are rare, so the median ignores them), divided by √2."""
    values = np.asarray(array, dtype=np.float64)
    if values.shape[0] < 2:
        return 0.0
    diffs = np.diff(values, axis=0).ravel()
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2.0))


def noisy(array: np.ndarray, rng: np.random.Generator, integer: bool) -> np.ndarray:
    """`array` plus seeded noise of NOISE_FRACTION of its noise floor (at least one grey level when
    the image is stored as integers, else at least 1e-4 of its value range)."""
    values = np.asarray(array, dtype=np.float64)
    finite = values[np.isfinite(values)]
    spread = float(finite.max() - finite.min()) if finite.size else 0.0
    sigma = max(NOISE_FRACTION * noise_floor(values), 1.0 if integer else 1e-4 * spread)
    return values + rng.normal(0.0, sigma, values.shape)


def perturb_file(source: Path, target: Path, rng: np.random.Generator) -> None:
    """Write the perturbed, re-encoded copy of `source` to `target` (same format as the name says)."""
    name = source.name.lower()
    if name.endswith((".nii.gz", ".nii")):
        _nifti(source, target, rng, compressed=name.endswith(".gz"))
    elif name.endswith(".png"):
        _plain(source, target, rng, "png")
    elif name.endswith((".tif", ".tiff")):
        _plain(source, target, rng, "tiff")
    else:
        raise ValueError(f"no perturbation for {source.name}: expected one of {', '.join(SUFFIXES)}")


def _nifti(source: Path, target: Path, rng: np.random.Generator, compressed: bool) -> None:
    import nibabel as nib

    image: Any = nib.load(source)
    raw = np.asanyarray(image.dataobj)
    integer = raw.dtype.kind in "iub" and float(getattr(image.dataobj, "slope", 1.0) or 1.0) == 1.0
    data = noisy(np.asarray(raw), rng, integer).astype(np.float32)
    header = image.header.copy()
    header.set_data_dtype(np.float32)
    header["descrip"] = b"amid stability copy"
    copy = nib.Nifti1Image(data, image.affine, header)
    copy.set_qform(image.affine, int(header["qform_code"]) or 1)
    copy.set_sform(image.affine, int(header["sform_code"]) or 1)
    data_bytes = copy.to_bytes()
    target.write_bytes(gzip.compress(data_bytes, compresslevel=9, mtime=0) if compressed else data_bytes)


def _plain(source: Path, target: Path, rng: np.random.Generator, kind: str) -> None:
    """PNG / TIFF keep their dtype (a PNG holds only 8- or 16-bit grey levels): noise rounded and clipped."""
    if kind == "tiff":
        import tifffile

        array = np.asarray(tifffile.imread(source))
    else:
        import imageio.v3 as iio

        array = np.asarray(iio.imread(source))
    integer = array.dtype.kind in "iub"
    values = noisy(array, rng, integer)
    if integer:
        info = np.iinfo(array.dtype) if array.dtype.kind != "b" else np.iinfo(np.uint8)
        values = np.clip(np.rint(values), info.min, info.max)
    copy = values.astype(array.dtype)
    if kind == "tiff":
        tifffile.imwrite(target, copy, compression="zlib")
    else:
        buffer = io.BytesIO()
        iio.imwrite(buffer, copy, extension=".png", compress_level=9)
        target.write_bytes(buffer.getvalue())
