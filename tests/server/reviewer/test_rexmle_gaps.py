"""PUMA's nuclei grader, end to end: it scores an incomplete test submission (as the real one does) and
returns `f1` as `macro_f1` beside per-class `f1_<class>` keys. A perfect attempt is accepted with its
f1 read from macro_f1; one whose test submission leaves out a case is SUBMISSION_INVALID by AMID's
own count, the grader not needed, beside PRED_INCOMPLETE; its one-fixed-answer predictions are
caught by the trivial baseline. Real workspace, commits, review processes and grader subprocesses."""

from __future__ import annotations

import csv
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from amid.tools.task.label_adapters import convert
from tests.fixtures.rexmle import grader_python, make_challenge
from tests.server.reviewer.benchmark_agent import REPLAY, BenchmarkAgent
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.test_rexmle_review import Reviewed, errors, review_all

CHALLENGE = "puma-track1-task2"


def _nuclei(box: BenchmarkAgent, case: str) -> bytes:
    """A training case's GeoJSON nuclei as the JSON the grader reads: the challenge's own conversion."""
    grader = box.contract.grader
    assert grader is not None
    column = next(c for c in grader.fold_answers or [] if c.kind == "converted")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / f"{case}_nuclei.json"
        convert(
            str(column.adapter),
            box.workspace.task_dir / str(box.cases[case].label_path),
            target,
            column.adapter_options,
        )
        return target.read_bytes()


def perfect(box: BenchmarkAgent, commit: str, reviewed: Reviewed) -> dict[str, Any]:
    """The fold's converted training nuclei and a perfect test submission, memorised by the model."""
    fold = box.fold_by_size(0)
    folder = box._folder(f"outputs/perfect-fold{fold}", {c: _nuclei(box, c) for c in box.folds.val_cases(fold)}, {})
    checkpoint = box.memorised_checkpoint(folder, "outputs/memory")
    reviewed.folds["perfect"], reviewed.declared["perfect"] = fold, 1.0
    artifacts = {"submission": box.test_submission("outputs/submission"), "checkpoint": checkpoint}
    return box.payload(commit, fold, folder, primary=1.0, artifacts=artifacts, inference_command=REPLAY)


def _drop_last_case(box: BenchmarkAgent, folder: str) -> str:
    table = box.path(f"{folder}/submission.csv")
    with table.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    with table.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows[:-1])
    return rows[-1][0]


def partial(box: BenchmarkAgent, commit: str, reviewed: Reviewed, fold: int) -> tuple[dict[str, Any], str]:
    """The same fixed prediction for every fold case, and a perfect test submission without its last case."""
    donor = box.folds.folds[fold].train_cases[0]  # one training case's nuclei, given for every case
    answer = _nuclei(box, donor)
    folder = box._folder(f"outputs/fixed-fold{fold}", dict.fromkeys(box.folds.val_cases(fold), answer), {})
    checkpoint = box.memorised_checkpoint(folder, "outputs/fixed-memory")
    submission = box.test_submission("outputs/partial-submission")
    dropped = _drop_last_case(box, submission)
    reviewed.folds["partial"], reviewed.declared["partial"] = fold, 0.0
    payload = box.payload(
        commit,
        fold,
        folder,
        primary=0.0,
        artifacts={"checkpoint": checkpoint, "submission": submission},
        inference_command=REPLAY,
    )
    return payload, dropped


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Reviewed, str]]:
    root = tmp_path_factory.mktemp(CHALLENGE)
    folder, data_dir = make_challenge(root, CHALLENGE)
    workspace = init_workspace(import_task(folder, data_dir=data_dir), root / "ws", grader_python=grader_python(root))
    services = open_services(workspace.root, review_workers=1)
    reviewer(services)
    try:
        result = Reviewed(CHALLENGE, workspace.root, workspace.contract().primary_metric)
        box = BenchmarkAgent(workspace, "perfect", CHALLENGE, data_dir)
        payloads = {"perfect": perfect(box, box.commit_model(), result)}
        box = BenchmarkAgent(workspace, "partial", CHALLENGE, data_dir)
        payloads["partial"], dropped = partial(box, box.commit_model(), result, result.folds["perfect"])
        answers = anyio.run(review_all, [(services, name, payload) for name, payload in payloads.items()])
        result.reviews = dict(zip(payloads, answers, strict=True))
        yield result, dropped
    finally:
        stop_reviewer(services)
        services.ledger.close()


def test_perfect_attempt_is_accepted_with_f1_read_from_the_graders_macro_f1(reviewed: tuple[Reviewed, str]) -> None:
    result, _ = reviewed
    review = result.reviews["perfect"]
    assert review["verdict"] == "accepted" and errors(review) == {}, review["failed_checks"]
    verified = next(m for m in review["metrics"] if m["metric"] == "f1")
    assert verified["verified"] == pytest.approx(1.0)
    assert result.check("perfect", "TRIVIAL_BASELINE")["passed"]


def test_a_test_submission_missing_a_case_is_invalid_though_the_grader_would_score_it(
    reviewed: tuple[Reviewed, str],
) -> None:
    result, dropped = reviewed
    review = result.reviews["partial"]
    assert review["verdict"] == "rejected"
    assert {"SUBMISSION_INVALID", "PRED_INCOMPLETE", "TRIVIAL_BASELINE"} <= set(errors(review)), review["failed_checks"]
    invalid = errors(review)["SUBMISSION_INVALID"]["evidence"]
    assert invalid["reasons"][0].startswith("missing cases: 1 test case") and dropped in invalid["reasons"][0]
    assert invalid["grader"] == "not run"
    assert errors(review)["PRED_INCOMPLETE"]["evidence"]["test_cases"] == [dropped]
