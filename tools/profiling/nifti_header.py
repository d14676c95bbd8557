"""NIfTI-1 and NIfTI-2 headers parsed without nibabel: shape, dtype, zooms, scaling, affine, axis codes.

Importing nibabel costs a profile's main process and every worker about half a second; a plain NIfTI
file needs only a few header fields. The values follow nibabel exactly, including the fixes it makes
while loading (qfac other than -1 or 1 read as 1, pixdim 0 read as 1 and negative pixdim as its
magnitude, unknown xform codes read as 0), so a profile reads the same geometry either way; a
conformance test writes files with nibabel and compares. Anything this module does not cover
(a pair header, an unknown or compound datatype, an offset inside the header, FreeSurfer's large
vector shapes, a scaled file with a non-finite intercept, a non-finite pixdim) parses to None,
and the caller asks nibabel.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

gzip_module: Any
inflate_module: Any
try:
    from isal import igzip as gzip_module  # ISA-L: about twice zlib's inflate speed
    from isal import isal_zlib as inflate_module
except ImportError:  # pragma: no cover - isal is a dependency; the standard library is the fallback
    import gzip as gzip_module
    import zlib as inflate_module
# ISA-L's C reader of gzip bytes held in memory (what its GzipFile wraps): read straight, without
# GzipFile's buffered and file-object layers, it inflates about a quarter faster. Not public, so
# looked up, with GzipFile (the same reader, wrapped) where it is missing.
MEMORY_READER: Any = getattr(inflate_module, "_GzipReader", None)

NIFTI1_SIZE, NIFTI2_SIZE = 348, 540
HEADER_SIZES = (NIFTI1_SIZE, NIFTI2_SIZE)
# The fields read, at their offsets in each format (big- or little-endian applied on parsing).
_FIELDS = {
    NIFTI1_SIZE: {
        "dim": (40, "i2", 8),
        "datatype": (70, "i2", 1),
        "pixdim": (76, "f4", 8),
        "vox_offset": (108, "f4", 1),
        "scl_slope": (112, "f4", 1),
        "scl_inter": (116, "f4", 1),
        "glmin": (144, "i4", 1),
        "qform_code": (252, "i2", 1),
        "sform_code": (254, "i2", 1),
        "quatern": (256, "f4", 3),
        "qoffset": (268, "f4", 3),
        "srow": (280, "f4", 12),
        "magic": (344, "S4", 1),
    },
    NIFTI2_SIZE: {
        "magic": (4, "S4", 1),
        "eol_check": (8, "u1", 4),
        "datatype": (12, "i2", 1),
        "dim": (16, "i8", 8),
        "pixdim": (104, "f8", 8),
        "vox_offset": (168, "i8", 1),
        "scl_slope": (176, "f8", 1),
        "scl_inter": (184, "f8", 1),
        "qform_code": (344, "i4", 1),
        "sform_code": (348, "i4", 1),
        "quatern": (352, "f8", 3),
        "qoffset": (376, "f8", 3),
        "srow": (400, "f8", 12),
    },
}
SINGLE_FILE_MAGIC = {NIFTI1_SIZE: b"n+1", NIFTI2_SIZE: b"n+2"}
# NIfTI datatype codes of plain numeric voxels (complex, RGB and 128-bit types go to nibabel).
DTYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4", 1024: "i8", 1280: "u8"}
XFORM_CODES = range(6)  # unknown, scanner, aligned, talairach, mni, template
EOL_CHECK = (13, 10, 26, 10)
# A unit quaternion's w is taken as 0 below this (nibabel: three float32 or float64 epsilons).
QUATERNION_THRESHOLD = {NIFTI1_SIZE: 3 * float(np.finfo(np.float32).eps), NIFTI2_SIZE: 3 * float(np.finfo(float).eps)}
AXIS_LETTERS = (("L", "R"), ("P", "A"), ("I", "S"))


def _dtype(size: int, order: str) -> np.dtype:
    fields = _FIELDS[size]
    return np.dtype(
        {
            "names": list(fields),
            "offsets": [offset for offset, _, _ in fields.values()],
            "formats": [
                (f"{order}{kind}", (count,)) if count > 1 else f"{order}{kind}" for _, kind, count in fields.values()
            ],
            "itemsize": size,
        }
    )


_STRUCTS = {(size, order): _dtype(size, order) for size in HEADER_SIZES for order in "<>"}


@dataclass(frozen=True)
class NiftiHeader:
    """What a profile needs from one NIfTI header, as nibabel would report it."""

    shape: tuple[int, ...]
    dtype: np.dtype  # in the file's byte order
    zooms: tuple[float, ...]
    offset: int  # of the first voxel byte
    slope: float  # 1.0 and 0.0 when the file is unscaled
    inter: float
    affine: np.ndarray  # 4 x 4, float64

    @property
    def scaled(self) -> bool:
        return (self.slope, self.inter) != (1.0, 0.0)

    @property
    def n_voxels(self) -> int:
        return int(np.prod(self.shape))


def header_size(start: bytes) -> tuple[int, str] | None:
    """Header size and byte order ('<' or '>') from the first four bytes, or None if not NIfTI."""
    if len(start) < 4:
        return None
    little, big = int.from_bytes(start[:4], "little"), int.from_bytes(start[:4], "big")
    if little in HEADER_SIZES:
        return little, "<"
    return (big, ">") if big in HEADER_SIZES else None


def parse(block: bytes) -> NiftiHeader | None:
    """The header at the start of `block` (at least its 348 or 540 bytes), or None (ask nibabel)."""
    found = header_size(block)
    if found is None or len(block) < found[0]:
        return None
    size, order = found
    fields = np.frombuffer(block, dtype=_STRUCTS[size, order], count=1)[0]
    if bytes(fields["magic"]) != SINGLE_FILE_MAGIC[size]:
        return None
    if size == NIFTI2_SIZE and tuple(fields["eol_check"]) not in (EOL_CHECK, (0, 0, 0, 0)):
        return None
    kind = DTYPES.get(int(fields["datatype"]))
    dim = [int(d) for d in fields["dim"]]
    ndim = dim[0]
    offset = fields["vox_offset"]
    if kind is None or not 1 <= ndim <= 7 or not np.isfinite(offset) or int(offset) < size + 4:
        return None
    shape = tuple(dim[1 : ndim + 1])
    if min(shape) < 1 or shape[:3] in ((27307, 1, 6),):  # FreeSurfer's ico7 surface shape
        return None
    pixdim = fields["pixdim"].copy()
    if not np.all(np.isfinite(pixdim[1 : max(ndim, 3) + 1])):
        return None
    spatial = pixdim[1:4]
    pixdim[1:4] = np.where(spatial == 0, 1, np.abs(spatial))  # nibabel's fixes on loading
    scaling = _scaling(float(fields["scl_slope"]), float(fields["scl_inter"]))
    affine = _best_affine(fields, size, shape, pixdim)
    if scaling is None or affine is None:
        return None
    return NiftiHeader(
        shape=shape,
        dtype=np.dtype(order + kind),
        zooms=tuple(float(z) for z in pixdim[1 : ndim + 1]),
        offset=int(offset),
        slope=scaling[0],
        inter=scaling[1],
        affine=affine,
    )


def _scaling(slope: float, inter: float) -> tuple[float, float] | None:
    """nibabel's rule: a zero or non-finite slope means unscaled; a valid slope needs a finite intercept."""
    if slope == 0 or not np.isfinite(slope):
        return 1.0, 0.0
    return (slope, inter) if np.isfinite(inter) else None


def _code(value: int) -> int:
    return value if value in XFORM_CODES else 0


def _best_affine(fields: np.void, size: int, shape: tuple[int, ...], pixdim: np.ndarray) -> np.ndarray | None:
    """sform when its code is set, else qform when its code is set, else the pixdim-only affine
    (None: a qform quaternion too long to be a rotation, which nibabel refuses)."""
    affine = np.eye(4)
    if _code(int(fields["sform_code"])):
        affine[:3, :] = np.asarray(fields["srow"], dtype=np.float64).reshape(3, 4)
        return affine
    if _code(int(fields["qform_code"])):
        qfac = pixdim[0] if pixdim[0] in (-1, 1) else 1
        voxel = pixdim[1:4].copy()
        voxel[2] *= qfac
        rotation = _rotation(fields["quatern"], QUATERNION_THRESHOLD[size])
        if rotation is None:
            return None
        affine[:3, :3] = rotation * voxel
        affine[:3, 3] = fields["qoffset"]
        return affine
    # no transform: voxel sizes along the axes, x flipped, the origin at the volume's centre
    extent = np.ones(3)
    steps = np.ones(3)
    used = min(len(shape), 3)
    extent[:used] = shape[:used]
    steps[:used] = pixdim[1 : used + 1]
    steps[0] = -steps[0]
    affine[:3, :3] = np.diag(steps)
    affine[:3, 3] = -(extent - 1) / 2.0 * steps
    return affine


def _rotation(bcd: np.ndarray, threshold: float) -> np.ndarray | None:
    """The rotation of the unit quaternion (a, b, c, d), a >= 0 completed from b, c, d (extended precision)."""
    b, c, d = (np.longdouble(v) for v in bcd)
    a_squared = 1 - (b * b + c * c + d * d)
    if abs(a_squared) < threshold:
        a = np.longdouble(0)
    elif a_squared < 0:
        return None
    else:
        a = np.sqrt(a_squared)
    norm = a * a + b * b + c * c + d * d
    if norm < np.finfo(float).eps:
        return np.eye(3)
    bs, cs, ds = (v * (2 / norm) for v in (b, c, d))
    return np.array(
        [
            [1 - (c * cs + d * ds), b * cs - a * ds, b * ds + a * cs],
            [b * cs + a * ds, 1 - (b * bs + d * ds), c * ds - a * bs],
            [b * ds - a * cs, c * ds + a * bs, 1 - (b * bs + c * cs)],
        ],
        dtype=np.longdouble,
    )


def axis_codes(affine: np.ndarray) -> str:
    """The RAS+ letters of the voxel axes (e.g. "LAS"), as nibabel's aff2axcodes names them.

    The direction part of the affine is made orthogonal (the closest rotation, through the SVD), then
    each voxel axis takes the world axis it moves along most, the axis with the largest component
    first (ties in axis order), each world axis once; a degenerate axis is "None".
    """
    linear = np.asarray(affine, dtype=np.float64)[:3, :3]
    plain = _permutation_codes(linear.tolist())
    if plain is not None:
        return plain
    lengths = np.sqrt(np.sum(linear * linear, axis=0))
    lengths[lengths == 0] = 1
    directions = linear / lengths
    left, singular, right = np.linalg.svd(directions)
    rank = singular > singular.max() * 3 * np.finfo(singular.dtype).eps
    rotation = left[:, rank] @ right[rank]
    codes = ["None"] * 3
    for axis in np.argsort(np.min(-(rotation**2), axis=0), kind="stable"):  # most decided axis first
        column = rotation[:, axis]
        if np.allclose(column, 0):
            continue
        world = int(np.argmax(np.abs(column)))
        codes[axis] = AXIS_LETTERS[world][1 if column[world] > 0 else 0]
        rotation[world, :] = 0
    return "".join(codes)


def gzip_reader(raw: bytes) -> Any:
    """The inflated stream of gzip bytes in memory, multi-member and zero-padded files included:
    read, readinto, seek (forward inflates and drops) and tell; EOFError where the stream is cut."""
    if MEMORY_READER is not None:
        return MEMORY_READER(raw)
    return gzip_module.GzipFile(fileobj=io.BytesIO(raw))


def read_prefix(path: str, n_bytes: int = NIFTI2_SIZE + 4) -> bytes:
    """The first inflated bytes of a file (.nii or .nii.gz), without reading the rest."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
        handle.seek(0)
        if magic != b"\x1f\x8b":
            return handle.read(n_bytes)
        with gzip_module.GzipFile(fileobj=handle) as stream:
            return stream.read(n_bytes)


def read(path: str) -> NiftiHeader | None:
    """The header of a NIfTI file on disk, or None when nibabel has to read it."""
    return parse(read_prefix(path))


def _permutation_codes(linear: list[list[float]]) -> str | None:
    """The codes of a direction matrix that is a scaled, signed permutation (one finite non-zero per
    column, each in its own row), as nearly every scan's is; None for any other.

    Such a matrix is its own closest rotation up to its signs, so `axis_codes`' SVD would find each
    axis along its non-zero row: read here directly, about 100 times faster (the SVD and its checks
    took half a millisecond per file, a tenth of a CT case's work).
    """
    codes, rows = [], set()
    for axis in range(3):
        column = [linear[world][axis] for world in range(3)]
        if not all(math.isfinite(v) for v in column):
            return None
        worlds = [world for world, value in enumerate(column) if value != 0]
        if len(worlds) != 1 or worlds[0] in rows:
            return None
        world = worlds[0]
        rows.add(world)
        codes.append(AXIS_LETTERS[world][1 if column[world] > 0 else 0])
    return "".join(codes)
