"""Label statistics: connected components per class equal scipy's labelling with full connectivity."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from amid.tools.profiling.labelstats import MAX_COMPONENT_SIZES, class_components, summarize_labels


def _scipy_reference(labels: np.ndarray) -> dict[int, tuple[int, list[int]]]:
    structure = ndimage.generate_binary_structure(labels.ndim, labels.ndim)
    found = {}
    for value in np.unique(labels):
        if value != 0:
            labelled, n = ndimage.label(labels == value, structure=structure)
            found[int(value)] = (int(n), sorted(int(s) for s in np.bincount(labelled.ravel())[1:]))
    return found


@pytest.mark.parametrize("shape", [(40, 35, 12), (64, 48), (30, 1, 20), (1, 1, 9), (6,), (5, 4, 3, 2)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int64])
def test_components_per_class_equal_scipys(shape: tuple[int, ...], dtype: type) -> None:
    rng = np.random.default_rng(len(shape) * 100 + np.dtype(dtype).itemsize)
    labels = (rng.random(shape) < 0.25) * rng.integers(1, 5, size=shape)  # speckle: many touching components
    labels = labels.astype(dtype)
    labels = np.asfortranarray(labels) if len(shape) == 3 else labels  # NIfTI volumes arrive in F order
    assert class_components(labels) == _scipy_reference(labels)


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("ndim", [2, 3])
def test_components_of_a_cropped_view_equal_scipys(layout: str, ndim: int) -> None:
    """summarize_labels passes the foreground box, a view whose memory order is neither C nor F."""
    rng = np.random.default_rng(ndim)
    shape = (30, 26, 9)[:ndim]
    labels = ((rng.random(shape) < 0.3) * rng.integers(1, 4, size=shape)).astype(np.uint8)
    labels = np.asfortranarray(labels) if layout == "F" else np.ascontiguousarray(labels)
    crop = labels[(slice(2, -3), slice(1, -2), slice(1, -1))[:ndim]]
    assert not crop.flags.c_contiguous and not crop.flags.f_contiguous
    assert class_components(crop) == _scipy_reference(np.ascontiguousarray(crop))


def test_touching_classes_stay_apart_and_diagonals_connect() -> None:
    labels = np.zeros((5, 5, 5), np.uint8)
    labels[1, 1, 1] = labels[2, 2, 2] = 1  # corner neighbours: one component at full connectivity
    labels[1, 1, 2] = 2  # face neighbour of both, another class
    assert class_components(labels) == {1: (1, [2]), 2: (1, [1])}
    assert class_components(np.zeros((3, 3), np.uint8)) == {}


def test_summaries_bound_the_sizes_sent_back() -> None:
    labels = np.zeros((200, 200, 3), np.uint8)
    labels[::2, ::2, 0] = 1  # 10,000 isolated voxels
    summary, box = summarize_labels(labels, instances=False)
    assert summary.component_counts == {1: 10_000} and len(summary.component_sizes[1]) == MAX_COMPONENT_SIZES
    assert box == (slice(0, 199), slice(0, 199), slice(0, 1))


@pytest.mark.parametrize("shape", [(9, 8, 7), (12, 5), (6,), (4, 3, 5, 2)])
def test_the_foreground_box_is_the_bounding_box_of_the_non_zero_voxels(shape: tuple[int, ...]) -> None:
    from amid.tools.profiling.labelstats import foreground_box

    rng = np.random.default_rng(sum(shape))
    for _ in range(20):
        labels = (rng.random(shape) < rng.choice([0.0, 0.002, 0.05])).astype(np.uint8) * 3
        where = np.argwhere(labels)
        expected = (
            tuple(slice(int(lo), int(hi) + 1) for lo, hi in zip(where.min(0), where.max(0), strict=True))
            if where.size
            else None
        )
        assert foreground_box(labels) == expected
        assert foreground_box(np.asfortranarray(labels)) == expected
