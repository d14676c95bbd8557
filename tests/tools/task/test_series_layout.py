"""Tasks whose cases are DICOM series folders (`imagesTr/<case_id>/*.dcm`), as the RSNA competitions ship
them, built from real slices that pydicom ships."""

from __future__ import annotations

import csv
from pathlib import Path, PurePosixPath

import pytest
import yaml

from amid.server.errors import InvalidInput
from amid.server.workspace import init_workspace
from amid.tools.profile_data import build_request
from amid.tools.profiling import profile_dataset
from amid.tools.task.cases import discover_cases, template_folder
from amid.tools.task.contract import DataLayout, load_contract
from amid.tools.task.folds import LockedFolds
from amid.tools.task.importers import import_task
from tests.tools.profiling.real_files import JUMPING_CT, REGULAR_CT, copy_slices, series_files

CASES = {"case_a": REGULAR_CT, "case_b": JUMPING_CT, "case_c": REGULAR_CT, "case_d": JUMPING_CT}


def _series_task(root: Path) -> Path:
    """A native classification task: one series folder per case, a labels table."""
    for case_id, series in CASES.items():
        copy_slices(series_files(series), root / "imagesTr" / case_id)
    (root / "imagesTr" / "notes").mkdir()
    (root / "imagesTr" / "notes" / "README.txt").write_text("not a series\n", encoding="utf-8")
    (root / "imagesTr" / "empty").mkdir()
    rows = [["case_id", "label"], *([case_id, str(i % 2)] for i, case_id in enumerate(CASES))]
    with (root / "labels.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    task = {
        "id": "series-classification",
        "title": "Series folders",
        "modality": "CT",
        "task_type": "classification",
        "layout": {"train_images": "imagesTr", "file_ending": ".dcm", "labels_table": "labels.csv"},
        "metrics": [{"name": "balanced_accuracy", "direction": "higher_better"}],
        "primary_metric": "balanced_accuracy",
        "prediction": {"file_type": "csv", "csv_columns": ["case_id", "label"]},
        "submission": {"columns": ["case_id", "label"]},
        "validation": {"k_folds": 2, "seed": 0},
    }
    (root / "task.yaml").write_text(yaml.safe_dump(task), encoding="utf-8")
    return root / "task.yaml"


def test_a_task_of_series_folders_imports_each_folder_as_one_case_and_profiles_it_as_a_volume(tmp_path: Path) -> None:
    workspace = init_workspace(import_task(_series_task(tmp_path / "source")), tmp_path / "ws")
    contract = load_contract(workspace.task_dir / "contract.yaml")
    cases = discover_cases(workspace.task_dir, contract.layout)
    assert {c.case_id: c.image_paths for c in cases} == {c: (f"imagesTr/{c}",) for c in CASES}  # not notes/, empty/
    folds = LockedFolds.model_validate_json((workspace.task_dir / "folds.json").read_text(encoding="utf-8"))
    request = build_request(workspace, contract, folds).model_copy(update={"n_workers": 1})
    profile = profile_dataset(request)
    records = {r.case_id: r for r in profile.cases}
    assert {r.file_type for r in records.values()} == {"dicom_series"}
    assert records["case_a"].shape == [16, 16, 5] and records["case_b"].shape == [16, 16, 4]
    assert sorted(str(i.case_id) for i in profile.issues_with("dicom_uneven_slices")) == ["case_b", "case_d"]
    assert not profile.issues_with("corrupt_file") and not profile.issues_with("missing_label")


def _brain_tumour_layout() -> DataLayout:
    """rsna-miccai-brain-tumor-radiogenomic-classification: train/<id>/<sequence>/Image-N.dcm."""
    templates = {"train_images": ["train/{case}/FLAIR", "train/{case}/T1w"]}
    return DataLayout.model_validate({"train_images": "train", "channels": ["FLAIR", "T1w"], "case_files": templates})


def test_case_files_templates_may_name_the_case_in_a_folder_holding_one_series_per_channel(tmp_path: Path) -> None:
    for case_id in ("00000", "00002"):
        for sequence in ("FLAIR", "T1w", "T2w"):
            copy_slices(series_files(REGULAR_CT), tmp_path / "train" / case_id / sequence, prefix="Image-")
    assert template_folder("train/{case}/FLAIR") == template_folder("train/{case}.dcm") == PurePosixPath("train")
    cases = discover_cases(tmp_path, _brain_tumour_layout())
    assert [(c.case_id, c.image_paths) for c in cases] == [
        (case_id, (f"train/{case_id}/FLAIR", f"train/{case_id}/T1w")) for case_id in ("00000", "00002")
    ]


def test_a_case_folder_missing_a_channel_series_is_refused_naming_the_case_and_the_folder(tmp_path: Path) -> None:
    copy_slices(series_files(REGULAR_CT), tmp_path / "train" / "00000" / "FLAIR")
    copy_slices(series_files(REGULAR_CT), tmp_path / "train" / "00000" / "T1w")
    copy_slices(series_files(REGULAR_CT), tmp_path / "train" / "00005" / "FLAIR")
    (tmp_path / "train" / "00005" / "T1w").mkdir()  # an empty folder is not a series
    with pytest.raises(InvalidInput, match=r"case '00005': files \['train/00005/T1w'\] are missing"):
        discover_cases(tmp_path, _brain_tumour_layout())


def test_series_folders_named_with_the_ending_still_import_by_template(tmp_path: Path) -> None:
    copy_slices(series_files(REGULAR_CT), tmp_path / "imagesTr" / "caseA.dcm")
    templates = {"train_images": ["imagesTr/{case}.dcm"]}
    layout = DataLayout.model_validate({"train_images": "imagesTr", "case_files": templates})
    cases = discover_cases(tmp_path, layout)
    assert [(c.case_id, c.image_paths) for c in cases] == [("caseA", ("imagesTr/caseA.dcm",))]


def test_a_folder_layout_with_another_ending_takes_no_folder_for_a_case(tmp_path: Path) -> None:
    copy_slices(series_files(REGULAR_CT), tmp_path / "imagesTr" / "case_a")  # .dcm files, but a NIfTI layout
    (tmp_path / "imagesTr" / "case_b.nii.gz").write_bytes(b"")
    layout = DataLayout.model_validate({"train_images": "imagesTr"})
    assert [c.case_id for c in discover_cases(tmp_path, layout)] == ["case_b"]


def test_series_folders_carry_the_channel_suffix_like_files(tmp_path: Path) -> None:
    for channel in ("0000", "0001"):
        copy_slices(series_files(REGULAR_CT), tmp_path / "imagesTr" / f"c1_{channel}")
    layout = DataLayout.model_validate({"train_images": "imagesTr", "file_ending": ".dcm", "channels": ["CT", "PET"]})
    cases = discover_cases(tmp_path, layout)
    assert [(c.case_id, c.image_paths) for c in cases] == [("c1", ("imagesTr/c1_0000", "imagesTr/c1_0001"))]
