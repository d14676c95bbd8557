"""The report's tables: lanes, leaderboard, the final package, recent notes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server.report.markup import Child, Markup, el, fmt
from server.report.queries import Row, RunData, as_time


def table(table_id: str, title: str, header: list[str], rows: list[list[Child]], empty: str, **attrs: Child) -> Markup:
    """A titled table; no rows gives an explicit "no data yet" line instead of an empty grid."""
    if not rows:
        return el("section", el("h3", title), el("p", "no data yet: ", empty, class_="no-data"),
                  id=table_id, class_="panel table empty", data_n=0)  # fmt: skip
    head = el("thead", el("tr", [el("th", name) for name in header]))
    body = el("tbody", [el("tr", [el("td", cell) for cell in row]) for row in rows])
    return el("section", el("h3", title), el("table", head, body), id=table_id, class_="panel table",
              data_n=len(rows), **attrs)  # fmt: skip


def lanes_table(run: RunData) -> Markup:
    best: dict[str, float] = {}
    for row in run.tables["leaderboard"]:
        lane, score = str(row["lane_id"]), float(row["verified_score"])
        best[lane] = score if lane not in best else run.best([best[lane], score])
    rows = [[lane["lane_id"], lane["title"], lane["tier"], lane["status"], int(lane["n_attempts"]),
             int(lane["n_accepted"]), int(lane["n_rejected"]), _best_cell(best.get(str(lane["lane_id"])))]
            for lane in run.tables["lanes"]]  # fmt: skip
    header = ["lane", "title", "tier", "state", "attempts", "accepted", "rejected", f"best verified {run.metric}"]
    return table("table-lanes", "Lanes", header, rows, "no lane is planned yet")


def _best_cell(score: float | None) -> Markup:
    return el("span", fmt(score), class_="best", data_value=score)


def leaderboard_table(run: RunData) -> Markup:
    ranked = sorted(run.tables["leaderboard"], key=lambda r: float(r["verified_score"]), reverse=run.higher_better)
    rows = [[rank, r["attempt_id"], r["agent_id"], r["lane_id"], _best_cell(float(r["verified_score"])),
             r["n_folds"], str(r["commit_sha"])[:12]] for rank, r in enumerate(ranked, start=1)]  # fmt: skip
    header = ["rank", "attempt", "agent", "lane", f"verified {run.metric}", "folds", "commit"]
    return table("table-leaderboard", "Leaderboard (accepted attempts, verified scores)", header, rows,
                 "no attempt has been accepted")  # fmt: skip


def notes_table(run: RunData) -> Markup:
    rows = [[_when(n["created_at"]), n["agent_id"], n["kind"], n["lane_id"] or "-", n["title"]]
            for n in run.tables["notes"]]  # fmt: skip
    return table("table-notes", "Recent notes", ["time (UTC)", "agent", "kind", "lane", "title"], rows,
                 "no agent has posted a note")  # fmt: skip


def _when(value: Any) -> str:
    at = as_time(value)
    return at.strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def read_package(package_dir: Path) -> dict[str, Any] | None:
    """The package builder's summary when it is installed, else the manifest as written; None: no package."""
    try:
        from server.package import read_package_summary  # type: ignore[attr-defined]
    except ImportError:
        read_package_summary = None
    manifest = package_dir / "manifest.json"
    if not manifest.is_file():
        return None
    if read_package_summary is not None:
        summary = read_package_summary(package_dir)
        return dict(summary) if isinstance(summary, dict) else dict(summary.model_dump(mode="json"))
    loaded = json.loads(manifest.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


def package_table(run: RunData, package: dict[str, Any] | None, package_dir: Path) -> Markup:
    final = run.tables["final"][0] if run.tables["final"] else None
    title = "Final package"
    if package is None:
        why = "no final choice yet" if final is None else f"{final['attempt_id']} was chosen; its package is not built"
        return table("table-package", title, [], [], why)
    files = package.get("files") or []
    n_bytes = sum(int(f.get("size_bytes") or f.get("size") or 0) for f in files if isinstance(f, dict))
    attempt = package.get("attempt_id") or package.get("attempt") or (final or {}).get("attempt_id")
    rows: list[list[Child]] = [
        ["attempt", attempt],
        ["lane", package.get("lane_id") or package.get("lane") or (final or {}).get("lane_id")],
        ["commit", package.get("commit") or package.get("commit_sha")],
        ["files", f"{len(files)} files, {n_bytes:,} bytes" if n_bytes else f"{len(files)} files"],
        ["verify", el("code", f"amid verify-package {package_dir}")],
    ]
    if final is not None:
        rows.insert(2, [f"verified {run.metric}", fmt(final["verified_score"])])
    return table("table-package", title, ["field", "value"], rows, "", data_attempt=str(attempt))


def final_choice_line(final: Row | None) -> str:
    if final is None:
        return "no final choice yet"
    return f"{final['attempt_id']} on {final['lane_id']}: {final['reason']}"
