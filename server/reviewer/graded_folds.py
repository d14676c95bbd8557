"""Re-scoring a validation fold with the task's own grader (benchmark imports).

A fold's frozen predictions are laid out like a test submission: `submission.csv` listing the
fold's validation cases, plus the files it references. The reviewer builds the fold's answers from
the public training labels in the schema of the grader's answers table, runs the grader, and takes
the metrics it returns: the same code that ranks the test set verifies the folds, on its scale.
The trivial predictor (empty masks of the answer's geometry, the input image for enhancement, a
constant per column for tables) goes through the same grader.
"""

from __future__ import annotations

import csv
import hashlib
import io
import shutil
import statistics
import tempfile
from collections import Counter
from pathlib import Path, PurePosixPath

from amid.server.reviewer import permuted
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.grader_keys import metrics_of
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.predictions import FoldResult
from amid.server.reviewer.submission_files import IMAGE_SUFFIXES
from amid.server.reviewer.task_grader import build_fold_answers, place_files, run_grader
from amid.tools.metrics import MetricSummary
from amid.tools.metrics.scoring import PlannedMetric


def review_graded_fold(ctx: ReviewContext, plan: list[PlannedMetric], fold: int, need_baseline: bool) -> FoldResult:
    result = FoldResult(fold, ctx.folds.val_cases(fold))
    refs = {ref.member or PurePosixPath(ref.declared_path).name: ref for ref in ctx.files("predictions", fold)}
    rows = _rows(ctx, result, refs)
    if rows is None:
        return result
    ctx.progress(0.2, f"fold {fold}: the task's grader")
    with tempfile.TemporaryDirectory(prefix="amid-fold-") as tmp:
        answers_dir = Path(tmp) / "answers"
        answers_dir.mkdir()
        answers = build_fold_answers(ctx, result.val_cases, answers_dir)
        submission = Path(tmp) / "submission"
        place_files(ctx, {m: r for m, r in refs.items() if ctx.usable(r)}, submission)
        result.summaries = _grade(ctx, plan, result, submission, answers, answers_dir, "predictions")
        if need_baseline:
            trivial = Path(tmp) / "trivial"
            if _write_trivial(ctx, rows, submission, result.val_cases, answers, answers_dir, trivial):
                result.baseline_summaries = _grade(ctx, plan, result, trivial, answers, answers_dir, None)
                _permuted_baseline(ctx, plan, result, trivial, answers, answers_dir)
    return result


def _permuted_baseline(
    ctx: ReviewContext, plan: list[PlannedMetric], result: FoldResult, trivial: Path, answers: Path, answers_dir: Path
) -> None:
    """Tables: the metrics a constant leaves undefined (correlations) get the seeded permutations of
    the fold's training targets as their trivial predictor, through the same grader."""
    names = [m.name for m in plan if permuted.undefined(result.baseline_summaries.get(m.name))]
    contract = ctx.contract.submission
    if not names or contract.file_column:
        return
    with (trivial / contract.filename).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    train = _training_rows(ctx, result.fold)
    graded = []
    for index, draw in enumerate(permuted.draws(train, len(rows), result.fold)):
        folder = trivial.parent / f"permuted-{index}"
        folder.mkdir()
        drawn = [
            {**row, **{c: source[c] for c in contract.columns[1:] if c in source}}
            for row, source in zip(rows, draw, strict=True)
        ]
        _write_rows(folder / contract.filename, contract.columns, drawn)
        graded.append(_grade(ctx, plan, result, folder, answers, answers_dir, None))
    for name, summary in permuted.averaged(graded, names).items():
        result.baseline_summaries[name] = summary
        result.baseline_predictors[name] = permuted.PREDICTOR


def _training_rows(ctx: ReviewContext, fold: int) -> list[dict[str, str]]:
    """The labels table's rows of the fold's training cases (the targets a trivial predictor may know)."""
    rel = ctx.contract.layout.labels_table
    if rel is None:
        return []
    with (ctx.workspace.task_dir / rel).open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    train = set(ctx.folds.folds[fold].train_cases)
    id_column = ctx.contract.submission.id_column
    return [row for row in table if row.get(id_column) in train]


def _write_rows(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _rows(ctx: ReviewContext, result: FoldResult, refs: dict[str, ArtifactRef]) -> list[dict[str, str]] | None:
    """The fold's submission rows; notes missing and outside cases, and fingerprints each case."""
    contract = ctx.contract.submission
    table = refs.get(contract.filename)
    if table is None or not ctx.usable(table):
        expected = f"{contract.filename} listing the fold's cases, as in a test submission"
        result.schema.append({"file": contract.filename, "problem": "missing", "expected": expected})
        result.missing.extend(result.val_cases)
        return None
    text = ctx.path(table).read_text(encoding="utf-8", errors="replace")
    rows = list(csv.DictReader(io.StringIO(text)))
    val = set(result.val_cases)
    listed = {row.get(contract.id_column, "") for row in rows}
    result.missing.extend(c for c in result.val_cases if c not in listed)
    for row in rows:
        case_id = row.get(contract.id_column, "")
        if case_id not in val:
            result.outside.append(
                {"case_id": case_id, "file": contract.filename, "belongs_to_fold": _fold(ctx, case_id)}
            )
            continue
        _fingerprint(ctx, result, case_id, row, refs)
    return rows


def _fold(ctx: ReviewContext, case_id: str) -> int | str:
    try:
        return ctx.folds.fold_of(case_id)
    except KeyError:
        return "test" if case_id in ctx.test_cases else "unknown case"


def _fingerprint(
    ctx: ReviewContext, result: FoldResult, case_id: str, row: dict[str, str], refs: dict[str, ArtifactRef]
) -> None:
    column = ctx.contract.submission.file_column
    if column:
        ref = refs.get(str(PurePosixPath(row.get(column) or "")))
        if ref is None or not ctx.usable(ref):
            result.missing.append(case_id)
            return
        result.byte_hashes[case_id] = ref.sha256
        result.value_hashes[case_id] = ref.sha256
    else:
        values = "\x00".join(f"{k}={v}" for k, v in sorted(row.items()))
        result.value_hashes[case_id] = result.byte_hashes[case_id] = hashlib.sha256(values.encode()).hexdigest()


def _grade(
    ctx: ReviewContext,
    plan: list[PlannedMetric],
    result: FoldResult,
    submission: Path,
    answers: Path,
    answers_dir: Path,
    problem_file: str | None,
) -> dict[str, MetricSummary]:
    verdict = run_grader(ctx, submission, answers, answers_dir, "scores")
    if verdict.status != "valid":
        if problem_file is not None:
            result.schema.append(
                {"file": problem_file, "problem": f"the task's grader: {verdict.status}", "got": verdict.reason}
            )
        return {}
    values = metrics_of((m.name for m in plan), verdict.metrics)
    n = len(result.val_cases)
    return {name: _single(value, n) for name, value in values.items()}


def _single(value: float | None, n_cases: int) -> MetricSummary:
    """The grader gives one value per metric; the summary records it with the fold's case count."""
    number = float("nan") if value is None else float(value)
    return MetricSummary(
        mean=number,
        median=number,
        std=0.0,
        n_cases=n_cases,
        n_valid=n_cases if value is not None else 0,
        n_nan=0 if value is not None else n_cases,
        n_capped=0,
        values=(number,),
    )


def _write_trivial(
    ctx: ReviewContext,
    rows: list[dict[str, str]],
    submission: Path,
    cases: list[str],
    answers: Path,
    answers_dir: Path,
    into: Path,
) -> bool:
    """A trivial submission in the task's format; False when none can be made."""
    contract = ctx.contract.submission
    into.mkdir()
    sample = _sample_row(ctx)
    column = contract.file_column
    labels = _answer_label_files(ctx, answers, answers_dir)
    fixed = _fixed_prediction(ctx, rows, submission) if column else None
    trivial_rows = []
    for case_id in cases:
        row = {c: sample.get(c, "") for c in contract.columns}
        row[contract.id_column] = case_id
        if column:
            rel = _trivial_file(ctx, case_id, labels.get(case_id), fixed, into, sample.get(column, ""))
            if rel is None:
                return False
            row[column] = rel
        trivial_rows.append(row)
    if not column:
        _constants(ctx, trivial_rows)
    _write_rows(into / contract.filename, contract.columns, trivial_rows)
    return True


def _fixed_prediction(ctx: ReviewContext, rows: list[dict[str, str]], submission: Path) -> Path | None:
    """The attempt's own prediction of its first listed case: given for every case, it is the
    'one fixed answer' predictor (one topology, the same boxes everywhere) in a format the grader
    surely reads."""
    column = ctx.contract.submission.file_column
    for row in rows:
        path = submission / (row.get(column or "") or "")
        if column and path.is_file():
            return path
    return None


def _sample_row(ctx: ReviewContext) -> dict[str, str]:
    sample = ctx.contract.submission.sample_submission
    if sample is None or not (ctx.workspace.task_dir / sample).is_file():
        return {}
    with (ctx.workspace.task_dir / sample).open(encoding="utf-8", newline="") as handle:
        return next(csv.DictReader(handle), {})


def _answer_label_files(ctx: ReviewContext, answers: Path, answers_dir: Path) -> dict[str, Path]:
    """Case → the image-like label file of its answers row (the geometry of a trivial mask)."""
    grader = ctx.contract.grader
    if grader is None:
        return {}
    inputs = set(ctx.contract.layout.case_files.train_images) if ctx.contract.layout.case_files else set()
    columns = [c.name for c in grader.fold_answers or [] if c.kind != "value" and c.train_source not in inputs]
    id_column = grader.id_column or ctx.contract.submission.id_column
    found: dict[str, Path] = {}
    with answers.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            value = next((row[n] for n in columns if (row.get(n) or "").lower().endswith(IMAGE_SUFFIXES)), None)
            if value is not None:
                found[row[id_column]] = answers_dir / value
    return found


def _trivial_file(
    ctx: ReviewContext, case_id: str, label: Path | None, constant: Path | None, into: Path, example: str
) -> str | None:
    ending = next((e for e in IMAGE_SUFFIXES if example.lower().endswith(e)), None)
    (into / "trivial").mkdir(exist_ok=True)
    if ending is None:  # JSON, YAML, text: one fixed prediction for every case
        if constant is None:
            return None
        rel = f"trivial/{case_id}{''.join(constant.suffixes[-1:])}"
        shutil.copyfile(constant, into / rel)
        return rel
    rel = f"trivial/{case_id}{ending}"
    if ctx.contract.task_type == "enhancement":
        shutil.copyfile(ctx.workspace.task_dir / ctx.train_cases[case_id].image_paths[0], into / rel)
        return rel
    if label is None or not label.exists():
        return None
    _zeros_like(label.resolve(), into / rel)
    return rel


def _zeros_like(reference: Path, target: Path) -> None:
    """An all-zero label image with the reference's size, spacing and orientation, in target's format."""
    import SimpleITK as sitk

    image = sitk.ReadImage(str(reference))
    zeros = sitk.Image(image.GetSize(), sitk.sitkUInt8)
    zeros.CopyInformation(image)
    sitk.WriteImage(zeros, str(target))


def _constants(ctx: ReviewContext, rows: list[dict[str, str]]) -> None:
    """Tables: every value column gets the training mean (numbers) or majority (classes)."""
    rel = ctx.contract.layout.labels_table
    if rel is None:
        return
    with (ctx.workspace.task_dir / rel).open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    for column in ctx.contract.submission.columns[1:]:
        values = [r[column] for r in table if r.get(column) not in (None, "")]
        if not values:
            continue
        majority = Counter(values).most_common(1)[0][0]
        classes = ctx.contract.task_type == "classification"  # a mean of grades 0-4 is no class (kappa raises)
        try:
            constant = majority if classes else str(statistics.fmean(float(v) for v in values))
        except ValueError:
            constant = majority
        for row in rows:
            row[column] = constant
