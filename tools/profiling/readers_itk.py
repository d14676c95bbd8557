"""ITK-read formats: NRRD, MetaImage, single DICOM files and DICOM series folders (SimpleITK).

Geometry comes from ReadImageInformation, without voxels. ITK's world is LPS+; affines here are turned
to RAS+ so that orientation codes mean the same as nibabel's. Called through `readers.read_header` and
`readers.read_array`, which translate failures into DataUnreadable.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from amid.tools.profiling.dicom_series import choose_series, series_problems, slice_geometry
from amid.tools.profiling.image_header import ImageHeader, ZRange, orientation_code

DICOM_TAGS = {"0008|0060": "modality", "0008|0070": "manufacturer"}


def _itk_affine(direction: tuple[float, ...], spacing: tuple[float, ...], origin: tuple[float, ...]) -> np.ndarray:
    """Voxel -> RAS+ affine from ITK's LPS geometry (padded to 3-D for 2-D images)."""
    dim = len(spacing)
    rotation = np.eye(3)
    rotation[:dim, :dim] = np.asarray(direction, dtype=float).reshape(dim, dim)
    scaled = rotation @ np.diag([*spacing, *([1.0] * (3 - dim))])
    affine = np.eye(4)
    affine[:3, :3] = scaled
    affine[:dim, 3] = origin
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ affine  # ITK's world is LPS+; flip x and y to RAS+


def _itk_pixel_dtype(pixel_id: int) -> str:
    import SimpleITK as sitk

    text = sitk.GetPixelIDValueAsString(pixel_id).replace("vector of ", "")
    names = {
        "8-bit unsigned integer": "uint8",
        "8-bit signed integer": "int8",
        "16-bit unsigned integer": "uint16",
        "16-bit signed integer": "int16",
        "32-bit unsigned integer": "uint32",
        "32-bit signed integer": "int32",
        "64-bit unsigned integer": "uint64",
        "64-bit signed integer": "int64",
        "32-bit float": "float32",
        "64-bit float": "float64",
    }
    return names.get(text, text)


def itk_header(path: str, kind: str) -> ImageHeader:
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(path)
    reader.ReadImageInformation()
    size = tuple(int(s) for s in reader.GetSize())
    spacing = tuple(float(s) for s in reader.GetSpacing())
    spatial = min(len(size), 3)
    affine = (
        _itk_affine(reader.GetDirection(), spacing[:spatial], reader.GetOrigin()[:spatial])
        if len(size) <= 3
        else np.eye(4)
    )
    meta = {name: reader.GetMetaData(tag).strip() for tag, name in DICOM_TAGS.items() if reader.HasMetaDataKey(tag)}
    extra_channels = int(np.prod(size[3:])) if len(size) > 3 else 1
    return ImageHeader(
        path=path,
        file_type=kind,
        shape=size[:spatial],
        n_channels=reader.GetNumberOfComponents() * extra_channels,
        dtype=_itk_pixel_dtype(reader.GetPixelID()),
        spacing=spacing[:spatial],
        affine=affine.tolist(),
        orientation=orientation_code(affine),
        is_rgb=reader.GetNumberOfComponents() in (3, 4),
        size_bytes=os.path.getsize(path),
        meta=meta,
    )


def dicom_series_header(directory: str) -> ImageHeader:
    """The folder's largest series as one volume: the first slice's header, as many slices as files,
    the median gap as slice spacing; several series, mixed orientations and uneven gaps are kept
    as `problems`. A single (possibly multi-frame) file is that file's own header."""
    choice = choose_series(directory)
    files = choice.files
    first = itk_header(files[0], "dicom")
    geometry = slice_geometry(files) if len(files) > 1 else None
    problems = series_problems(choice, geometry)
    size_bytes = sum(os.path.getsize(f) for f in files)
    if len(files) == 1:
        return replace(first, path=directory, file_type="dicom_series", size_bytes=size_bytes, problems=problems)
    spacing = [*first.spacing[:2], (geometry.slice_spacing if geometry else None) or 1.0]
    affine = np.asarray(first.affine)
    affine[:3, 2] = affine[:3, 2] / np.linalg.norm(affine[:3, 2]) * spacing[2]
    return replace(
        first,
        path=directory,
        file_type="dicom_series",
        shape=(*first.shape[:2], len(files)),
        spacing=tuple(spacing),
        affine=affine.tolist(),
        size_bytes=size_bytes,
        problems=problems,
    )


def _itk_to_index_order(array: np.ndarray, header: ImageHeader) -> np.ndarray:
    """SimpleITK arrays are (k, j, i[, c]); reverse the spatial axes, keep channels last."""
    spatial = array.ndim - (1 if header.n_channels > 1 else 0)
    order = [*reversed(range(spatial)), *range(spatial, array.ndim)]
    return array.transpose(order)


def itk_array(path: str, header: ImageHeader, z_range: ZRange | None) -> np.ndarray:
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(path)
    if z_range is not None and len(header.shape) == 3:
        # ITK streams the compressed file and stops after the last requested slice.
        reader.ReadImageInformation()
        reader.SetExtractIndex((0, 0, z_range[0]))
        reader.SetExtractSize((header.shape[0], header.shape[1], z_range[1] - z_range[0]))
    return _itk_to_index_order(sitk.GetArrayFromImage(reader.Execute()), header)


def dicom_series_array(directory: str, header: ImageHeader, z_range: ZRange | None) -> np.ndarray:
    """Voxels of the series `dicom_series_header` describes (the same largest series, never a mix)."""
    import SimpleITK as sitk

    files = choose_series(directory).files
    if len(files) == 1:
        return itk_array(files[0], replace(header, path=files[0]), z_range)
    chosen = files[slice(*z_range)] if z_range is not None else files
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(chosen)
    shown = sitk.ProcessObject.GetGlobalWarningDisplay()
    sitk.ProcessObject.SetGlobalWarningDisplay(False)  # uneven slices are a profile issue, not stderr noise
    try:
        return _itk_to_index_order(sitk.GetArrayFromImage(reader.Execute()), header)
    finally:
        sitk.ProcessObject.SetGlobalWarningDisplay(shown)
