"""The conformance run's attempts on an MLE-bench table task (one answers row per case), and the checks
made against MLE-bench's own harness beside AMID's review.

Every attempt memorises its predictions in its checkpoint (a zip of a submission folder) and commits
the replaying script of benchmarks/rexmle_conformance.py, so replay reproduces them; it tests the
plumbing, not a model.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from amid.server.workspace import Workspace
from amid.tools.task.fold_answers import write_fold_answers
from benchmarks.rexmle_conformance import MEMORISED_PY, _commit, _grader_ran, _zip

HARNESS = Path(__file__).resolve().parent / "harness.py"
ROUNDING = 5e-6  # MLE-bench's Grader rounds a score to 5 decimals


def profile_errors(workspace: Workspace) -> list[str]:
    """Error-severity codes of the data profile `amid init` wrote, with their counts."""
    profile = json.loads((workspace.root / "memory" / "profile" / "profile.json").read_text(encoding="utf-8"))
    counts = Counter(i["code"] for i in profile.get("issues", []) if i.get("severity") == "error")
    return [f"{code}×{n}" for code, n in sorted(counts.items())]


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _write(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def trivial_values(workspace: Workspace, columns: list[str]) -> dict[str, str]:
    """Each target at its training majority (integer classes) or mean: the trivial predictor."""
    table = workspace.contract().layout.labels_table
    assert table is not None, "an MLE-bench table task has a training labels table"
    _, rows = _read(workspace.task_dir / table)
    values = {}
    for column in columns:
        seen = [r[column] for r in rows]
        if all(v.lstrip("-").isdigit() for v in seen):
            values[column] = Counter(seen).most_common(1)[0][0]
        else:
            values[column] = str(sum(float(v) for v in seen) / len(seen))
    return values


def _predictions(answers: list[dict[str, str]], header: list[str], kind: str, workspace: Workspace) -> list[dict]:
    if kind != "trivial":
        return answers
    fixed = trivial_values(workspace, header[1:])
    return [{header[0]: row[header[0]], **fixed} for row in answers]


def _test_submission(prepared: Path, workspace: Workspace, into: Path, kind: str) -> None:
    header, _ = _read(prepared / "public" / "sample_submission.csv")
    answers_file = workspace.private_dir / (workspace.contract().grader.answers or "")  # type: ignore[union-attr]
    _, answers = _read(answers_file)
    rows = _predictions(answers, header, kind, workspace)
    if kind == "broken":
        header = header[:-1]
    if kind == "missing":
        rows = rows[1:]
    _write(into / "submission.csv", header, rows)


def write_attempt(
    workspace: Workspace,
    worktree: Path,
    data: Path,
    competition_id: str,
    python: str,
    val_cases: list[str],
    kind: str,
) -> dict[str, Any]:
    """Fold-0 predictions, a test submission, checkpoint, manifest and log of one attempt, committed;
    returns the submit_attempt arguments and where the files are. The declared fold score is the
    agent's own: MLE-bench's grader on the fold's answers."""
    prepared = data / competition_id / "prepared"
    base = worktree / "attempts" / kind
    shutil.rmtree(base, ignore_errors=True)
    fold_dir, test_dir = base / "fold0", base / "submission"
    header, _ = _read(prepared / "public" / "sample_submission.csv")
    with tempfile.TemporaryDirectory(prefix="amid-fold-") as tmp:
        fold_answers = write_fold_answers(workspace.task_dir, workspace.contract(), val_cases, Path(tmp))
        _, answers = _read(fold_answers)
        _write(fold_dir / "submission.csv", header, _predictions(answers, header, kind, workspace))
        own = harness_grade(python, data, competition_id, fold_dir / "submission.csv", fold_answers)["score"]
    _test_submission(prepared, workspace, test_dir, kind)
    _zip(fold_dir, base / "checkpoint.zip")
    (worktree / "memorised.py").write_text(MEMORISED_PY, encoding="utf-8")
    train_cases = json.loads((workspace.task_dir / "folds.json").read_text(encoding="utf-8"))["folds"][0]
    (base / "manifest.json").write_text(json.dumps({"folds": {"0": train_cases["train_cases"]}}), encoding="utf-8")
    (base / "train.log").write_text(f"{kind} attempt: predictions memorised in the checkpoint\n", encoding="utf-8")
    commit = _commit(worktree, ["memorised.py"], f"{kind} attempt")
    rel = base.relative_to(worktree)
    submit = {
        "commit": commit,
        "folds": [0],
        "budget_class": "smoke",
        "declared_scores": {"0": {workspace.contract().primary_metric: own if own is not None else 0.0}},
        "artifacts": {
            "predictions": {"0": f"{rel}/fold0"},
            "submission": f"{rel}/submission",
            "checkpoint": f"{rel}/checkpoint.zip",
            "training_manifest": f"{rel}/manifest.json",
            "logs": [f"{rel}/train.log"],
        },
        "inference_command": ["{python}", "memorised.py", "{checkpoint}", "{case_ids}", "{output_dir}"],
    }
    return {"submit": submit, "fold_dir": fold_dir, "test_dir": test_dir, "val_cases": val_cases}


def harness_grade(python: str, data: Path, competition_id: str, submission: Path, answers: Path | None = None) -> dict:
    """MLE-bench's own call of its grader (`Grader.__call__`: None for an invalid submission)."""
    argv = [python, str(HARNESS), "grade", str(data), competition_id, str(submission)]
    done = subprocess.run([*argv, *([str(answers)] if answers else [])], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"MLE-bench harness grade failed: {done.stderr[-1500:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def harness_valid(python: str, data: Path, competition_id: str, attempt: dict[str, Any]) -> bool:
    return bool(harness_grade(python, data, competition_id, attempt["test_dir"] / "submission.csv")["valid"])


def grader_ran(workspace: Workspace, verdict: dict[str, Any]) -> bool:
    return bool(_grader_ran(workspace, verdict))


def check_state(workspace: Workspace, verdict: dict[str, Any], code: str) -> str:
    """passed, or the check's severity and message (a warning: nothing to compare with)."""
    report = json.loads((workspace.root / "reviews" / f"{verdict['review_id']}.json").read_text(encoding="utf-8"))
    check = next(c for c in report["checks"] if c["code"] == code)
    return "passed" if check["passed"] else f"{check.get('severity', 'error')}: {str(check['message'])[:160]}"


def fold_scores(
    workspace: Workspace,
    python: str,
    data: Path,
    competition_id: str,
    attempt: dict[str, Any],
    verdict: dict[str, Any],
) -> dict[str, Any]:
    """AMID's verified fold-0 score of the attempt beside MLE-bench's harness on the same fold answers."""
    contract = workspace.contract()
    with tempfile.TemporaryDirectory(prefix="amid-fold-") as tmp:
        answers = write_fold_answers(workspace.task_dir, contract, attempt["val_cases"], Path(tmp))
        direct = harness_grade(python, data, competition_id, attempt["fold_dir"] / "submission.csv", answers)
    verified = _verified(workspace, verdict, contract.primary_metric)
    equal = direct["score"] is not None and verified is not None and abs(direct["score"] - verified) <= ROUNDING
    return {"fold_score_amid": verified, "fold_score_mlebench": direct["score"], "fold_scores_equal": equal}


def _verified(workspace: Workspace, verdict: dict[str, Any], metric: str) -> float | None:
    report = json.loads((workspace.root / "reviews" / f"{verdict['review_id']}.json").read_text(encoding="utf-8"))
    for row in report.get("metrics", []):
        if row.get("metric") == metric and str(row.get("fold")) == "0" and row.get("value") is not None:
            return float(row["value"])
    return None
