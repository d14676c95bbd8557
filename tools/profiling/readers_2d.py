"""Readers for natural images (PNG, JPEG, BMP through Pillow) and TIFF, including large pyramidal tiles.

2-D arrays keep numpy order (rows, columns[, channels]); TIFF stacks (z, y, x) are turned to index
order (x, y, z), as ITK reads them, so that slices always run along the last spatial axis. Called
through `readers.read_header` and `readers.read_array`, which translate failures into DataUnreadable.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from amid.server.errors import DataUnreadable
from amid.tools.profiling.image_header import ImageHeader
from amid.tools.profiling.nifti_memory import file_signature

# Largest pixel count decoded at once (about 200 MB as RGB); larger TIFFs are read from the largest
# pyramid level under it, so one whole-slide image cannot exhaust a worker's memory.
MAX_DECODED_PIXELS = 64_000_000
PIL_CHANNELS = {"1": 1, "L": 1, "P": 1, "I": 1, "F": 1, "I;16": 1, "LA": 2, "RGB": 3, "YCbCr": 3, "RGBA": 4}
PIL_DTYPES = {"1": "bool", "I": "int32", "F": "float32", "I;16": "uint16"}
CHANNEL_AXES = "CS"
MM_PER_UNIT = {2: 25.4, 3: 10.0}  # TIFF ResolutionUnit: 2 inch, 3 centimetre


class ImageTooLarge(DataUnreadable):
    """The image exceeds MAX_DECODED_PIXELS and offers no smaller pyramid level."""


@dataclass
class _OpenedImage:
    """A natural image within a case: its file's bytes and Pillow's image over them, not yet decoded."""

    signature: tuple[int, int]
    raw: bytes
    image: Any
    digest: str | None = None


# Within a profile worker's case (`case_images`), a natural image's file is read from disk once: its
# bytes give the header, the content hash and the pixels, and the image Pillow opened for the header
# decodes the pixels (opening it again would parse its chunks again: about a tenth of a millisecond
# per file, and the hash another read of the file).
_case_images: dict[str, _OpenedImage] = {}
_active = False


@contextmanager
def case_images() -> Iterator[None]:
    """Within: natural images stay open between a case's steps; on leaving, all are closed."""
    global _active
    _active = True
    try:
        yield
    finally:
        _active = False
        for opened in _case_images.values():
            opened.image.close()
        _case_images.clear()


def _opened(path: str) -> _OpenedImage:
    """The case's open image of `path`, read and opened on first use (or when the file changed)."""
    from PIL import Image

    signature = file_signature(path)
    found = _case_images.get(path)
    if found is None or found.signature != signature:
        with open(path, "rb") as handle:
            raw = handle.read()
        found = _OpenedImage(signature, raw, Image.open(io.BytesIO(raw)))  # lazy: the header only
        _case_images[path] = found
    return found


def file_sha256(path: str) -> str | None:
    """sha256 of the file's bytes when it is open in this case (read once for both); None otherwise."""
    found = _case_images.get(path)
    if found is None or found.signature != file_signature(path):
        return None
    if found.digest is None:
        found.digest = hashlib.sha256(found.raw).hexdigest()
    return found.digest


def natural_header(path: str, kind: str) -> ImageHeader:
    from PIL import Image

    if _active:
        opened = _opened(path)
        return _natural_header(path, kind, opened.image, opened.signature[0])
    with Image.open(path) as image:  # lazy: only the header is parsed
        return _natural_header(path, kind, image, os.path.getsize(path))


def _natural_header(path: str, kind: str, image: Any, size_bytes: int) -> ImageHeader:
    width, height = image.size
    mode = image.mode
    return ImageHeader(
        path=path,
        file_type=kind,
        shape=(height, width),
        n_channels=PIL_CHANNELS.get(mode, 3),
        dtype=PIL_DTYPES.get(mode, "uint8"),
        spacing=(1.0, 1.0),
        spacing_unit="pixel",
        is_rgb=mode in ("RGB", "RGBA", "YCbCr"),
        size_bytes=size_bytes,
        meta={"mode": mode},
    )


def natural_array(path: str) -> np.ndarray:
    from PIL import Image

    found = _case_images.get(path) if _active else None
    if found is not None and found.signature == file_signature(path):
        del _case_images[path]  # decoded once: the pixels are the caller's now, the hash was taken
        with found.image as image:
            return _pixels(image)
    with Image.open(path) as image:
        return _pixels(image)


def _pixels(image: Any) -> np.ndarray:
    return np.asarray(image.convert("RGB") if image.mode == "YCbCr" else image)


def _tiff_spacing(page: Any, n_spatial: int) -> tuple[tuple[float, ...], str]:
    """Millimetres per pixel from the resolution tags, or 1 pixel when they say nothing."""
    tags = page.tags
    unit = tags["ResolutionUnit"].value if "ResolutionUnit" in tags else 1
    if n_spatial != 2 or int(unit) not in MM_PER_UNIT or "XResolution" not in tags:
        return (1.0,) * n_spatial, "pixel"
    per_unit = [tags[name].value for name in ("YResolution", "XResolution")]
    pixels = [num / den if den else 0.0 for num, den in per_unit]
    if min(pixels) <= 0:
        return (1.0,) * n_spatial, "pixel"
    return tuple(MM_PER_UNIT[int(unit)] / p for p in pixels), "mm"


def _axis_roles(axes: str, shape: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """Indices of the spatial axes (the last three non-channel axes longer than 1) and of the rest."""
    candidates = [i for i, axis in enumerate(axes) if axis not in CHANNEL_AXES]
    spatial = [i for i in candidates if shape[i] > 1] or candidates[-2:]
    spatial = spatial[-3:]
    return spatial, [i for i in range(len(shape)) if i not in spatial]


def _split_axes(axes: str, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Spatial shape and channel count (every non-spatial axis folds into channels)."""
    spatial, other = _axis_roles(axes, shape)
    return tuple(shape[i] for i in spatial), int(np.prod([shape[i] for i in other]))


def tiff_header(path: str) -> ImageHeader:
    import tifffile

    with tifffile.TiffFile(path) as tif:
        series = tif.series[0]
        page = tif.pages[0]
        shape, channels = _split_axes(series.axes, tuple(series.shape))
        spacing, unit = _tiff_spacing(page, len(shape))
        return ImageHeader(
            path=path,
            file_type="tiff",
            shape=shape[::-1] if len(shape) == 3 else shape,
            n_channels=channels,
            dtype=np.dtype(series.dtype).name,
            spacing=spacing,
            spacing_unit="mm" if unit == "mm" else "pixel",
            is_rgb="S" in series.axes and channels in (3, 4),
            is_tiled=bool(getattr(page, "is_tiled", False)),
            n_levels=len(series.levels),
            size_bytes=os.path.getsize(path),
            meta={"axes": series.axes},
        )


def _readable_level(levels: list[Any], path: str) -> int:
    for index, level in enumerate(levels):
        shape, _ = _split_axes(level.axes, tuple(level.shape))
        if int(np.prod(shape)) <= MAX_DECODED_PIXELS:
            return index
    pixels = int(np.prod(_split_axes(levels[0].axes, tuple(levels[0].shape))[0]))
    raise ImageTooLarge(
        f"{os.path.basename(path)}: {pixels} pixels exceed {MAX_DECODED_PIXELS} and no smaller pyramid level exists"
    )


def tiff_array(path: str, header: ImageHeader) -> tuple[np.ndarray, ImageHeader]:
    """Pixels of the largest pyramid level that fits; the header returned describes that level."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        levels = list(tif.series[0].levels)
        index = _readable_level(levels, path)
        level = levels[index]
        array = level.asarray()
        axes = level.axes
    shape, channels = _split_axes(axes, array.shape)
    spatial_axes, other_axes = _axis_roles(axes, array.shape)
    array = array.transpose([*spatial_axes, *other_axes])
    array = array.reshape((*shape, channels) if channels > 1 else shape)
    if len(shape) == 3:
        array = np.swapaxes(array, 0, 2)
        shape = shape[::-1]
    if index == 0:
        return array, header
    factor = header.shape[-1] / shape[-1]
    spacing = tuple(s * factor for s in header.spacing)
    return array, replace(header, shape=shape, spacing=spacing, meta={"level": str(index)})
