"""Small result types shared by every profile section: summary statistics, issues, predicates, case rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["error", "warning", "info"]
EvidenceValue = float | int | str

# Lists inside a section are cut to this many entries (with the full count beside them) so that the
# compact profile stays within a tool reply whatever the dataset size.
MAX_LISTED = 20


class Stats(BaseModel):
    """Distribution of one per-case value over the cases that have it."""

    model_config = ConfigDict(frozen=True)

    n: int
    min: float
    p10: float
    median: float
    p90: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Stats | None:
        """Summarise finite values; None when there are none."""
        array = np.asarray([v for v in values if v is not None], dtype=np.float64)
        array = array[np.isfinite(array)]
        if array.size == 0:
            return None
        p10, median, p90 = np.percentile(array, [10, 50, 90])
        return cls(
            n=int(array.size),
            min=float(array.min()),
            p10=float(p10),
            median=float(median),
            p90=float(p90),
            max=float(array.max()),
            mean=float(array.mean()),
        )


class ChannelStats(BaseModel):
    """Intensity statistics of one channel, the fields nnU-Net's fingerprint records."""

    model_config = ConfigDict(frozen=True)

    channel: int
    name: str | None = None
    n_samples: int
    n_cases: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    percentile_00_5: float
    percentile_99_5: float


class ProfileIssue(BaseModel):
    """A problem found in the data, named by a stable code and the file that shows it."""

    model_config = ConfigDict(frozen=True)

    code: str = Field(description="Stable code, e.g. corrupt_file, geometry_mismatch, duplicate_case.")
    severity: Severity
    case_id: str | None = None
    path: str | None = None
    message: str


class Predicate(BaseModel):
    """A planning fact (docs/ARCHITECTURE.md §8) and the profile values that decided it."""

    model_config = ConfigDict(frozen=True)

    name: str
    value: bool
    evidence: dict[str, EvidenceValue]


class CaseRecord(BaseModel):
    """One row of the per-case table (`cases.parquet`)."""

    case_id: str
    split: str
    group: str | None = None
    fold: int | None = None
    file_type: str | None = None
    n_channels: int | None = None
    shape: list[int] = Field(default_factory=list)
    spacing: list[float] = Field(default_factory=list)
    orientation: str | None = None
    dtype: str | None = None
    size_bytes: int = 0
    content_hash: str | None = None
    has_label: bool = False
    foreground_ratio: float | None = None
    n_components: int | None = None
    n_instances: int | None = None
    n_boxes: int | None = None
    class_label: str | None = None
    intensity_mean: float | None = None
    intensity_std: float | None = None
    pair_correlation: float | None = None
    n_issues: int = 0
    seconds: float = 0.0


def capped(items: Sequence[str]) -> list[str]:
    """The first MAX_LISTED items (callers keep the full count beside the list)."""
    return list(items[:MAX_LISTED])


def top_counts(counts: dict[str, int]) -> dict[str, int]:
    """The MAX_LISTED largest counts, largest first."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return dict(ranked[:MAX_LISTED])
