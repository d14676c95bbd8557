"""Table predictions (a classification task): the reviewer re-scores a fold's CSV against the task's
labels table, compares with the majority-class predictor, and finds copied tables."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from amid.server.context import Services
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from tests.factories import write_nifti
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import AgentSandbox, client_for, failed_codes, submit_and_review

pytestmark = pytest.mark.anyio
N_CASES = 24


def _classification_task(root: Path) -> Path:
    rng = np.random.default_rng(3)
    rows = ["case_id,label"]
    for i in range(N_CASES):
        write_nifti(root / "data/images" / f"c{i:02d}_0000.nii.gz", rng.normal(0, 1, (6, 6, 3)).astype(np.float32))
        rows.append(f"c{i:02d},{int(i % 3 == 0)}")  # one case in three is positive
    (root / "data/labels.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = {
        "id": "tiny-classification",
        "title": "Tiny classification",
        "modality": "CT",
        "task_type": "classification",
        "layout": {"train_images": "data/images", "labels_table": "data/labels.csv"},
        "metrics": [{"name": "balanced_accuracy", "direction": "higher_better"}],
        "primary_metric": "balanced_accuracy",
        "prediction": {"file_type": "csv", "csv_columns": ["case_id", "label"]},
        "submission": {"columns": ["case_id", "label"]},
        "validation": {"k_folds": 3, "seed": 0},
    }
    (root / "task.yaml").write_text(yaml.safe_dump(task), encoding="utf-8")
    return root / "task.yaml"


@pytest.fixture(scope="module")
def table_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    source = _classification_task(tmp_path_factory.mktemp("classification"))
    workspace = init_workspace(import_task(source), tmp_path_factory.mktemp("table") / "ws")
    services = open_services(workspace.root)
    reviewer(services)
    yield services
    stop_reviewer(services)
    services.ledger.close()


def _truth(box: AgentSandbox) -> dict[str, int]:
    lines = (box.workspace.task_dir / "data/labels.csv").read_text(encoding="utf-8").split()[1:]
    return {line.split(",")[0]: int(line.split(",")[1]) for line in lines}


# The replayed "model": a lookup from its checkpoint, written for the cases of {input_dir}.
TABLE_MODEL_PY = """\
import json, sys
from pathlib import Path
model, source, target = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), Path(sys.argv[3])
cases = sorted(p.name[: -len("_0000.nii.gz")] for p in source.glob("*_0000.nii.gz"))
rows = "".join(f"{case},{model[case]}\\n" for case in cases)
(target / "predictions.csv").write_text("case_id,label\\n" + rows)
"""
TABLE_REPLAY = ["{python}", "table_model.py", "{checkpoint}", "{input_dir}", "{output_dir}"]


def _payload(box: AgentSandbox, fold: int, predict: dict[str, int], declared: float, tag: str) -> dict[str, Any]:
    rows = "\n".join(f"{case},{label}" for case, label in predict.items())
    table = box.write_text(f"outputs/{tag}/predictions.csv", "case_id,label\n" + rows + "\n", encoding="utf-8")
    manifest = box.honest_manifest([fold], f"outputs/{tag}/manifest.json")
    checkpoint = box.write_text(f"outputs/{tag}/model.json", json.dumps(predict), encoding="utf-8")
    return {
        "commit": box.commit({"table_model.py": TABLE_MODEL_PY}),
        "folds": [fold],
        "declared_scores": {str(fold): {"balanced_accuracy": declared}},
        "artifacts": {
            "predictions": {str(fold): table},
            "training_manifest": manifest,
            **box.write_evidence(tag),
            "checkpoint": checkpoint,
        },
        "inference_command": TABLE_REPLAY,
    }


async def test_table_predictions_are_rescored_and_judged(table_services: Services) -> None:
    box = AgentSandbox(table_services.workspace, "tabler")
    truth, val = _truth(box), box.folds.val_cases(0)
    good = {c: truth[c] for c in val}
    good[val[0]] = 1 - good[val[0]]  # one mistake
    expected = np.mean([np.mean([good[c] == k for c in val if truth[c] == k]) for k in (0, 1)])
    async with client_for(table_services, "tabler") as client:
        honest = await submit_and_review(client, _payload(box, 0, good, float(expected), "good"))
        assert honest["verdict"] == "accepted", honest["failed_checks"]
        assert honest["metrics"][0]["verified"] == pytest.approx(expected)
        assert "PRED_NOT_REPRODUCED" in honest["passed_checks"]  # the CSV replay agrees row by row

        flipped = _payload(box, 0, good, float(expected), "flipped")  # a replay that disagrees on every row
        box.write_text("outputs/flipped/model.json", json.dumps({c: 1 - v for c, v in good.items()}))
        replayed = failed_codes(await submit_and_review(client, flipped))["PRED_NOT_REPRODUCED"]["evidence"]
        assert replayed["n_differing"] == replayed["n_cases"] == len(val)  # every row, not a sample

        majority = await submit_and_review(client, _payload(box, 0, dict.fromkeys(val, 0), 0.5, "majority"))
        baseline = failed_codes(majority)["TRIVIAL_BASELINE"]["evidence"]["folds"][0]
        assert (baseline["predictor"], baseline["baseline"], baseline["verified"]) == ("majority_class", 0.5, 0.5)

        inflated = await submit_and_review(client, _payload(box, 0, good, 1.0, "inflated"))
        mismatch = failed_codes(inflated)["METRIC_MISMATCH"]["evidence"]["mismatches"][0]
        assert (mismatch["declared"], mismatch["verified"]) == (1.0, pytest.approx(expected))

    copier = AgentSandbox(table_services.workspace, "table-copier")
    shutil.copy(box.worktree / "outputs/good/predictions.csv", copier.path("outputs/copy/predictions.csv"))
    payload = _payload(copier, 0, good, float(expected), "copy2")
    payload["artifacts"]["predictions"] = {"0": "outputs/copy/predictions.csv"}
    async with client_for(table_services, "table-copier") as client:
        copied = await submit_and_review(client, payload)
    assert failed_codes(copied)["DUPLICATE_PAYLOAD"]["evidence"]["duplicates"][0]["identical"] == "bytes"


async def test_a_table_copied_with_reformatted_values_fires_duplicate_payload_as_near(table_services: Services) -> None:
    box = AgentSandbox(table_services.workspace, "table-original")
    truth, val = _truth(box), box.folds.val_cases(1)
    async with client_for(table_services, box.agent_id) as client:
        first = await submit_and_review(client, _payload(box, 1, {c: truth[c] for c in val}, 1.0, "orig1"))
    copier = AgentSandbox(table_services.workspace, "table-reformatter")
    rows = "\n".join(f"{c},{truth[c]:.1f}" for c in val)  # "1.0" for "1": other bytes, other value hashes
    table = copier.write_text("outputs/reformatted/predictions.csv", f"case_id,label\n{rows}\n", encoding="utf-8")
    payload = _payload(copier, 1, {}, 1.0, "evidence")
    payload["artifacts"]["predictions"] = {"1": table}
    async with client_for(table_services, copier.agent_id) as client:
        copied = await submit_and_review(client, payload)
    found = failed_codes(copied)["DUPLICATE_PAYLOAD"]["evidence"]["duplicates"]
    assert found == [
        {
            "fold": 1,
            "earlier_attempt_id": first["attempt_id"],
            "identical": "near",
            "lowest_case_agreement": 1.0,
            "threshold": 0.999,
        }
    ]
