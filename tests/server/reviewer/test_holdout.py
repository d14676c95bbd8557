"""Holdout replay on a demo workspace whose contract keeps 20 % of the patients server-side: the
reviewer re-runs the attempt's declared inference command at its frozen commit on the holdout
inputs, scores it per case and gates (HOLDOUT_GAP, an error) an attempt whose holdout score is
significantly worse than its validation score."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from amid.server.context import Services
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import init_workspace
from amid.tools.task.contract import ValidationProtocol
from amid.tools.task.importers import import_task
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import (
    PREDICT_PY,
    AgentSandbox,
    Transform,
    call,
    client_for,
    failed_codes,
    marked,
    submit_and_review,
)

pytestmark = pytest.mark.anyio
REPLAY = ["{python}", "predict.py", "{input_dir}", "{output_dir}"]


@pytest.fixture(scope="module")
def holdout_services(demo_challenge: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    imported = import_task(demo_challenge)
    imported.contract = imported.contract.model_copy(
        update={"validation": ValidationProtocol(k_folds=4, seed=0, holdout_fraction=0.2)}
    )
    workspace = init_workspace(imported, tmp_path_factory.mktemp("holdout") / "ws")
    services = open_services(workspace.root, replay_timeout_s=120.0)
    reviewer(services)
    yield services
    stop_reviewer(services)
    services.ledger.close()


@pytest.fixture(scope="module")
def lenient_services(demo_challenge: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """The same holdout, gated at alpha 0.2: one of the 6 relabellings of 2 + 2 patients may reject."""
    imported = import_task(demo_challenge)
    imported.contract = imported.contract.model_copy(
        update={"validation": ValidationProtocol(k_folds=4, seed=0, holdout_fraction=0.2)}
    )
    workspace = init_workspace(imported, tmp_path_factory.mktemp("lenient") / "ws")
    services = open_services(workspace.root, replay_timeout_s=120.0, holdout_alpha=0.2)
    reviewer(services)
    yield services
    stop_reviewer(services)
    services.ledger.close()


def _holdout_ids(services: Services) -> list[str]:
    cases = json.loads((services.workspace.private_dir / "holdout.json").read_text(encoding="utf-8"))["cases"]
    return [c["case_id"] for c in cases]


async def _review(services: Services, box: AgentSandbox, payload: dict[str, Any]) -> dict[str, Any]:
    async with client_for(services, box.agent_id) as client:
        return await submit_and_review(client, payload)


async def test_an_honest_model_replays_on_the_holdout_without_a_gap(holdout_services: Services) -> None:
    box = AgentSandbox(holdout_services.workspace, "replayed")
    payload = box.payload(box.commit(), 0, box.predict_with_model(0), inference_command=REPLAY)
    review = await _review(holdout_services, box, payload)

    assert review["verdict"] == "accepted" and "HOLDOUT_GAP" in review["passed_checks"], review["failed_checks"]
    holdout = {m["metric"]: m for m in review["metrics"] if m["scope"] == "holdout"}
    assert set(holdout) == {"dice", "hd95"} and holdout["dice"]["n_cases"] == 2 * len(_holdout_ids(holdout_services))
    assert holdout["dice"]["declared"] is None  # the agent never sees holdout labels, so never declares them
    spread = holdout_services.ledger.db.scalar(
        "SELECT case_se FROM metrics WHERE attempt_id = ? AND source = 'reviewer' AND scope = 'fold' "
        "AND metric = 'dice'",
        [review["attempt_id"]],
    )
    assert spread is not None and 0 < spread < 0.5  # a one-fold attempt's noise for ranking, from its cases


def _gate_evidence(services: Services, review: dict[str, Any]) -> dict[str, Any]:
    checks = services.ledger.reviews.checks(review["review_id"])
    return next(c for c in checks if c["code"] == "HOLDOUT_GAP")


async def test_with_two_holdout_patients_the_gate_says_it_cannot_reject_and_replay_keeps_a_copy_out(
    holdout_services: Services,
) -> None:
    """The demo holds out 2 of 10 patients and a fold has 2: the 6 relabellings of 4 patients cannot
    reach alpha 0.01, so the gate does not pretend to judge; the copied labels fail replay instead."""
    box = AgentSandbox(holdout_services.workspace, "overfitter")
    payload = box.payload(box.commit(), 1, box.write_predictions(1, marked(1)), inference_command=REPLAY)
    review = await _review(holdout_services, box, payload)

    assert review["verdict"] == "rejected" and "PRED_NOT_REPRODUCED" in failed_codes(review)
    gate = _gate_evidence(holdout_services, review)
    evidence = gate["evidence"]
    assert gate["passed"] and "too few groups" in gate["message"]
    assert evidence["validation"] > 0.99 and evidence["powered"] is False and evidence["tolerance"] is None
    assert (evidence["n_holdout_groups"], evidence["n_validation_groups"], evidence["arrangements"]) == (2, 2, 6)
    assert evidence["metric"] == "dice" and evidence["n_holdout_scored"] == len(_holdout_ids(holdout_services))


async def test_the_holdout_alpha_setting_reaches_the_gate(lenient_services: Services) -> None:
    box = AgentSandbox(lenient_services.workspace, "overfitter")
    payload = box.payload(box.commit(), 1, box.write_predictions(1, marked(1)), inference_command=REPLAY)
    review = await _review(lenient_services, box, payload)

    gap = failed_codes(review)["HOLDOUT_GAP"]
    assert gap["severity"] == "error" and gap["evidence"]["alpha"] == 0.2 and gap["evidence"]["powered"]
    assert gap["evidence"]["p_worse"] == pytest.approx(1 / 6, abs=1e-6)  # the copy is the most extreme arrangement


def other_scan(box: AgentSandbox) -> Transform:
    """Each validation case predicted with the label of the same patient's other scan (public labels)."""

    def transform(case_id: str, label: np.ndarray) -> np.ndarray:
        twin = case_id[:-1] + ("1" if case_id.endswith("0") else "0")
        return np.asarray(box.label(twin).dataobj)

    return transform


async def test_other_scan_labels_with_an_honest_replay_are_kept_off_the_leaderboard(holdout_services: Services) -> None:
    """The crafted case of issue 10: 0.770 on validation, 0.475 on the holdout, and it was accepted."""
    box = AgentSandbox(holdout_services.workspace, "twin")
    payload = box.payload(box.commit(), 2, box.write_predictions(2, other_scan(box)), inference_command=REPLAY)
    review = await _review(holdout_services, box, payload)

    assert review["verdict"] == "rejected" and "PRED_NOT_REPRODUCED" in failed_codes(review)
    assert _gate_evidence(holdout_services, review)["evidence"]["p_worse"] > 0.01  # 1/6 at best with 2 + 2 patients
    board = holdout_services.ledger.reviews.leaderboard(True, None, 50)
    assert review["attempt_id"] not in {row["attempt_id"] for row in board}


async def test_without_an_inference_command_the_holdout_is_not_replayed(holdout_services: Services) -> None:
    box = AgentSandbox(holdout_services.workspace, "silent")
    payload = box.payload(box.commit(), 2, box.write_predictions(2, marked(2)))
    async with client_for(holdout_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", payload)
        assert any("inference_command" in w for w in attempt["warnings"])
        review = await submit_and_review(client, {**payload, "idempotency_key": "second"})
    gap = failed_codes(review)["HOLDOUT_GAP"]
    assert gap["severity"] == "warning" and "not replayed" in gap["message"]


async def test_naming_or_training_on_holdout_cases_fires_illegal_data_access(holdout_services: Services) -> None:
    box = AgentSandbox(holdout_services.workspace, "snoop")
    held = _holdout_ids(holdout_services)
    folder = box.write_predictions(3, marked(3))
    log = box.write_text("outputs/snoop.log", f"epoch 1\nextra case {held[0]}_0000.nii.gz\n", encoding="utf-8")
    manifest = box.write_manifest({3: [*box.folds.folds[3].train_cases, held[1]]}, "outputs/greedy.json")
    payload = box.payload(box.commit(), 3, folder, artifacts={"logs": [log], "training_manifest": manifest})
    review = await _review(holdout_services, box, payload)

    hits = failed_codes(review)["ILLEGAL_DATA_ACCESS"]["evidence"]["hits"]
    assert {"source": "logs", "kind": "holdout case id", "match": held[0]} in [
        {k: h[k] for k in ("source", "kind", "match")} for h in hits
    ]
    assert any(h["source"] == "training_manifest" and held[1] in h["match"] for h in hits)
    assert review["verdict"] == "rejected"


async def test_a_replay_that_crashes_only_on_the_holdout_cannot_pass_the_gate(holdout_services: Services) -> None:
    """The script knows the public case ids and refuses any other input: the holdout replay fails."""
    box = AgentSandbox(holdout_services.workspace, "dodger")
    known = sorted(box.cases)
    guard = (
        f"KNOWN = {known!r}\n"
        "if any(p.name[: -len('_0000.nii.gz')] not in KNOWN for p in source.iterdir()):\n    sys.exit(3)\n"
    )
    sha = box.commit({"predict.py": PREDICT_PY.replace("target.mkdir(", guard + "target.mkdir(")})
    payload = box.payload(sha, 0, box.predict_with_model(0, "outputs/dodge"), inference_command=REPLAY)
    review = await _review(holdout_services, box, payload)

    gap = failed_codes(review)["HOLDOUT_GAP"]
    assert gap["severity"] == "error" and review["verdict"] == "rejected"
    assert "holdout replay failed (exit 3)" in gap["message"] and gap["evidence"]["exit_code"] == 3
