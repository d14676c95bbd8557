"""Red team: one crafted attempt per reviewer check code, each proving the check fires with the
evidence that names what went wrong, and honest attempts that must be accepted.

Every attempt is built for real on the demo workspace (a worktree, NIfTI predictions, a manifest,
logs, a checkpoint, a git commit) and goes through the real in-memory MCP client.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import git
import nibabel as nib
import numpy as np
import pytest

from amid.server.context import Services
from amid.server.sandbox import bwrap_problem
from tests.server.reviewer.sandbox import (
    AgentSandbox,
    call,
    client_for,
    empty,
    eroded,
    failed_codes,
    marked,
    submit_and_review,
    verdict,
)

pytestmark = pytest.mark.anyio


async def review_of(services: Services, box: AgentSandbox, payload: dict[str, Any]) -> dict[str, Any]:
    async with client_for(services, box.agent_id) as client:
        return await submit_and_review(client, payload)


def only_failure(review: dict[str, Any], code: str) -> dict[str, Any]:
    failed = failed_codes(review)
    assert code in failed, f"{code} did not fire: {review['failed_checks']}"
    assert failed[code]["severity"] == "error"
    return dict(failed[code]["evidence"])


async def test_honest_attempt_is_accepted_with_verified_metrics_and_full_report(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "honest-1")
    sha = box.commit()
    review = await review_of(review_services, box, box.model_payload(sha, 0, seed=1))

    assert review["verdict"] == "accepted" and review["attempt_status"] == "accepted", review["failed_checks"]
    assert review["failed_checks"] == [] and len(review["passed_checks"]) == 17
    dice = next(m for m in review["metrics"] if m["metric"] == "dice")
    assert dice["verified"] == pytest.approx(dice["declared"], abs=1e-12) and 0.3 < dice["verified"] < 0.999
    assert (dice["n_cases"], dice["n_valid"], dice["n_nan"], dice["n_capped"]) == (8, 8, 0, 0)  # 4 cases x 2 labels
    report = json.loads((review_services.workspace.root / review["report"]).read_text(encoding="utf-8"))
    assert report["verdict"] == "accepted" and len(report["checks"]) == 17
    replayed = next(c for c in report["checks"] if c["code"] == "PRED_NOT_REPRODUCED")["evidence"]
    assert replayed["n_cases"] == 4 and {c["agreement"] for c in replayed["cases"]} == {1.0}  # every validation case
    assert replayed["sandbox"] == ("bwrap" if bwrap_problem() is None else "none")
    assert report["conventions"]["hd95"]["cap_mm"] == 100.0


async def test_honest_model_attempt_with_a_valid_submission_is_accepted(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "honest-model")
    sha = box.commit()
    folder = box.predict_with_model(1)
    submission = box.write_submission("outputs/submission")
    replay = ["{python}", "predict.py", "{input_dir}", "{output_dir}"]
    payload = box.payload(sha, 1, folder, artifacts={"submission": submission}, inference_command=replay)
    review = await review_of(review_services, box, payload)

    assert review["verdict"] == "accepted", review["failed_checks"]
    dice = next(m for m in review["metrics"] if m["metric"] == "dice")
    assert 0.3 < dice["verified"] < 0.999  # a real, imperfect model
    report = json.loads((review_services.workspace.root / review["report"]).read_text(encoding="utf-8"))
    check = next(c for c in report["checks"] if c["code"] == "SUBMISSION_INVALID")
    assert check["passed"] and check["evidence"] == {"grader": "valid"}  # valid, and no test score anywhere


async def test_commit_that_vanished_from_the_server_store_fires_commit_unknown(review_services: Services) -> None:
    """Erasing it from repo/ is not enough any more (test_commit_store.py); losing the server's copy is."""
    box = AgentSandbox(review_services.workspace, "rewriter")
    sha = box.commit({"train.py": "print('v2')\n"}, message="to be erased")
    async with client_for(review_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", box.payload(sha, 2, box.write_predictions(2, marked(2))))
        with git.Repo(review_services.workspace.commit_store) as store:
            store.git.update_ref("-d", f"refs/amid/attempts/{attempt['attempt_id']}")
            store.git.gc("--prune=now", "--quiet")
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = await verdict(client, queued["review_id"])
    evidence = only_failure(review, "COMMIT_UNKNOWN")
    assert evidence["commit"] == sha and review["verdict"] == "rejected"


async def test_frozen_file_deleted_after_submission_fires_artifact_missing(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "deleter")
    sha = box.commit()
    async with client_for(review_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", box.payload(sha, 3, box.write_predictions(3, marked(3))))
        checkpoint = next(
            a for a in review_services.ledger.attempts.artifacts(attempt["attempt_id"]) if a["role"] == "checkpoint"
        )
        (review_services.workspace.root / checkpoint["frozen_path"]).unlink()
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = await verdict(client, queued["review_id"])
    evidence = only_failure(review, "ARTIFACT_MISSING")
    assert evidence["files"][0]["role"] == "checkpoint" and evidence["n_missing"] == 1


async def test_prediction_modified_after_submission_fires_artifact_changed(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "tamperer")
    sha = box.commit()
    async with client_for(review_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", box.payload(sha, 4, box.write_predictions(4, marked(4))))
        frozen = next(
            a for a in review_services.ledger.attempts.artifacts(attempt["attempt_id"]) if a["role"] == "predictions"
        )
        path = review_services.workspace.root / frozen["frozen_path"]
        assert not os.access(path, os.W_OK) or os.geteuid() == 0  # frozen read-only (root may write anyway)
        assert path.stat().st_mode & 0o222 == 0
        path.chmod(0o644)
        path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = await verdict(client, queued["review_id"])
    evidence = only_failure(review, "ARTIFACT_CHANGED")
    changed = evidence["files"][0]
    assert changed["expected_sha256"] == frozen["sha256"] and changed["actual_sha256"] != frozen["sha256"]
    assert changed["declared_path"] == frozen["declared_path"]


async def test_missing_cases_fire_pred_incomplete(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "lazy")
    sha = box.commit()
    val = box.folds.val_cases(0)
    folder = box.write_predictions(0, marked(5), folder="outputs/partial", cases=val[:2])
    review = await review_of(review_services, box, box.payload(sha, 0, folder))
    evidence = only_failure(review, "PRED_INCOMPLETE")
    assert evidence["folds"] == [{"fold": 0, "cases": val[2:], "n_missing": 2}]


async def test_wrong_spacing_fires_pred_schema_with_expected_and_received(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "resampler")
    sha = box.commit()
    folder = box.write_predictions(1, marked(6), folder="outputs/spacing", zooms=(1.0, 1.0, 1.0))
    review = await review_of(review_services, box, box.payload(sha, 1, folder))
    evidence = only_failure(review, "PRED_SCHEMA")
    spacing = next(p for p in evidence["problems"] if p["problem"] == "spacing")
    assert spacing["expected"] == [0.8, 0.8, 4.0] and spacing["got"] == [1.0, 1.0, 1.0]


async def test_unknown_label_value_fires_pred_schema(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "relabeller")
    sha = box.commit()

    def with_label_three(case_id: str, label: np.ndarray) -> np.ndarray:
        out = marked(7)(case_id, label)
        out[out == 2] = 3
        return out

    folder = box.write_predictions(2, with_label_three, folder="outputs/labels")
    review = await review_of(review_services, box, box.payload(sha, 2, folder))
    problem = only_failure(review, "PRED_SCHEMA")["problems"][0]
    assert problem["problem"] == "label values" and problem["got"] == [3] and problem["expected"] == [0, 1, 2]


async def test_predictions_for_another_folds_cases_fire_fold_mismatch(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "wanderer")
    sha = box.commit()
    folder = box.write_predictions(0, marked(8), folder="outputs/mixed")
    stranger = box.folds.val_cases(3)[0]
    box.write_predictions(3, marked(8), folder=folder, cases=[stranger])
    review = await review_of(review_services, box, box.payload(sha, 0, folder))
    evidence = only_failure(review, "FOLD_MISMATCH")
    assert evidence["cases"][0]["case_id"] == stranger and evidence["cases"][0]["belongs_to_fold"] == 3


async def test_patient_leaked_across_the_split_fires_split_leak(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "leaker")
    sha = box.commit()
    folder = box.write_predictions(1, marked(9), folder="outputs/leak")
    leaked = box.folds.val_cases(1)[0]  # a scan of a validation patient, "forgotten" in training
    manifest = box.write_manifest({1: [*box.folds.folds[1].train_cases, leaked]}, "outputs/leaky-manifest.json")
    review = await review_of(
        review_services, box, box.payload(sha, 1, folder, artifacts={"training_manifest": manifest})
    )
    leak = only_failure(review, "SPLIT_LEAK")["leaks"][0]
    patient = box.folds.case_groups[leaked]
    assert leak["validation_cases_trained_on"] == [leaked] and leak["groups"] == [patient]
    assert leak["group_key"] == "patient_id"


async def test_code_and_logs_touching_private_fire_illegal_data_access(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "peeker")
    cheat = "import pandas\nanswers = pandas.read_csv('../../private/answers.csv')\n"
    sha = box.commit({"train.py": cheat})
    folder = box.write_predictions(2, marked(10), folder="outputs/peek")
    private_label = review_services.workspace.private_dir / "labels" / "p010s0.nii.gz"
    log = box.write_text("outputs/peek.log", f"epoch 1\nloaded {private_label}\n", encoding="utf-8")
    review = await review_of(review_services, box, box.payload(sha, 2, folder, artifacts={"logs": [log]}))
    hits = only_failure(review, "ILLEGAL_DATA_ACCESS")["hits"]
    assert {"source": "commit", "file": "train.py", "line": 2} in [
        {k: h[k] for k in ("source", "file", "line")} for h in hits
    ]
    assert any(h["source"] == "logs" and h["line"] == 2 and h["kind"] == "private path" for h in hits)


async def test_inflated_declared_score_fires_metric_mismatch(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "inflater")
    sha = box.commit()
    folder = box.write_predictions(3, eroded, folder="outputs/eroded")
    payload = box.payload(sha, 3, folder)
    honest = payload["declared_scores"]["3"]["dice"]
    payload["declared_scores"]["3"]["dice"] = min(1.0, honest + 0.05)
    review = await review_of(review_services, box, payload)
    mismatch = only_failure(review, "METRIC_MISMATCH")["mismatches"][0]
    assert mismatch["metric"] == "dice" and mismatch["verified"] == pytest.approx(honest)
    assert mismatch["declared"] == pytest.approx(honest + 0.05) and mismatch["tolerance"] == 1e-3


async def test_claimed_improvement_in_the_wrong_direction_fires_metric_direction(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "optimist")
    sha = box.commit()
    parent = await review_of(review_services, box, box.model_payload(sha, 4, seed=11))
    assert parent["verdict"] == "accepted", parent["failed_checks"]
    folder = box.write_predictions(4, empty, folder="outputs/child")  # farther from the labels than the model
    payload = box.payload(
        sha, 4, folder, parent_attempt_id=parent["attempt_id"], claims_improvement=["hd95"], budget_class="tune"
    )
    review = await review_of(review_services, box, payload)
    claim = only_failure(review, "METRIC_DIRECTION")["claims"][0]
    assert claim["metric"] == "hd95" and claim["direction"] == "lower_better"
    assert claim["parent_attempt_id"] == parent["attempt_id"] and claim["parent_source"] == "verified"
    assert claim["declared_value"] > claim["parent_value"]


async def test_copied_predictions_fire_duplicate_payload_by_bytes_and_by_values(review_services: Services) -> None:
    original = AgentSandbox(review_services.workspace, "original")
    first = await review_of(review_services, original, original.model_payload(original.commit(), 0, seed=12))
    assert first["verdict"] == "accepted", first["failed_checks"]
    copier = AgentSandbox(review_services.workspace, "copier")
    sha = copier.commit()
    shutil.copytree(original.worktree / "outputs/model12-fold0", copier.worktree / "outputs/copied")
    review = await review_of(review_services, copier, copier.payload(sha, 0, "outputs/copied"))
    duplicate = only_failure(review, "DUPLICATE_PAYLOAD")["duplicates"][0]
    assert duplicate == {"fold": 0, "earlier_attempt_id": first["attempt_id"], "identical": "bytes"}

    for case_id in copier.folds.val_cases(0):  # the same voxels, saved again as int16: other bytes
        source = nib.load(original.worktree / f"outputs/model12-fold0/{case_id}.nii.gz")
        array = np.asarray(source.dataobj).astype(np.int16)  # type: ignore[attr-defined]
        nib.save(nib.Nifti1Image(array, source.affine), copier.path(f"outputs/resaved/{case_id}.nii.gz"))  # type: ignore[attr-defined]
    review = await review_of(review_services, copier, copier.payload(sha, 0, "outputs/resaved"))
    identical = {d["identical"] for d in only_failure(review, "DUPLICATE_PAYLOAD")["duplicates"]}
    assert "values" in identical


async def test_missing_logs_and_checkpoint_fire_missing_evidence_and_warn_at_submit(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "minimalist")
    sha = box.commit()
    payload = box.payload(sha, 1, box.write_predictions(1, marked(13), folder="outputs/bare"))
    payload["artifacts"].pop("logs")
    payload["artifacts"].pop("checkpoint")
    async with client_for(review_services, box.agent_id) as client:
        attempt = await call(client, "submit_attempt", payload)
        assert any("logs" in w and "MISSING_EVIDENCE" in w for w in attempt["warnings"])
        queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
        review = await verdict(client, queued["review_id"])
    evidence = only_failure(review, "MISSING_EVIDENCE")
    assert [p["role"] for p in evidence["problems"]] == ["logs", "checkpoint"]


async def test_empty_masks_fire_trivial_baseline_and_the_baseline_is_cached_once(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "nihilist")
    sha = box.commit()
    review = await review_of(review_services, box, box.payload(sha, 2, box.write_predictions(2, empty, "outputs/e")))
    loss = only_failure(review, "TRIVIAL_BASELINE")["folds"][0]
    assert (loss["fold"], loss["metric"], loss["predictor"]) == (2, "dice", "empty_mask")
    assert loss["verified"] == loss["baseline"]  # an empty mask scores exactly the trivial predictor
    rows = review_services.ledger.db.fetchall(
        "SELECT attempt_id, metric, value FROM metrics WHERE scope = 'baseline' AND fold = 2 ORDER BY metric"
    )
    assert [(r["attempt_id"], r["metric"]) for r in rows] == [
        ("baseline:empty_mask", "dice"),
        ("baseline:empty_mask", "hd95"),
    ]  # several reviews of fold 2, one cached baseline per metric
    assert rows[0]["value"] == loss["baseline"]


async def test_submission_rejected_by_the_tasks_grader_fires_submission_invalid(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "submitter")
    sha = box.commit()
    submission = box.write_submission("outputs/swapped", columns="prediction_path,case_id")
    folder = box.write_predictions(3, marked(14), folder="outputs/sub3")
    review = await review_of(review_services, box, box.payload(sha, 3, folder, artifacts={"submission": submission}))
    evidence = only_failure(review, "SUBMISSION_INVALID")
    assert evidence["grader"] == "invalid"
    assert "columns must be case_id, prediction_path" in evidence["reasons"][0]

    partial = box.write_submission("outputs/partial-submission", drop=1)
    folder = box.write_predictions(3, marked(15), folder="outputs/sub3b")
    review = await review_of(review_services, box, box.payload(sha, 3, folder, artifacts={"submission": partial}))
    assert only_failure(review, "PRED_INCOMPLETE")["test_cases"] == ["p010s0"]
    assert "missing cases" in only_failure(review, "SUBMISSION_INVALID")["reasons"][0]


async def test_leaderboard_ranks_accepted_attempts_by_verified_score_only(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "climber")
    sha = box.commit()
    for seed, fold in ((16, 0), (17, 1)):
        review = await review_of(review_services, box, box.model_payload(sha, fold, seed))
        assert review["verdict"] == "accepted", review["failed_checks"]
    async with client_for(review_services, "climber") as client:
        board = await call(client, "leaderboard", {"per_lane": 50})
    scores = [r["verified_score"] for r in board["rows"]]
    assert board["metric"] == "dice" and board["direction"] == "higher_better"
    assert scores == sorted(scores, reverse=True) and [r["rank"] for r in board["rows"]] == list(
        range(1, len(scores) + 1)
    )
    accepted = review_services.ledger.counts_by_status("attempts")["accepted"]
    assert len(board["rows"]) == accepted  # every accepted attempt, and nothing else (none has a lane here)
