"""Fixtures: tiny generated tasks of each type, written once per test into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from amid.tools.profiling import ProfileCase, ProfileRequest
from tests.tools.profiling.factories import make_ct_segmentation

SAMPLES = 200_000  # enough for these tiny cases, and keeps each profile well under a second


@pytest.fixture
def ct_cases(tmp_path: Path) -> list[ProfileCase]:
    return make_ct_segmentation(tmp_path / "ct")


def make_request(task_type: str, cases: list[ProfileCase], **fields: object) -> ProfileRequest:
    """A request profiled in-process with a small voxel budget; fields override."""
    defaults: dict[str, object] = {"n_workers": 1, "max_voxel_samples": SAMPLES}
    return ProfileRequest.model_validate({"task_type": task_type, "cases": cases, **defaults, **fields})


def ct_request(cases: list[ProfileCase], **fields: object) -> ProfileRequest:
    """A segmentation request over the CT factory's cases (labels 0 background, 1 lesion)."""
    return make_request("segmentation", cases, **{"label_values": {0: "background", 1: "lesion"}, **fields})
