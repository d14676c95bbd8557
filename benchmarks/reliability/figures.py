"""The reliability figures table of the README, regenerated from the suites' result files.

Reads benchmarks/results/crash.json, attacks.json and fuzz.json (a missing one is a row saying so)
and rewrites the table between `<!-- reliability-figures:start -->` and
`<!-- reliability-figures:end -->` in README.md (inside `## Reliability and threat model`; the
heading and the markers are appended when absent).

    python benchmarks/reliability/figures.py [--readme README.md] [--results benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- reliability-figures:start -->", "<!-- reliability-figures:end -->"
SECTION = "## Reliability and threat model"


def _load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def crash_rows(result: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    if result is None:
        return [("crash", "no results yet", "`python benchmarks/reliability/crash.py`")]
    kills = result["kills"]
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(result["kills_by"].items()))
    acked = result["acknowledged"]
    writes = ", ".join(f"{n} {k}" for k, n in acked.items())
    return [
        ("crash: kills", f"{len(kills)} ({kinds})", f"{result['agents']} concurrent writers over HTTP"),
        ("crash: acknowledged writes", writes, "every one audited in the stopped server's ledger"),
        (
            "crash: lost / duplicated",
            f"{len(result['lost'])} / {len(result['duplicated'])}",
            f"artifacts re-hashed: {len(result['artifacts_bad_hash'])} mismatches",
        ),
        (
            "crash: reviews run twice",
            str(len(result["reviews_finished_twice"])),
            f"jobs ended: {_counts(result['job_status'])}",
        ),
        ("crash: orphan processes", str(result["orphans"]), "after every kill and the final stop"),
    ]


def attack_rows(result: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    if result is None:
        return [("attacks", "no results yet", "`python benchmarks/reliability/attacks.py`")]
    classes = ", ".join(
        f"{name} {c.get('refused', 0)}/{c.get('refused', 0) + c.get('passed', 0)}"
        for name, c in result["by_class"].items()
    )
    passed = [o["name"] for o in result["passed_through"]]
    return [
        ("attacks: refused", f"{result['refused']} of {result['attacks']}", classes),
        ("attacks: passed through", str(len(passed)), "; ".join(passed)[:400] or "none"),
    ]


def fuzz_rows(result: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    if result is None:
        return [("fuzz", "no results yet", "`python benchmarks/reliability/fuzz.py`")]
    wanted = ("calls", "tracebacks", "untyped_errors", "http_5xx", "hangs", "partial_writes")
    shown = ", ".join(f"{k.replace('_', ' ')} {result[k]}" for k in wanted if k in result)
    rest = {k: v for k, v in result.items() if k not in (*wanted, "machine") and isinstance(v, int | float | str)}
    return [("fuzz", shown or "see fuzz.json", ", ".join(f"{k} {v}" for k, v in list(rest.items())[:6]))]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def table(results: Path) -> str:
    rows = [
        *crash_rows(_load(results, "crash")),
        *attack_rows(_load(results, "attacks")),
        *fuzz_rows(_load(results, "fuzz")),
    ]
    lines = ["| figure | value | notes |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c.replace('|', '/')} |" for a, b, c in rows]
    return "\n".join(lines)


def rewrite(readme: Path, body: str) -> None:
    text = readme.read_text(encoding="utf-8")
    block = f"{START}\n{body}\n{END}"
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    else:
        heading = "" if SECTION in text else f"\n{SECTION}\n"
        text = text.rstrip("\n") + f"\n{heading}\n{block}\n"
    readme.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    rewrite(args.readme, table(args.results))
    print(table(args.results))


if __name__ == "__main__":
    main()
