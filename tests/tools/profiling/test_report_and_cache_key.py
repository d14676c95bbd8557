"""The report files, the compact profile's size bound, and the fingerprint used as the cache key."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest

from amid.server.errors import InvalidInput
from amid.tools.profiling import DataProfile, ProfileCase, fingerprint, profile_dataset, write_report
from tests.tools.profiling.conftest import ct_request, make_request
from tests.tools.profiling.factories import make_classification

# A tool reply must stay within about 8k tokens; JSON runs at about 4 characters per token.
MAX_COMPACT_CHARACTERS = 8000 * 4


def test_write_report_writes_json_markdown_and_a_typed_parquet_table(
    tmp_path: Path, ct_cases: list[ProfileCase]
) -> None:
    profile = profile_dataset(ct_request(ct_cases, folds={c.case_id: i % 2 for i, c in enumerate(ct_cases)}))
    paths = write_report(profile, tmp_path / "report")
    assert DataProfile.model_validate_json(paths["profile.json"].read_text(encoding="utf-8")) == profile
    markdown = paths["profile.md"].read_text(encoding="utf-8")
    assert "# Data profile: segmentation" in markdown and "| anisotropic | yes |" in markdown
    query = f"SELECT case_id, fold, shape, foreground_ratio FROM '{paths['cases.parquet']}' ORDER BY case_id"
    fetched = duckdb.connect().execute(query).fetchall()
    assert len(fetched) == 6
    assert fetched[0][:3] == ("ct_000", 0, [24, 24, 8])
    assert fetched[0][3] == pytest.approx(18 / (24 * 24 * 8))


def test_compact_profile_fits_a_tool_reply_even_with_hundreds_of_issues(tmp_path: Path) -> None:
    cases, _ = make_classification(tmp_path, {"a": 150})
    copies = [c.model_copy(update={"image_paths": cases[0].image_paths}) for c in cases]  # all duplicates
    profile = profile_dataset(make_request("classification", copies))
    assert len(profile.issues) >= 298  # a missing label and a duplicate for (nearly) every case
    compact = profile.compact()
    text = compact.model_dump_json()
    assert len(text) < MAX_COMPACT_CHARACTERS
    assert len(compact.issues) == 25
    assert compact.issues_omitted == len(profile.issues) - 25
    assert compact.issue_counts == {"missing_label": 150, "duplicate_case": 149}
    assert compact.predicates["few_cases"] is True
    assert "cases" not in json.loads(text)


def test_fingerprint_changes_with_file_contents_and_request_but_not_with_workers(ct_cases: list[ProfileCase]) -> None:
    request = ct_request(ct_cases)
    key = fingerprint(request)
    assert key == fingerprint(ct_request(ct_cases, n_workers=4))
    assert key != fingerprint(ct_request(ct_cases, seed=7))
    image = Path(ct_cases[0].image_paths[0])
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert fingerprint(request) != key
    assert profile_dataset(request).fingerprint == fingerprint(request)


def test_requests_reject_repeated_ids_relative_paths_and_unknown_fold_cases(ct_cases: list[ProfileCase]) -> None:
    with pytest.raises(InvalidInput, match="cases: got \\['ct_000'\\]; expected unique case_id values"):
        ct_request([*ct_cases, ct_cases[0]])
    with pytest.raises(InvalidInput, match="expected an absolute path"):
        ct_request([ProfileCase(case_id="x", image_paths=["relative.nii.gz"])])
    with pytest.raises(InvalidInput, match="folds: got \\['nobody'\\]"):
        ct_request(ct_cases, folds={"nobody": 0})
