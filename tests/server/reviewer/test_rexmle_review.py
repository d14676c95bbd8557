"""The whole review loop on ReX-MLE tasks, with each task's own grader (our stand-in of it, called as
the benchmark's harness calls it, under the --grader-python wrapper): a perfect attempt is accepted
with the grader's "valid" on its test submission, a broken test submission is SUBMISSION_INVALID by
the grader's word, and trivial predictions are rejected. Five representative challenges: multi-channel
NIfTI, a score table, MHA, graph edges (YAML answers, JSON predictions) and image enhancement. Real
workspaces, worktrees, commits, review processes and grader subprocesses, through the real MCP client;
each challenge's attempts are submitted together and reviewed side by side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import yaml

from amid.server.context import Services
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from tests.fixtures.rexmle import grader_python, make_challenge
from tests.server.reviewer.benchmark_agent import REPLAY, BenchmarkAgent
from tests.server.reviewer.conftest import open_services
from tests.server.reviewer.sandbox import call, client_for, failed_codes, verdict

REVIEWED = ("isles22", "ldct-iqa", "panther-task1", "topcow-track1-task3", "usenhance")
PERFECT = {"ldct-iqa": 3.0}  # |PLCC| + |SROCC| + |KROCC|; every other primary metric is 1.0 when perfect
GRADER_REFUSAL = {  # what the stand-in grader says of the broken submission's first case
    "isles22": "differs from the reference",
    "ldct-iqa": "must be numeric",
    "panther-task1": "differs from the reference",
    "topcow-track1-task3": "no 'posterior' edges",
    "usenhance": "differs from the reference",
}


@dataclass
class Reviewed:
    challenge_id: str
    root: Path
    primary: str
    folds: dict[str, int] = field(default_factory=dict)  # attempt → its fold
    declared: dict[str, float] = field(default_factory=dict)  # attempt → its declared primary score
    reviews: dict[str, dict[str, Any]] = field(default_factory=dict)  # attempt → get_review's answer

    def check(self, attempt: str, code: str) -> dict[str, Any]:
        """One check of the attempt's full report (passed ones included)."""
        path = self.root / self.reviews[attempt]["report"]
        return dict(next(c for c in json.loads(path.read_text(encoding="utf-8"))["checks"] if c["code"] == code))


def errors(review: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {code: c for code, c in failed_codes(review).items() if c["severity"] == "error"}


def perfect(box: BenchmarkAgent, commit: str, reviewed: Reviewed) -> dict[str, Any]:
    """Fold predictions from the training labels, the test submission from the private answers."""
    fold = box.fold_by_size(0)
    folder = box.perfect_fold(fold, f"outputs/perfect-fold{fold}")
    checkpoint = box.memorised_checkpoint(folder, "outputs/memory")
    reviewed.folds["perfect"], reviewed.declared["perfect"] = fold, PERFECT.get(reviewed.challenge_id, 1.0)
    submission = box.test_submission("outputs/submission")
    artifacts = {"submission": submission, "checkpoint": checkpoint}
    return box.payload(
        commit, fold, folder, primary=reviewed.declared["perfect"], artifacts=artifacts, inference_command=REPLAY
    )


def trivial(box: BenchmarkAgent, commit: str, reviewed: Reviewed, fold: int) -> dict[str, Any]:
    """Blank / constant / one-fixed-answer predictions, with a test submission the grader refuses."""
    folder = box.trivial_fold(fold, f"outputs/trivial-fold{fold}")
    checkpoint = box.memorised_checkpoint(folder, "outputs/trivial-memory")
    submission = box.test_submission("outputs/broken-submission", broken=True)
    reviewed.folds["trivial"], reviewed.declared["trivial"] = fold, trivial_score(box, fold)
    artifacts = {"checkpoint": checkpoint, "submission": submission}
    return box.payload(
        commit, fold, folder, primary=reviewed.declared["trivial"], artifacts=artifacts, inference_command=REPLAY
    )


def trivial_score(box: BenchmarkAgent, fold: int) -> float:
    """The stand-in grader's primary score of `trivial_fold`: 0 for blank images and constants; for
    edges, the accuracy of one training case's anterior edges on the fold's cases."""
    if box.spec.kind != "edges":
        return 0.0
    donor = box.folds.folds[fold].train_cases[0]

    def edges(case: str) -> dict[str, int]:
        text = (box.workspace.task_dir / str(box.cases[case].label_path)).read_text(encoding="utf-8")
        return dict(yaml.safe_load(text)["anterior"])

    guess = edges(donor)
    return float(np.mean([np.mean([guess[e] == v for e, v in edges(c).items()]) for c in box.folds.val_cases(fold)]))


async def review_all(attempts: list[tuple[Services, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Submit and request every attempt first (in this order), then wait for each verdict."""
    queued = []
    for services, agent_id, payload in attempts:
        async with client_for(services, agent_id) as client:
            attempt = await call(client, "submit_attempt", payload)
            queued.append((await call(client, "request_review", {"attempt_id": attempt["attempt_id"]}))["review_id"])
    answers = []
    for (services, agent_id, _), review_id in zip(attempts, queued, strict=True):
        async with client_for(services, agent_id) as client:
            answers.append(await verdict(client, review_id))
    return answers


def prepare(challenge_id: str, root: Path) -> tuple[Services, Reviewed, dict[str, dict[str, Any]]]:
    """A workspace with its reviewer (one process: the trivial attempt, reviewed second, finds the
    fold's trivial baseline already computed) and the payloads of its two attempts."""
    folder, data_dir = make_challenge(root, challenge_id)
    workspace = init_workspace(import_task(folder, data_dir=data_dir), root / "ws", grader_python=grader_python(root))
    services = open_services(workspace.root, review_workers=1)
    reviewer(services)
    result = Reviewed(challenge_id, workspace.root, workspace.contract().primary_metric)
    box = BenchmarkAgent(workspace, "perfect", challenge_id, data_dir)
    payloads = {"perfect": perfect(box, box.commit_model(), result)}
    box = BenchmarkAgent(workspace, "trivial", challenge_id, data_dir)
    payloads["trivial"] = trivial(box, box.commit_model(), result, result.folds["perfect"])
    return services, result, payloads


@pytest.fixture(scope="module")
def reviewed_all(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Reviewed]]:
    """Every challenge's attempts, submitted at once and reviewed side by side (a reviewer each)."""
    prepared = {c: prepare(c, tmp_path_factory.mktemp(c)) for c in REVIEWED}
    attempts = [
        (services, name, payload) for services, _, payloads in prepared.values() for name, payload in payloads.items()
    ]
    try:
        answers = iter(anyio.run(review_all, attempts))
        for _, result, payloads in prepared.values():
            result.reviews = {name: next(answers) for name in payloads}
        yield {c: result for c, (_, result, _) in prepared.items()}
    finally:
        for services, _, _ in prepared.values():
            stop_reviewer(services)
            services.ledger.close()


@pytest.fixture(params=REVIEWED)
def reviewed(request: pytest.FixtureRequest, reviewed_all: dict[str, Reviewed]) -> Reviewed:
    return reviewed_all[request.param]


def test_perfect_attempt_is_accepted_with_the_task_graders_valid_verdict(reviewed: Reviewed) -> None:
    review = reviewed.reviews["perfect"]
    assert review["verdict"] == "accepted" and errors(review) == {}, review["failed_checks"]
    verified = next(m for m in review["metrics"] if m["metric"] == reviewed.primary)
    assert verified["fold"] == reviewed.folds["perfect"]
    assert verified["verified"] == pytest.approx(reviewed.declared["perfect"])  # the grader's own number
    check = reviewed.check("perfect", "SUBMISSION_INVALID")
    assert check["passed"] and check["evidence"] == {"grader": "valid"}
    baseline = reviewed.check("perfect", "TRIVIAL_BASELINE")  # scored, even where a constant has no correlation
    assert baseline["passed"] and baseline["evidence"]["folds"], baseline["message"]
    if reviewed.challenge_id == "ldct-iqa":  # the training mean's correlation is NaN: permuted targets instead
        assert baseline["evidence"]["folds"][0]["predictor"] == "permuted_targets"


def test_trivial_predictions_are_rejected_for_not_beating_the_trivial_predictor(reviewed: Reviewed) -> None:
    review = reviewed.reviews["trivial"]
    assert review["verdict"] == "rejected", review["failed_checks"]
    # ldct's constant scores NaN, as scipy's correlation of a constant: no declared number can match it.
    nan = {"METRIC_MISMATCH"} if reviewed.challenge_id == "ldct-iqa" else set()
    assert set(errors(review)) == {"TRIVIAL_BASELINE", "SUBMISSION_INVALID", *nan}, review["failed_checks"]
    loss = errors(review)["TRIVIAL_BASELINE"]["evidence"]["folds"][0]
    assert (loss["fold"], loss["metric"]) == (reviewed.folds["trivial"], reviewed.primary)
    if nan:  # caught by the seeded permutations of the training targets, whose correlation is defined
        assert loss["verified"] is None and loss["predictor"] == "permuted_targets" and loss["baseline"] < 3.0
    else:
        assert loss["verified"] == pytest.approx(reviewed.declared["trivial"]) and loss["verified"] <= loss["baseline"]


def test_broken_test_submission_is_invalid_by_the_task_graders_word(reviewed: Reviewed) -> None:
    invalid = errors(reviewed.reviews["trivial"])["SUBMISSION_INVALID"]["evidence"]
    assert invalid["grader"] == "invalid"  # the task's own grader refused it, in its own words
    reason = invalid["reasons"][0]
    assert "InvalidSubmissionError" in reason and GRADER_REFUSAL[reviewed.challenge_id] in reason, reason


def test_other_predictions_under_the_same_file_names_are_no_duplicate(reviewed: Reviewed) -> None:
    assert reviewed.folds["trivial"] == reviewed.folds["perfect"]  # same fold, files named as the sample names them
    assert "DUPLICATE_PAYLOAD" in reviewed.reviews["trivial"]["passed_checks"]


def test_the_memorising_model_is_replayed_and_reproduces_the_frozen_predictions(reviewed: Reviewed) -> None:
    check = reviewed.check("perfect", "PRED_NOT_REPRODUCED")
    assert check["passed"], check["message"]
    cases = check["evidence"]["cases"]
    assert check["evidence"]["n_cases"] == len(cases) >= 1
    assert all(c["fold"] == reviewed.folds["perfect"] and c["agreement"] >= c["threshold"] for c in cases)
