"""Perturbed copies for the memorisation check (server/reviewer/perturb.py): other bytes, other
values beyond rounding, the same geometry, and barely any change in an honest model's output."""

from __future__ import annotations

import hashlib
from pathlib import Path

import imageio.v3 as iio
import nibabel as nib
import numpy as np

from amid.server.reviewer.perturb import crop, draw_margin, noise_floor, perturb_file


def test_a_nifti_copy_differs_in_bytes_values_shape_and_origin_but_keeps_every_voxel_in_place(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    array = (rng.normal(40, 12, (16, 16, 6))).astype(np.int16)
    affine = np.diag([-0.8, -0.8, 4.0, 1.0])
    affine[:3, 3] = [10.0, -5.0, 2.0]
    nib.save(nib.Nifti1Image(array, affine), tmp_path / "c_0000.nii.gz")
    margin = ((2, 0), (0, 1), (1, 1))
    perturb_file(tmp_path / "c_0000.nii.gz", tmp_path / "x_0000.nii.gz", np.random.default_rng(0), margin)

    source, copy = (tmp_path / "c_0000.nii.gz").read_bytes(), (tmp_path / "x_0000.nii.gz").read_bytes()
    assert hashlib.sha256(source).digest() != hashlib.sha256(copy).digest()
    image = nib.load(tmp_path / "x_0000.nii.gz")
    padded = np.asarray(image.dataobj)  # type: ignore[attr-defined]
    assert padded.shape == (18, 17, 8) and (values := crop(padded, margin)).shape == array.shape
    moved = image.affine  # type: ignore[attr-defined]
    assert np.allclose(moved @ [2, 0, 1, 1], affine @ [0, 0, 0, 1]) and np.allclose(moved[:3, :3], affine[:3, :3])
    assert image.get_data_dtype() == np.int16  # type: ignore[attr-defined]  # nothing says it is a copy
    assert np.mean(np.rint(values) != array) > 0.3  # rounding does not give the source back
    assert np.std(values - array) < 0.2 * noise_floor(array)  # far below the image's own noise


def test_a_png_copy_keeps_its_dtype_and_changes_grey_levels_by_about_one(tmp_path: Path) -> None:
    ramp = np.add.outer(np.arange(32), np.arange(32)) * 3.0 + 20  # a smooth image, noise floor ~2 grey levels
    array = np.clip(ramp + np.random.default_rng(4).normal(0, 2, (32, 32)), 0, 255).astype(np.uint8)
    iio.imwrite(tmp_path / "c.png", array)
    perturb_file(tmp_path / "c.png", tmp_path / "x.png", np.random.default_rng(1), ((1, 0), (0, 2), (1, 1)))
    copy = crop(np.asarray(iio.imread(tmp_path / "x.png")), ((1, 0), (0, 2)))
    assert copy.dtype == np.uint8 and copy.shape == array.shape
    difference = np.abs(copy.astype(int) - array)
    assert difference.max() <= 5 and np.mean(difference > 0) > 0.3


def test_every_drawn_margin_adds_at_least_one_voxel_and_at_most_two_per_side() -> None:
    margins = [draw_margin(np.random.default_rng(seed), 3) for seed in range(200)]
    assert all(any(a or b for a, b in m) and all(0 <= v <= 2 for side in m for v in side) for m in margins)
    assert len(set(margins)) > 50  # seeded, and varied enough that a shape names no case
