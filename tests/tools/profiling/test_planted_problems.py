"""Planted problems are found and reported with the file that shows them; the profile never crashes."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from amid.tools.profiling import ProfileCase, profile_dataset
from tests.tools.profiling.conftest import ct_request
from tests.tools.profiling.factories import CT_SPACING, load_voxels, write_nifti


def _codes(profile_issues: list) -> list[str]:
    return sorted(issue.code for issue in profile_issues)


def test_a_patient_split_across_folds_is_an_error_and_a_leak_risk(ct_cases: list[ProfileCase]) -> None:
    folds = {"ct_000": 0, "ct_001": 1, "ct_002": 1, "ct_003": 1, "ct_004": 2, "ct_005": 2}
    profile = profile_dataset(ct_request(ct_cases, folds=folds, group_key="patient"))
    [issue] = profile.issues_with("group_split_across_folds")
    assert "'patient_0'" in issue.message and "[0, 1]" in issue.message and issue.severity == "error"
    assert profile.evaluation.groups_split_across_folds == ["patient_0"]
    assert profile.evaluation.cases_per_fold == {"0": 1, "1": 3, "2": 2}
    leak = profile.predicate("group_leak_risk")
    assert leak.value and leak.evidence["groups_split_across_folds"] == 1


def test_grouped_folds_raise_no_issue_but_the_risk_stays_for_case_level_splits(ct_cases: list[ProfileCase]) -> None:
    folds = {c.case_id: int(c.case_id[-1]) // 2 for c in ct_cases}
    profile = profile_dataset(ct_request(ct_cases, folds=folds))
    assert profile.issues == []
    leak = profile.predicate("group_leak_risk")
    assert leak.value and leak.evidence["groups_split_across_folds"] == 0
    one_case_each = [c.model_copy(update={"group": c.case_id}) for c in ct_cases]
    assert not profile_dataset(ct_request(one_case_each, folds=folds)).predicate("group_leak_risk").value


def test_a_duplicated_case_across_train_and_test_is_a_leak(ct_cases: list[ProfileCase]) -> None:
    copy = Path(ct_cases[0].image_paths[0]).with_name("copy_0000.nii.gz")
    copy.write_bytes(Path(ct_cases[0].image_paths[0]).read_bytes())
    cases = [*ct_cases, ProfileCase(case_id="test_000", split="test", image_paths=[str(copy)])]
    profile = profile_dataset(ct_request(cases))
    [duplicate] = profile.issues_with("duplicate_case")
    assert duplicate.case_id == "test_000" and "'ct_000'" in duplicate.message
    assert len(profile.issues_with("duplicate_across_splits")) == 1
    assert profile.evaluation.duplicates_across_splits == [["ct_000", "test_000"]]
    assert profile.inventory.n_duplicate_cases == 1
    assert profile.predicate("group_leak_risk").evidence["duplicate_sets_across_splits"] == 1


def test_a_noisy_copy_in_the_test_set_is_a_near_duplicate(ct_cases: list[ProfileCase]) -> None:
    source = load_voxels(ct_cases[1].image_paths[0])
    pixels = source + np.random.default_rng(1).integers(-1, 2, source.shape).astype(np.int16)
    path = write_nifti(Path(ct_cases[1].image_paths[0]).with_name("noisy.nii.gz"), pixels, CT_SPACING)
    cases = [*ct_cases, ProfileCase(case_id="test_001", split="test", image_paths=[path])]
    profile = profile_dataset(ct_request(cases))
    assert profile.evaluation.near_duplicates_across_splits == [["ct_001", "test_001"]]
    assert _codes(profile.issues) == ["near_duplicate"]


def test_corrupt_and_truncated_files_become_issues_naming_the_file(ct_cases: list[ProfileCase]) -> None:
    Path(ct_cases[2].image_paths[0]).write_bytes(b"\x1f\x8b garbage")
    truncated = Path(ct_cases[3].image_paths[0])
    truncated.write_bytes(gzip.compress(gzip.decompress(truncated.read_bytes())[:2000]))
    profile = profile_dataset(ct_request(ct_cases))
    corrupt = {i.case_id: Path(str(i.path)).name for i in profile.issues_with("corrupt_file")}
    assert corrupt == {"ct_002": "ct_002_0000.nii.gz", "ct_003": "ct_003_0000.nii.gz"}
    intensity = profile.representation.intensity
    assert intensity is not None and intensity.channels[0].n_cases == 4
    assert profile.cases[2].file_type is None and profile.cases[3].file_type == "nifti"


def test_a_label_value_outside_the_contract_is_reported(ct_cases: list[ProfileCase]) -> None:
    path = str(ct_cases[3].label_path)
    label = load_voxels(path).copy()
    label[0, 0, 0] = 3
    write_nifti(Path(path), label, CT_SPACING)
    profile = profile_dataset(ct_request(ct_cases))
    [issue] = profile.issues_with("unexpected_label_value")
    assert (issue.case_id, Path(str(issue.path)).name) == ("ct_003", "ct_003.nii.gz")
    assert "[3]" in issue.message
    assert profile.supervision.unexpected_label_values == [3]


def test_a_label_with_a_shifted_affine_is_a_geometry_mismatch(ct_cases: list[ProfileCase]) -> None:
    path = str(ct_cases[4].label_path)
    label = load_voxels(path)
    shifted = np.diag([*CT_SPACING, 1.0])
    shifted[:3, 3] = (5.0, 0.0, 0.0)
    write_nifti(Path(path), label, CT_SPACING, affine=shifted)
    profile = profile_dataset(ct_request(ct_cases))
    [issue] = profile.issues_with("geometry_mismatch")
    assert issue.case_id == "ct_004" and issue.path == path and "5 mm" in issue.message
    assert profile.representation.image_label_mismatches == 1


def test_nan_voxels_missing_files_and_missing_labels_are_reported(ct_cases: list[ProfileCase]) -> None:
    floats = load_voxels(ct_cases[0].image_paths[0]).astype(np.float32)
    floats[1, 2, 3] = np.nan
    write_nifti(Path(ct_cases[0].image_paths[0]), floats, CT_SPACING)
    Path(ct_cases[1].image_paths[0]).unlink()
    cases = [*ct_cases[:5], ct_cases[5].model_copy(update={"label_path": None})]
    profile = profile_dataset(ct_request(cases))
    assert _codes(profile.issues) == ["missing_file", "missing_label", "nan_values"]
    assert profile.issues_with("nan_values")[0].message == "1 NaN voxels"
    assert profile.representation.nan_cases == 1
    assert profile.inventory.missing_files == 1


def test_a_label_map_with_fractional_values_is_flagged(ct_cases: list[ProfileCase]) -> None:
    path = str(ct_cases[0].label_path)
    label = load_voxels(path).astype(np.float32)
    label[0, 0, 0] = 0.5
    write_nifti(Path(path), label, CT_SPACING)
    profile = profile_dataset(ct_request(ct_cases))
    assert [i.case_id for i in profile.issues_with("label_not_integer")] == ["ct_000"]


def test_a_channel_on_its_own_grid_is_a_warning_that_names_the_resampling(ct_cases: list[ProfileCase]) -> None:
    """As ISLES'22 ships its cases: FLAIR on a finer grid than DWI, whose grid the mask shares. The
    data are usable (a model resamples FLAIR); a label off its image's grid would be an error."""
    case = ct_cases[2]
    image = load_voxels(case.image_paths[0])
    finer = Path(case.image_paths[0]).with_name(f"{case.case_id}_0001.nii.gz")
    write_nifti(finer, np.repeat(image, 2, axis=0), (CT_SPACING[0] / 2, *CT_SPACING[1:]))
    two_channels = [
        c.model_copy(update={"image_paths": [*c.image_paths, str(finer)]}) if c is case else c for c in ct_cases
    ]
    profile = profile_dataset(ct_request(two_channels))
    [issue] = profile.issues_with("channel_grid_differs")
    assert (issue.case_id, issue.severity, issue.path) == (case.case_id, "warning", str(finer))
    assert "resample it onto channel 0's grid" in issue.message
    assert profile.issues_with("geometry_mismatch") == []
