"""Plots of the run's state: lane coverage, check failures, declared vs verified, holdout vs validation."""

from __future__ import annotations

from amid.server.report import queries
from amid.server.report.markup import Markup, el, fmt, void
from amid.server.report.queries import Row, RunData
from amid.server.report.svg import (
    MARGIN_BOTTOM,
    MARGIN_TOP,
    STATUS_COLOURS,
    Frame,
    axes,
    colour,
    empty_panel,
    extent,
    identity_line,
    legend,
    panel,
    svg,
)

BAR_PX = 24
LABEL_PX = 200
LANE_STACK = ("accepted", "rejected", "revoked", "other")
OTHER_COLOUR = "#bdbdbd"


def _bar_frame(n_rows: int, x_max: float) -> Frame:
    height = MARGIN_TOP + MARGIN_BOTTOM + BAR_PX * n_rows + 6
    return Frame.over((0.0, max(x_max, 1.0) * 1.4), (n_rows - 0.5, -0.5), left=LABEL_PX, height=height)


def _category(frame: Frame, row: int, label: str) -> Markup:
    shown = label if len(label) <= 30 else label[:29] + "…"
    return el(
        "text", el("title", label), shown, x=frame.x.start - 6, y=frame.y(row) + 4, class_="category", text_anchor="end"
    )


def _segment(frame: Frame, row: int, start: float, length: float, fill: str, tip: str, **data: str | int) -> Markup:
    x0, x1 = frame.x(start), frame.x(start + length)
    return el(
        "rect",
        el("title", tip),
        x=x0,
        y=frame.y(row) - BAR_PX * 0.36,
        width=round(x1 - x0, 2),
        height=round(BAR_PX * 0.72, 2),
        fill=fill,
        class_="mark bar",
        **data,
    )


def lane_coverage(run: RunData) -> Markup:
    plot_id, title = "plot-lane-coverage", "Lane coverage and states: attempts by verdict"
    lanes = run.tables["lanes"]
    if not any(int(lane["n_attempts"]) for lane in lanes):
        why = f"{len(lanes)} lanes planned, no attempt submitted" if lanes else "no lane is planned yet"
        return empty_panel(plot_id, title, why)
    frame = _bar_frame(len(lanes), max(int(lane["n_attempts"]) for lane in lanes))
    parts: list[Markup] = [axes(frame, "attempts", "lane", y_ticks=False)]
    n_marks = 0
    for row, lane in enumerate(lanes):
        parts.append(_category(frame, row, str(lane["lane_id"])))
        segments = _lane_segments(frame, row, lane)
        n_marks += len(segments)
        end = float(lane["n_attempts"])
        parts.extend(segments)
        parts.append(
            el(
                "text",
                f"{lane['n_attempts']} · {lane['status']}",
                x=frame.x(end) + 6,
                y=frame.y(row) + 4,
                class_="bar-label",
                data_lane=str(lane["lane_id"]),
            )
        )
    keys = [
        (kind if kind != "other" else "pending / withdrawn", STATUS_COLOURS.get(kind, OTHER_COLOUR))
        for kind in LANE_STACK
    ]
    body = svg(parts, label=title, height=frame.height)
    return panel(plot_id, title, n_marks, Markup(body + legend(keys)), "bar label: attempts · lane state")


def _lane_segments(frame: Frame, row: int, lane: Row) -> list[Markup]:
    """One bar segment per verdict the lane's attempts have, stacked in LANE_STACK order."""
    counts = _lane_counts(lane)
    segments, start = [], 0.0
    for kind in (k for k in LANE_STACK if counts[k]):
        tip = f"{lane['lane_id']}: {counts[kind]} {kind}"
        segments.append(_segment(frame, row, start, counts[kind], STATUS_COLOURS.get(kind, OTHER_COLOUR), tip))
        start += counts[kind]
    return segments


def _lane_counts(lane: Row) -> dict[str, int]:
    counts = {kind: int(lane.get(f"n_{kind}") or 0) for kind in ("accepted", "rejected", "revoked")}
    counts["other"] = int(lane["n_attempts"]) - sum(counts.values())
    return counts


def check_failures(run: RunData) -> Markup:
    plot_id, title = "plot-check-failures", "Failed reviewer checks, by code"
    by_code: dict[str, dict[str, int]] = {}
    for check in run.tables["failed_checks"]:
        by_code.setdefault(str(check["code"]), {})[str(check["severity"])] = int(check["n"])
    if not by_code:
        return empty_panel(plot_id, title, "no reviewer check has failed")
    codes = sorted(by_code, key=lambda code: (-sum(by_code[code].values()), code))
    frame = _bar_frame(len(codes), max(sum(v.values()) for v in by_code.values()))
    parts: list[Markup] = [axes(frame, "failed checks", "check code", y_ticks=False)]
    fills = {"error": STATUS_COLOURS["rejected"], "warning": STATUS_COLOURS["in_review"]}
    n_marks = 0
    for row, code in enumerate(codes):
        parts.append(_category(frame, row, code))
        start = 0.0
        for severity in (s for s in ("error", "warning") if by_code[code].get(s)):
            n = by_code[code][severity]
            parts.append(_segment(frame, row, start, n, fills[severity], f"{code}: {n} {severity}"))
            start, n_marks = start + n, n_marks + 1
        parts.append(
            el("text", int(start), x=frame.x(start) + 6, y=frame.y(row) + 4, class_="bar-label count", data_code=code)
        )
    body = svg(parts, label=title, height=frame.height)
    return panel(plot_id, title, n_marks, Markup(body + legend(list(fills.items()))))


def _newest_of(run: RunData, name: str, what: str) -> str:
    """Said under a scatter that draws only the newest of its points."""
    shown, total = len(run.tables[name]), run.total(name)
    return f"; the newest {shown:,} of {total:,} {what}" if total > shown else ""


def _scatter(
    plot_id: str, title: str, points: list[tuple[float, float, str, str]], x_label: str, y_label: str, shown: str = ""
) -> Markup:
    """Points (x, y, status, tooltip) on shared axes with the y = x line."""
    points = sorted(points, key=lambda p: p[2] == "accepted")  # accepted drawn last, on top of duplicates
    lo, hi = extent([v for x, y, _, _ in points for v in (x, y)])
    frame = Frame.over((lo, hi), (lo, hi))
    marks = [
        el(
            "circle",
            el("title", tip),
            cx=frame.x(x),
            cy=frame.y(y),
            r=5,
            fill=STATUS_COLOURS.get(status, "#777"),
            fill_opacity=0.75,
            class_="mark",
        )
        for x, y, status, tip in points
    ]
    body = svg(axes(frame, x_label, y_label), identity_line(frame), marks, label=title)
    statuses = sorted({status for _, _, status, _ in points})
    keys = [(status, STATUS_COLOURS.get(status, "#777")) for status in statuses]
    return panel(plot_id, title, len(points), Markup(body + legend(keys)), f"dashed line: y = x{shown}")


def declared_vs_verified(run: RunData) -> Markup:
    plot_id, title = "plot-declared-vs-verified", f"Declared vs verified {run.metric}, per attempt and fold"
    rows = [r for r in run.tables["declared_verified"] if r["declared"] is not None and r["verified"] is not None]
    if not rows:
        return empty_panel(plot_id, title, "no attempt has both a declared and a verified fold score")
    points = [
        (
            float(r["declared"]),
            float(r["verified"]),
            str(r["status"]),
            f"{r['attempt_id']} fold {r['fold']}: declared {fmt(r['declared'])}, verified {fmt(r['verified'])}",
        )
        for r in rows
    ]
    return _scatter(
        plot_id,
        title,
        points,
        f"declared {run.metric} (agent)",
        f"verified {run.metric} (reviewer)",
        _newest_of(run, "declared_verified", "attempt folds"),
    )


def holdout_vs_validation(run: RunData) -> Markup:
    plot_id, title = "plot-holdout-vs-validation", f"Holdout vs validation {run.metric}, per attempt"
    rows = [r for r in run.tables["holdout"] if r["holdout"] is not None]
    if not rows:
        return empty_panel(plot_id, title, "no review has replayed an attempt on the server-held holdout")
    points = [
        (
            float(r["validation"]),
            float(r["holdout"]),
            str(r["status"]),
            f"{r['attempt_id']}: validation {fmt(r['validation'])}, holdout {fmt(r['holdout'])}",
        )
        for r in rows
    ]
    return _scatter(
        plot_id,
        title,
        points,
        f"verified validation {run.metric}",
        f"holdout {run.metric} (replayed)",
        _newest_of(run, "holdout", "replayed attempts"),
    )


def lineage(run: RunData) -> Markup:
    from amid.server.report.lineage import layers

    plot_id, title = "plot-lineage", "Lineage of attempts (parent → child)"
    attempts = run.tables["attempts"][: queries.LINEAGE][::-1]  # the newest, in submission order
    if not attempts:
        return empty_panel(plot_id, title, "no attempt has been submitted")
    position = layers([(str(a["attempt_id"]), a["parent_attempt_id"]) for a in attempts])
    n_rows = max(row for _, row in position.values()) + 1
    n_cols = max(col for col, _ in position.values()) + 1
    height = MARGIN_TOP + MARGIN_BOTTOM + BAR_PX * n_rows + 6
    frame = Frame.over((-0.5, max(n_cols, 3) - 0.5), (n_rows - 0.5, -0.5), left=20, height=height)
    lanes = sorted({a["lane_id"] or "(no lane)" for a in attempts})
    by_id = {str(a["attempt_id"]): a for a in attempts}
    parts: list[Markup] = []
    for child, attempt in by_id.items():
        parent = attempt["parent_attempt_id"]
        if parent in position:
            (pc, pr), (cc, cr) = position[parent], position[child]
            parts.append(void("line", x1=frame.x(pc), y1=frame.y(pr), x2=frame.x(cc), y2=frame.y(cr), class_="edge"))
    for attempt_id, (col, row) in position.items():
        attempt = by_id[attempt_id]
        x, y = frame.x(col), frame.y(row)
        stroke = colour(lanes.index(attempt["lane_id"] or "(no lane)"))
        tip = f"{attempt_id} ({attempt['lane_id']}, {attempt['status']}); parent {attempt['parent_attempt_id'] or '-'}"
        parts.append(
            el(
                "circle",
                el("title", tip),
                cx=x,
                cy=y,
                r=7,
                fill=STATUS_COLOURS.get(attempt["status"], "#777"),
                stroke=stroke,
                stroke_width=3,
                class_="mark node",
            )
        )
        parts.append(el("text", f"{attempt_id} · {attempt['lane_id'] or '-'}", x=x + 12, y=y + 4, class_="node-label"))
    n_edges = sum(1 for a in attempts if a["parent_attempt_id"] in position)
    body = svg(
        el("text", "generation →", x=frame.x.end, y=frame.height - 8, class_="x-label", text_anchor="end"),
        el("text", "attempts", x=14, y=MARGIN_TOP + 10, class_="y-label"),
        parts,
        label=title,
        height=frame.height,
    )
    caption = f"{len(position)} attempts, {n_edges} parent edges; fill: status, ring: lane"
    if run.n_attempts > len(position):
        newest = f"the newest {len(position):,} of {run.n_attempts:,} attempts"
        caption += f"; {newest} (every parent edge: the view v_lineage)"
    keys = legend([(lane, colour(i)) for i, lane in enumerate(lanes)])
    return panel(plot_id, title, len(position), Markup(body + keys), caption)
