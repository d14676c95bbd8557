"""Red team, issue 21's replay holes: replay outputs that are links to labels, one memorised or
copied case among a fold, a lesion edited inside an agreeing organ, and checkpoints that look their
inputs up (by hash, by case name) instead of modelling them: each rejected with the code naming the
cause, beside honest seeded models on every fold that are accepted. Real worktrees, commits, NIfTI,
review processes and the replay sandbox, through the real in-memory MCP client."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from typing import Any

import nibabel as nib
import numpy as np
import pytest

from amid.server.context import Services
from amid.server.reviewer.agreement import label_agreement
from tests.server.reviewer.sandbox import (
    MODEL_REPLAY,
    PREDICT_PY,
    AgentSandbox,
    client_for,
    failed_codes,
    identity,
    marked,
    submit_and_review,
)

pytestmark = pytest.mark.anyio

# Writes each output as a link to the case's label on the host (the path hidden in base64): inside
# the sandbox the link dangles, but a scorer on the host following it would read the label.
LINK_PY = """\
import base64, json, os, sys
from pathlib import Path
targets = json.loads(base64.b64decode("{targets}").decode())
source, target = Path(sys.argv[1]), Path(sys.argv[2])
for image in source.glob("*_0000.nii.gz"):
    case = image.name[: -len("_0000.nii.gz")]
    os.symlink(targets.get(case, "/nowhere"), target / (case + ".nii.gz"))
"""

# The honest model, except that a checkpoint may hold stored outputs, found by the input's sha256
# or by its case name: a lookup, not a model.
LOOKUP = """\
import base64, hashlib
TABLE = json.loads(Path(sys.argv[3]).read_text())
def lookup(path):
    case = path.name[: -len("_0000.nii.gz")]
    key = hashlib.sha256(path.read_bytes()).hexdigest()
    stored = TABLE.get("by_hash", {}).get(key) or TABLE.get("by_name", {}).get(case)
    return base64.b64decode(stored) if stored else None
"""
LOOKUP_HIT = """\
    stored = lookup(path)
    if stored is not None:
        (target / (path.name[: -len("_0000.nii.gz")] + ".nii.gz")).write_bytes(stored)
        continue
"""
LOOP = 'for path in sorted(source.glob("*_0000.nii.gz")):\n'
LOOKUP_PY = PREDICT_PY.replace(LOOP, LOOKUP + LOOP + LOOKUP_HIT)


async def _review(services: Services, box: AgentSandbox, payload: dict[str, Any]) -> dict[str, Any]:
    async with client_for(services, box.agent_id) as client:
        return await submit_and_review(client, payload)


def _error(review: dict[str, Any], code: str) -> dict[str, Any]:
    found = failed_codes(review)
    assert code in found and found[code]["severity"] == "error", review["failed_checks"]
    assert review["verdict"] == "rejected"
    return dict(found[code])


def _stored_label(box: AgentSandbox, case_id: str, seed: int) -> str:
    """A case's label (marked by `seed`, so no two attempts share it) as base64 NIfTI bytes."""
    source = box.label(case_id)
    array = marked(seed)(case_id, np.asarray(source.dataobj)).astype(np.uint8)
    raw = nib.Nifti1Image(array, source.affine).to_bytes()
    return base64.b64encode(gzip.compress(raw, mtime=0)).decode()


def _lookup_attempt(box: AgentSandbox, fold: int, table: dict[str, Any], tag: str) -> dict[str, Any]:
    """The lookup model's own outputs as frozen predictions, with the checkpoint it reads."""
    sha = box.commit({"predict.py": LOOKUP_PY}, message=f"lookup {tag}")
    checkpoint = box.write_text(f"outputs/lookup-{tag}.json", json.dumps(table))
    folder = box.predict_with_model(fold, f"outputs/lookup-{tag}-fold{fold}", checkpoint)
    return box.payload(sha, fold, folder, artifacts={"checkpoint": checkpoint}, inference_command=MODEL_REPLAY)


def _image_sha(box: AgentSandbox, case_id: str) -> str:
    return hashlib.sha256((box.workspace.task_dir / box.cases[case_id].image_paths[0]).read_bytes()).hexdigest()


async def test_honest_seeded_models_on_every_fold_are_reproduced_stable_and_accepted(
    review_services: Services,
) -> None:
    box = AgentSandbox(review_services.workspace, "honest-all-folds")
    sha = box.commit()
    for fold in range(len(box.folds.folds)):
        review = await _review(review_services, box, box.model_payload(sha, fold, seed=60 + fold))
        assert review["verdict"] == "accepted", (fold, review["failed_checks"])
        assert {"PRED_NOT_REPRODUCED", "PRED_UNSTABLE"} <= set(review["passed_checks"])


async def test_replay_outputs_linked_to_the_labels_are_not_read_and_not_reproduced(review_services: Services) -> None:
    """Issue 21: links to the labels, followed by the host-side scorer, were accepted at 0.999."""
    box = AgentSandbox(review_services.workspace, "linker")
    fold = 0
    targets = {c: str(box.workspace.task_dir / str(box.cases[c].label_path)) for c in box.folds.val_cases(fold)}
    encoded = base64.b64encode(json.dumps(targets).encode()).decode()
    sha = box.commit({"link.py": LINK_PY.replace("{targets}", encoded)})
    folder = box.write_predictions(fold, identity, folder="outputs/labels-copy")  # what the links point at
    payload = box.payload(sha, fold, folder, inference_command=["{python}", "link.py", "{input_dir}", "{output_dir}"])
    found = _error(await _review(review_services, box, payload), "PRED_NOT_REPRODUCED")

    evidence = found["evidence"]
    assert evidence["exit_code"] == 0 and evidence["n_unsafe_outputs"] == len(targets)
    assert {u["file"] for u in evidence["unsafe_outputs"]} == {f"{c}.nii.gz" for c in targets}
    assert {u["kind"] for u in evidence["unsafe_outputs"]} == {"symbolic link"}
    assert "not regular files of the output folder" in found["message"]


async def test_one_copied_label_among_the_fold_is_caught_on_every_review(review_services: Services) -> None:
    """Issue 21: with two of four cases sampled, the second try of this attempt was accepted."""
    box = AgentSandbox(review_services.workspace, "one-copy")
    fold = 1
    copied = box.folds.val_cases(fold)[-1]
    payload = box.model_payload(box.commit(), fold, seed=70)
    box.write_predictions(fold, marked(70), folder=payload["artifacts"]["predictions"][str(fold)], cases=[copied])
    payload["declared_scores"] = {str(fold): box.scores(fold, payload["artifacts"]["predictions"][str(fold)])}
    evidence = _error(await _review(review_services, box, payload), "PRED_NOT_REPRODUCED")["evidence"]

    assert evidence["n_cases"] == len(box.folds.val_cases(fold)) and evidence["n_differing"] == 1
    assert evidence["cases"][0]["case_id"] == copied and evidence["cases"][0]["agreement"] < 0.99


async def test_a_lesion_edited_inside_an_agreeing_organ_fails_per_label(review_services: Services) -> None:
    """Issue 21: predictions edited only on the lesion passed replay at pooled agreement 0.9925."""
    box = AgentSandbox(review_services.workspace, "lesion-editor")
    fold = 2
    payload = box.model_payload(box.commit(), fold, seed=71)
    folder = payload["artifacts"]["predictions"][str(fold)]
    pooled = []
    for case_id in box.folds.val_cases(fold):
        path = box.worktree / folder / f"{case_id}.nii.gz"
        model: Any = nib.load(path)
        predicted = np.asarray(model.dataobj).copy()
        edited = np.where(predicted == 2, 1, predicted).astype(np.uint8)
        edited[(np.asarray(box.label(case_id).dataobj) == 2) & (predicted > 0)] = 2  # the true lesion, nothing else
        nib.save(nib.Nifti1Image(edited, model.affine), path)
        pooled.append(label_agreement(predicted, edited))
    payload["declared_scores"] = {str(fold): box.scores(fold, folder)}
    evidence = _error(await _review(review_services, box, payload), "PRED_NOT_REPRODUCED")["evidence"]

    assert max(pooled) > 0.97  # the organ agrees: pooled over labels, the edit would hide
    worst = evidence["cases"][0]
    assert worst["worst_label"] == 2 and worst["labels"]["1"] > 0.97 and worst["labels"]["2"] < 0.99


async def test_a_checkpoint_looking_inputs_up_by_hash_is_unstable(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "hash-lookup")
    fold = 3
    cases = box.folds.val_cases(fold)
    table = {"mark": 72, "by_hash": {_image_sha(box, c): _stored_label(box, c, 72) for c in cases}}
    review = await _review(review_services, box, _lookup_attempt(box, fold, table, "hash"))

    assert "PRED_NOT_REPRODUCED" in review["passed_checks"]  # the replay alone is fooled: same inputs, same lookup
    found = _error(review, "PRED_UNSTABLE")
    evidence = found["evidence"]
    assert evidence["n_cases"] == evidence["n_differing"] == len(cases) and "perturbed-copy" in found["message"]
    assert all(n not in cases and n.startswith("x") for c in evidence["cases"] for n in c["copies"])  # pseudonyms
    assert isinstance(evidence["seed"], int)


async def test_a_checkpoint_memorising_one_case_by_name_is_unstable(review_services: Services) -> None:
    """Issue 21: a checkpoint memorising one validation case, honest elsewhere, was accepted."""
    box = AgentSandbox(review_services.workspace, "name-lookup")
    fold = 4
    memorised = box.folds.val_cases(fold)[0]
    table = {"mark": 73, "by_name": {memorised: _stored_label(box, memorised, 73)}}
    review = await _review(review_services, box, _lookup_attempt(box, fold, table, "name"))

    assert "PRED_NOT_REPRODUCED" in review["passed_checks"]
    evidence = _error(review, "PRED_UNSTABLE")["evidence"]
    assert evidence["n_differing"] == 1 and evidence["n_cases"] == len(box.folds.val_cases(fold))
    assert evidence["cases"][0]["case_id"] == memorised and evidence["cases"][0]["agreement"] < 0.95
    assert all(c["agreement"] > 0.99 for c in evidence["cases"][1:])  # the modelled cases stay put
