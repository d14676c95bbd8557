"""Topology metrics: the Betti-0 (connected component count) error."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention
from amid.tools.metrics.inputs import binary_mask, mask_pair

DEFAULT = MetricConvention()


def components(mask: np.ndarray, convention: MetricConvention = DEFAULT) -> tuple[np.ndarray, int]:
    """Label the connected components of a binary mask under `convention.connectivity`.

    Connectivity 1 joins face neighbours only (6 in 3-D); ndim (the default, None) joins every
    neighbour sharing a vertex (26 in 3-D), as `scipy.ndimage.label` with a full structure.
    """
    foreground = binary_mask("mask", mask)
    connectivity = convention.connectivity or foreground.ndim
    if connectivity > foreground.ndim:
        raise invalid("convention.connectivity", connectivity, f"1..{foreground.ndim} for a {foreground.ndim}-D mask")
    structure = ndimage.generate_binary_structure(foreground.ndim, connectivity)
    labels, count = ndimage.label(foreground, structure=structure)
    return labels, int(count)


def betti0_error(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """|b0(prediction) - b0(reference)|: the difference in connected component counts.

    Two empty masks give 0 (both have b0 = 0); no empty rule is needed.
    """
    pred, ref = mask_pair(prediction, reference)
    return float(abs(components(pred, convention)[1] - components(ref, convention)[1]))
