"""One check of a package and how it ends (passed, failed naming files, skipped), and the score
comparison every check uses: what verify.py, attestation.py and workspace_checks.py build on."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

SCORE_TOLERANCE = 1e-9


class PackageCheck(BaseModel):
    name: str
    status: str = Field(description="passed | failed | skipped")
    detail: str
    files: list[str] = Field(default_factory=list, description="package files the failure names")


def passed(name: str, detail: str) -> PackageCheck:
    return PackageCheck(name=name, status="passed", detail=detail)


def failed(name: str, detail: str, files: list[str]) -> PackageCheck:
    return PackageCheck(name=name, status="failed", detail=detail, files=files)


def skipped(name: str, detail: str) -> PackageCheck:
    return PackageCheck(name=name, status="skipped", detail=detail)


def same_numbers(left: dict[str, Any], right: dict[str, Any]) -> bool:
    if set(left) != set(right):
        return False
    return all(_close(left[k], right[k]) for k in left)


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= SCORE_TOLERANCE * max(1.0, abs(a), abs(b))
