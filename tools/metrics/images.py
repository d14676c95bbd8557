"""Reading prediction and reference images with their geometry (frozen files carry no extension,
so the contract's file ending says how to decode them)."""

from __future__ import annotations

import gzip
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from amid.server.errors import DataUnreadable


@dataclass(frozen=True)
class Volume:
    array: np.ndarray
    spacing: tuple[float, ...]  # mm per array axis
    affine: np.ndarray | None  # voxel → world (NIfTI); None for plain image files


def is_nifti(ending: str) -> bool:
    return ".nii" in ending


def read_volume(path: Path, ending: str) -> Volume:
    """Decode an image file as `ending` (.nii.gz, .nii, .png, .tif…); DataUnreadable if it is not one."""
    data = path.read_bytes()
    try:
        return _nifti(data, ending) if is_nifti(ending) else _plain(data, ending)
    except DataUnreadable:
        raise
    except Exception as exc:
        raise DataUnreadable(f"not a readable {ending} file ({type(exc).__name__}: {exc})") from None


def _nifti(data: bytes, ending: str) -> Volume:
    import nibabel as nib

    compressed = data[:2] == b"\x1f\x8b"
    if ending.endswith(".gz") != compressed:
        raise DataUnreadable(f"the bytes are {'gzip' if compressed else 'not gzip'}-compressed, unlike {ending}")
    raw = gzip.decompress(data) if compressed else data
    try:
        image = nib.Nifti1Image.from_bytes(raw)
    except Exception:
        image = nib.Nifti2Image.from_bytes(raw)
    array = np.asanyarray(image.dataobj)
    zooms = tuple(float(z) for z in image.header.get_zooms()[: array.ndim])
    return Volume(array, zooms, np.asarray(image.affine, dtype=np.float64))


ITK_ENDINGS = (".mha", ".mhd", ".nrrd", ".nhdr")


def _itk(data: bytes, ending: str) -> Volume:
    """MHA / NRRD through SimpleITK, with the file's real spacing (array axes z, y, x)."""
    import tempfile

    import SimpleITK as sitk

    with tempfile.NamedTemporaryFile(suffix=ending) as handle:
        handle.write(data)
        handle.flush()
        image = sitk.ReadImage(handle.name)
    array = sitk.GetArrayFromImage(image)
    spacing = tuple(float(s) for s in reversed(image.GetSpacing()))
    return Volume(array, spacing[-array.ndim :] if array.ndim <= len(spacing) else spacing, None)


def _plain(data: bytes, ending: str) -> Volume:
    if ending.lower().endswith(ITK_ENDINGS):
        return _itk(data, ending)
    if ending.lower().endswith((".tif", ".tiff")):
        import tifffile

        array = np.asarray(tifffile.imread(io.BytesIO(data)))
    else:
        import imageio.v3 as iio

        array = np.asarray(iio.imread(data, extension=ending))
    return Volume(array, (1.0,) * array.ndim, None)


def read_reference(path: Path, ending: str) -> Volume:
    """A file the server owns (task/ or private/), read like a prediction."""
    return read_volume(path, ending)


def value_hash(array: np.ndarray) -> str:
    """sha256 of the decoded values and shape: equal for re-encoded copies of one prediction."""
    values = np.ascontiguousarray(array)
    if values.dtype.kind in "uib" or (values.dtype.kind == "f" and np.all(np.mod(values, 1) == 0)):
        values = values.astype(np.int64)
    else:
        values = values.astype(np.float64)
    digest = hashlib.sha256(str(values.shape).encode())
    digest.update(values.tobytes())
    return digest.hexdigest()
