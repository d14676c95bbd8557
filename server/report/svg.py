"""Charts as inline SVG: linear scales, axes with ticks and labels, and the panel every plot sits in.

A panel carries `id`, a title, and `data-n`: how many data marks (points, bars, nodes) it draws.
A plot without data is a panel that says "no data yet" and why, never a blank.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amid.server.report.markup import Child, Markup, el, fmt, void

WIDTH, HEIGHT = 620, 320
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 18, 46
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
STATUS_COLOURS = {
    "accepted": "#2ca02c",
    "rejected": "#d62728",
    "revoked": "#9467bd",
    "pending": "#7f7f7f",
    "in_review": "#ff7f0e",
    "withdrawn": "#c7c7c7",
}


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Scale:
    """Maps a data interval onto a pixel interval (a reversed pixel interval flips the axis)."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo
        fraction = 0.5 if span == 0 else (value - self.lo) / span
        return round(self.start + fraction * (self.end - self.start), 2)


def extent(values: Iterable[float], pad: float = 0.05) -> tuple[float, float]:
    """The data range with a margin; a single value gets a small interval around it."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi == lo:
        return lo - (abs(lo) * 0.05 or 0.5), hi + (abs(hi) * 0.05 or 0.5)
    margin = (hi - lo) * pad
    return lo - margin, hi + margin


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) inside [lo, hi]."""
    raw = (hi - lo) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step) + 1)]


@dataclass(frozen=True)
class Frame:
    """The plotting area of one chart: its x and y scales in pixels, and the chart's height."""

    x: Scale
    y: Scale
    height: int = HEIGHT

    @classmethod
    def over(
        cls,
        x_range: tuple[float, float],
        y_range: tuple[float, float],
        *,
        left: int = MARGIN_LEFT,
        height: int = HEIGHT,
    ) -> Frame:
        x = Scale(*x_range, left, WIDTH - MARGIN_RIGHT)
        y = Scale(*y_range, height - MARGIN_BOTTOM, MARGIN_TOP)
        return cls(x, y, height)


def axes(frame: Frame, x_label: str, y_label: str, *, y_ticks: bool = True) -> Markup:
    """Both axes with ticks, grid lines and the axis labels (classes x-label / y-label)."""
    bottom, left = frame.y.start, frame.x.start
    parts: list[Markup] = [
        void("line", x1=left, y1=bottom, x2=frame.x.end, y2=bottom, class_="axis"),
        void("line", x1=left, y1=bottom, x2=left, y2=frame.y.end, class_="axis"),
    ]
    for value in ticks(frame.y.lo, frame.y.hi) if y_ticks else []:
        y = frame.y(value)
        parts.append(void("line", x1=left, y1=y, x2=frame.x.end, y2=y, class_="grid"))
        parts.append(el("text", fmt(value, 3), x=left - 6, y=y + 4, class_="tick", text_anchor="end"))
    for value in ticks(frame.x.lo, frame.x.hi):
        x = frame.x(value)
        parts.append(el("text", fmt(value, 3), x=x, y=bottom + 16, class_="tick", text_anchor="middle"))
    label_x = (left + frame.x.end) / 2
    parts.append(el("text", x_label, x=label_x, y=frame.height - 8, class_="x-label", text_anchor="middle"))
    if y_ticks:
        middle = (bottom + frame.y.end) / 2
        rotate = f"rotate(-90 14 {middle})"
        parts.append(el("text", y_label, x=14, y=middle, class_="y-label", text_anchor="middle", transform=rotate))
    else:  # a category axis: its names fill the left margin, so the label heads the column
        parts.append(el("text", y_label, x=left - 6, y=MARGIN_TOP - 3, class_="y-label", text_anchor="end"))
    return Markup("".join(parts))


def identity_line(frame: Frame) -> Markup:
    """The y = x diagonal across the shared part of both ranges (class identity)."""
    lo, hi = max(frame.x.lo, frame.y.lo), min(frame.x.hi, frame.y.hi)
    if lo >= hi:
        return Markup("")
    return void("line", x1=frame.x(lo), y1=frame.y(lo), x2=frame.x(hi), y2=frame.y(hi), class_="identity")


def svg(*children: Child | Iterable[Child], label: str, height: int = HEIGHT) -> Markup:
    return el(
        "svg",
        *children,
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {WIDTH} {height}",
        width=WIDTH,
        height=height,
        role="img",
        aria_label=label,
    )


def legend(entries: Sequence[tuple[str, str]]) -> Markup:
    """Coloured keys under a chart: (label, colour) pairs."""
    items = [el("span", el("i", style=f"background:{c}"), label, class_="key") for label, c in entries]
    return el("div", items, class_="legend")


def panel(plot_id: str, title: str, n_marks: int, body: Markup, caption: str = "") -> Markup:
    """A plot with its id, title and mark count; `body` is its SVG and legend."""
    return el(
        "section",
        el("h3", title),
        body,
        el("p", caption, class_="caption") if caption else None,
        id=plot_id,
        class_="panel plot",
        data_n=n_marks,
    )


def empty_panel(plot_id: str, title: str, why: str) -> Markup:
    """What a plot shows before its data exists: an explicit note, data-n 0."""
    return el(
        "section",
        el("h3", title),
        el("p", "no data yet: ", why, class_="no-data"),
        id=plot_id,
        class_="panel plot empty",
        data_n=0,
    )
