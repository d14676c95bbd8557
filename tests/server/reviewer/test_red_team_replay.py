"""Red team for replay verification: predictions that did not come from the committed code, and
replays that reach for data they were not given, each rejected with the code naming the cause,
beside an honest attempt that is accepted. Real worktrees, commits, NIfTI files, review processes
and (where it runs) the bubblewrap sandbox, through the real in-memory MCP client."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from amid.server.context import Services
from amid.server.reviewer.agreement import LABEL_AGREEMENT
from amid.server.sandbox import bwrap_problem
from tests.server.reviewer.sandbox import (
    MODEL_REPLAY,
    PREDICT_PY,
    AgentSandbox,
    client_for,
    identity,
    marked,
    submit_and_review,
)

pytestmark = pytest.mark.anyio
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap cannot run: {bwrap_problem()}")

NOISE_PY = """\
import sys
from pathlib import Path
import nibabel as nib
import numpy as np
source, target = Path(sys.argv[1]), Path(sys.argv[2])
for path in sorted(source.glob("*_0000.nii.gz")):
    image = nib.load(path)
    noise = np.random.default_rng(0).integers(0, 3, image.shape).astype(np.uint8)
    nib.save(nib.Nifti1Image(noise, image.affine), target / (path.name[: -len("_0000.nii.gz")] + ".nii.gz"))
"""

# A "model" that copies the public labels of its input cases, from a path hidden in base64.
COPY_LABELS_PY = """\
import base64, shutil, sys
from pathlib import Path
labels = Path(base64.b64decode("{folder}").decode())
source, target = Path(sys.argv[1]), Path(sys.argv[2])
for image in source.glob("*_0000.nii.gz"):
    case = image.name[: -len("_0000.nii.gz")]
    shutil.copyfile(labels / (case + ".nii.gz"), target / (case + ".nii.gz"))
"""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def _review(services: Services, box: AgentSandbox, payload: dict[str, Any]) -> dict[str, Any]:
    async with client_for(services, box.agent_id) as client:
        return await submit_and_review(client, payload)


def _failure(review: dict[str, Any], code: str) -> dict[str, Any]:
    failed = {c["code"]: c for c in review["failed_checks"]}
    assert code in failed and failed[code]["severity"] == "error", review["failed_checks"]
    assert review["verdict"] == "rejected"
    return dict(failed[code]["evidence"])


def _replay_hits(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for h in evidence["hits"] if h["source"] == "validation replay"]


async def test_an_honest_model_is_reproduced_in_the_sandbox_and_accepted(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "replay-honest")
    review = await _review(review_services, box, box.model_payload(box.commit(), 2, seed=21))
    assert review["verdict"] == "accepted", review["failed_checks"]
    assert "PRED_NOT_REPRODUCED" in review["passed_checks"] and "ILLEGAL_DATA_ACCESS" in review["passed_checks"]


async def test_label_copies_without_an_inference_command_are_not_reproduced(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "copy-no-command")
    review = await _review(review_services, box, box.payload(box.commit(), 0, box.write_predictions(0, marked(31))))
    evidence = _failure(review, "PRED_NOT_REPRODUCED")
    message = next(c["message"] for c in review["failed_checks"] if c["code"] == "PRED_NOT_REPRODUCED")
    assert "argv" in evidence["fix"] and "inference_command" in message


async def test_label_copies_whose_replay_outputs_noise_are_not_reproduced(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "copy-noise")
    sha = box.commit({"noise.py": NOISE_PY})
    folder = box.write_predictions(1, marked(32))
    command = ["{python}", "noise.py", "{input_dir}", "{output_dir}"]
    evidence = _failure(
        await _review(review_services, box, box.payload(sha, 1, folder, inference_command=command)),
        "PRED_NOT_REPRODUCED",
    )
    assert evidence["n_cases"] == evidence["n_differing"] == len(box.folds.val_cases(1))  # every case, not a sample
    assert all(c["agreement"] < LABEL_AGREEMENT and c["fold"] == 1 for c in evidence["cases"])
    assert {c["case_id"] for c in evidence["cases"]} <= set(box.folds.val_cases(1))


async def test_symlinked_label_copies_with_a_real_model_command_are_not_reproduced(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "copy-linked")
    sha = box.commit()
    copies = box.write_predictions(3, marked(33), folder="outputs/.cache/copies")
    for case_id in box.folds.val_cases(3):  # the declared folder holds only links to the copies
        os.symlink(f"../.cache/copies/{case_id}.nii.gz", box.path(f"outputs/linked/{case_id}.nii.gz"))
    payload = box.payload(sha, 3, "outputs/linked", inference_command=MODEL_REPLAY[:-1])
    assert copies != "outputs/linked"
    evidence = _failure(await _review(review_services, box, payload), "PRED_NOT_REPRODUCED")
    assert evidence["n_differing"] == len(box.folds.val_cases(3))  # a decent model (~0.9) is not their source
    assert all(c["labels"]["1"] > 0.5 and c["agreement"] < LABEL_AGREEMENT for c in evidence["cases"])


@needs_bwrap
async def test_a_replay_copying_task_labels_by_an_obfuscated_path_is_caught(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "copy-replay")
    labels = (review_services.workspace.task_dir / str(next(iter(box.cases.values())).label_path)).parent
    sha = box.commit({"model.py": COPY_LABELS_PY.format(folder=_b64(str(labels)))})
    folder = box.write_predictions(4, identity, folder="outputs/copied")  # what the replay would copy again
    payload = box.payload(sha, 4, folder, inference_command=["{python}", "model.py", "{input_dir}", "{output_dir}"])
    review = await _review(review_services, box, payload)

    replay = _failure(review, "PRED_NOT_REPRODUCED")
    assert replay["exit_code"] == 1 and replay["sandbox"] == "bwrap" and "FileNotFoundError" in replay["stderr_tail"]
    hits = _replay_hits(_failure(review, "ILLEGAL_DATA_ACCESS"))
    assert hits and hits[0]["kind"] == "workspace path" and str(labels) in hits[0]["text"]


@needs_bwrap
async def test_a_replay_reading_private_by_an_obfuscated_path_is_illegal_data_access(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "private-replay")
    private = next(p for p in sorted(review_services.workspace.private_dir.rglob("*")) if p.is_file())
    peek = f"import base64\nSECRET = open(base64.b64decode('{_b64(str(private))}').decode(), 'rb').read()\n"
    sha = box.commit({"predict.py": peek + PREDICT_PY})
    review = await _review(review_services, box, box.model_payload(sha, 0, seed=35))

    hits = _replay_hits(_failure(review, "ILLEGAL_DATA_ACCESS"))
    assert hits[0]["kind"] == "workspace path" and str(private) in hits[0]["text"]
    assert _failure(review, "PRED_NOT_REPRODUCED")["exit_code"] == 1  # the read failed: no predictions


@needs_bwrap
async def test_a_replay_calling_the_network_is_illegal_data_access(review_services: Services) -> None:
    box = AgentSandbox(review_services.workspace, "network-replay")
    call_home = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 8765), timeout=5)\n"
    call_home += "except OSError as exc:\n    print('offline:', exc)\n"  # it swallows the error and goes on
    sha = box.commit({"predict.py": call_home + PREDICT_PY})
    review = await _review(review_services, box, box.model_payload(sha, 1, seed=36))

    hits = _replay_hits(_failure(review, "ILLEGAL_DATA_ACCESS"))
    assert hits[0]["kind"] == "network" and hits[0]["file"] == "stdout"
    assert "PRED_NOT_REPRODUCED" in review["passed_checks"]  # the predictions themselves were reproduced


async def test_a_command_naming_the_scaffold_as_before_the_namespace_is_refused_by_name(
    review_services: Services,
) -> None:
    """An attempt made before AMID's one namespace runs `-m tools.scaffolds.nnunet`: its replay says
    why (SCAFFOLD_CHANGED, the new name), rather than dying on an import."""
    box = AgentSandbox(review_services.workspace, "before-namespace")
    command = [
        "{python}",
        "-m",
        "tools.scaffolds.nnunet",
        "replay",
        "--input-dir",
        "{input_dir}",
        "--output-dir",
        "{output_dir}",
    ]
    payload = box.payload(box.commit(), 0, box.write_predictions(0, marked(33)), inference_command=command)
    review = await _review(review_services, box, payload)
    evidence = _failure(review, "PRED_NOT_REPRODUCED")
    assert "SCAFFOLD_CHANGED" in str(evidence) and "amid.tools.scaffolds.nnunet" in str(evidence), evidence
