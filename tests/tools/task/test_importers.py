from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from amid.server.errors import InvalidInput
from amid.tools.task.contract import SourceRef, contract_hash, load_contract, write_contract
from amid.tools.task.importers import import_task
from tests.factories import make_native_task, make_nnunet_dataset, native_task_dict


def test_rex_mle_challenge_imports_metrics_layout_grader_and_submission(demo_challenge: Path) -> None:
    imported = import_task(demo_challenge)
    contract = imported.contract
    assert contract.source.format == "rex_mle"
    assert contract.id == "demo-liver-lesion-ct"
    assert [(m.name, m.direction) for m in contract.metrics] == [("dice", "higher_better"), ("hd95", "lower_better")]
    assert contract.primary_metric == "dice"
    assert contract.layout.group_key == "patient_id"
    assert contract.layout.label_values == {0: "background", 1: "liver", 2: "lesion"}
    assert contract.submission.columns == ["case_id", "prediction_path"]
    assert contract.submission.file_column == "prediction_path"
    assert contract.grader is not None and contract.grader.function == "grade"
    assert (demo_challenge / "public", "public") in imported.public_copies
    assert any(dest == "grader/grade.py" for _, dest in imported.private_copies)


def _challenge_copy(demo_challenge: Path, tmp_path: Path) -> Path:
    target = tmp_path / "challenge"
    shutil.copytree(demo_challenge, target)
    return target


def test_challenge_without_metric_directions_is_refused_naming_the_file(demo_challenge: Path, tmp_path: Path) -> None:
    folder = _challenge_copy(demo_challenge, tmp_path)
    (folder / "metric_config.json").write_text(json.dumps({"metrics": ["dice"]}), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"metric_config.json: field metric_directions is missing"):
        import_task(folder)
    (folder / "metric_config.json").unlink()
    with pytest.raises(InvalidInput, match=r"metric_config\.json: missing"):
        import_task(folder)


def test_challenge_with_a_wrong_direction_names_the_metric(demo_challenge: Path, tmp_path: Path) -> None:
    folder = _challenge_copy(demo_challenge, tmp_path)
    (folder / "metric_config.json").write_text(json.dumps({"metric_directions": {"dice": "up"}}), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"metric_directions.dice is 'up'"):
        import_task(folder)


def test_challenge_without_layout_is_detected_from_public_folders(demo_challenge: Path, tmp_path: Path) -> None:
    folder = _challenge_copy(demo_challenge, tmp_path)
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    del config["metadata"]["layout"]
    (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    layout = import_task(folder).contract.layout
    assert (layout.train_images, layout.train_labels) == ("public/train/images", "public/train/labels")
    assert layout.test_images == "public/test/images"


def test_nnunet_raw_dataset_imports_channels_labels_and_modality(tmp_path: Path) -> None:
    folder = make_nnunet_dataset(tmp_path, channels=2)
    contract = import_task(folder).contract
    assert contract.source.format == "nnunet"
    assert contract.id == "dataset042_tiny"
    assert contract.modality == "MRI"
    assert contract.layout.channels == ["T2", "ADC"]
    assert contract.layout.label_values == {0: "background", 1: "lesion"}
    assert contract.prediction.label_values == [0, 1]


def test_nnunet_dataset_json_without_file_ending_is_refused(tmp_path: Path) -> None:
    folder = make_nnunet_dataset(tmp_path)
    spec = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    del spec["file_ending"]
    (folder / "dataset.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"dataset\.json: field file_ending is missing"):
        import_task(folder)


def test_native_task_yaml_imports_and_hash_is_stable(tmp_path: Path) -> None:
    first = import_task(make_native_task(tmp_path / "a")).contract
    second = import_task(make_native_task(tmp_path / "b")).contract
    assert first.task_type == "segmentation" and first.validation.k_folds == 3
    assert contract_hash(first) != ""
    # the hash is of what the task is, not of where it was imported from (no folder in the contract)
    assert first.source.origin is None and contract_hash(first) == contract_hash(second)
    assert contract_hash(first.model_copy(update={"title": "Other"})) != contract_hash(first)


def test_the_import_folder_is_kept_out_of_the_written_contract_and_a_declared_origin_too(tmp_path: Path) -> None:
    data = native_task_dict()
    data["source"] = {"format": "native", "origin": "/datasets/secret-labels"}
    imported = import_task(make_native_task(tmp_path / "a", data=data))
    assert imported.contract.source.origin is None
    declared = {"task": str((tmp_path / "a" / "task.yaml").resolve()), "declared": "/datasets/secret-labels"}
    assert imported.origin == declared
    written = tmp_path / "contract.yaml"
    digest = write_contract(imported.contract, written)
    text = written.read_text(encoding="utf-8")
    assert "origin" not in text and str(tmp_path) not in text and "secret-labels" not in text
    assert contract_hash(load_contract(written)) == digest


def test_a_contract_written_before_the_origin_moved_out_keeps_its_hash(tmp_path: Path) -> None:
    contract = import_task(make_native_task(tmp_path / "a")).contract
    legacy = contract.model_copy(update={"source": SourceRef(format="native", origin="/old/host/task.yaml")})
    digest = write_contract(legacy, tmp_path / "contract.yaml")
    assert contract_hash(load_contract(tmp_path / "contract.yaml")) == digest != contract_hash(contract)


def test_malformed_task_yaml_names_the_file_and_fields(tmp_path: Path) -> None:
    data = native_task_dict()
    data["primary_metric"] = "auc"
    data["modality"] = "telepathy"
    path = make_native_task(tmp_path, data=data)
    with pytest.raises(InvalidInput) as excinfo:
        import_task(path)
    message = str(excinfo.value)
    assert message.startswith("task.yaml:")
    assert "field modality" in message
    path.write_text("id: [unclosed", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"task\.yaml: not valid YAML"):
        import_task(path)


def test_unknown_folder_is_refused_with_the_accepted_formats(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"no task.yaml, config.yaml \(ReX-MLE\) or dataset.json"):
        import_task(tmp_path)
