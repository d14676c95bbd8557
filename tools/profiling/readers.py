"""Header-first image readers: geometry from headers without touching voxels, voxels only on request.

Axis convention. Volumes (NIfTI, NRRD, MetaImage, DICOM) keep the file's index order (i, j, k), the
order of NIfTI and of ITK's GetSize; `spacing` follows that order (nnU-Net reports the reverse).
2-D natural images and TIFF keep numpy order (rows, columns); TIFF stacks turn to (x, y, z), so
slices always run along the last axis. Channels are never part of `shape`;
arrays from `read_array` put them last. `affine` maps voxel indices to RAS+ world millimetres, so
`orientation` is nibabel's axis code (e.g. "LAS": i runs to the left, j anterior, k superior).

Every third-party failure is translated here, in `_unreadable`, into `DataUnreadable`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from amid.server.errors import DataUnreadable
from amid.tools.profiling import readers_2d, readers_itk
from amid.tools.profiling.image_header import ImageHeader, ZRange, orientation_code

__all__ = ["ImageHeader", "ZRange", "file_kind", "orientation_code", "read_array", "read_header"]

ITK_SUFFIXES = {".nrrd": "nrrd", ".nhdr": "nrrd", ".mha": "metaimage", ".mhd": "metaimage", ".dcm": "dicom"}
NATURAL_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".bmp": "bmp"}
# Bytes a gzip stream may hold beyond header and voxels (extensions, padding) and still count as whole.
GZIP_TRAILING_SLACK = 1 << 20


def file_kind(path: str, is_dir: bool | None = None) -> str:
    """The reader family of a path, from its name (a directory is a DICOM series). `is_dir`: whether
    the path is a directory, when the caller has stat'ed it already."""
    lower = path.lower()
    if lower.endswith((".nii", ".nii.gz")):
        return "nifti"
    if os.path.isdir(path) if is_dir is None else is_dir:
        return "dicom_series"
    suffix = Path(lower).suffix
    if suffix in (".tif", ".tiff"):
        return "tiff"
    return ITK_SUFFIXES.get(suffix) or NATURAL_SUFFIXES.get(suffix) or "unknown"


@contextmanager
def _unreadable(path: str, what: str) -> Iterator[None]:
    """Turn any reader failure into DataUnreadable naming the file."""
    try:
        yield
    except DataUnreadable:
        raise
    except Exception as error:
        name = Path(path).name
        raise DataUnreadable(f"{name}: cannot read {what} ({type(error).__name__}: {error})") from error


def read_header(path: str) -> ImageHeader:
    """Read geometry, dtype and orientation of an image without decoding its voxels."""
    kind = file_kind(path)
    with _unreadable(path, "header"):
        if kind == "nifti":
            return _nifti_header(path)
        if kind in ("nrrd", "metaimage", "dicom"):
            return readers_itk.itk_header(path, kind)
        if kind == "dicom_series":
            return readers_itk.dicom_series_header(path)

        if kind == "tiff":
            return readers_2d.tiff_header(path)
        if kind in ("png", "jpeg", "bmp"):
            return readers_2d.natural_header(path, kind)
    raise DataUnreadable(
        f"{Path(path).name}: unsupported image type; expected NIfTI, NRRD, MHA, DICOM, PNG, JPEG, TIFF"
    )


def read_array(
    path: str, z_range: ZRange | None = None, header: ImageHeader | None = None
) -> tuple[np.ndarray, ImageHeader]:
    """Decode voxels (only slices z_range[0]:z_range[1] of a volume when given); channels last.
    `header`: the file's header when the caller has read it already."""
    header = header if header is not None and header.path == path else read_header(path)
    with _unreadable(path, "voxels"):
        if header.file_type == "nifti":
            return _nifti_array(path, header, z_range), header
        if header.file_type in ("nrrd", "metaimage", "dicom"):
            return readers_itk.itk_array(path, header, z_range), header
        if header.file_type == "dicom_series":
            return readers_itk.dicom_series_array(path, header, z_range), header

        if header.file_type == "tiff":
            return readers_2d.tiff_array(path, header)
        return readers_2d.natural_array(path), header


def _plain_dtype(dtype: Any) -> str:
    return np.dtype(dtype).newbyteorder("=").name


def _nifti_header(path: str) -> ImageHeader:
    """From the header alone, parsed here (`nifti_header`) unless the file needs nibabel."""
    from amid.tools.profiling import nifti_header, nifti_memory

    parsed = nifti_memory.load_header(path) if nifti_memory.active() else nifti_header.read(path)
    if parsed is None:
        return _nibabel_header(path)
    return _nifti_image_header(path, parsed.shape, parsed.dtype, parsed.zooms, parsed.affine)


def _nibabel_header(path: str) -> ImageHeader:
    import nibabel as nib

    image: Any = nib.load(path)  # parses the header only; voxels stay on disk
    shape = tuple(int(s) for s in image.shape)
    zooms = tuple(float(z) for z in image.header.get_zooms())
    affine = np.asarray(image.affine, dtype=np.float64)
    return _nifti_image_header(path, shape, image.header.get_data_dtype(), zooms, affine)


def _nifti_image_header(
    path: str, shape: tuple[int, ...], dtype: Any, zooms: tuple[float, ...], affine: np.ndarray
) -> ImageHeader:
    spatial = shape[:3]
    meta = {}
    if len(shape) > 3:  # channels or time points: the dataset-level check tells them apart
        step = zooms[3] if len(zooms) > 3 else 0.0
        meta = {"fourth_axis_length": str(int(np.prod(shape[3:]))), "fourth_axis_step": f"{step:g}"}
    return ImageHeader(
        path=path,
        file_type="nifti",
        shape=spatial,
        n_channels=int(np.prod(shape[3:])) if len(shape) > 3 else 1,
        dtype=_plain_dtype(dtype),
        spacing=tuple(zooms[: len(spatial)]),
        affine=affine.tolist(),
        orientation=orientation_code(affine),
        size_bytes=os.path.getsize(path),
        meta=meta,
    )


def _nifti_is_complete(path: str, image: Any) -> bool:
    """Whether the file holds every voxel byte the header promises (gzip: its size trailer says so).

    A failed check sends the file to nibabel, which raises on a truncated file and reads multi-member
    gzip files, whose trailer describes only the last member.
    """
    expected = int(image.header.get_data_offset()) + int(np.prod(image.shape)) * image.get_data_dtype().itemsize
    if not path.lower().endswith(".gz"):
        return os.path.getsize(path) >= expected
    with open(path, "rb") as handle:
        handle.seek(-4, os.SEEK_END)
        stored = int.from_bytes(handle.read(4), "little")  # ISIZE: uncompressed size modulo 2**32
    return (stored - expected) % 2**32 < GZIP_TRAILING_SLACK


def _nifti_array(path: str, header: ImageHeader, z_range: ZRange | None) -> np.ndarray:
    """SimpleITK decodes gzip faster than nibabel; nibabel takes what ITK would misread or refuses.

    ITK misreads float volumes (NaN comes back as 0) and truncated files (zero-filled), and refuses
    sheared affines; nibabel reads the first exactly and raises on the second.
    """
    from amid.tools.profiling import nifti_memory

    if nifti_memory.active() and header.n_channels == 1:
        parsed = nifti_memory.load_header(path)
        if parsed is not None and nifti_memory.fits(parsed):  # inflated once in memory, ISA-L where installed
            return nifti_memory.load_array(path, parsed, z_range)
    import nibabel as nib

    image: Any = nib.load(path)
    integers = np.dtype(header.dtype).kind in "iub"
    if header.n_channels == 1 and integers and _nifti_is_complete(path, image):
        try:
            return readers_itk.itk_array(path, header, z_range)
        except RuntimeError:
            pass  # e.g. a sheared affine, which ITK rejects and nibabel reads
    proxy = image.dataobj
    z_slice = slice(*z_range) if z_range is not None and len(header.shape) == 3 else slice(None)
    array = np.asanyarray(proxy[:, :, z_slice] if len(header.shape) == 3 else proxy[...])
    if header.n_channels > 1:
        array = array.reshape((*array.shape[:3], header.n_channels), order="F")
    return array
