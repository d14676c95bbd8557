"""Benchmark-fold replays (server/reviewer/graded_replay.py) whose replayed submission.csv names
absolute host paths of the training labels: read from the host, they would reproduce label copies
exactly; they name no file of the replay's output, so the case is not reproduced."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from tests.fixtures.rexmle import grader_python, make_challenge
from tests.server.reviewer.benchmark_agent import REPLAY, BenchmarkAgent
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import client_for, failed_codes, submit_and_review

pytestmark = pytest.mark.anyio

# Writes submission.csv naming each given case's label by its absolute path on the host, and no file.
POINT_PY = """\
import csv, json, sys
from pathlib import Path
source, target, table = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text())
names = [p.name for p in source.iterdir()]
rows = [[case, path] for case, path in table["labels"].items() if any(n.startswith(case + "_") for n in names)]
target.mkdir(parents=True, exist_ok=True)
with (target / "submission.csv").open("w", newline="") as handle:
    csv.writer(handle).writerows([table["header"], *rows])
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Services, Path]]:
    root = tmp_path_factory.mktemp("isles22")
    folder, data_dir = make_challenge(root, "isles22")
    workspace = init_workspace(import_task(folder, data_dir=data_dir), root / "ws", grader_python=grader_python(root))
    services = open_services(workspace.root, review_workers=1)
    reviewer(services)
    yield services, data_dir
    stop_reviewer(services)
    services.ledger.close()


async def test_a_replayed_submission_naming_absolute_label_paths_is_not_reproduced(
    graded: tuple[Services, Path],
) -> None:
    services, data_dir = graded
    box = BenchmarkAgent(services.workspace, "pointer", "isles22", data_dir)
    fold = box.fold_by_size(0)
    folder = box.perfect_fold(fold, "outputs/labels")  # frozen: the training labels themselves
    with box.path(f"{folder}/submission.csv").open(encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    labels = {c: str(services.workspace.task_dir / str(box.cases[c].label_path)) for c in box.folds.val_cases(fold)}
    checkpoint = box.write_text("outputs/pointer.json", json.dumps({"header": header, "labels": labels}))
    sha = box.commit({"predict.py": POINT_PY}, message="pointer")
    payload = box.payload(sha, fold, folder, primary=1.0, artifacts={"checkpoint": checkpoint})
    payload["inference_command"] = REPLAY
    async with client_for(services, box.agent_id) as client:
        review = await submit_and_review(client, payload)

    found = failed_codes(review)["PRED_NOT_REPRODUCED"]
    assert found["severity"] == "error" and review["verdict"] == "rejected"
    assert found["evidence"]["n_differing"] == found["evidence"]["n_cases"] == len(labels)
    assert {c["problem"] for c in found["evidence"]["cases"]} == {"no replayed file for the case"}
