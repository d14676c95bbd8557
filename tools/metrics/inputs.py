"""Input checks shared by the metrics: each failure names the parameter, the value and the fix."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from amid.server.errors import invalid


def binary_mask(name: str, array: object) -> np.ndarray:
    """Return `array` as a bool mask; it must be bool or hold only 0 and 1."""
    mask = np.asarray(array)
    if mask.dtype == bool:
        return mask
    if mask.dtype.kind not in "uif" or (mask.size and not _only_zero_one(mask)):
        shown = np.unique(mask)[:6] if mask.dtype.kind in "uif" else mask.dtype
        raise invalid(name, f"array with values {shown}", "a binary mask: bool or only 0 and 1")
    return mask.astype(bool)


def _only_zero_one(mask: np.ndarray) -> bool:
    if mask.dtype.kind in "ui":
        return bool(mask.min() >= 0 and mask.max() <= 1)
    return bool(np.all((mask == 0) | (mask == 1)))


def mask_pair(prediction: object, reference: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate two binary masks of one shape."""
    pred, ref = binary_mask("prediction", prediction), binary_mask("reference", reference)
    same_shape(pred, ref)
    return pred, ref


def label_map(name: str, array: object) -> np.ndarray:
    """Return an integer label map (0 = background, no negative labels)."""
    labels = np.asarray(array)
    if labels.dtype == bool:
        return labels.astype(np.int64)
    if labels.dtype.kind not in "ui" or (labels.size and labels.min() < 0):
        raise invalid(name, f"array of dtype {labels.dtype}", "a non-negative integer label map")
    return labels


def label_pair(prediction: object, reference: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate two integer label maps of one shape."""
    pred, ref = label_map("prediction", prediction), label_map("reference", reference)
    same_shape(pred, ref)
    return pred, ref


def same_shape(prediction: np.ndarray, reference: np.ndarray) -> None:
    """Raise unless both arrays have the same shape."""
    if prediction.shape != reference.shape:
        raise invalid("prediction", f"shape {prediction.shape}", f"the reference shape {reference.shape}")


def voxel_spacing(spacing: Sequence[float] | None, ndim: int) -> tuple[float, ...]:
    """Validate a physical spacing (mm per voxel along each array axis)."""
    if spacing is None:
        raise invalid("spacing", spacing, f"{ndim} positive voxel sizes in mm, one per array axis")
    values = tuple(float(s) for s in spacing)
    if len(values) != ndim or not all(math.isfinite(s) and s > 0 for s in values):
        raise invalid("spacing", spacing, f"{ndim} positive voxel sizes in mm, one per array axis")
    return values


def vector_pair(
    prediction: object, reference: object, *, min_length: int = 1, allow_matrix: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Validate per-case predictions (1-D, or N x C scores if allowed) against 1-D references."""
    pred, ref = np.asarray(prediction), np.asarray(reference)
    if ref.ndim != 1 or ref.size < min_length:
        raise invalid("reference", f"shape {ref.shape}", f"a 1-D array of at least {min_length} values")
    if pred.shape[:1] != ref.shape or pred.ndim > (2 if allow_matrix else 1):
        shown = "one row of class scores per case" if allow_matrix else "one value per case"
        raise invalid("prediction", f"shape {pred.shape}", f"{ref.size} values, {shown}")
    return pred, ref


def finite_images(prediction: object, reference: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate two real images of one shape, returned as float64."""
    pred, ref = np.asarray(prediction, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    same_shape(pred, ref)
    for name, image in (("prediction", pred), ("reference", ref)):
        if not np.all(np.isfinite(image)):
            raise invalid(name, "image with NaN or inf", "finite intensities")
    return pred, ref
