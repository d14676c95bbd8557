"""Image-quality metrics for enhancement / synthesis: PSNR, SSIM and LNCC.

`convention.data_range` (max - min possible intensity) is required by PSNR and SSIM and never
inferred from the data: inferring it from a prediction lets a model move its own score.
PSNR = 10 log10(data_range^2 / MSE); identical images give inf. SSIM follows Wang et al. 2004:
Gaussian window (sigma 1.5, side `convention.window`, 11 by default), K1 = 0.01, K2 = 0.03,
population (co)variances, averaged over the positions where the window fits inside the image; this
equals scikit-image's `structural_similarity(gaussian_weights=True, sigma=1.5,
use_sample_covariance=False, data_range=...)`. MONAI's SSIMMetric defaults to data_range 1.0.
LNCC is the registration convention (VoxelMorph, MONAI's LocalNormalizedCrossCorrelationLoss): the
mean over window positions inside the image of cov^2 / (var_pred * var_ref) in a box window of
side `convention.window`; windows where either image is constant are left out (NaN if all are).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import ndimage

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention
from amid.tools.metrics.inputs import finite_images

DEFAULT = MetricConvention()
_SIGMA = 1.5
_K1, _K2 = 0.01, 0.03


def psnr(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Peak signal-to-noise ratio in dB at the contract's `data_range`."""
    pred, ref = finite_images(prediction, reference)
    data_range = _data_range(convention)
    mse = float(np.mean((pred - ref) ** 2))
    if mse == 0:
        return math.inf
    return 10.0 * math.log10(data_range**2 / mse)


def ssim(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Mean structural similarity (Gaussian window) at the contract's `data_range`."""
    pred, ref = finite_images(prediction, reference)
    data_range = _data_range(convention)
    radius = _radius(pred.shape, convention)

    def smooth(image: np.ndarray) -> np.ndarray:
        return ndimage.gaussian_filter(image, _SIGMA, mode="reflect", radius=radius)

    mean_p, mean_r, var_p, var_r, cov = _local_moments(pred, ref, smooth)
    c1, c2 = (_K1 * data_range) ** 2, (_K2 * data_range) ** 2
    numerator = (2 * mean_p * mean_r + c1) * (2 * cov + c2)
    denominator = (mean_p**2 + mean_r**2 + c1) * (var_p + var_r + c2)
    return float(np.mean(_interior(numerator / denominator, radius)))


def lncc(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Local normalised cross-correlation (squared, box window), averaged inside the image."""
    pred, ref = finite_images(prediction, reference)
    radius = _radius(pred.shape, convention)

    def box(image: np.ndarray) -> np.ndarray:
        return ndimage.uniform_filter(image, size=convention.window, mode="reflect")

    _, _, var_p, var_r, cov = (_interior(m, radius) for m in _local_moments(pred, ref, box))
    varying = (var_p > _flat_variance(pred)) & (var_r > _flat_variance(ref))
    if not varying.any():
        return float("nan")
    return float(np.mean(cov[varying] ** 2 / (var_p[varying] * var_r[varying])))


def _local_moments(
    pred: np.ndarray, ref: np.ndarray, local_mean: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, ...]:
    mean_p, mean_r = local_mean(pred), local_mean(ref)
    var_p = local_mean(pred * pred) - mean_p**2
    var_r = local_mean(ref * ref) - mean_r**2
    cov = local_mean(pred * ref) - mean_p * mean_r
    return mean_p, mean_r, var_p, var_r, cov


def _flat_variance(image: np.ndarray) -> float:
    """Below this a local variance is rounding noise of a constant window."""
    return 1e-10 * max(float(np.max(np.abs(image))) ** 2, np.finfo(np.float64).tiny)


def _interior(values: np.ndarray, radius: int) -> np.ndarray:
    return values[tuple(slice(radius, n - radius) for n in values.shape)]


def _radius(shape: tuple[int, ...], convention: MetricConvention) -> int:
    if min(shape) < convention.window:
        raise invalid("prediction", f"image of shape {shape}", f"every side >= window {convention.window}")
    return convention.window // 2


def _data_range(convention: MetricConvention) -> float:
    if convention.data_range is None:
        raise invalid("convention.data_range", None, "the intensity range (max - min possible value) > 0")
    return convention.data_range
