"""SUBMISSION_INVALID: the test submission against the submission contract, then the task's own
grader (when it has one) as the authority on validity. Valid or invalid with reasons; the grader's
score never leaves its process."""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path, PurePosixPath

from amid.server.errors import DataUnreadable
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.predictions import schema_problems
from amid.server.reviewer.report import Check, fired, head, ok
from amid.server.reviewer.task_grader import place_files, run_grader, scores_folds, test_answers
from amid.tools.metrics.images import read_reference, read_volume

IMAGE_TYPES = frozenset({"nifti", "png", "tiff", "mha", "nrrd"})


def submission_check(ctx: ReviewContext) -> tuple[Check, list[str]]:
    """The check, and the test cases the submission leaves out (for PRED_INCOMPLETE)."""
    files = {ref.member or PurePosixPath(ref.declared_path).name: ref for ref in ctx.files("submission")}
    if not files:
        return ok("SUBMISSION_INVALID", "no test submission declared; nothing to validate"), []
    reasons: list[str] = []
    missing: list[str] = []
    table = files.get(ctx.contract.submission.filename)
    if table is None or not ctx.usable(table):
        reasons.append(f"no usable {ctx.contract.submission.filename} at the top of the submission folder")
    else:
        missing = _check_table(ctx, ctx.path(table).read_text(errors="replace"), files, reasons)
    grader = "not run"
    if not reasons and ctx.contract.grader is not None:
        grader = _run_grader(ctx, files, reasons)
    if reasons:
        return (
            fired(
                "SUBMISSION_INVALID",
                f"the test submission is invalid: {reasons[0]}",
                reasons=head(reasons),
                n_reasons=len(reasons),
                grader=grader,
            ),
            missing,
        )
    detail = "the task's grader accepted it" if grader == "valid" else "no task grader to confirm it"
    return ok("SUBMISSION_INVALID", f"the test submission is valid ({detail})", grader=grader), missing


def _check_table(ctx: ReviewContext, text: str, files: dict[str, ArtifactRef], reasons: list[str]) -> list[str]:
    contract = ctx.contract.submission
    rows = list(csv.DictReader(io.StringIO(text)))
    header = next(csv.reader(io.StringIO(text)), [])
    absent = [c for c in contract.columns if c not in header]
    if absent:
        reasons.append(f"{contract.filename} lacks columns {absent}; expected {contract.columns}, got {header}")
        return []
    ids = [row[contract.id_column] for row in rows]
    expected = set(ctx.test_cases)
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    unknown = sorted(set(ids) - expected)
    if repeated:
        reasons.append(f"case ids repeat: {repeated[:10]}")
    if unknown:
        reasons.append(f"case ids not in the test set: {unknown[:10]}")
    missing = sorted(expected - set(ids))
    if missing:
        # Invalid whatever the task's grader says: some graders score an incomplete submission
        # (PUMA's nuclei graders average the cases they are given), and a test set is scored whole.
        reasons.append(
            f"missing cases: {len(missing)} test case(s) have no row in {contract.filename}, e.g. {missing[:10]}; "
            f"the submission needs one row per case of the test set"
        )
    for row in rows:
        value = row.get(contract.file_column or "", "") if contract.file_column else ""
        if contract.file_column:
            _check_file(ctx, row[contract.id_column], value, files, reasons)
        elif any(v in ("", None) for v in row.values()):
            reasons.append(f"row {row[contract.id_column]!r} has empty values")
    return missing


def _check_file(ctx: ReviewContext, case_id: str, rel: str, files: dict[str, ArtifactRef], reasons: list[str]) -> None:
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or ".." in path.parts:
        reasons.append(f"{case_id}: path {rel!r} must be relative to the submission folder, without '..'")
        return
    ref = files.get(str(path))
    if ref is None or not ctx.usable(ref):
        reasons.append(f"{case_id}: {rel!r} is not in the submission folder")
        return
    case = ctx.test_cases.get(case_id)
    if case is None or scores_folds(ctx) or ctx.contract.prediction.file_type not in IMAGE_TYPES:
        return  # the task's grader judges file contents it defines; built-in checks cover images only
    ending = ctx.contract.layout.file_ending
    try:
        prediction = read_volume(ctx.path(ref), ending)
    except DataUnreadable as exc:
        reasons.append(f"{case_id}: {rel} {exc}")
        return
    image = read_reference(ctx.workspace.task_dir / case.image_paths[0], ending)
    for problem in schema_problems(ctx, prediction, image):
        reasons.append(f"{case_id}: {problem['problem']} expected {problem.get('expected')} got {problem.get('got')}")


def _run_grader(ctx: ReviewContext, files: dict[str, ArtifactRef], reasons: list[str]) -> str:
    """The task's grader on the test submission: the authority on validity. A grader that is
    present but cannot run is a reason, never "valid"."""
    answers = test_answers(ctx)
    if answers is None or not answers[0].is_file():
        reasons.append("the task's grader has no answers table under private/ to grade against")
        return "not run: answers absent"
    with tempfile.TemporaryDirectory(prefix="amid-submission-") as tmp:
        folder = Path(tmp) / "submission"
        place_files(ctx, files, folder)
        verdict = run_grader(ctx, folder, answers[0], answers[1], "validity")
    if verdict.status == "valid":
        return "valid"
    what = {"invalid": "rejected it", "timed_out": "timed out", "not_run": "could not run"}.get(
        verdict.status, "failed"
    )
    reasons.append(f"the task's grader {what}: {verdict.reason}")
    return verdict.status
