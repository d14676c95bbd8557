"""Whole profiles of real shipped files: broken DICOM series, 4-D NIfTI among 3-D scans, NaN voxels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest

from amid.tools.profiling import ProfileCase, profile_dataset
from amid.tools.profiling.dataprofile import DataProfile
from tests.tools.profiling.conftest import make_request
from tests.tools.profiling.real_files import (
    JUMPING_CT,
    NIFTI_FILES,
    RADIAL_MR,
    REGULAR_CT,
    copy_slices,
    series_files,
)


def _cases(paths: dict[str, Path]) -> list[ProfileCase]:
    return [ProfileCase(case_id=case_id, image_paths=[str(path)]) for case_id, path in paths.items()]


def _issues(profile: DataProfile, *codes: str) -> dict[str, str]:
    """case id -> code of the profile's issues with these codes."""
    return {str(i.case_id): i.code for i in profile.issues if i.code in codes}


def _predicates(profile: DataProfile) -> dict[str, bool]:
    return {p.name: p.value for p in profile.predicates}


def test_broken_series_cases_are_named_by_code_and_the_regular_one_is_not(tmp_path: Path) -> None:
    mixed = copy_slices(series_files(REGULAR_CT), tmp_path / "mixed", prefix="a")
    copy_slices(series_files(JUMPING_CT), mixed, prefix="b")
    paths = {"regular": REGULAR_CT, "jump": JUMPING_CT, "radial": RADIAL_MR, "mixed": mixed}
    profile = profile_dataset(make_request("classification", _cases(paths)))
    codes = ("dicom_uneven_slices", "dicom_mixed_orientation", "dicom_several_series")
    assert _issues(profile, *codes) == {
        "jump": "dicom_uneven_slices",
        "radial": "dicom_mixed_orientation",
        "mixed": "dicom_several_series",
    }
    jump = next(i for i in profile.issues if i.case_id == "jump" and i.code == "dicom_uneven_slices")
    assert jump.path == str(JUMPING_CT) and jump.severity == "warning" and "202.5" in jump.message
    spacing = {c.case_id: c.spacing for c in profile.cases}
    assert spacing["jump"][2] == pytest.approx(1.25, abs=1e-3) and spacing["regular"][2] == pytest.approx(2.5)


def test_a_4d_functional_run_among_3d_scans_is_flagged_and_does_not_make_the_task_multi_channel() -> None:
    anatomical = NIFTI_FILES / "anatomical.nii"
    paths = {"a1": anatomical, "a2": anatomical, "a3": anatomical, "fmri": NIFTI_FILES / "functional.nii"}
    profile = profile_dataset(make_request("segmentation", _cases(paths)))
    assert _issues(profile, "four_d_image", "channel_count_mismatch") == {"fmri": "four_d_image"}
    issue = profile.issues_with("four_d_image")[0]
    assert issue.severity == "error" and "20 volumes along its 4th axis (step 2" in issue.message
    assert "3 of 4 cases have 1" in issue.message
    assert not _predicates(profile)["multi_channel"]


def test_a_task_stored_as_4d_files_throughout_is_multi_channel_with_no_4d_issue() -> None:
    four_d = NIFTI_FILES / "example4d.nii.gz"  # (128, 96, 24, 2): every case stores two volumes
    profile = profile_dataset(make_request("segmentation", _cases({"b1": four_d, "b2": four_d})))
    assert _issues(profile, "four_d_image", "channel_count_mismatch") == {}
    assert _predicates(profile)["multi_channel"]


def test_nan_voxels_of_a_real_resampled_volume_are_counted_and_left_out_of_the_intensity_statistics() -> None:
    path = NIFTI_FILES / "resampled_anat_moved.nii"  # float32, NaN outside the moved field of view
    image: Any = nib.load(path)
    volume = np.asarray(image.dataobj, dtype=np.float64)
    central = volume[:, :, volume.shape[2] // 2]
    assert np.isnan(central).any()
    profile = profile_dataset(make_request("segmentation", _cases({"moved": path})))
    assert profile.issues_with("nan_values")[0].message == f"{int(np.isnan(volume).sum())} NaN voxels"
    intensity = profile.representation.intensity
    assert intensity is not None
    channel = intensity.channels[0]
    assert channel.mean == pytest.approx(float(np.nanmean(central)), rel=1e-6)
    assert channel.mean != pytest.approx(float(np.nan_to_num(central).mean()), rel=1e-3)  # NaN read as 0
    assert channel.min == pytest.approx(float(np.nanmin(central)), rel=1e-6)
    assert np.isfinite([channel.median, channel.std, channel.percentile_00_5, channel.percentile_99_5]).all()


def test_infinite_voxels_are_counted_and_kept_out_of_the_statistics_like_nan(tmp_path: Path) -> None:
    volume = np.random.default_rng(5).normal(100.0, 10.0, (12, 12, 5)).astype(np.float32)
    volume[0, :3, 2] = np.inf  # three voxels of the central slice
    nib.save(nib.Nifti1Image(volume, np.eye(4)), tmp_path / "inf.nii.gz")
    profile = profile_dataset(make_request("segmentation", _cases({"inf": tmp_path / "inf.nii.gz"})))
    assert profile.issues_with("infinite_values")[0].message == "3 infinite voxels"
    intensity = profile.representation.intensity
    assert intensity is not None
    central = volume[:, :, 2].astype(np.float64)
    assert intensity.channels[0].mean == pytest.approx(float(central[np.isfinite(central)].mean()), rel=1e-6)
    assert intensity.channels[0].max < np.inf
