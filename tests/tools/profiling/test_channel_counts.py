"""Cases whose channel count is not the dataset's are named; a missing channel file is not counted twice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from amid.tools.profiling import ProfileCase, profile_dataset
from tests.tools.profiling.conftest import make_request


def _png(path: Path, shape: tuple[int, ...], seed: int) -> str:
    pixels = np.random.default_rng(seed).integers(0, 255, shape, dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return str(path)


def test_a_grey_image_among_colour_ones_is_a_channel_count_warning(tmp_path: Path) -> None:
    cases = [
        ProfileCase(case_id=f"rgb{i}", image_paths=[_png(tmp_path / f"rgb{i}.png", (32, 32, 3), i)]) for i in range(3)
    ]
    cases.append(ProfileCase(case_id="grey", image_paths=[_png(tmp_path / "grey.png", (32, 32), 9)]))
    profile = profile_dataset(make_request("segmentation", cases))
    issues = profile.issues_with("channel_count_mismatch")
    assert [(i.case_id, i.severity) for i in issues] == [("grey", "warning")]
    assert issues[0].message == "1 channel(s), where 3 of 4 cases have 3"
    assert not profile.issues_with("four_d_image")


def test_a_case_missing_a_channel_file_is_reported_once_as_missing(tmp_path: Path) -> None:
    cases = [
        ProfileCase(
            case_id=f"c{i}",
            image_paths=[_png(tmp_path / f"c{i}_0.png", (32, 32), i), _png(tmp_path / f"c{i}_1.png", (32, 32), 10 + i)],
        )
        for i in range(3)
    ]
    cases.append(ProfileCase(case_id="gone", image_paths=[cases[0].image_paths[0], str(tmp_path / "absent.png")]))
    profile = profile_dataset(make_request("segmentation", cases))
    assert [i.case_id for i in profile.issues_with("missing_modality")] == ["gone"]
    assert not profile.issues_with("channel_count_mismatch")
