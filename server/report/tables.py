"""The report's tables: lanes, leaderboard, the final package, recent notes."""

from __future__ import annotations

import json
from pathlib import Path
from shlex import quote
from typing import Any

from amid.server.ranking import rank_rows
from amid.server.report import queries
from amid.server.report.markup import Child, Markup, el, fmt
from amid.server.report.queries import RunData, as_time


def table(table_id: str, title: str, header: list[str], rows: list[list[Child]], empty: str, **attrs: Child) -> Markup:
    """A titled table; no rows gives an explicit "no data yet" line instead of an empty grid."""
    if not rows:
        return el(
            "section",
            el("h3", title),
            el("p", "no data yet: ", empty, class_="no-data"),
            id=table_id,
            class_="panel table empty",
            data_n=0,
        )
    head = el("thead", el("tr", [el("th", name) for name in header]))
    body = el("tbody", [el("tr", [el("td", cell) for cell in row]) for row in rows])
    return el(
        "section",
        el("h3", title),
        el("table", head, body),
        id=table_id,
        class_="panel table",
        data_n=len(rows),
        **attrs,
    )


def lanes_table(run: RunData) -> Markup:
    # per lane over every accepted attempt (an aggregate), not over the leaderboard rows the page lists
    side = "highest" if run.higher_better else "lowest"
    best = {str(row["lane_id"]): float(row[side]) for row in run.tables["lane_best"] if row[side] is not None}
    rows = [
        [
            lane["lane_id"],
            lane["title"],
            lane["tier"],
            lane["status"],
            int(lane["n_attempts"]),
            int(lane["n_accepted"]),
            int(lane["n_rejected"]),
            _best_cell(best.get(str(lane["lane_id"]))),
        ]
        for lane in run.tables["lanes"]
    ]
    header = ["lane", "title", "tier", "state", "attempts", "accepted", "rejected", f"best verified {run.metric}"]
    return table("table-lanes", "Lanes", header, rows, "no lane is planned yet")


def _best_cell(score: float | None) -> Markup:
    return el("span", fmt(score), class_="best", data_value=score)


def _ranked(run: RunData) -> list[dict[str, Any]]:
    return rank_rows([dict(r) for r in run.tables["leaderboard"]], run.higher_better)


def leaderboard_table(run: RunData) -> Markup:
    ranked = _ranked(run)
    rows = [
        [
            rank,
            r["attempt_id"],
            r["agent_id"],
            r["lane_id"],
            _best_cell(float(r["verified_score"])),
            fmt(r["score_se"]),
            r["tries"],
            fmt(r["score_bound"]),
            r["n_folds"],
            str(r["commit_sha"])[:12],
        ]
        for rank, r in enumerate(ranked[: queries.ACCEPTED], start=1)
    ]
    header = [
        "rank",
        "attempt",
        "agent",
        "lane",
        f"verified {run.metric}",
        "± SE",
        "tries",
        "ranked by",
        "folds",
        "commit",
    ]
    title = "Leaderboard (accepted attempts, ranked by a bound widened for tries)"
    if len(ranked) > len(rows):
        title += f": the best {len(rows):,} of {len(ranked):,}"
    return table("table-leaderboard", title, header, rows, "no attempt has been accepted", data_total=len(ranked))


def attempts_table(run: RunData) -> Markup:
    """The newest attempts, newest first, whatever their verdict."""
    rows = [
        [
            a["attempt_id"],
            a["agent_id"],
            a["lane_id"] or "-",
            el("span", a["status"], class_="status"),
            fmt(a["verified_score"]),
            _when(a["created_at"]),
            a["parent_attempt_id"] or "-",
        ]
        for a in run.tables["attempts"]
    ]
    title = "Newest attempts"
    if run.n_attempts > len(rows):
        title += f": {len(rows):,} of {run.n_attempts:,}"
    header = ["attempt", "agent", "lane", "status", f"verified {run.metric}", "submitted (UTC)", "parent"]
    return table("table-attempts", title, header, rows, "no attempt has been submitted", data_total=run.n_attempts)


def notes_table(run: RunData) -> Markup:
    rows = [
        [_when(n["created_at"]), n["agent_id"], n["kind"], n["lane_id"] or "-", n["title"]] for n in run.tables["notes"]
    ]
    return table(
        "table-notes",
        "Recent notes",
        ["time (UTC)", "agent", "kind", "lane", "title"],
        rows,
        "no agent has posted a note",
    )


def _when(value: Any) -> str:
    at = as_time(value)
    return at.strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def read_package(package_dir: Path) -> dict[str, Any] | None:
    """The package at a glance (the package builder's summary); None: no package built."""
    try:
        from amid.server.package import read_package_summary
    except ImportError:  # a checkout without the package builder: read the manifest as written
        return _manifest_summary(package_dir)
    return read_package_summary(package_dir)


def _manifest_summary(package_dir: Path) -> dict[str, Any] | None:
    manifest_path = package_dir / "manifest.json"
    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    files = manifest.get("files", [])
    keys = ("attempt_id", "lane_id", "agent_id", "commit", "verified_primary_score")
    return {
        **{key: manifest.get(key) for key in keys},
        "n_files": len(files),
        "size_bytes": sum(int(f.get("size_bytes", 0)) for f in files),
    }


def package_table(run: RunData, package: dict[str, Any] | None, package_dir: Path) -> Markup:
    final = run.tables["final"][0] if run.tables["final"] else None
    title = "Final package"
    if package is None:
        why = "no final choice yet" if final is None else f"{final['attempt_id']} was chosen; its package is not built"
        return table("table-package", title, [], [], why)
    score = package.get("verified_primary_score")
    rows: list[list[Child]] = [
        ["attempt", package.get("attempt_id")],
        ["lane", package.get("lane_id")],
        ["agent", package.get("agent_id")],
        [f"verified {run.metric}", fmt(score if score is not None else (final or {}).get("verified_score"))],
        ["commit", package.get("commit")],
        ["files", f"{package.get('n_files', 0)} files, {int(package.get('size_bytes') or 0):,} bytes"],
        ["verify", el("code", f"amid verify-package {quote(str(package_dir))} -w {quote(str(package_dir.parent))}")],
    ]
    return table("table-package", title, ["field", "value"], rows, "", data_attempt=str(package.get("attempt_id")))


def workers_table(run: RunData) -> Markup:
    """Managed workers, each with the sandbox its last start ran in (`none` only where the user chose it)."""
    rows = [
        [w["agent_id"], w["backend"], w["state"], _sandbox(w["launch"]), w["session_id"] or "-"]
        for w in run.tables["workers"]
    ]
    return table(
        "table-workers",
        "Managed workers",
        ["agent", "backend", "state", "sandbox", "session"],
        rows,
        "no managed worker has started",
    )


def _sandbox(launch: str | None) -> Markup:
    kind = json.loads(launch).get("sandbox", "?") if launch else "?"
    return el("span", kind, class_="sandbox", data_sandbox=kind)
