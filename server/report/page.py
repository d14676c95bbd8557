"""The report page: a header with the run's facts, the plots, the tables, inline CSS; nothing external."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from shlex import quote
from typing import Any

from amid.server.report import plots, queries, tables, timeplots
from amid.server.report.markup import Markup, el, void
from amid.server.report.queries import RunData

CSS = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#f6f7f9;color:#222}
header{background:#1d2b3a;color:#fff;padding:14px 24px}header h1{margin:0 0 4px;font-size:20px}
header .sub{opacity:.85}dl.facts{display:flex;flex-wrap:wrap;gap:6px 22px;margin:10px 0 0}
dl.facts div{min-width:90px}dl.facts dt{font-size:11px;text-transform:uppercase;opacity:.7}
dl.facts dd{margin:0;font-size:16px;font-weight:600}main{padding:16px 24px}
h2{font-size:16px;margin:18px 0 8px}.plots{display:flex;flex-wrap:wrap;gap:14px}
.panel{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 12px;max-width:640px}
.panel h3{margin:0 0 6px;font-size:14px}.panel.table{max-width:none}.no-data{color:#8a6d3b;background:#fcf8e3;
padding:24px;border-radius:4px;text-align:center;min-width:400px}.caption{color:#666;font-size:12px;margin:4px 0 0}
svg text{font-size:11px;fill:#333}.tick{fill:#666}.x-label,.y-label{font-size:12px;fill:#222}
.axis{stroke:#444}.grid{stroke:#eee}.identity{stroke:#999;stroke-dasharray:5 4}.edge{stroke:#888;stroke-width:1.5}
.legend{font-size:12px;color:#444}.key{margin-right:12px;white-space:nowrap}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #eee;padding:3px 10px;text-align:left}
th{background:#f0f2f5}footer{color:#777;font-size:12px;padding:8px 24px 20px}code{font-size:12px}
.session{background:#13202c;color:#cfd8e3;font-size:12px;padding:4px 24px;text-align:right}
.shown{background:#eef3f8;border:1px solid #cdd9e5;border-radius:4px;padding:8px 12px}
.session form{margin:0}.session button{font-size:12px;margin-left:6px}
"""


@dataclass(frozen=True)
class RunFacts:
    """What the page states about the run besides the ledger: the task, and where its package is."""

    title: str
    task_id: str
    metric: str
    direction: str
    package_dir: Path
    package: dict[str, Any] | None


def _wall_time(run: RunData, now: datetime) -> str:
    """From the first agent activity to `done`, or to now while the run goes on."""
    start, end = run.first_activity, run.done_at or now
    if start is None:
        return "-"
    seconds = int(max((end - start).total_seconds(), 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"


def _fact(label: str, value: object, key: str) -> Markup:
    return el("div", el("dt", label), el("dd", str(value), data_fact=key))


def header(run: RunData, facts: RunFacts, now: datetime) -> Markup:
    counts = run.counts
    attempts = counts.get("attempts", {})
    by_status = ", ".join(f"{n} {status}" for status, n in sorted(attempts.items())) or "none"
    items = [
        _fact("stage", run.state.get("stage") or "exploration", "stage"),
        _fact("primary metric", f"{facts.metric} ({facts.direction.replace('_', ' ')})", "metric"),
        _fact("wall time", _wall_time(run, now), "wall-time"),
        _fact("started (UTC)", str(run.state.get("started_at") or "-")[:19].replace("T", " "), "started"),
        _fact("agents", counts.get("agents", {}).get("agent", 0), "agents"),
        _fact("lanes", sum(counts.get("lanes", {}).values()), "lanes"),
        _fact("attempts", sum(attempts.values()), "attempts"),
        _fact("accepted", attempts.get("accepted", 0), "accepted"),
        _fact("reviews", sum(counts.get("reviews", {}).values()), "reviews"),
        _fact("jobs", sum(counts.get("jobs", {}).values()), "jobs"),
        _fact("heartbeats", sum(counts.get("heartbeats", {}).values()), "heartbeats"),
        _fact("notes", sum(counts.get("notes", {}).values()), "notes"),
    ]
    sub = f"task {facts.task_id} · attempts by status: {by_status}"
    return el("header", el("h1", facts.title), el("div", sub, class_="sub"), el("dl", items, class_="facts"))


PLOTS = (
    timeplots.score_over_time,
    plots.lane_coverage,
    timeplots.agent_timeline,
    plots.check_failures,
    plots.declared_vs_verified,
    plots.holdout_vs_validation,
    plots.lineage,
)


REST_SQL = "SELECT * FROM v_evidence ORDER BY created_at, attempt_id"  # every attempt with its verdict and score


def _accepted_shown(run: RunData) -> str:
    if run.n_accepted <= queries.ACCEPTED:
        return f" and all {run.n_accepted:,} accepted ones;"
    return f" and the best ranked {queries.ACCEPTED:,} of {run.n_accepted:,} accepted ones;"


def shown_notice(run: RunData, workspace: Path) -> Markup:
    """What the page shows of the run out of how much, and the commands that read the rest."""
    n_shown = len(run.tables["attempts"])
    if n_shown >= run.n_attempts and not run.bucketed and not run.truncated:
        return el("p", f"This page shows all {run.n_attempts:,} attempts of the run.", id="shown", class_="caption")
    ws = quote(str(workspace))
    parts = [
        f"This page shows the newest {n_shown:,} of {run.n_attempts:,} attempts",
        _accepted_shown(run),
        f" the counts and the lane table are over the whole run, and a plot draws at most"
        f" {queries.POINTS:,} points (beyond that: the newest, or aggregates per time slice, as its caption"
        " says). The rest, from the ledger: ",
        el("code", f"amid sql {quote(REST_SQL)} -w {ws} --limit 100000"),
        " (page on with --offset) or ",
        el("code", f"amid export -w {ws}"),
        " (every table as Parquet).",
    ]
    if run.truncated:  # a query that is not bounded by the page's own limits reached the read path's
        parts.append(f" These read at most {queries.ROW_LIMIT:,} rows and show the first: {', '.join(run.truncated)}.")
    return el("p", parts, id="shown", class_="shown")


def session_bar(signed_in_as: str | None) -> Markup | None:
    """Who the dashboard's browser session belongs to, and a logout button (a form: the page has no script)."""
    if signed_in_as is None:
        return None
    button = el("button", "log out", type="submit")
    form = el("form", f"signed in as {signed_in_as} ", button, method="post", action="/dashboard/logout")
    return el("div", form, id="session", class_="session")


def render(
    run: RunData,
    facts: RunFacts,
    *,
    generated_at: datetime,
    refresh_s: int | None = None,
    signed_in_as: str | None = None,
) -> str:
    """The whole page as one HTML string; `refresh_s` makes the browser reload it (the dashboard),
    `signed_in_as` names the browser session's human beside a logout button."""
    head = [
        void("meta", charset="utf-8"),
        void("meta", name="viewport", content="width=device-width, initial-scale=1"),
        void("meta", http_equiv="refresh", content=str(refresh_s)) if refresh_s else None,
        el("title", f"AMID report: {facts.title}"),
        el("style", Markup(CSS)),
    ]
    main = el(
        "main",
        shown_notice(run, facts.package_dir.parent),
        el("h2", "Plots"),
        el("div", [plot(run) for plot in PLOTS], class_="plots"),
        el("h2", "Tables"),
        tables.leaderboard_table(run),
        tables.package_table(run, facts.package, facts.package_dir),
        tables.lanes_table(run),
        tables.attempts_table(run),
        tables.notes_table(run),
        tables.workers_table(run),
    )
    stamp = generated_at.strftime("%Y-%m-%d %H:%M:%S")
    refresh = f"; reloads every {refresh_s} s" if refresh_s else ""
    footer = el("footer", f"generated {stamp} UTC from the run's ledger by amid report{refresh}", id="generated")
    body = el("body", session_bar(signed_in_as), header(run, facts, generated_at), main, footer)
    page = el("html", el("head", head), body, lang="en")
    return "<!DOCTYPE html>\n" + page + "\n"
