"""ReX-MLE conformance: every real challenge, unchanged, through the whole AMID loop with its own grader.

    python benchmarks/rexmle_conformance.py --rexmle CHECKOUT [--only ID ...] [--work DIR]

CHECKOUT is a checkout of rajpurkarlab/ReX-MLE (or set REXMLE_DIR). For each challenge folder
`rex-mle/rexmle/challenges/<id>/` the runner:
  1. writes small synthetic raw data in the layout that challenge's prepare.py reads
     (benchmarks/rexmle/raw_*.py) and runs the real prepare.py (benchmarks/rexmle/harness.py) in
     the grader environment (benchmarks/rexmle/grader_env.sh: an interpreter where `rexmle` imports);
  2. `amid init <challenge folder> --data-dir DATA --grader-python PY` (the folder as it is);
  3. starts `amid serve`, and as an agent over MCP/HTTP: profile_data, list_lanes, claim_lane;
  4. submits three attempts on fold 0, each committed with an inference command whose replay
     reproduces its predictions from the frozen checkpoint, and requests the review:
       perfect  — validation predictions equal to the fold's answers, a perfect test submission:
                  must be accepted, with the real grade_fn having judged the test submission;
       broken   — the same with a test submission that breaks the format: SUBMISSION_INVALID;
       trivial  — the task type's trivial predictor (empty masks, the input image, one fixed answer
                  for every case, the training mean of a table): must be rejected.
       partial  — (--strict) the perfect attempt with a test submission missing its last case:
                  must be SUBMISSION_INVALID, whether or not the challenge's grader scores it.
It prints a table and N/20, and writes benchmarks/results/rexmle_conformance.json. `--strict` also
requires a sane profile (no error-severity issue, no training case called unlabelled), the partial
attempt invalid, and the trivial baseline scored (the perfect attempt's TRIVIAL_BASELINE check passed,
not unverifiable; the trivial attempt caught by it), and writes rexmle_conformance_strict.json.
`run_rexmle(checkout, strict)` returns the rows, for a combined table.

The perfect attempt memorises its predictions in its checkpoint (no holdout is configured), so it
tests the plumbing, not a model. Nothing of ReX-MLE is copied here: its files are read where they are.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.connect import ensure_worktree
from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.reviewer.grader_keys import metrics_of
from amid.server.workspace import Workspace
from amid.tools.task.cases import discover_cases
from amid.tools.task.fold_answers import write_fold_answers
from benchmarks._common import write_result
from benchmarks.rexmle import raw_misc, raw_pathology, raw_topcow

HERE = Path(__file__).resolve().parent
STRICT_SUMMARY = (
    "; strict: no error issue in the profile, a test submission missing a case invalid, the trivial baseline scored"
)
WRITERS = {**raw_misc.WRITERS, **raw_pathology.WRITERS, **raw_topcow.WRITERS}
SUBMITTERS = {**raw_misc.SUBMITTERS, **raw_pathology.SUBMITTERS, **raw_topcow.SUBMITTERS}
RUNNER = Path(__file__).resolve().parent.parent / "server" / "reviewer" / "grader_runner.py"

# The committed "model" of every attempt: it replays the predictions memorised in its checkpoint
# (a zip of a submission folder) for the cases whose input files it is given.
MEMORISED_PY = '''\
"""Replays memorised predictions: python memorised.py CHECKPOINT_ZIP CASE_IDS OUTPUT_DIR"""
import csv, io, sys, zipfile
from pathlib import Path

checkpoint, wanted, output = sys.argv[1], set(sys.argv[2].split(",")), Path(sys.argv[3])
with zipfile.ZipFile(checkpoint) as archive:
    rows = list(csv.DictReader(io.StringIO(archive.read("submission.csv").decode())))
    header = list(rows[0]) if rows else []
    keep = [r for r in rows if r[header[0]] in wanted]
    output.mkdir(parents=True, exist_ok=True)
    for row in keep:
        for value in row.values():
            if value in archive.namelist():
                (output / value).parent.mkdir(parents=True, exist_ok=True)
                (output / value).write_bytes(archive.read(value))
    with (output / "submission.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(keep)
'''


def challenge_ids(checkout: Path) -> list[str]:
    root = checkout / "rex-mle" / "rexmle" / "challenges"
    return sorted(p.name for p in root.iterdir() if (p / "config.yaml").is_file() and not p.name.startswith("_"))


def grader_python(checkout: Path) -> str:
    done = subprocess.run(
        ["bash", str(HERE / "rexmle" / "grader_env.sh"), str(checkout)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def prepare(python: str, data: Path, challenge_id: str, seed: int) -> None:
    raw = data / challenge_id / "raw"
    shutil.rmtree(data / challenge_id, ignore_errors=True)
    raw.mkdir(parents=True)
    WRITERS[challenge_id](raw, seed)
    subprocess.run(
        [python, str(HERE / "rexmle" / "harness.py"), "prepare", str(data), challenge_id],
        check=True,
        capture_output=True,
        text=True,
    )


def amid(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "amid", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"amid {args[0]} failed: {(done.stderr or done.stdout)[-1500:]}")
    return done.stdout


def run_challenge(
    checkout: Path, python: str, work: Path, challenge_id: str, seed: int, strict: bool = False
) -> dict[str, Any]:
    row: dict[str, Any] = {"challenge": challenge_id}
    started = time.monotonic()
    data, ws_dir = work / "data", work / "ws" / challenge_id
    try:
        prepare(python, data, challenge_id, seed)
        row["prepared"] = True
        folder = checkout / "rex-mle" / "rexmle" / "challenges" / challenge_id
        amid("init", str(folder), "-w", str(ws_dir), "--data-dir", str(data), "--grader-python", python)
        row["imported"] = True
        workspace = Workspace(ws_dir)
        contract = workspace.contract()
        row.update(task_type=contract.task_type, modality=contract.modality, primary=contract.primary_metric)
        row.update(asyncio.run(_loop(workspace, data, challenge_id, python, strict)))
    except Exception as exc:  # one challenge's failure is a row of the table, not the end of the run
        row["error"] = _describe(exc)[:600]
    row["seconds"] = round(time.monotonic() - started, 1)
    row["ok"] = bool(
        row.get("imported")
        and row.get("perfect") == "accepted"
        and row.get("grader_used")
        and row.get("broken_invalid")
        and row.get("trivial") == "rejected"
    )
    if strict:
        row["strict_failures"] = strict_failures(row)
        row["ok"] = row["ok"] and not row["strict_failures"]
    return row


def _describe(exc: BaseException) -> str:
    """The error itself, not the task group that carried it (the MCP client's ExceptionGroup)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def strict_failures(row: dict[str, Any]) -> list[str]:
    """What --strict adds: a sane profile, a missing test case invalid, the trivial baseline scored."""
    failures = []
    if row.get("profile_errors"):
        failures.append(f"profile: error issues {row['profile_errors']}")
    if row.get("unlabelled_train"):
        failures.append(f"profile: {row['unlabelled_train']} training case(s) called unlabelled")
    if not row.get("partial_invalid"):
        failures.append("a test submission missing a case was not SUBMISSION_INVALID")
    if row.get("perfect_baseline") != "passed":
        failures.append(f"perfect attempt: TRIVIAL_BASELINE {row.get('perfect_baseline')} (no baseline scored)")
    if "TRIVIAL_BASELINE" not in (row.get("trivial_codes") or []):
        failures.append("trivial attempt: not caught by TRIVIAL_BASELINE")
    return failures


async def _loop(workspace: Workspace, data: Path, challenge_id: str, python: str, strict: bool) -> dict[str, Any]:
    process, url = start_server(workspace.root)
    try:
        token = admin_call(workspace, "token_create", {"name": "conformance", "role": "agent"})["token"]
        ensure_worktree(workspace, "conformance")
        async with connect(url, token) as client:
            return await _agent(client, workspace, data, challenge_id, python, strict)
    finally:
        stop_server(process)


async def _agent(
    client: Any, workspace: Workspace, data: Path, challenge_id: str, python: str, strict: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    task = await call(client, "get_task")
    profile = await call(client, "profile_data", {"wait_s": 50})
    while profile["status"] == "running":
        profile = await call(client, "profile_data", {"wait_s": 50})
    compact = profile.get("profile") or {}
    predicates = compact.get("predicates", {})
    out["predicates"] = sorted(k for k, v in predicates.items() if v)
    out["profile_errors"] = sorted({i["code"] for i in compact.get("issues", []) if i["severity"] == "error"})
    out["unlabelled_train"] = (compact.get("supervision") or {}).get("unlabelled_train_cases")
    lanes = (await call(client, "list_lanes"))["lanes"]
    out["lanes"] = sorted({lane["family"] for lane in lanes})
    lane = lanes[0]["lane_id"]
    await call(client, "claim_lane", {"lane_id": lane})
    worktree, fold = Path(task["worktree"]), 0
    val_cases = task["folds"][fold]["val_cases"]
    prepared = data / challenge_id / "prepared"
    for kind in ("perfect", "broken", "trivial", *(["partial"] if strict else [])):
        verdict = await _attempt(client, workspace, worktree, prepared, challenge_id, python, lane, val_cases, kind)
        codes = [c["code"] for c in verdict["failed_checks"] if c.get("severity", "error") == "error"]
        out[kind] = verdict["verdict"] or verdict["status"]
        out[f"{kind}_codes"] = codes
        if kind == "perfect":
            out["grader_used"] = _grader_ran(workspace, verdict)
            out["perfect_baseline"] = _check_state(workspace, verdict, "TRIVIAL_BASELINE")
        if kind == "broken":
            out["broken_invalid"] = "SUBMISSION_INVALID" in codes
        if kind == "partial":
            out["partial_invalid"] = "SUBMISSION_INVALID" in codes
    return out


async def _attempt(
    client: Any,
    workspace: Workspace,
    worktree: Path,
    prepared: Path,
    challenge_id: str,
    python: str,
    lane: str,
    val_cases: list[str],
    kind: str,
) -> dict[str, Any]:
    base = worktree / "attempts" / kind
    shutil.rmtree(base, ignore_errors=True)
    fold_dir, test_dir = base / "fold0", base / "submission"
    fold_kind = "trivial" if kind == "trivial" else "perfect"
    submit_kind = "perfect" if kind == "partial" else kind
    if fold_kind == "trivial" and workspace.contract().submission.file_column is None:
        _mean_table(workspace, val_cases, fold_dir)  # a table's trivial predictor: the training mean
    else:
        _fold_predictions(workspace, prepared, challenge_id, val_cases, fold_dir, fold_kind)
    SUBMITTERS[challenge_id](prepared, test_dir, submit_kind)
    if kind == "partial":
        _drop_last_row(test_dir / "submission.csv")
    checkpoint = base / "checkpoint.zip"
    _zip(fold_dir, checkpoint)
    (worktree / "memorised.py").write_text(MEMORISED_PY, encoding="utf-8")
    manifest = base / "manifest.json"
    train_cases = [c for c in json.loads((workspace.task_dir / "folds.json").read_text())["folds"][0]["train_cases"]]
    manifest.write_text(json.dumps({"folds": {"0": train_cases}}), encoding="utf-8")
    (base / "train.log").write_text(f"{kind} attempt: predictions memorised in the checkpoint\n", encoding="utf-8")
    commit = _commit(worktree, ["memorised.py"], f"{kind} attempt")
    scores = _own_scores(workspace, python, fold_dir, val_cases)
    rel = base.relative_to(worktree)
    attempt = await call(
        client,
        "submit_attempt",
        {
            "commit": commit,
            "folds": [0],
            "declared_scores": {"0": scores},
            "lane_id": lane,
            "budget_class": "smoke",
            "artifacts": {
                "predictions": {"0": f"{rel}/fold0"},
                "submission": f"{rel}/submission",
                "checkpoint": f"{rel}/checkpoint.zip",
                "training_manifest": f"{rel}/manifest.json",
                "logs": [f"{rel}/train.log"],
            },
            "inference_command": ["{python}", "memorised.py", "{checkpoint}", "{case_ids}", "{output_dir}"],
        },
    )
    review = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
    verdict = await call(client, "get_review", {"review_id": review["review_id"], "wait_s": 50})
    while verdict["status"] in ("queued", "running"):
        verdict = await call(client, "get_review", {"review_id": review["review_id"], "wait_s": 50})
    return verdict


def _fold_predictions(
    workspace: Workspace, prepared: Path, challenge_id: str, cases: list[str], into: Path, kind: str
) -> None:
    """The fold's predictions in the submission format, made by the challenge's submitter from the
    fold's answers laid out like a prepared challenge (answers under private/, a fold sample)."""
    pseudo = Path(tempfile.mkdtemp(prefix="amid-fold-prepared-"))
    try:
        table = write_fold_answers(workspace.task_dir, workspace.contract(), cases, pseudo / "private")
        table.rename(pseudo / "private" / "test_labels.csv")
        shutil.copytree(prepared / "public", pseudo / "public", symlinks=True)
        for path in (pseudo / "private").rglob("*"):  # input files the answers name (test/images/…) seen as public
            target = pseudo / "public" / path.relative_to(pseudo / "private")
            if path.is_file() and path.suffix != ".csv" and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(path.resolve())
        _fold_inputs(workspace, cases, pseudo / "public")
        _fold_sample(prepared / "public" / "sample_submission.csv", pseudo / "public" / "sample_submission.csv", cases)
        SUBMITTERS[challenge_id](pseudo, into, kind)
    finally:
        shutil.rmtree(pseudo, ignore_errors=True)


def _fold_inputs(workspace: Workspace, cases: list[str], public: Path) -> None:
    """The fold's input images where a submitter looks for test inputs (public/test/…)."""
    trains = {c.case_id: c for c in discover_cases(workspace.task_dir, workspace.contract().layout, "train")}
    for case in cases:
        for rel in trains[case].image_paths:
            parts = list(PurePosixPath(rel).parts[1:])  # without the leading public/
            parts = ["test" if p == "train" else p for p in parts]
            target = public.joinpath(*parts)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(workspace.task_dir / rel)


def _mean_table(workspace: Workspace, cases: list[str], into: Path) -> None:
    """Every value column at its training mean: the trivial predictor of a table task."""
    contract = workspace.contract()
    table = contract.layout.labels_table
    assert table is not None
    with (workspace.task_dir / table).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    columns = contract.submission.columns
    means = {c: sum(float(r[c]) for r in rows) / len(rows) for c in columns[1:] if rows and c in rows[0]}
    into.mkdir(parents=True, exist_ok=True)
    with (into / "submission.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows([case, *(means.get(c, 0.0) for c in columns[1:])] for case in cases)


def _drop_last_row(table: Path) -> None:
    """A perfect test submission without its last case: invalid whether or not the grader scores it."""
    lines = table.read_text(encoding="utf-8").splitlines()
    table.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")


def _fold_sample(sample: Path, target: Path, cases: list[str]) -> None:
    with sample.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    header = list(rows[0])
    template = rows[0]
    out = []
    for case in cases:
        row = {k: v.replace(template[header[0]], case) for k, v in template.items()}
        out.append(row)
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(out)


def _zip(folder: Path, target: Path) -> None:
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())


def _commit(worktree: Path, paths: list[str], message: str) -> str:
    import git

    with git.Repo(worktree) as repo:
        repo.index.add(paths)
        return str(repo.index.commit(message).hexsha)


def _own_scores(workspace: Workspace, python: str, fold_dir: Path, cases: list[str]) -> dict[str, float]:
    """The agent's own fold score, on the grader's scale: the task's grader on the fold's answers."""
    contract = workspace.contract()
    grader = contract.grader
    assert grader is not None
    with tempfile.TemporaryDirectory(prefix="amid-own-") as tmp:
        answers = write_fold_answers(workspace.task_dir, contract, cases, Path(tmp))
        argv = [
            python,
            str(RUNNER),
            str(workspace.private_dir / grader.file),
            grader.function,
            str(fold_dir / "submission.csv"),
            str(fold_dir),
            str(answers),
            tmp,
            "scores",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    metrics = verdict.get("metrics") or {}
    found = metrics_of((m.name for m in contract.metrics), metrics)  # the reviewer's own rule
    scores = {k: float(v) for k, v in found.items() if v is not None}
    return scores or {contract.primary_metric: 0.0}


def _report_check(workspace: Workspace, verdict: dict[str, Any], code: str) -> dict[str, Any]:
    report = json.loads((workspace.root / "reviews" / f"{verdict['review_id']}.json").read_text(encoding="utf-8"))
    return dict(next(c for c in report["checks"] if c["code"] == code))


def _grader_ran(workspace: Workspace, verdict: dict[str, Any]) -> bool:
    return bool(_report_check(workspace, verdict, "SUBMISSION_INVALID")["evidence"].get("grader") == "valid")


def _check_state(workspace: Workspace, verdict: dict[str, Any], code: str) -> str:
    """passed, failed, or unverifiable (a warning: nothing to compare with)."""
    check = _report_check(workspace, verdict, code)
    return "passed" if check["passed"] else str(check.get("severity", "error")) + ": " + str(check["message"])[:160]


def run_rexmle(
    checkout: Path,
    strict: bool = False,
    only: list[str] | None = None,
    work: Path | None = None,
    seed: int = 0,
    echo: bool = True,
) -> list[dict[str, Any]]:
    """One row per challenge of the checkout (or `only` those); `strict` adds the checks of
    `strict_failures`. Each row has `ok`, and `strict_failures` when strict."""
    checkout = checkout.resolve()
    work = (work or Path(tempfile.mkdtemp(prefix="amid-rexmle-"))).resolve()
    shutil.rmtree(work / "ws", ignore_errors=True)
    python = grader_python(checkout)
    rows = []
    for challenge_id in only or challenge_ids(checkout):
        row = run_challenge(checkout, python, work, challenge_id, seed, strict)
        rows.append(row)
        if echo:
            _print_row(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rexmle", type=Path, default=os.environ.get("REXMLE_DIR"), help="ReX-MLE checkout")
    parser.add_argument("--only", nargs="*", default=None, help="challenge ids (default: all)")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also: sane profile, missing test case invalid, trivial baseline scored (rexmle_conformance_strict.json)",
    )
    args = parser.parse_args(argv)
    if args.rexmle is None:
        parser.error("give --rexmle CHECKOUT or set REXMLE_DIR")
    checkout = args.rexmle.resolve()
    rows = run_rexmle(checkout, args.strict, args.only, args.work, args.seed)
    passed = sum(r["ok"] for r in rows)
    print(
        f"\n{passed}/{len(rows)} challenges: imported unchanged, perfect accepted with the real grade_fn, "
        f"broken SUBMISSION_INVALID, trivial rejected{STRICT_SUMMARY if args.strict else ''}"
    )
    name = "rexmle_conformance_strict" if args.strict else "rexmle_conformance"
    if not args.only:
        write_result(
            name,
            {
                "checkout_commit": _head(checkout),
                "strict": args.strict,
                "passed": passed,
                "total": len(rows),
                "challenges": rows,
            },
        )
    return 0 if passed == len(rows) else 1


def _print_row(row: dict[str, Any]) -> None:
    fields: tuple[str, ...] = (
        "imported",
        "task_type",
        "primary",
        "perfect",
        "grader_used",
        "broken_invalid",
        "trivial",
    )
    fields += ("partial_invalid", "perfect_baseline", "unlabelled_train") if "strict_failures" in row else ()
    cells = " | ".join(f"{row.get(k, '-')}" for k in fields)
    codes = ",".join(row.get("perfect_codes") or []) + " / " + ",".join(row.get("trivial_codes") or [])
    status = "PASS" if row["ok"] else "FAIL"
    why = "; ".join(row.get("strict_failures") or [])
    print(
        f"{status} {row['challenge']:<22} {cells} | {row['seconds']} s | {codes} {row.get('error', '')} {why}",
        flush=True,
    )


def _head(checkout: Path) -> str | None:
    """The checkout's commit (REXMLE_COMMIT when the checkout is an export without .git)."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or os.environ.get("REXMLE_COMMIT") or None


if __name__ == "__main__":
    raise SystemExit(main())
