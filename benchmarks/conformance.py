"""Benchmark conformance in one table: every ReX-MLE challenge and every covered MLE-bench medical
competition, unchanged, through the whole AMID loop with its own grader.

    python benchmarks/conformance.py --rexmle CHECKOUT --mlebench CHECKOUT [--strict] [--work DIR]

Runs benchmarks/rexmle_conformance.py's `run_rexmle` and benchmarks/mlebench_conformance.py's
`run_mlebench` (see each for what a row checks and what `--strict` adds), prints one table and
N/M per benchmark, and writes benchmarks/results/conformance[_strict].json with every row, the
MLE-bench competitions not covered and why, and the checkouts' commits. A benchmark whose checkout
is not given is left out of the run and named so in the results. Exits 0 only when every row passes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import write_result
from benchmarks.mlebench.coverage import NOT_COVERED
from benchmarks.mlebench_conformance import head, run_mlebench
from benchmarks.rexmle_conformance import _head as rexmle_head
from benchmarks.rexmle_conformance import run_rexmle

COLUMNS = ("benchmark", "task", "task_type", "primary", "perfect", "broken", "missing", "trivial", "seconds")


def table_row(benchmark: str, row: dict[str, Any]) -> dict[str, Any]:
    """One line of the combined table from a ReX-MLE or an MLE-bench row."""
    return {
        "benchmark": benchmark,
        "task": row.get("challenge") or row.get("competition"),
        "task_type": row.get("task_type", "-"),
        "primary": row.get("primary", "-"),
        "perfect": row.get("perfect", "-"),
        "broken": "invalid" if row.get("broken_invalid") else "-",
        "missing": "invalid" if row.get("partial_invalid") or row.get("missing_invalid") else "-",
        "trivial": ",".join(row.get("trivial_codes") or []) or row.get("trivial", "-"),
        "seconds": row.get("seconds", "-"),
        "ok": bool(row.get("ok")),
        "why": "; ".join(row.get("strict_failures") or []) or row.get("error", ""),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in COLUMNS} if rows else {}
    print("   ".join(c.ljust(widths[c]) for c in COLUMNS) + "   ok")
    for row in rows:
        cells = "   ".join(str(row[c]).ljust(widths[c]) for c in COLUMNS)
        print(f"{cells}   {'PASS' if row['ok'] else 'FAIL ' + row['why']}")


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for row in rows:
        entry = totals.setdefault(row["benchmark"], {"passed": 0, "total": 0})
        entry["passed"] += row["ok"]
        entry["total"] += 1
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rexmle", type=Path, default=os.environ.get("REXMLE_DIR"), help="ReX-MLE checkout")
    parser.add_argument("--mlebench", type=Path, default=os.environ.get("MLEBENCH_DIR"), help="MLE-bench work tree")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true", help="each runner's strict checks as well")
    args = parser.parse_args(argv)
    if args.rexmle is None and args.mlebench is None:
        parser.error("give --rexmle CHECKOUT and/or --mlebench CHECKOUT (or REXMLE_DIR / MLEBENCH_DIR)")
    work = (args.work or Path(tempfile.mkdtemp(prefix="amid-conformance-"))).resolve()
    rows: list[dict[str, Any]] = []
    if args.rexmle is not None:
        rexmle = run_rexmle(args.rexmle, args.strict, work=work / "rexmle", seed=args.seed)
        rows += [table_row("rex-mle", r) for r in rexmle]
    if args.mlebench is not None:
        mlebench = run_mlebench(args.mlebench, args.strict, work=work / "mlebench", seed=args.seed)
        rows += [table_row("mle-bench", r) for r in mlebench]
    print()
    print_table(rows)
    totals = summary(rows)
    passed = "; ".join(f"{b}: {t['passed']}/{t['total']}" for b, t in totals.items())
    print(f"\n{passed}{' (strict)' if args.strict else ''}; MLE-bench not covered: {', '.join(sorted(NOT_COVERED))}")
    left_out = [name for name, given in (("rex-mle", args.rexmle), ("mle-bench", args.mlebench)) if given is None]
    commits = {
        "rex-mle": rexmle_head(args.rexmle) if args.rexmle else None,
        "mle-bench": head(args.mlebench) if args.mlebench else None,
    }
    write_result(
        "conformance_strict" if args.strict else "conformance",
        {
            "strict": args.strict,
            "totals": totals,
            "rows": rows,
            "left_out": left_out,
            "checkout_commits": commits,
            "mlebench_not_covered": NOT_COVERED,
        },
    )
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
