"""Imperceptibly perturbed, re-encoded copies of input images, for the memorisation check
(server/reviewer/stability.py): pure file-to-file functions, seeded.

Each copy differs from its source in every way a lookup could key on, and in none a model of the
image should care about:
- bytes and file hash: new intensity noise and another compression (ISA-L's deflate at level 3 for
  NIfTI, PNG level 9, TIFF zlib), so no hash or byte prefix matches; the dtype and the other header
  fields stay. (zlib's level 9 cost 1.7 s a copy on a 256x256x80 volume, most of a large review's
  time in the reviews_growth --large benchmark; ISA-L is about ten times faster.)
- values: Gaussian noise of `NOISE_FRACTION` of the image's own noise floor (estimated from
  neighbouring-voxel differences, robustly), and never less than one grey level of an integer
  image, so rounding or re-quantising the copy does not give the source back;
- shape and position: a seeded margin of 0-2 voxels on each side of each spatial axis (at least
  one voxel in all), filled with the edge values, and the NIfTI affine's origin moved by the low
  margin, so every original voxel keeps its place in the world: a lookup by shape, header or
  affine finds nothing, and the copy's prediction, cropped by the margin, is compared voxel by
  voxel with the frozen prediction of the source. Spacing and orientation stay.
The noise is well below what separates tissues (the demo's honest threshold model moves a few
boundary voxels of 80 000), so an honest model's output barely changes.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from isal import igzip

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


Margin = tuple[tuple[int, int], ...]  # (before, after) voxels per spatial axis


def draw_margin(rng: np.random.Generator, spatial_axes: int) -> Margin:
    """0-2 voxels before and after each spatial axis, at least one voxel in all."""
    margin = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(spatial_axes)]
    if not any(a or b for a, b in margin):
        margin[int(rng.integers(0, spatial_axes))] = (1, 0)
    return tuple(margin)


def crop(array: np.ndarray, margin: Margin) -> np.ndarray:
    """The part of a copy's prediction that covers the source's voxels."""
    return array[tuple(slice(a, array.shape[i] - b) for i, (a, b) in enumerate(margin))]


def perturb_file(source: Path, target: Path, rng: np.random.Generator, margin: Margin) -> None:
    """Write the perturbed, re-encoded copy of `source` to `target` (same format as the name says),
    with `margin` added around its first spatial axes (three for NIfTI, two for PNG / TIFF)."""
    name = source.name.lower()
    if name.endswith((".nii.gz", ".nii")):
        _nifti(source, target, rng, margin, compressed=name.endswith(".gz"))
    elif name.endswith(".png"):
        _plain(source, target, rng, margin[:2], "png")
    elif name.endswith((".tif", ".tiff")):
        _plain(source, target, rng, margin[:2], "tiff")
    else:
        raise ValueError(f"no perturbation for {source.name}: expected one of {', '.join(SUFFIXES)}")


def _nifti(source: Path, target: Path, rng: np.random.Generator, margin: Margin, compressed: bool) -> None:
    """The copy keeps its dtype and header (nothing in it says it is a copy), only the values and
    the gzip level change; an integer image gets whole grey levels of noise (see `noisy`)."""
    import nibabel as nib

    image: Any = nib.load(source)
    dtype = np.dtype(image.get_data_dtype())
    plain = (
        dtype.kind in "iu"
        and getattr(image.dataobj, "slope", 1.0) == 1.0
        and getattr(image.dataobj, "inter", 0.0) == 0.0
    )
    values = noisy(np.asarray(image.dataobj, dtype=np.float64), rng, dtype.kind in "iu")
    data = _in_dtype(_padded(values, margin[:3]), dtype if plain else np.dtype(np.float32))  # scaled ints: floats
    affine = np.array(image.affine, dtype=np.float64)
    low = np.zeros(3)
    low[: len(margin[:3])] = [a for a, _ in margin[:3]]
    affine[:3, 3] -= affine[:3, :3] @ low  # the source's voxel (0, 0, 0) stays where it was in the world
    header = image.header.copy()
    header.set_data_dtype(data.dtype)
    copy = nib.Nifti1Image(data, affine, header)
    copy.set_qform(affine, int(header["qform_code"]) or 1)
    copy.set_sform(affine, int(header["sform_code"]) or 1)
    data_bytes = copy.to_bytes()
    target.write_bytes(igzip.compress(data_bytes, compresslevel=3, mtime=0) if compressed else data_bytes)


def _padded(values: np.ndarray, margin: Margin) -> np.ndarray:
    widths = [*margin[: values.ndim], *[(0, 0)] * (values.ndim - len(margin[: values.ndim]))]
    return np.pad(values, widths, mode="edge")


def _in_dtype(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Rounded and clipped to an integer dtype's range, or cast to a float dtype."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype if dtype.kind == "f" else np.float32)


def _plain(source: Path, target: Path, rng: np.random.Generator, margin: Margin, kind: str) -> None:
    """PNG / TIFF keep their dtype (a PNG holds only 8- or 16-bit grey levels)."""
    if kind == "tiff":
        import tifffile

        array = np.asarray(tifffile.imread(source))
    else:
        import imageio.v3 as iio

        array = np.asarray(iio.imread(source))
    copy = _in_dtype(_padded(noisy(array, rng, array.dtype.kind in "iub"), margin), array.dtype)
    if kind == "tiff":
        tifffile.imwrite(target, copy, compression="zlib")
    else:
        buffer = io.BytesIO()
        iio.imwrite(buffer, copy, extension=".png", compress_level=9)
        target.write_bytes(buffer.getvalue())
