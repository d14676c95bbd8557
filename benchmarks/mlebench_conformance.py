"""MLE-bench conformance: its medical competitions, unchanged, through the whole AMID loop with their own graders.

    python benchmarks/mlebench_conformance.py --mlebench CHECKOUT [--only ID ...] [--work DIR] [--strict]

CHECKOUT is a work tree of openai/mle-bench (or set MLEBENCH_DIR). For each covered competition
`mlebench/competitions/<id>/` the runner:
  1. writes small synthetic raw data in Kaggle's raw layout that competition's prepare.py reads
     (benchmarks/mlebench/raw_*.py) and runs the real prepare.py as `mlebench prepare` does
     (benchmarks/mlebench/harness.py), in an interpreter where `mlebench` imports (grader_env.sh);
  2. `amid init <competition folder> --data-dir DATA --grader-python PY` (the folder as it is; where
     its leaderboard.csv is a Git LFS pointer, a copy whose leaderboard is a two-row stand-in in the
     metric's direction, since the direction is all AMID reads from it);
  3. starts `amid serve`, and as an agent over MCP/HTTP submits on fold 0, each committed with an
     inference command whose replay reproduces its predictions, and requests the review:
       perfect  — fold predictions equal to the fold's answers, a perfect test submission: accepted,
                  with MLE-bench's grade_fn having judged the test submission;
       broken   — a test submission without its last column: SUBMISSION_INVALID;
       missing  — a test submission without one case: SUBMISSION_INVALID;
       trivial  — every target at the training majority (or mean): rejected;
  4. grades the test submissions with MLE-bench's harness call (`Grader.__call__`, None = invalid),
     and the trivial fold predictions with it too, against the same fold answers AMID built.
`--strict` also requires: no error in the data profile, the missing-case submission invalid, a trivial
baseline scored on the perfect attempt and TRIVIAL_BASELINE among the trivial attempt's codes, and
AMID's fold score equal to MLE-bench's (within its 5-decimal rounding). Writes
benchmarks/results/mlebench_conformance[_strict].json when every covered competition ran;
`run_mlebench(checkout, strict)` returns the rows, for the combined table (benchmarks/conformance.py).
Nothing of MLE-bench is copied here: its files are read where they are.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.connect import ensure_worktree
from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call, connect
from amid.server.workspace import Workspace
from benchmarks._common import write_result
from benchmarks.mlebench import attempts, raw_classification, raw_series
from benchmarks.mlebench.coverage import COVERED, NOT_COVERED, STANDIN_BOARDS

HERE = Path(__file__).resolve().parent
WRITERS = {**raw_classification.WRITERS, **raw_series.WRITERS}
KINDS = ("perfect", "broken", "missing", "trivial")


def grader_python(checkout: Path) -> str:
    done = subprocess.run(
        ["bash", str(HERE / "mlebench" / "grader_env.sh"), str(checkout)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def harness(python: str, *args: str) -> str:
    done = subprocess.run([python, str(HERE / "mlebench" / "harness.py"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"harness {args[0]} failed: {(done.stderr or done.stdout)[-1500:]}")
    return done.stdout


def prepare(python: str, data: Path, competition_id: str, seed: int) -> None:
    raw = data / competition_id / "raw"
    shutil.rmtree(data / competition_id, ignore_errors=True)
    raw.mkdir(parents=True)
    WRITERS[competition_id](raw, seed)
    harness(python, "prepare", str(data), competition_id)


def competition_folder(checkout: Path, work: Path, competition_id: str) -> tuple[Path, str]:
    """The folder to import, and where its leaderboard came from."""
    folder = checkout / "mlebench" / "competitions" / competition_id
    board = folder / "leaderboard.csv"
    if not board.read_text(encoding="utf-8", errors="replace").startswith("version https://git-lfs"):
        return folder, "checkout"
    copy = work / "competitions" / competition_id
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy)
    best, worst = STANDIN_BOARDS[competition_id]
    (copy / "leaderboard.csv").write_text(f"teamId,score\n1,{best}\n2,{worst}\n", encoding="utf-8")
    return copy, "stand-in (Git LFS pointer in the checkout)"


def amid(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "amid", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"amid {args[0]} failed: {(done.stderr or done.stdout)[-1500:]}")
    return done.stdout


def run_competition(
    checkout: Path, python: str, work: Path, competition_id: str, seed: int, strict: bool = False
) -> dict[str, Any]:
    row: dict[str, Any] = {"competition": competition_id, "benchmark": "mle-bench"}
    started = time.monotonic()
    data, ws_dir = work / "data", work / "ws" / competition_id
    try:
        prepare(python, data, competition_id, seed)
        row["prepared"] = True
        folder, row["leaderboard"] = competition_folder(checkout, work, competition_id)
        amid("init", str(folder), "-w", str(ws_dir), "--data-dir", str(data), "--grader-python", python)
        row["imported"] = True
        workspace = Workspace(ws_dir)
        contract = workspace.contract()
        row.update(task_type=contract.task_type, modality=contract.modality, primary=contract.primary_metric)
        row["profile_errors"] = attempts.profile_errors(workspace)
        row.update(asyncio.run(_loop(workspace, data, competition_id, python)))
    except Exception as exc:  # one competition's failure is a row of the table, not the end of the run
        row["error"] = f"{type(exc).__name__}: {exc}"[:600]
    row["seconds"] = round(time.monotonic() - started, 1)
    return judge(row, strict)


def judge(row: dict[str, Any], strict: bool) -> dict[str, Any]:
    """`ok`: the loop's checks (and, when strict, no `strict_failures`), in the shape of the ReX-MLE rows."""
    row["ok"] = bool(
        row.get("imported")
        and row.get("perfect") == "accepted"
        and row.get("grader_used")
        and row.get("broken_invalid")
        and row.get("trivial") == "rejected"
        and row.get("harness_perfect_valid")
        and row.get("harness_broken_valid") is False
    )
    if strict:
        row["strict_failures"] = strict_failures(row)
        row["ok"] = row["ok"] and not row["strict_failures"]
    return row


def strict_failures(row: dict[str, Any]) -> list[str]:
    """What --strict adds: a sane profile, a missing test case invalid (by AMID and by MLE-bench), the
    trivial baseline scored and catching the trivial attempt, AMID's fold score equal to MLE-bench's."""
    failures = []
    if row.get("profile_errors"):
        failures.append(f"profile: error issues {row['profile_errors']}")
    if not row.get("missing_invalid") or row.get("harness_missing_valid") is not False:
        failures.append("a test submission missing a case was not invalid (AMID / MLE-bench)")
    if row.get("perfect_baseline") != "passed":
        failures.append(f"perfect attempt: TRIVIAL_BASELINE {row.get('perfect_baseline')} (no baseline scored)")
    if "TRIVIAL_BASELINE" not in (row.get("trivial_codes") or []):
        failures.append("trivial attempt: not caught by TRIVIAL_BASELINE")
    if not row.get("fold_scores_equal"):
        failures.append(f"fold score: AMID {row.get('fold_score_amid')} vs MLE-bench {row.get('fold_score_mlebench')}")
    return failures


async def _loop(workspace: Workspace, data: Path, competition_id: str, python: str) -> dict[str, Any]:
    process, url = start_server(workspace.root)
    try:
        token = admin_call(workspace, "token_create", {"name": "conformance", "role": "agent"})["token"]
        ensure_worktree(workspace, "conformance")
        async with connect(url, token) as client:
            return await _agent(client, workspace, data, competition_id, python)
    finally:
        stop_server(process)


async def _agent(client: Any, workspace: Workspace, data: Path, competition_id: str, python: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    task = await call(client, "get_task")
    lanes = (await call(client, "list_lanes"))["lanes"]
    lane = lanes[0]["lane_id"]
    await call(client, "claim_lane", {"lane_id": lane})
    worktree, val_cases = Path(task["worktree"]), task["folds"][0]["val_cases"]
    for kind in KINDS:
        attempt = attempts.write_attempt(workspace, worktree, data, competition_id, python, val_cases, kind)
        verdict = await _review(client, attempt, lane)
        codes = [c["code"] for c in verdict["failed_checks"] if c.get("severity", "error") == "error"]
        out[kind], out[f"{kind}_codes"] = verdict["verdict"] or verdict["status"], codes
        out[f"{kind}_warnings"] = [c["code"] for c in verdict["failed_checks"] if c.get("severity") == "warning"]
        out[f"harness_{kind}_valid"] = attempts.harness_valid(python, data, competition_id, attempt)
        if kind == "perfect":
            out["grader_used"] = attempts.grader_ran(workspace, verdict)
            out["perfect_baseline"] = attempts.check_state(workspace, verdict, "TRIVIAL_BASELINE")
        if kind in ("broken", "missing"):
            out[f"{kind}_invalid"] = "SUBMISSION_INVALID" in codes
        if kind == "trivial":
            out.update(attempts.fold_scores(workspace, python, data, competition_id, attempt, verdict))
    return out


async def _review(client: Any, attempt: dict[str, Any], lane: str) -> dict[str, Any]:
    submitted = await call(client, "submit_attempt", {**attempt["submit"], "lane_id": lane})
    review = await call(client, "request_review", {"attempt_id": submitted["attempt_id"]})
    verdict = await call(client, "get_review", {"review_id": review["review_id"], "wait_s": 50})
    while verdict["status"] in ("queued", "running"):
        verdict = await call(client, "get_review", {"review_id": review["review_id"], "wait_s": 50})
    return verdict


def run_mlebench(
    checkout: Path,
    strict: bool = False,
    only: list[str] | None = None,
    work: Path | None = None,
    seed: int = 0,
    echo: bool = True,
) -> list[dict[str, Any]]:
    """Every covered competition (or `only`), one row each with `ok` (and `strict_failures` when strict)."""
    work = work or Path(tempfile.mkdtemp(prefix="amid-mlebench-"))
    checkout, work = checkout.resolve(), work.resolve()
    shutil.rmtree(work / "ws", ignore_errors=True)
    python = grader_python(checkout)
    rows = []
    for competition_id in only or list(COVERED):
        if competition_id not in COVERED:
            rows.append(
                {
                    "competition": competition_id,
                    "benchmark": "mle-bench",
                    "ok": False,
                    "error": f"not covered: {NOT_COVERED.get(competition_id, 'no raw-data writer')}",
                }
            )
        else:
            rows.append(run_competition(checkout, python, work, competition_id, seed, strict))
        if echo:
            print_row(rows[-1])
    return rows


def print_row(row: dict[str, Any]) -> None:
    fields = (
        "imported",
        "task_type",
        "primary",
        "perfect",
        "grader_used",
        "broken_invalid",
        "missing_invalid",
        "trivial",
        "fold_scores_equal",
    )
    cells = " | ".join(f"{row.get(k, '-')}" for k in fields)
    status = "PASS" if row.get("ok") else "FAIL"
    codes = ",".join(row.get("perfect_codes") or []) + " / " + ",".join(row.get("trivial_codes") or [])
    why = "; ".join(row.get("strict_failures") or [])
    print(
        f"{status} {row['competition']:<44} {cells} | {row.get('seconds', '-')} s | {codes} "
        f"{row.get('error', '')} {why}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--mlebench", type=Path, default=os.environ.get("MLEBENCH_DIR"), help="MLE-bench work tree")
    parser.add_argument("--only", nargs="*", default=None, help="competition ids (default: every covered one)")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true", help="also require the strict checks (see above)")
    args = parser.parse_args(argv)
    if args.mlebench is None:
        parser.error("give --mlebench CHECKOUT or set MLEBENCH_DIR")
    rows = run_mlebench(args.mlebench, args.strict, args.only, args.work, args.seed)
    passed = sum(bool(r.get("ok")) for r in rows)
    print(
        f"\n{passed}/{len(rows)} competitions pass{' strictly' if args.strict else ''}; not covered: "
        f"{', '.join(sorted(NOT_COVERED))}"
    )
    if not args.only:
        name = "mlebench_conformance_strict" if args.strict else "mlebench_conformance"
        write_result(
            name,
            {
                "checkout_commit": head(args.mlebench),
                "strict": args.strict,
                "passed": passed,
                "total": len(rows),
                "competitions": rows,
                "not_covered": NOT_COVERED,
            },
        )
    return 0 if passed == len(rows) else 1


def head(checkout: Path) -> str | None:
    """The checkout's commit (MLEBENCH_COMMIT when the checkout is an export without .git)."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or os.environ.get("MLEBENCH_COMMIT") or None


if __name__ == "__main__":
    raise SystemExit(main())
