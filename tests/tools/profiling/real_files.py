"""Real medical files that installed packages ship, and series assembled from their real slices.

pydicom's wheel ships `data/test_files` (the dicomdirtests folders are real CT and MR series of
16 x 16 slices: a regular CT, a CT with a 202.5 mm jump, a two-plane localizer, radial MR); nibabel's
ships `tests/data` (anatomical.nii, the 4-D functional.nii and example4d.nii.gz, a resampled
float volume with NaN outside the field of view). Nothing is downloaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nibabel
import numpy as np
import pydicom
import SimpleITK as sitk

DICOM_FILES = Path(pydicom.__file__).parent / "data" / "test_files"
DICOM_SERIES = DICOM_FILES / "dicomdirtests"
NIFTI_FILES = Path(nibabel.__file__).parent / "tests" / "data"

REGULAR_CT = DICOM_SERIES / "98892001" / "CT5N"  # 5 axial slices, 2.5 mm apart
JUMPING_CT = DICOM_SERIES / "77654033" / "CT2"  # 4 axial slices, gaps 202.5 / 1.25 / 1.25 mm
TWO_PLANE_LOCALIZER = DICOM_SERIES / "98892001" / "CT2N"  # a sagittal and a coronal slice, one series
RADIAL_MR = DICOM_SERIES / "98892003" / "MR700"  # 7 slices rotated about one axis, one series
THREE_SERIES_MR = DICOM_SERIES / "98892003" / "MR2"  # a three-plane localizer stored as 3 series


def series_files(folder: Path) -> list[Path]:
    """A real series' files in SimpleITK's order (sorted along the slice normal)."""
    return [Path(f) for f in sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder))]


def copy_slices(files: list[Path], into: Path, prefix: str = "") -> Path:
    """Copies of real slices in a new series folder, named `<prefix><n>.dcm`."""
    into.mkdir(parents=True, exist_ok=True)
    for index, file in enumerate(files):
        shutil.copyfile(file, into / f"{prefix}{index:03d}.dcm")
    return into


def rewrite(path: Path, **elements: object) -> None:
    """Rewrite DICOM elements of a copied real file in place (e.g. ImageOrientationPatient)."""
    dataset = pydicom.dcmread(path)
    for keyword, value in elements.items():
        setattr(dataset, keyword, value)
    dataset.save_as(path)


def sitk_series(folder: Path) -> sitk.Image:
    """SimpleITK's own reading of a folder's first series, the reference geometry."""
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder)))
    return reader.Execute()


def ras_affine(image: sitk.Image) -> np.ndarray:
    """SimpleITK's LPS geometry as a voxel -> RAS+ affine, computed independently of the readers."""
    affine = np.eye(4)
    affine[:3, :3] = np.asarray(image.GetDirection()).reshape(3, 3) @ np.diag(image.GetSpacing())
    affine[:3, 3] = image.GetOrigin()
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ affine


def slice_positions(folder: Path) -> np.ndarray:
    """Each slice's ImagePositionPatient projected on the slice normal, read by pydicom, sorted."""
    positions = []
    for file in folder.iterdir():
        dataset = pydicom.dcmread(file, stop_before_pixels=True)
        row, column = np.asarray(dataset.ImageOrientationPatient[:3]), np.asarray(dataset.ImageOrientationPatient[3:])
        positions.append(float(np.asarray(dataset.ImagePositionPatient, dtype=float) @ np.cross(row, column)))
    return np.sort(positions)
