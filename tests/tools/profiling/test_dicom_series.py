"""DICOM series folders read right: real series that pydicom ships, and series assembled from their slices.

Each broken series is compared with SimpleITK's own ImageSeriesReader, which reads it without complaint
(it averages a missing slice away and takes the first file's orientation for all).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk

from amid.tools.profiling import read_array, read_header
from tests.tools.profiling.real_files import (
    DICOM_FILES,
    JUMPING_CT,
    RADIAL_MR,
    REGULAR_CT,
    THREE_SERIES_MR,
    TWO_PLANE_LOCALIZER,
    copy_slices,
    ras_affine,
    rewrite,
    series_files,
    sitk_series,
    slice_positions,
)


def _codes(header: object) -> list[str]:
    return [code for code, _, _ in header.problems]  # type: ignore[attr-defined]


def test_a_regular_real_ct_series_matches_simpleitk_in_geometry_and_voxels_with_no_problem() -> None:
    header = read_header(str(REGULAR_CT))
    image = sitk_series(REGULAR_CT)
    assert header.problems == () and header.file_type == "dicom_series"
    assert header.shape == image.GetSize() == (16, 16, 5)
    assert header.spacing == pytest.approx(image.GetSpacing(), abs=1e-6)
    assert np.asarray(header.affine) == pytest.approx(ras_affine(image), abs=1e-4)
    voxels, _ = read_array(str(REGULAR_CT))
    assert np.array_equal(voxels, sitk.GetArrayFromImage(image).transpose())


def test_a_series_missing_one_slice_is_flagged_and_spaced_by_its_real_gap_not_the_average(tmp_path: Path) -> None:
    files = series_files(REGULAR_CT)
    folder = copy_slices(files[:2] + files[3:], tmp_path / "gap")  # the middle slice is lost
    header = read_header(str(folder))
    assert np.diff(slice_positions(folder)) == pytest.approx([2.5, 5.0, 2.5], abs=1e-4)
    assert sitk_series(folder).GetSpacing()[2] == pytest.approx(10.0 / 3)  # SimpleITK's average, unflagged
    assert header.spacing[2] == pytest.approx(2.5, abs=1e-4) and header.shape == (16, 16, 4)
    assert _codes(header) == ["dicom_uneven_slices"]
    _, severity, message = header.problems[0]
    assert severity == "warning" and "[2.5, 5.0, 2.5]" in message


def test_the_real_ct_series_with_a_202_mm_jump_is_flagged() -> None:
    header = read_header(str(JUMPING_CT))
    assert np.diff(slice_positions(JUMPING_CT)) == pytest.approx([202.5, 1.25, 1.25], abs=1e-3)
    assert sitk_series(JUMPING_CT).GetSpacing()[2] == pytest.approx(68.333, abs=1e-3)
    assert _codes(header) == ["dicom_uneven_slices"] and header.spacing[2] == pytest.approx(1.25, abs=1e-3)


def test_rounding_of_stored_positions_is_not_an_uneven_gap(tmp_path: Path) -> None:
    files = series_files(REGULAR_CT)
    folder = copy_slices(files, tmp_path / "rounded")
    first = sorted(folder.iterdir())[1]
    x, y, z = (float(v) for v in pydicom.dcmread(first).ImagePositionPatient)
    rewrite(first, ImagePositionPatient=[x, y, z + 0.004])  # 4 micrometres of rounding
    assert read_header(str(folder)).problems == ()


@pytest.mark.parametrize("folder", [TWO_PLANE_LOCALIZER, RADIAL_MR], ids=["two-plane-localizer", "radial-mr"])
def test_real_slices_of_several_orientations_in_one_series_are_not_a_volume(folder: Path) -> None:
    header = read_header(str(folder))
    assert len(sitk.ImageSeriesReader.GetGDCMSeriesIDs(str(folder))) == 1  # one series: SimpleITK stacks it
    assert _codes(header) == ["dicom_mixed_orientation"]
    assert header.problems[0][1] == "error"


def test_one_slice_tilted_by_a_tenth_is_caught_and_float32_rounding_of_cosines_is_not(tmp_path: Path) -> None:
    files = series_files(REGULAR_CT)
    tilted = copy_slices(files, tmp_path / "tilted")
    rewrite(sorted(tilted.iterdir())[2], ImageOrientationPatient=[0.995, 0.0998, 0.0, -0.0998, 0.995, 0.0])
    assert _codes(read_header(str(tilted))) == ["dicom_mixed_orientation"]
    rounded = copy_slices(files, tmp_path / "rounded")
    rewrite(sorted(rounded.iterdir())[2], ImageOrientationPatient=[1.0, 1e-6, 0.0, -1e-6, 1.0, 0.0])
    assert read_header(str(rounded)).problems == ()


def test_a_folder_of_two_real_series_is_flagged_and_only_the_larger_is_read(tmp_path: Path) -> None:
    folder = copy_slices(series_files(REGULAR_CT), tmp_path / "mixed", prefix="a")
    copy_slices(series_files(JUMPING_CT), folder, prefix="b")
    header = read_header(str(folder))
    assert _codes(header) == ["dicom_several_series"] and header.problems[0][1] == "error"
    assert "[5, 4]" in header.problems[0][2]
    reference = sitk_series(REGULAR_CT)
    assert header.shape == (16, 16, 5)
    assert np.asarray(header.affine) == pytest.approx(ras_affine(reference), abs=1e-4)
    voxels, _ = read_array(str(folder))
    assert np.array_equal(voxels, sitk.GetArrayFromImage(reference).transpose())  # no slice of the other


def test_the_real_three_series_localizer_names_every_problem() -> None:
    assert _codes(read_header(str(THREE_SERIES_MR))) == ["dicom_several_series", "dicom_mixed_orientation"]


def test_a_folder_holding_one_multi_frame_file_keeps_its_frames(tmp_path: Path) -> None:
    folder = copy_slices([DICOM_FILES / "rtdose.dcm"], tmp_path / "dose")
    header = read_header(str(folder))
    image = sitk.ReadImage(str(DICOM_FILES / "rtdose.dcm"))
    assert header.shape == image.GetSize() == (10, 10, 15) and header.problems == ()
    assert header.spacing == pytest.approx(image.GetSpacing())
    voxels, _ = read_array(str(folder))
    assert np.array_equal(voxels, sitk.GetArrayFromImage(image).transpose())


def _shift_across(folder: Path, step_mm: float) -> None:
    """Move each slice's corner across the plane by step_mm more than the previous one (a tilt);
    `copy_slices` names the files in SimpleITK's order, along the normal."""
    for index, file in enumerate(sorted(folder.iterdir())):
        x, y, z = (float(v) for v in pydicom.dcmread(file).ImagePositionPatient)
        rewrite(file, ImagePositionPatient=[x, y + index * step_mm, z])


def test_slices_shifted_across_the_plane_by_a_tilted_gantry_are_flagged_and_stored_rounding_is_not(
    tmp_path: Path,
) -> None:
    tilted = copy_slices(series_files(REGULAR_CT), tmp_path / "tilted")
    _shift_across(tilted, 0.44)  # 10 degrees of tilt at 2.5 mm slices
    header = read_header(str(tilted))
    assert _codes(header) == ["dicom_sheared_slices"] and "1.76 mm" in header.problems[0][2]
    rounded = copy_slices(series_files(REGULAR_CT), tmp_path / "rounded")
    _shift_across(rounded, 0.005)
    assert read_header(str(rounded)).problems == ()


def test_a_slice_stored_twice_at_one_position_is_an_uneven_gap(tmp_path: Path) -> None:
    files = series_files(REGULAR_CT)
    folder = copy_slices([*files, files[2]], tmp_path / "twice")
    rewrite(sorted(folder.iterdir())[-1], SOPInstanceUID=pydicom.uid.generate_uid())
    header = read_header(str(folder))
    assert header.shape == (16, 16, 6) and header.spacing[2] == pytest.approx(2.5, abs=1e-4)
    assert _codes(header) == ["dicom_uneven_slices"] and "0.0" in header.problems[0][2]
