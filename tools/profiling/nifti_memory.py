"""NIfTI files read once: the bytes from disk once, inflated once and only as far as needed.

A case's files are visited several times (header, content hash, voxels); here the compressed bytes
are kept from the first visit, so the hash and the header come from memory, and inflation resumes
where the header left off. gzip is inflated by ISA-L (`isal`, about twice zlib's speed) when it is
installed, else by zlib, straight into the array that is handed out: one allocation per volume, no
growing buffer and no copy (slices before the ones asked for are inflated and dropped). Headers are
parsed by `nifti_header`, without nibabel. Only plain, unscaled 3-D volumes take this path (`fits`);
others stay with nibabel and SimpleITK in `readers`. The path is taken inside `case_files()` only
(a profile worker's case): elsewhere a header is read without the rest of the file.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import numpy as np

from amid.tools.profiling import nifti_header
from amid.tools.profiling.nifti_header import NiftiHeader

OPEN_FILES = 8  # per process: a case's images and label stay open between its steps


class Truncated(ValueError):
    """The file ends before the voxels the header promises."""


@dataclass
class OpenedNifti:
    """One file's compressed bytes, the inflating stream over them and the header read so far."""

    path: str
    signature: tuple[int, int]
    raw: bytes
    gzipped: bool
    stream: Any = None  # a gzip reader over `raw` (multi-member files and zero padding included)
    prefix: bytes = b""  # the inflated bytes read for the header
    parsed: NiftiHeader | None = None
    parsed_done: bool = False
    digest: str | None = None

    def head(self, n_bytes: int) -> bytes:
        """The first `n_bytes` inflated bytes (fewer when the file ends sooner)."""
        if not self.gzipped:
            return self.raw[:n_bytes]
        if len(self.prefix) < n_bytes:
            with suppress(EOFError):  # a truncated stream: what came out before the cut is kept
                self.prefix += self._stream_at(len(self.prefix)).read(n_bytes - len(self.prefix))
        return self.prefix[:n_bytes]

    def header(self) -> NiftiHeader | None:
        """The parsed header, or None when nibabel has to read this file."""
        if not self.parsed_done:
            start = self.head(4)
            found = nifti_header.header_size(start)
            self.parsed = nifti_header.parse(self.head(found[0])) if found else None
            self.parsed_done = True
        return self.parsed

    def voxels(self, start: int, count: int, dtype: np.dtype) -> np.ndarray:
        """`count` values of `dtype` from inflated byte `start` on, as a new native, writable array."""
        native = dtype.newbyteorder("=")
        n_bytes = count * dtype.itemsize
        if not self.gzipped:
            if start + n_bytes > len(self.raw):
                raise Truncated(f"truncated: {len(self.raw)} bytes, the header needs {start + n_bytes}")
            return np.frombuffer(self.raw, dtype=dtype, count=count, offset=start).astype(native)  # a copy
        array = np.empty(count, dtype=native)
        target = array.view(np.uint8).data
        stream, got = self._stream_at(start), 0
        try:
            while got < n_bytes:  # a reader may return fewer bytes than asked before the end
                step = stream.readinto(target[got:])
                if not step:
                    break
                got += step
        except EOFError:
            got = -1
        if got != n_bytes:
            raise Truncated(f"truncated: the header needs {start + n_bytes} inflated bytes, the file holds fewer")
        if not dtype.isnative:
            array.byteswap(inplace=True)
        return array

    def sha256(self) -> str:
        if self.digest is None:
            self.digest = hashlib.sha256(self.raw).hexdigest()
        return self.digest

    def _stream_at(self, position: int) -> Any:
        if self.stream is None:
            self.stream = nifti_header.gzip_reader(self.raw)
        if self.stream.tell() != position:
            self.stream.seek(position)  # forward: inflates and drops; backward: starts over
        return self.stream


_opened: OrderedDict[str, OpenedNifti] = OrderedDict()


def file_signature(path: str) -> tuple[int, int]:
    """Size and modification time: a file read and kept for a case is read again when these change."""
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def opened(path: str) -> OpenedNifti:
    """The file's open state, read from disk on first use (or when it changed since)."""
    signature = file_signature(path)
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
    """Drop a file's state once its voxels are out (the array owns its own memory)."""
    _opened.pop(path, None)


def file_sha256(path: str) -> str | None:
    """sha256 of the file's bytes when it is open here (read once for both); None otherwise."""
    found = _opened.get(path)
    if found is None or found.signature != file_signature(path):
        return None
    return found.sha256()


def load_header(path: str) -> NiftiHeader | None:
    """The file's header, parsed from its inflated first bytes; None when nibabel has to read it."""
    return opened(path).header()


def fits(header: NiftiHeader) -> bool:
    """A plain 3-D volume, unscaled: voxels are the stored values, in slices along the last axis
    (a scaled file keeps the readers' own path and its dtype rules)."""
    return len(header.shape) == 3 and not header.scaled


def load_array(path: str, header: NiftiHeader, z_range: tuple[int, int] | None) -> np.ndarray:
    """Voxels (slices z_range[0]:z_range[1] when given) of a volume that `fits`."""
    nx, ny, nz = header.shape
    low, high = z_range if z_range is not None else (0, nz)
    slab = nx * ny * header.dtype.itemsize
    state = opened(path)
    array = state.voxels(header.offset + low * slab, nx * ny * (high - low), header.dtype)
    forget(path)
    return array.reshape((nx, ny, high - low), order="F")


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
