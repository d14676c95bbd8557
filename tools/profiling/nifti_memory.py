"""NIfTI files read once: the bytes from disk once, inflated once and only as far as needed.

A case's files are visited several times (header, content hash, voxels); here the compressed bytes
are kept from the first visit, so the hash and the header come from memory, and inflation resumes
where the header left off. gzip is inflated by ISA-L (`isal`, about twice zlib's speed) when it is
installed, else by zlib. Voxels come from the inflated bytes without a copy. Only plain, unscaled
3-D volumes take this path (`fits`); others stay with nibabel and SimpleITK in `readers`. The path
is taken inside `case_files()` only (a profile worker's case): elsewhere a header is read without
the rest of the file.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    from isal import isal_zlib as inflate_module
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    import zlib as inflate_module  # type: ignore[no-redef]

GZIP_WBITS = 31  # a gzip member: header and trailer checked by the inflater
CHUNK = 1 << 20  # compressed bytes fed per step while inflating a prefix
OPEN_FILES = 8  # per process: a case's images and label stay open between its steps
HEADER_CLASSES = {348: "Nifti1", 540: "Nifti2"}


@dataclass
class OpenedNifti:
    """One file's compressed bytes and the inflated prefix read so far."""

    path: str
    signature: tuple[int, int]
    raw: bytes
    gzipped: bool
    data: bytearray = field(default_factory=bytearray)
    consumed: int = 0  # offset in `raw` of the next compressed byte to inflate
    inflater: Any = None
    finished: bool = False
    digest: str | None = None

    def ensure(self, n_bytes: int) -> bytes | bytearray:
        """The first `n_bytes` inflated bytes (fewer when the file ends sooner)."""
        if not self.gzipped:
            return self.raw
        while len(self.data) < n_bytes and not self.finished:
            self._inflate_step()
        return self.data

    def sha256(self) -> str:
        if self.digest is None:
            self.digest = hashlib.sha256(self.raw).hexdigest()
        return self.digest

    def _inflate_step(self) -> None:
        if self.inflater is None:
            self.inflater = inflate_module.decompressobj(wbits=GZIP_WBITS)
        chunk = self.raw[self.consumed : self.consumed + CHUNK]
        self.consumed += len(chunk)
        out = self.inflater.decompress(chunk)
        try:
            self.data.extend(out)
        except BufferError:  # an array handed out views the old buffer: grow a copy instead
            self.data = bytearray(self.data) + out
        if self.inflater.eof:  # a gzip member ended; another may follow (multi-member files)
            self.consumed -= len(self.inflater.unused_data)
            self.inflater = None
            self.finished = not self.raw[self.consumed :].strip(b"\x00")
        elif self.consumed >= len(self.raw):
            self.finished = True  # truncated stream: what was inflated is all there is


_opened: OrderedDict[str, OpenedNifti] = OrderedDict()


def _signature(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def opened(path: str) -> OpenedNifti:
    """The file's open state, read from disk on first use (or when it changed since)."""
    signature = _signature(path)
    found = _opened.get(path)
    if found is not None and found.signature == signature:
        _opened.move_to_end(path)
        return found
    with open(path, "rb") as handle:
        raw = handle.read()
    found = OpenedNifti(path, signature, raw, gzipped=raw[:2] == b"\x1f\x8b")
    _opened[path] = found
    while len(_opened) > OPEN_FILES:
        _opened.popitem(last=False)
    return found


def forget(path: str) -> None:
    """Drop a file's state once its voxels are out (the array keeps its own bytes)."""
    _opened.pop(path, None)


def file_sha256(path: str) -> str | None:
    """sha256 of the file's bytes when it is open here (read once for both); None otherwise."""
    found = _opened.get(path)
    if found is None or found.signature != _signature(path):
        return None
    return found.sha256()


def load_header(path: str) -> Any:
    """A nibabel image over the inflated header (and extensions); its voxels are not read."""
    import nibabel as nib

    state = opened(path)
    start = bytes(state.ensure(4)[:4])
    size = int.from_bytes(start, "little")
    size = size if size in HEADER_CLASSES else int.from_bytes(start, "big")
    if size not in HEADER_CLASSES:
        raise ValueError("not a NIfTI-1 or NIfTI-2 header")
    header_class = getattr(nib, f"{HEADER_CLASSES[size]}Header")
    image_class = getattr(nib, f"{HEADER_CLASSES[size]}Image")
    offset = int(header_class(binaryblock=bytes(state.ensure(size)[:size]), check=False).get_data_offset())
    prefix = bytes(state.ensure(max(offset, size + 4))[: max(offset, size + 4)])
    return image_class.from_bytes(prefix)


def fits(image: Any) -> bool:
    """A plain 3-D volume, unscaled: voxels are the stored values, in slices along the last axis
    (a scaled file keeps the readers' own path and its dtype rules)."""
    return len(image.shape) == 3 and (float(image.dataobj.slope), float(image.dataobj.inter)) == (1.0, 0.0)


def load_array(path: str, image: Any, z_range: tuple[int, int] | None) -> np.ndarray:
    """Voxels (slices z_range[0]:z_range[1] when given) of a volume that `fits`."""

    header = image.header
    dtype = header.get_data_dtype()
    nx, ny, nz = (int(s) for s in image.shape)
    low, high = z_range if z_range is not None else (0, nz)
    offset = int(image.dataobj.offset)  # as read from the file (the image's header copy says 0)
    slab = nx * ny * dtype.itemsize
    needed = offset + high * slab
    state = opened(path)
    data = state.ensure(needed)
    if len(data) < needed:
        raise ValueError(f"truncated: {len(data)} voxel bytes, the header needs {needed}")
    forget(path)
    array = np.frombuffer(data, dtype=dtype, count=nx * ny * (high - low), offset=offset + low * slab)
    array = array.reshape((nx, ny, high - low), order="F")
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


_active = False


def active() -> bool:
    return _active


@contextmanager
def case_files() -> Iterator[None]:
    """Within: NIfTI files are read once and kept open between steps; on leaving, all are closed."""
    global _active
    _active = True
    try:
        yield
    finally:
        _active = False
        _opened.clear()
