"""A regression task scored by correlation (PLCC), re-scored by the built-in table reviewer: the
training mean is a constant whose correlation is NaN, so the trivial predictor is the seeded
permutations of the fold's training targets. An honest table beats it with no warning; the
training mean for every case is rejected by TRIVIAL_BASELINE."""

from __future__ import annotations

import json
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
from tests.server.reviewer.test_tabular import TABLE_MODEL_PY, TABLE_REPLAY

pytestmark = pytest.mark.anyio
N_CASES = 12  # three folds of four


def _regression_task(root: Path) -> Path:
    rng = np.random.default_rng(5)
    rows = ["case_id,label"]
    for i in range(N_CASES):
        write_nifti(root / "data/images" / f"c{i:02d}_0000.nii.gz", rng.normal(0, 1, (6, 6, 3)).astype(np.float32))
        rows.append(f"c{i:02d},{1.0 + 0.5 * ((i * 7) % N_CASES):.1f}")  # distinct targets
    (root / "data/labels.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = {
        "id": "tiny-regression",
        "title": "Tiny regression",
        "modality": "CT",
        "task_type": "regression",
        "layout": {"train_images": "data/images", "labels_table": "data/labels.csv"},
        "metrics": [{"name": "plcc", "direction": "higher_better"}],
        "primary_metric": "plcc",
        "prediction": {"file_type": "csv", "csv_columns": ["case_id", "label"]},
        "submission": {"columns": ["case_id", "label"]},
        "validation": {"k_folds": 3, "seed": 0},
    }
    (root / "task.yaml").write_text(yaml.safe_dump(task), encoding="utf-8")
    return root / "task.yaml"


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    source = _regression_task(tmp_path_factory.mktemp("regression"))
    workspace = init_workspace(import_task(source), tmp_path_factory.mktemp("corr") / "ws")
    opened = open_services(workspace.root)
    reviewer(opened)
    yield opened
    stop_reviewer(opened)
    opened.ledger.close()


def _payload(box: AgentSandbox, predict: dict[str, float], declared: float, tag: str) -> dict[str, Any]:
    rows = "".join(f"{case},{value}\n" for case, value in predict.items())
    return {
        "commit": box.commit({"table_model.py": TABLE_MODEL_PY}),
        "folds": [0],
        "declared_scores": {"0": {"plcc": declared}},
        "artifacts": {
            "predictions": {"0": box.write_text(f"outputs/{tag}/predictions.csv", "case_id,label\n" + rows)},
            "training_manifest": box.honest_manifest([0], f"outputs/{tag}/manifest.json"),
            **box.write_evidence(tag),
            "checkpoint": box.write_text(f"outputs/{tag}/model.json", json.dumps(predict)),
        },
        "inference_command": TABLE_REPLAY,
    }


async def test_correlation_has_a_permuted_targets_baseline_an_honest_table_beats(services: Services) -> None:
    box = AgentSandbox(services.workspace, "correlator")
    lines = (box.workspace.task_dir / "data/labels.csv").read_text(encoding="utf-8").split()[1:]
    truth = {line.split(",")[0]: float(line.split(",")[1]) for line in lines}
    val = box.folds.val_cases(0)
    train_mean = float(np.mean([truth[c] for c in box.folds.folds[0].train_cases]))
    async with client_for(services, box.agent_id) as client:
        honest = await submit_and_review(client, _payload(box, {c: truth[c] * 2 + 1 for c in val}, 1.0, "honest"))
        mean = await submit_and_review(client, _payload(box, dict.fromkeys(val, train_mean), 0.0, "mean"))
    assert honest["verdict"] == "accepted" and "TRIVIAL_BASELINE" in honest["passed_checks"], honest["failed_checks"]
    loss = failed_codes(mean)["TRIVIAL_BASELINE"]["evidence"]["folds"][0]
    assert loss["predictor"] == "permuted_targets" and loss["verified"] is None and loss["baseline"] < 1.0
