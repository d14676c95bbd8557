"""Holdout replay outputs that are links to the server-held holdout labels (issue 21: the scorer
followed them, holdout 1.000): the gate fails closed naming the files, and no label is read."""

from __future__ import annotations

import base64
import json

import pytest

from amid.server.context import Services
from tests.server.reviewer.sandbox import AgentSandbox, client_for, failed_codes, identity, submit_and_review
from tests.server.reviewer.test_holdout import holdout_services  # noqa: F401  (the fixture, shared)
from tests.server.reviewer.test_red_team_round2 import LINK_PY

pytestmark = pytest.mark.anyio


async def test_holdout_outputs_linked_to_the_holdout_labels_fail_the_gate(holdout_services: Services) -> None:  # noqa: F811
    box = AgentSandbox(holdout_services.workspace, "holdout-linker")
    held = holdout_services.workspace.private_dir / "holdout"
    cases = json.loads((holdout_services.workspace.private_dir / "holdout.json").read_text(encoding="utf-8"))["cases"]
    targets = {c["case_id"]: str(held / c["label_path"]) for c in cases}
    targets |= {c: str(box.workspace.task_dir / str(box.cases[c].label_path)) for c in box.folds.val_cases(0)}
    sha = box.commit({"link.py": LINK_PY.replace("{targets}", base64.b64encode(json.dumps(targets).encode()).decode())})
    folder = box.write_predictions(0, identity, folder="outputs/linked-copy")
    payload = box.payload(sha, 0, folder, inference_command=["{python}", "link.py", "{input_dir}", "{output_dir}"])
    async with client_for(holdout_services, box.agent_id) as client:
        review = await submit_and_review(client, payload)

    gap = failed_codes(review)["HOLDOUT_GAP"]
    assert gap["severity"] == "error" and review["verdict"] == "rejected"
    assert "not regular files of the output folder" in gap["message"]
    assert {u["file"] for u in gap["evidence"]["unsafe_outputs"]} == {f"{c['case_id']}.nii.gz" for c in cases}
    assert not [m for m in review["metrics"] if m["scope"] == "holdout"]  # nothing was scored from the links
    assert failed_codes(review)["PRED_NOT_REPRODUCED"]["evidence"]["n_unsafe_outputs"] == len(box.folds.val_cases(0))
