"""SSIM and PSNR against scikit-image, LNCC against MONAI's local normalised cross-correlation.

Conventions: scikit-image is called with the Gaussian window of Wang et al. and population
covariance (`gaussian_weights=True, sigma=1.5, use_sample_covariance=False`) and an explicit
`data_range`; its defaults (7x7 uniform window, sample covariance) give other numbers. MONAI's LNCC
pads with zeros, so only windows inside the image are compared.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from monai.losses import LocalNormalizedCrossCorrelationLoss
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from amid.tools.metrics import MetricConvention, lncc, psnr, ssim

RANGE = MetricConvention(data_range=2.0)


def _images(seed: int, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    reference = rng.random(shape)
    prediction = np.clip(reference + rng.normal(scale=0.1, size=shape), 0, 1)
    return prediction, reference


@pytest.mark.parametrize("shape", [(40, 48), (20, 24, 22)])
def test_ssim_equals_scikit_image_with_the_gaussian_window(shape):
    prediction, reference = _images(0, shape)
    expected = structural_similarity(
        reference, prediction, data_range=2.0, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    assert ssim(prediction, reference, RANGE) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_psnr_equals_scikit_image_at_the_same_data_range(seed):
    prediction, reference = _images(seed, (32, 32))
    expected = peak_signal_noise_ratio(reference, prediction, data_range=2.0)
    assert psnr(prediction, reference, RANGE) == pytest.approx(expected, rel=1e-12)


def test_identical_images_give_perfect_scores():
    _, reference = _images(1, (24, 24))
    assert psnr(reference, reference, RANGE) == math.inf
    assert ssim(reference, reference, RANGE) == pytest.approx(1.0)
    assert lncc(reference, reference) == pytest.approx(1.0)


def test_psnr_and_ssim_refuse_to_guess_the_data_range():
    prediction, reference = _images(0, (16, 16))
    for metric in (psnr, ssim):
        with pytest.raises(Exception, match=r"convention\.data_range"):
            metric(prediction, reference, MetricConvention())


@pytest.mark.parametrize("window", [5, 11])
def test_lncc_equals_monai_local_ncc_inside_the_image(window):
    prediction, reference = _images(2, (36, 40))
    loss = LocalNormalizedCrossCorrelationLoss(
        spatial_dims=2,
        kernel_size=window,
        kernel_type="rectangular",
        reduction="none",
        smooth_nr=0.0,
        smooth_dr=1e-12,
    )
    ncc_map = -loss(torch.from_numpy(prediction)[None, None], torch.from_numpy(reference)[None, None])[0, 0].numpy()
    half = window // 2
    expected = ncc_map[half:-half, half:-half].mean()
    assert lncc(prediction, reference, MetricConvention(window=window)) == pytest.approx(expected, rel=1e-6)


def test_lncc_leaves_out_constant_windows():
    prediction, reference = _images(3, (30, 30))
    flat = reference.copy()
    flat[:, :15] = 0.5
    value = lncc(prediction, flat, MetricConvention(window=5))
    assert 0 < value <= 1
    assert math.isnan(lncc(np.ones((9, 9)), np.ones((9, 9)), MetricConvention(window=5)))


def test_images_smaller_than_the_window_are_refused():
    with pytest.raises(Exception, match="window 11"):
        ssim(np.zeros((8, 20)), np.zeros((8, 20)), RANGE)
