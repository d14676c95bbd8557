"""Red team, the holes of issue 10 in the manifest, direction and duplicate checks: each crafted
attempt gets the verdict and code that name its cause, and an honest attempt beside it stays accepted.
(The holdout gate's crafted attempts are in test_holdout.py.)"""

from __future__ import annotations

import shutil
from typing import Any

import nibabel as nib
import numpy as np
import pytest

from amid.server.context import Services
from tests.server.reviewer.sandbox import PREDICT_PY, AgentSandbox, client_for, failed_codes, submit_and_review

pytestmark = pytest.mark.anyio
WEAKER_PREDICT_PY = PREDICT_PY.replace("label[filled] = 1", "label[ndimage.binary_erosion(filled, iterations=2)] = 1")


async def review_of(services: Services, box: AgentSandbox, payload: dict[str, Any]) -> dict[str, Any]:
    async with client_for(services, box.agent_id) as client:
        return await submit_and_review(client, payload)


def image_path(box: AgentSandbox, case_id: str) -> str:
    return f"task/{box.cases[case_id].image_paths[0]}"


async def test_a_validation_image_listed_by_path_in_the_manifest_fires_split_leak(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "path-leaker")
    leaked = box.folds.val_cases(0)[0]
    manifest = box.write_manifest({0: [*box.folds.folds[0].train_cases, image_path(box, leaked)]}, "outputs/pl.json")
    payload = box.model_payload(box.commit(), 0, seed=21, artifacts={"training_manifest": manifest})
    review = await review_of(review_services, box, payload)

    leak = failed_codes(review)["SPLIT_LEAK"]
    assert leak["severity"] == "error" and review["verdict"] == "rejected"
    assert leak["evidence"]["leaks"][0]["validation_cases_trained_on"] == [leaked]


async def test_a_manifest_of_training_image_paths_is_read_as_case_ids_and_accepted(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "path-lister")
    train = box.folds.folds[1].train_cases
    entries = [str(review_services.workspace.root / image_path(box, c)) for c in train[:3]]  # absolute paths
    entries += [f"{c}_0000.nii.gz" for c in train[3:6]] + train[6:]  # file names and bare ids
    manifest = box.write_manifest({1: entries}, "outputs/paths.json")
    review = await review_of(
        review_services, box, box.model_payload(box.commit(), 1, seed=22, artifacts={"training_manifest": manifest})
    )
    assert review["verdict"] == "accepted", review["failed_checks"]
    assert {"SPLIT_LEAK", "MISSING_EVIDENCE"} <= set(review["passed_checks"])


async def test_manifest_entries_that_name_no_case_fire_missing_evidence_naming_them(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "vague")
    extras = ["augmented/synthetic_001.nii.gz", "all-the-rest"]
    manifest = box.write_manifest({2: [*box.folds.folds[2].train_cases, *extras]}, "outputs/vague.json")
    payload = box.model_payload(box.commit(), 2, seed=23, artifacts={"training_manifest": manifest})
    review = await review_of(review_services, box, payload)

    failed = failed_codes(review)
    problem = next(p for p in failed["MISSING_EVIDENCE"]["evidence"]["problems"] if p["role"] == "training_manifest")
    assert failed["MISSING_EVIDENCE"]["severity"] == "error" and review["verdict"] == "rejected"
    assert "2 training-manifest entries name no case" in problem["reason"]
    assert all(repr(e) in problem["reason"] for e in extras)
    assert failed["SPLIT_LEAK"]["severity"] == "warning"  # not checkable on an unusable manifest


async def test_claiming_an_improvement_equal_to_the_parent_fires_metric_direction(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "standstill")
    sha = box.commit()
    parent = await review_of(review_services, box, box.model_payload(sha, 3, seed=24))
    assert parent["verdict"] == "accepted", parent["failed_checks"]
    child = box.model_payload(sha, 3, seed=25, parent_attempt_id=parent["attempt_id"], claims_improvement=["dice"])
    review = await review_of(review_services, box, child)

    claim = failed_codes(review)["METRIC_DIRECTION"]["evidence"]["claims"][0]
    assert review["verdict"] == "rejected" and claim["metric"] == "dice"
    assert claim["declared_value"] == pytest.approx(claim["parent_value"], abs=1e-12)  # the same model: no gain
    assert claim["tolerance"] == 1e-3 and list(failed_codes(review)) == ["METRIC_DIRECTION"]


async def test_a_claimed_improvement_beyond_tolerance_is_accepted(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "improver")
    parent = await review_of(
        review_services, box, box.model_payload(box.commit({"predict.py": WEAKER_PREDICT_PY}), 4, 26)
    )
    assert parent["verdict"] == "accepted", parent["failed_checks"]
    child = box.model_payload(
        box.commit(), 4, seed=27, parent_attempt_id=parent["attempt_id"], claims_improvement=["dice"]
    )
    review = await review_of(review_services, box, child)
    assert review["verdict"] == "accepted" and "METRIC_DIRECTION" in review["passed_checks"], review["failed_checks"]


async def test_a_copy_with_one_voxel_changed_per_case_fires_duplicate_payload(review_services: Services) -> None:
    original = AgentSandbox(review_services.workspace, "near-original")
    first = await review_of(review_services, original, original.model_payload(original.commit(), 1, seed=28))
    assert first["verdict"] == "accepted", first["failed_checks"]
    honest = AgentSandbox(review_services.workspace, "near-neighbour")  # same code, its own checkpoint
    second = await review_of(review_services, honest, honest.model_payload(honest.commit(), 1, seed=29))
    assert second["verdict"] == "accepted", second["failed_checks"]

    copier = AgentSandbox(review_services.workspace, "near-copier")
    shutil.copytree(original.worktree / "outputs/model28-fold1", copier.worktree / "outputs/nudged")
    for case_id in copier.folds.val_cases(1):
        path = copier.worktree / f"outputs/nudged/{case_id}.nii.gz"
        source = nib.load(path)
        array = np.asarray(source.dataobj).copy()  # type: ignore[attr-defined]
        array[10, 60, 3] = 1  # one voxel of air, a different file and a different value hash
        nib.save(nib.Nifti1Image(array, source.affine), path)  # type: ignore[attr-defined]
    review = await review_of(review_services, copier, copier.payload(copier.commit(), 1, "outputs/nudged"))

    found = failed_codes(review)["DUPLICATE_PAYLOAD"]
    assert found["severity"] == "error" and review["verdict"] == "rejected"
    near = next(d for d in found["evidence"]["duplicates"] if d["earlier_attempt_id"] == first["attempt_id"])
    assert near["identical"] == "near" and 0.999 <= near["lowest_case_agreement"] < 1.0
    assert second["attempt_id"] not in {d["earlier_attempt_id"] for d in found["evidence"]["duplicates"]}
