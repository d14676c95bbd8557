"""DICOM series folders: which series a folder holds, and whether its slices make one regular grid.

GDCM groups a folder's files by SeriesInstanceUID and sorts each series along the slice normal;
ITK then builds one grid from the first file's orientation and the first and last positions.
Real folders break that grid in three ways, each kept as a problem on the header (a profile issue)
instead of being averaged away: several series in one folder (the largest is read, the others are
never mixed in), slices whose orientations differ (localizers, radial MR), and uneven slice gaps
(a missing slice). Geometry here is ITK's LPS+, per file, from ReadImageInformation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from amid.server.errors import DataUnreadable

# Direction cosines of one volume's slices agree to float32 rounding; a localizer's planes or a
# radial MR's spokes differ by whole tenths.
ORIENTATION_TOLERANCE = 1e-3
# A gap counts as uneven when it differs from the median gap by more than 1 % and 0.01 mm: the
# positions DICOM stores carry a few micrometres of rounding, a missing slice a whole gap.
GAP_RELATIVE_TOLERANCE = 0.01
GAP_ABSOLUTE_TOLERANCE_MM = 0.01
LISTED_GAPS = 8
# Slices of an orthogonal grid lie on one line along the normal; a tilted CT gantry shifts each
# slice across the plane (millimetres over a scan), stored rounding stays far below a tenth.
SHEAR_TOLERANCE_MM = 0.1


@dataclass(frozen=True)
class SeriesChoice:
    """The series read from a folder and how many files each series in it has (the chosen first)."""

    files: tuple[str, ...]
    series_sizes: tuple[int, ...]


@dataclass(frozen=True)
class SliceGeometry:
    """Where the chosen series' slices lie: their gaps along the first slice's normal, how far any
    slice's in-plane orientation departs from the first one's, and how far any slice's corner lies
    off the line through the first one along the normal (mm)."""

    gaps: tuple[float, ...]
    orientation_spread: float
    drift_mm: float = 0.0

    @property
    def slice_spacing(self) -> float | None:
        """The median gap between neighbouring slices: the spacing of the slices that are there."""
        positive = [g for g in self.gaps if g > GAP_ABSOLUTE_TOLERANCE_MM]
        return float(np.median(positive)) if positive else None

    @property
    def uneven(self) -> bool:
        spacing = self.slice_spacing
        if spacing is None:
            return bool(self.gaps)
        tolerance = max(GAP_ABSOLUTE_TOLERANCE_MM, GAP_RELATIVE_TOLERANCE * spacing)
        return any(abs(g - spacing) > tolerance for g in self.gaps)


def choose_series(directory: str) -> SeriesChoice:
    """The folder's largest series (GDCM's first among equals), sorted along its slice normal.

    GDCM scans every file once per call: a folder whose first series holds all its files (the usual
    case) costs one scan; only a folder with other files asks for every series. The last answer is
    kept, keyed by the folder's listing (names, sizes, times), for the voxel read that follows.
    """
    key = (directory, _listing(directory))
    if key in _LAST_CHOICE:
        return _LAST_CHOICE[key]
    import SimpleITK as sitk

    first = tuple(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(directory))
    if first and len(first) == len(key[1]):
        choice = SeriesChoice(files=first, series_sizes=(len(first),))
    else:
        uids = sitk.ImageSeriesReader.GetGDCMSeriesIDs(directory)
        series = [tuple(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(directory, uid)) for uid in uids]
        series = sorted((s for s in series if s), key=len, reverse=True)  # stable: ties keep GDCM's order
        if not series:
            raise DataUnreadable(f"{Path(directory).name}: no DICOM series in this directory")
        choice = SeriesChoice(files=series[0], series_sizes=tuple(len(s) for s in series))
    _LAST_CHOICE.clear()
    _LAST_CHOICE[key] = choice
    return choice


Listing = tuple[tuple[str, int, int], ...]
_LAST_CHOICE: dict[tuple[str, Listing], SeriesChoice] = {}  # one entry per worker process


def _listing(directory: str) -> Listing:
    entries = (e for e in os.scandir(directory) if e.is_file())
    return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries))


def _file_geometry(path: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Origin (LPS mm) and 3 x 3 direction (columns: row, column and normal axes) of one slice, from
    its ImagePositionPatient and ImageOrientationPatient, the tags ITK builds its grid from (pydicom
    reads just these, at half the time of ITK's header read); None when a tag is absent."""
    import pydicom

    try:  # force: GDCM reads files without the DICM preamble, and so must this
        dataset = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=[*GEOMETRY_TAGS], force=True)
        position, orientation = (dataset.get(tag) for tag in GEOMETRY_TAGS)
    except Exception:  # a tag pydicom cannot parse leaves the grid unchecked, the series still read
        return None
    if position is None or orientation is None or len(position) != 3 or len(orientation) != 6:
        return None
    row, column = np.asarray(orientation[:3], dtype=float), np.asarray(orientation[3:], dtype=float)
    return np.asarray(position, dtype=float), np.column_stack([row, column, np.cross(row, column)])


GEOMETRY_TAGS = ("ImagePositionPatient", "ImageOrientationPatient")


def slice_geometry(files: tuple[str, ...]) -> SliceGeometry | None:
    """Gaps and orientation spread of a series' slices, read from every file's header; None when a
    file lacks position or orientation (no grid to check)."""
    read = [_file_geometry(f) for f in files]
    known = [g for g in read if g is not None]
    if len(known) < len(read):
        return None
    origins, rotations = [origin for origin, _ in known], [rotation for _, rotation in known]
    normal = rotations[0][:, 2]
    positions = np.sort(np.asarray(origins) @ normal)
    in_plane = np.asarray([r[:, :2] for r in rotations])
    spread = float(np.max(np.abs(in_plane - in_plane[0]))) if len(files) > 1 else 0.0
    offsets = np.asarray(origins) - origins[0]
    across = offsets - np.outer(offsets @ normal, normal)
    drift = float(np.max(np.linalg.norm(across, axis=1)))
    return SliceGeometry(gaps=tuple(float(g) for g in np.diff(positions)), orientation_spread=spread, drift_mm=drift)


def series_problems(choice: SeriesChoice, geometry: SliceGeometry | None) -> tuple[tuple[str, str, str], ...]:
    """(code, severity, message) for each way the folder is not one regular volume."""
    problems = []
    if len(choice.series_sizes) > 1:
        sizes = list(choice.series_sizes)
        message = (
            f"the folder holds {len(sizes)} DICOM series ({sizes} files); only the largest "
            f"({sizes[0]} files) was read: give each series its own folder"
        )
        problems.append(("dicom_several_series", "error", message))
    if geometry is None:
        return tuple(problems)
    if geometry.orientation_spread > ORIENTATION_TOLERANCE:
        message = (
            f"slice orientations differ by up to {geometry.orientation_spread:.3g} in their direction cosines "
            "(a localizer or radial acquisition): the slices are not one volume"
        )
        problems.append(("dicom_mixed_orientation", "error", message))
    elif geometry.uneven:
        shown = [round(g, 3) for g in geometry.gaps[:LISTED_GAPS]]
        more = f" (of {len(geometry.gaps)})" if len(geometry.gaps) > LISTED_GAPS else ""
        message = (
            f"slice gaps are uneven: {shown}{more} mm (a missing or repeated slice); "
            f"the spacing reported is the median gap {geometry.slice_spacing} mm"
        )
        problems.append(("dicom_uneven_slices", "warning", message))
    if geometry.orientation_spread <= ORIENTATION_TOLERANCE and geometry.drift_mm > SHEAR_TOLERANCE_MM:
        message = (
            f"slice corners drift up to {geometry.drift_mm:.3g} mm across the slice plane (a tilted gantry): "
            "the grid is sheared, and the geometry reported (as ITK's) ignores the shear"
        )
        problems.append(("dicom_sheared_slices", "warning", message))
    return tuple(problems)
