"""Plots over the run's wall clock: verified score per lane with its best so far, and the agent timeline."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from amid.server.report import queries
from amid.server.report.markup import Markup, el, fmt, void
from amid.server.report.queries import Row, RunData, as_time
from amid.server.report.svg import (
    MARGIN_BOTTOM,
    MARGIN_TOP,
    STATUS_COLOURS,
    Frame,
    axes,
    colour,
    empty_panel,
    extent,
    legend,
    panel,
    svg,
)

ROW_PX = 28


@dataclass(frozen=True)
class Clock:
    """Elapsed time since the run started, in a unit that suits the run's length."""

    start: datetime
    unit: str
    seconds: float

    @classmethod
    def for_run(cls, run: RunData, times: Iterable[datetime]) -> Clock:
        known = list(times)
        start = as_time(run.state.get("started_at")) or min(known)
        span = (max(known) - start).total_seconds() if known else 0.0
        unit, seconds = ("h", 3600.0) if span > 3 * 3600 else ("min", 60.0) if span > 600 else ("s", 1.0)
        return cls(start, unit, seconds)

    def __call__(self, at: datetime) -> float:
        return (at - self.start).total_seconds() / self.seconds

    @property
    def label(self) -> str:
        return f"time since the run started ({self.unit})"


def score_over_time(run: RunData) -> Markup:
    plot_id, title = "plot-score-over-time", f"Verified {run.metric} over time, per lane"
    rows = [r for r in run.tables["evidence"] if r["verified_score"] is not None and r["reviewed_at"] is not None]
    if not rows:
        return empty_panel(plot_id, title, "no attempt has a verified score (reviews pending or none submitted)")
    clock = Clock.for_run(run, (as_time(r["reviewed_at"]) for r in rows))  # type: ignore[misc]
    xs = [clock(as_time(r["reviewed_at"])) for r in rows]  # type: ignore[arg-type]
    frame = Frame.over(extent([0.0, *xs]), extent(float(r["verified_score"]) for r in rows))
    lanes = sorted({r["lane_id"] or "(no lane)" for r in rows})
    marks: list[Markup] = []
    for index, lane in enumerate(lanes):
        mine = [(x, r) for x, r in zip(xs, rows, strict=True) if (r["lane_id"] or "(no lane)") == lane]
        marks.append(
            _best_so_far(
                run,
                frame,
                [(x, float(r["verified_score"])) for x, r in mine if r["status"] == "accepted"],
                colour(index),
            )
        )
        for x, row in mine:
            filled = row["status"] == "accepted"
            marks.append(
                el(
                    "circle",
                    el("title", _score_tip(row, lane)),
                    cx=frame.x(x),
                    cy=frame.y(float(row["verified_score"])),
                    r=5,
                    fill=colour(index) if filled else "white",
                    stroke=colour(index),
                    stroke_width=2,
                    class_="mark",
                    data_attempt=row["attempt_id"],
                    data_count=int(row["n"]),
                )
            )
    body = svg(axes(frame, clock.label, f"verified {run.metric} (mean over folds)"), marks, label=title)
    keys = [(lane, colour(i)) for i, lane in enumerate(lanes)]
    caption = "filled: accepted; hollow: not accepted; line: best accepted so far"
    if "evidence" in run.bucketed:
        caption = (
            f"{run.total('evidence'):,} scored attempts, more than {queries.POINTS:,}: each point is the best "
            f"of one lane's attempts in one of {queries.BUCKETS} time slices (count in its tooltip); {caption}"
        )
    return panel(plot_id, title, len(rows), Markup(body + legend(keys)), caption)


def _score_tip(row: Row, lane: str) -> str:
    if int(row["n"]) == 1 and row["attempt_id"]:
        return f"{row['attempt_id']} {lane}: {fmt(row['verified_score'])} ({row['status']})"
    return f"{lane}: best {fmt(row['verified_score'])} of {int(row['n'])} {row['status']} attempts by this time"


def _best_so_far(run: RunData, frame: Frame, points: list[tuple[float, float]], stroke: str) -> Markup:
    """A step line through the best accepted score so far, held to the right edge."""
    if not points:
        return Markup("")
    path: list[str] = []
    best: float | None = None
    for x, value in sorted(points):
        best = value if best is None else run.best([best, value])
        path.append(f"H{frame.x(x)} V{frame.y(best)}" if path else f"M{frame.x(x)} {frame.y(best)}")
    path.append(f"H{frame.x.end}")
    return void("path", d=" ".join(path), fill="none", stroke=stroke, stroke_width=1.5, class_="best-so-far")


def agent_timeline(run: RunData) -> Markup:
    plot_id, title = "plot-agent-timeline", "Agent timeline: attempts, reviews, heartbeats"
    events = _agent_events(run)
    if not events:
        return empty_panel(plot_id, title, "no agent has submitted, requested a review or received a heartbeat")
    agents = sorted({agent for agent, _, _, _ in events})
    height = MARGIN_TOP + MARGIN_BOTTOM + ROW_PX * len(agents) + 10
    clock = Clock.for_run(run, (at for _, _, at, _ in events))
    frame = Frame.over(
        extent([0.0, *(clock(at) for _, _, at, _ in events)]), (len(agents) - 0.5, -0.5), left=110, height=height
    )
    parts: list[Markup] = [axes(frame, clock.label, "agent", y_ticks=False)]
    for row, agent in enumerate(agents):
        y = frame.y(row)
        parts.append(void("line", x1=frame.x.start, y1=y, x2=frame.x.end, y2=y, class_="grid"))
        parts.append(el("text", agent, x=frame.x.start - 6, y=y + 4, class_="category", text_anchor="end"))
    for agent, kind, at, tip in events:
        parts.append(_event_mark(frame.x(clock(at)), frame.y(agents.index(agent)), kind, tip))
    keys = [("attempt (colour: status)", "#2ca02c"), ("review verdict", "#555"), ("heartbeat", "#e377c2")]
    caption = ""
    if "timeline" in run.bucketed:
        caption = (
            f"{run.total('timeline'):,} events, more than {queries.POINTS:,}: each mark is one agent's events "
            f"of one kind in one of {queries.BUCKETS} time slices (count in its tooltip)"
        )
    return panel(plot_id, title, len(events), Markup(svg(parts, label=title, height=height) + legend(keys)), caption)


def _agent_events(run: RunData) -> list[tuple[str, str, datetime, str]]:
    """(agent, kind, time, tooltip) per attempt, review and heartbeat, or per time bucket of them."""
    events = []
    for row in run.tables["timeline"]:
        at, kind, n = as_time(row["ts"]), str(row["kind"]), int(row["n"])
        if at is not None:
            events.append((str(row["agent_id"]), kind, at, row["tip"] if n == 1 and row["tip"] else _bucket_tip(row)))
    return events


def _bucket_tip(row: Row) -> str:
    first, last = (as_time(row[key]) for key in ("ts", "last_at"))
    when = f"{first:%H:%M:%S}–{last:%H:%M:%S}" if first and last else "-"
    return f"{int(row['n'])} × {str(row['kind']).replace(':', ' ')}, {when} UTC"


def _event_mark(x: float, y: float, kind: str, tip: str) -> Markup:
    if kind.startswith("attempt:"):
        fill = STATUS_COLOURS.get(kind.split(":", 1)[1], "#7f7f7f")
        return el("circle", el("title", tip), cx=x, cy=y - 7, r=5, fill=fill, class_="mark attempt")
    if kind == "review":
        return el("rect", el("title", tip), x=x - 4, y=y - 4, width=8, height=8, fill="#555", class_="mark review")
    points = f"{x},{y + 3} {x - 4},{y + 10} {x + 4},{y + 10}"
    return el("polygon", el("title", tip), points=points, fill="#e377c2", class_="mark heartbeat")
