"""An attempt on a task whose cases are DICOM series folders passes review: a classification task laid
out as rsna-miccai-brain-tumor-radiogenomic-classification ships it (`train/<id>/FLAIR/Image-N.dcm`,
`train/<id>/T1w/…`), assembled from real CT slices that pydicom ships. The replay gets each case's
series as folders named by the case (`{input_dir}/<id>_0000/`, `<id>_0001/`), not as `FLAIR`,
`T1w` for every case. Real workspace, commits, sandboxed replays and the in-process MCP client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest
import yaml

from amid.server.context import Services
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import AgentSandbox, client_for, failed_codes, submit_and_review
from tests.tools.profiling.real_files import REGULAR_CT, copy_slices, series_files

pytestmark = pytest.mark.anyio
CASES = [f"{i:05d}" for i in range(8)]
HARD = "00006"  # a positive case whose signal is too faint for the threshold model: it errs there
OFFSETS = {case: (0 if i % 2 == 0 else 300) for i, case in enumerate(CASES)} | {HARD: 20}
MARGIN = 150  # the model's threshold above the real series' own mean

# The honest model: reads the FLAIR series (channel 0) of every case in {input_dir} with pydicom and
# thresholds its mean grey value; the threshold is its checkpoint.
SERIES_MODEL_PY = """\
import json, sys
from pathlib import Path
import numpy as np
import pydicom
model, source, target = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), Path(sys.argv[3])
rows = []
for folder in sorted(p for p in source.iterdir() if p.is_dir() and p.name.endswith("_0000")):
    mean = np.mean([pydicom.dcmread(f).pixel_array.mean() for f in sorted(folder.glob("*.dcm"))])
    rows.append(f"{folder.name[: -len('_0000')]},{int(mean > model['threshold'])}\\n")
(target / "predictions.csv").write_text("case_id,label\\n" + "".join(rows))
"""
REPLAY = ["{python}", "series_model.py", "{checkpoint}", "{input_dir}", "{output_dir}"]


def _brighten(folder: Path, offset: int) -> None:
    """Add `offset` grey levels to every slice's pixel data (a lesion-like signal for the label)."""
    for path in sorted(folder.glob("*.dcm")):
        dataset = pydicom.dcmread(path)
        pixels = dataset.pixel_array.astype(np.int32) + offset
        dataset.PixelData = pixels.astype(dataset.pixel_array.dtype).tobytes()
        dataset.save_as(path)


def _series_mean(folder: Path) -> float:
    return float(np.mean([pydicom.dcmread(f).pixel_array.mean() for f in sorted(folder.glob("*.dcm"))]))


def _brain_tumour_task(root: Path, cases: list[str] = CASES, holdout: float = 0.0) -> Path:
    for case in cases:
        for sequence in ("FLAIR", "T1w"):
            copy_slices(series_files(REGULAR_CT), root / "train" / case / sequence, prefix="Image-")
        _brighten(root / "train" / case / "FLAIR", OFFSETS.get(case, 0))
    rows = ["case_id,label", *(f"{case},{int(OFFSETS.get(case, 0) > 0)}" for case in cases)]
    (root / "labels.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = {
        "id": "series-brain-tumour",
        "title": "Series folders per MRI sequence",
        "modality": "MRI",
        "task_type": "classification",
        "layout": {
            "train_images": "train",
            "file_ending": ".dcm",
            "labels_table": "labels.csv",
            "channels": ["FLAIR", "T1w"],
            "case_files": {"train_images": ["train/{case}/FLAIR", "train/{case}/T1w"]},
        },
        "metrics": [{"name": "balanced_accuracy", "direction": "higher_better"}],
        "primary_metric": "balanced_accuracy",
        "prediction": {"file_type": "csv", "csv_columns": ["case_id", "label"]},
        "submission": {"columns": ["case_id", "label"]},
        "validation": {"k_folds": 2, "seed": 0, "holdout_fraction": holdout},
    }
    (root / "task.yaml").write_text(yaml.safe_dump(task), encoding="utf-8")
    return root / "task.yaml"


@pytest.fixture(scope="module")
def series_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    source = _brain_tumour_task(tmp_path_factory.mktemp("series-task"))
    workspace = init_workspace(import_task(source), tmp_path_factory.mktemp("series") / "ws")
    services = open_services(workspace.root)
    reviewer(services)
    yield services
    stop_reviewer(services)
    services.ledger.close()


def _threshold(box: AgentSandbox) -> float:
    negative = next(case for case in sorted(box.cases) if OFFSETS.get(case, 0) == 0)  # the real series, as shipped
    return _series_mean(box.workspace.task_dir / "train" / negative / "FLAIR") + MARGIN


def _honest(box: AgentSandbox, cases: list[str]) -> dict[str, int]:
    """What the honest model predicts, computed here the same way it computes it."""
    threshold = _threshold(box)
    return {c: int(_series_mean(box.workspace.task_dir / "train" / c / "FLAIR") > threshold) for c in cases}


def _balanced_accuracy(truth: dict[str, int], predicted: dict[str, int]) -> float:
    classes = sorted(set(truth.values()))
    return float(np.mean([np.mean([predicted[c] == k for c in truth if truth[c] == k]) for k in classes]))


def _payload(box: AgentSandbox, fold: int, predicted: dict[str, int], declared: float, tag: str) -> dict[str, Any]:
    rows = "".join(f"{case},{label}\n" for case, label in predicted.items())
    table = box.write_text(f"outputs/{tag}/predictions.csv", "case_id,label\n" + rows)
    checkpoint = box.write_text(f"outputs/{tag}/model.json", json.dumps({"threshold": _threshold(box)}))
    return {
        "commit": box.commit({"series_model.py": SERIES_MODEL_PY}, message=f"series model {tag}"),
        "folds": [fold],
        "declared_scores": {str(fold): {"balanced_accuracy": declared}},
        "artifacts": {
            "predictions": {str(fold): table},
            "training_manifest": box.honest_manifest([fold], f"outputs/{tag}/manifest.json"),
            **box.write_evidence(tag),
            "checkpoint": checkpoint,
        },
        "inference_command": REPLAY,
    }


def _hard_fold(box: AgentSandbox) -> int:
    return next(f for f in range(box.folds.k) if HARD in box.folds.val_cases(f))


async def test_an_honest_model_of_series_folders_is_replayed_on_them_and_accepted(series_services: Services) -> None:
    box = AgentSandbox(series_services.workspace, "series-honest")
    assert box.cases[HARD].image_paths == (f"train/{HARD}/FLAIR", f"train/{HARD}/T1w")
    fold = _hard_fold(box)
    val = box.folds.val_cases(fold)
    truth = {c: int(OFFSETS[c] > 0) for c in val}
    predicted = _honest(box, val)
    assert predicted[HARD] == 0 and truth[HARD] == 1  # the model is honest, so it is wrong here
    score = _balanced_accuracy(truth, predicted)
    async with client_for(series_services, box.agent_id) as client:
        review = await submit_and_review(client, _payload(box, fold, predicted, score, "honest"))
    assert review["verdict"] == "accepted", review["failed_checks"]
    assert "PRED_NOT_REPRODUCED" in review["passed_checks"]  # every case's series reached the replay by its id
    assert review["metrics"][0]["verified"] == pytest.approx(score)


async def test_predictions_copied_from_the_labels_are_not_reproduced_by_the_series_model(
    series_services: Services,
) -> None:
    """The memorised answer key, declared with the honest model's command: the replay of the model on
    the series disagrees on the case the model gets wrong."""
    box = AgentSandbox(series_services.workspace, "series-memoriser")
    fold = _hard_fold(box)
    truth = {c: int(OFFSETS[c] > 0) for c in box.folds.val_cases(fold)}
    async with client_for(series_services, box.agent_id) as client:
        review = await submit_and_review(client, _payload(box, fold, truth, 1.0, "answer-key"))
    assert review["verdict"] == "rejected"
    evidence = failed_codes(review)["PRED_NOT_REPRODUCED"]["evidence"]
    assert evidence["n_differing"] == 1 and evidence["cases"][0]["case_id"] == HARD


async def test_a_series_task_with_a_holdout_keeps_its_public_cases_and_says_the_gate_is_not_judged(
    tmp_path: Path,
) -> None:
    """The holdout moves each held-out case's series out of task/ and its emptied case folder with them
    (left behind, `train/<id>/` read as a case whose series are missing, and no case list could be
    made); the gate does not score tables yet and says so instead of crashing the review."""
    cases = [*CASES, *(f"{i:05d}" for i in range(8, 12))]  # 00008-00011: negatives
    workspace = init_workspace(import_task(_brain_tumour_task(tmp_path / "src", cases, 0.25)), tmp_path / "ws")
    services = open_services(workspace.root)
    reviewer(services)
    try:
        box = AgentSandbox(workspace, "series-holdout")
        held = {case for case in cases if case not in box.cases}
        assert held and not any((workspace.task_dir / "train" / case).exists() for case in held)
        fold = 0
        val = box.folds.val_cases(fold)
        predicted = _honest(box, val)
        score = _balanced_accuracy({c: int(OFFSETS.get(c, 0) > 0) for c in val}, predicted)
        async with client_for(services, box.agent_id) as client:
            review = await submit_and_review(client, _payload(box, fold, predicted, score, "holdout"))
    finally:
        stop_reviewer(services)
        services.ledger.close()
    assert review["status"] == "done" and review["verdict"] == "accepted", review
    gate = json.loads((workspace.root / review["report"]).read_text(encoding="utf-8"))
    check = next(c for c in gate["checks"] if c["code"] == "HOLDOUT_GAP")
    assert check["severity"] == "warning" and "not judged for csv predictions" in check["message"]
