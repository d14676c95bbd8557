"""What a review produces: checks (code, message, evidence), verified metrics, baselines, verdict.

The check codes are stable strings (docs/ARCHITECTURE.md §7). Every check is recorded, passed or not, so a human
can see what was verified; a failed `error` check rejects the attempt, a failed `warning` does not.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

CODES = (
    "COMMIT_UNKNOWN",
    "ARTIFACT_MISSING",
    "ARTIFACT_CHANGED",
    "PRED_INCOMPLETE",
    "PRED_SCHEMA",
    "FOLD_MISMATCH",
    "SPLIT_LEAK",
    "ILLEGAL_DATA_ACCESS",
    "METRIC_MISMATCH",
    "METRIC_DIRECTION",
    "DUPLICATE_PAYLOAD",
    "MISSING_EVIDENCE",
    "PRED_NOT_REPRODUCED",
    "PRED_UNSTABLE",
    "TRIVIAL_BASELINE",
    "HOLDOUT_GAP",
    "SUBMISSION_INVALID",
)
WARNING_CODES: frozenset[str] = frozenset()  # codes whose firing never rejects (none since the holdout gate)
EVIDENCE_ITEMS = 20  # lists in evidence are cut to this many items; the full count rides along

Severity = Literal["error", "warning"]


class Check(BaseModel):
    code: str
    passed: bool
    severity: Severity
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)


def ok(code: str, message: str, **evidence: Any) -> Check:
    return Check(code=code, passed=True, severity=_severity(code), message=message, evidence=evidence)


def fired(code: str, message: str, **evidence: Any) -> Check:
    return Check(code=code, passed=False, severity=_severity(code), message=message, evidence=evidence)


def warned(code: str, message: str, **evidence: Any) -> Check:
    """The check fired, but on the side that does not reject (a holdout better than validation)."""
    return Check(code=code, passed=False, severity="warning", message=message, evidence=evidence)


def unverifiable(code: str, message: str, **evidence: Any) -> Check:
    """The reviewer could not run this check: a warning, never a silent pass."""
    return Check(code=code, passed=False, severity="warning", message=message, evidence=evidence)


def _severity(code: str) -> Severity:
    if code not in CODES:
        raise ValueError(f"unknown check code {code!r}")
    return "warning" if code in WARNING_CODES else "error"


def head(items: list[Any], limit: int = EVIDENCE_ITEMS) -> list[Any]:
    """The first items of an evidence list (the caller records the full count beside it)."""
    return items[:limit]


class VerifiedMetric(BaseModel):
    scope: Literal["fold", "test", "holdout"]
    fold: int | None
    metric: str
    value: float | None
    n_cases: int
    n_valid: int
    n_nan: int
    n_capped: int
    case_se: float | None = None  # standard error of the mean from per-case scores (grouped), folds only


class BaselineValue(BaseModel):
    fold: int
    predictor: str
    metric: str
    value: float | None
    n_cases: int | None = None
    n_valid: int | None = None
    n_nan: int | None = None
    n_capped: int | None = None


class ReviewReport(BaseModel):
    review_id: str
    attempt_id: str
    commit: str
    verdict: Literal["accepted", "rejected"]
    checks: list[Check]
    metrics: list[VerifiedMetric]
    baselines: list[BaselineValue] = Field(description="baselines computed by this review (new to the cache)")
    value_hashes: dict[str, str] = Field(description="sha256 of prediction bytes → sha256 of its decoded values")
    conventions: dict[str, dict[str, Any]] = Field(description="metric → convention applied")
    seconds: float


def verdict_of(checks: list[Check]) -> Literal["accepted", "rejected"]:
    return "rejected" if any(not c.passed and c.severity == "error" for c in checks) else "accepted"
