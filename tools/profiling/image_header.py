"""What every image reader returns: the geometry and storage of one image, read from its header
(tools/profiling/readers.py dispatches by file type to the readers that build it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

ZRange = tuple[int, int]


@dataclass(frozen=True, kw_only=True)
class ImageHeader:
    """Geometry and storage of one image, read from its header.

    A plain dataclass, not a pydantic model: profile workers build and return thousands of these,
    and a worker that imports no pydantic starts a fifth of a second sooner. Sequences are
    normalised on construction (tuples of Python numbers, the affine as nested lists of floats).
    """

    path: str
    file_type: str
    shape: tuple[int, ...]
    n_channels: int = 1
    dtype: str
    spacing: tuple[float, ...]
    spacing_unit: Literal["mm", "pixel"] = "mm"
    affine: list[list[float]] | None = None
    orientation: str | None = None
    is_rgb: bool = False
    is_tiled: bool = False
    n_levels: int = 1
    size_bytes: int = 0
    meta: dict[str, str] = field(default_factory=dict)
    # What the reader found wrong with the file's geometry, as (code, severity, message): a broken
    # DICOM series is still read, and the profile reports these as issues of the case.
    problems: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        set_field = object.__setattr__  # frozen: normalise once, here
        set_field(self, "shape", tuple(int(s) for s in self.shape))
        set_field(self, "spacing", tuple(float(s) for s in self.spacing))
        if self.affine is not None:
            set_field(self, "affine", [[float(v) for v in row] for row in self.affine])

    @property
    def spatial_dims(self) -> int:
        """3 for a volume with more than one slice, else 2."""
        return 3 if len(self.shape) >= 3 and sorted(self.shape)[0] > 1 else 2

    @property
    def n_voxels(self) -> int:
        return int(np.prod(self.shape))


def orientation_code(affine: np.ndarray) -> str:
    from amid.tools.profiling.nifti_header import axis_codes

    return axis_codes(affine)
