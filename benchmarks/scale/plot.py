"""Draw the growth benchmarks' results as one PNG, one panel per benchmark, each beside its reference.

Reads benchmarks/results/{ledger,data,agents,reviews,jobs}_growth.json (written by benchmarks/scale/*_growth.py)
and writes benchmarks/results/growth.png. A panel whose file is missing, unreadable or lacks a field is drawn
with a short "no data" note instead.

    python benchmarks/scale/plot.py [--results DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
OUT = RESULTS / "growth.png"

LEDGER_TOOLS = ("get_task", "list_lanes", "leaderboard", "run_evidence", "read_notes")
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


class NoData(Exception):
    """A panel's file or one of its fields is missing."""


def _load(results_dir: Path, name: str) -> dict[str, Any]:
    path = results_dir / f"{name}_growth.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise NoData(f"{path.name} missing") from e
    except (OSError, ValueError) as e:
        raise NoData(f"{path.name} unreadable") from e
    if not isinstance(data, dict):
        raise NoData(f"{path.name} is not an object")
    return data


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NoData(f"no {what}")
    return float(value)


def _nums(values: Any, what: str) -> list[float]:
    if not isinstance(values, list) or not values:
        raise NoData(f"no {what}")
    return [_num(v, what) for v in values]


def _count(n: float) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{int(n // 1000)}k"
    return f"{n:g}"


def _size_axis(ax: Axes, sizes: Sequence[float], label: str) -> None:
    """Log x where the sizes span a decade or more, ticks at the measured sizes."""
    if min(sizes) > 0 and max(sizes) / min(sizes) >= 10:
        ax.set_xscale("log")
        ax.set_xlim(min(sizes) / 1.6, max(sizes) * 1.6)
    ax.xaxis.set_major_locator(FixedLocator(list(sizes)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: _count(x)))
    ax.set_xlabel(label)


def _minor_label(y: float, _pos: int | None) -> str:
    """Label only the 2s and 5s between the decades, in plain numbers."""
    mantissa = round(y / 10 ** math.floor(math.log10(y)), 6) if y > 0 else 0
    return f"{y:g}" if mantissa in (2, 5) else ""


def _plain_log_y(ax: Axes) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(_minor_label))


def _log_axes(ax: Axes, sizes: Sequence[float], xlabel: str, ylabel: str, title: str) -> None:
    """A size axis below, a plain-numbered log axis beside, and the panel's title."""
    _size_axis(ax, sizes, xlabel)
    _plain_log_y(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def _ledger(ax: Axes, results_dir: Path) -> None:
    d = _load(results_dir, "ledger")
    ping = _num((d.get("bare_sdk_ping") or {}).get("server_cpu_ms_per_call"), "bare SDK ping CPU")
    sizes = d.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        raise NoData("no sizes")
    attempts = [_num(s.get("attempts"), "attempts") for s in sizes]
    drawn = 0
    for tool, colour in zip(LEDGER_TOOLS, COLOURS, strict=False):
        points = [
            (a, ((s.get("warm") or {}).get(tool) or {}).get("server_cpu_ms_per_call"))
            for a, s in zip(attempts, sizes, strict=True)
        ]
        xs = [a for a, v in points if isinstance(v, int | float)]
        ys = [float(v) for _, v in points if isinstance(v, int | float)]
        if xs:
            ax.plot(xs, ys, "o-", color=colour, label=tool)
            drawn += 1
    if not drawn:
        raise NoData("no per-tool server CPU")
    ax.axhline(ping, color="black", linestyle="--", linewidth=1.2, label=f"bare SDK ping ({ping:g} ms)")
    _log_axes(
        ax,
        attempts,
        "attempts in the ledger",
        "server CPU ms per call (warm)",
        "Ledger size: tool CPU per call\nreference: bare MCP SDK ping, same run",
    )
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo / 1.3, hi * 6)  # room for the legend above the curves
    ax.legend(fontsize=7.5, loc="upper right", ncol=2)


def _data(ax: Axes, results_dir: Path) -> None:
    d = _load(results_dir, "data")
    growth = d.get("growth")
    if not isinstance(growth, dict):
        raise NoData("no growth")
    all_cases: list[float] = []
    drawn = 0
    for (kind, label), colour in zip((("ct", "CT volumes"), ("tiles", "PNG tiles")), COLOURS, strict=False):
        g = growth.get(kind)
        if not isinstance(g, dict):
            continue
        try:
            cases = _nums(g.get("cases"), "cases")
            cpu = _nums(g.get("cpu_ns_per_byte_tool"), "profiler CPU ns per byte")
            floor = _nums(g.get("cpu_ns_per_byte_floor_isal"), "ISA-L floor")
        except NoData:
            continue
        if not len(cases) == len(cpu) == len(floor):
            continue
        ax.plot(cases, cpu, "o-", color=colour, label=f"{label}: profiler")
        ax.plot(cases, floor, "s--", color=colour, alpha=0.7, label=f"{label}: ISA-L read floor")
        all_cases += cases
        drawn += 1
    if not drawn:
        raise NoData("no CT or tile curves")
    _log_axes(
        ax,
        sorted(set(all_cases)),
        "cases in the dataset",
        "CPU ns per byte on disk",
        "Data size: profiler CPU per byte\nreference: ISA-L read-and-inflate floor, same run",
    )
    ax.legend(fontsize=7.5, loc="upper right")


def _agents_series(runs: Any, what: str) -> tuple[list[float], list[float], bool]:
    if not isinstance(runs, list) or not runs:
        raise NoData(f"no {what} runs")
    net = all(isinstance(r.get("server_cpu_ms_per_call_net_of_idle"), int | float) for r in runs)
    key = "server_cpu_ms_per_call_net_of_idle" if net else "server_cpu_ms_per_call"
    xs = [_num(r.get("agents"), "agents") for r in runs]
    ys = [_num(r.get(key), f"{what} server CPU") for r in runs]
    return xs, ys, net


def _agents(ax: Axes, results_dir: Path) -> None:
    d = _load(results_dir, "agents")
    ax_, ay, a_net = _agents_series(d.get("amid"), "amid")
    bx, by, b_net = _agents_series(d.get("bare_sdk_json_response"), "bare SDK")
    ax.plot(ax_, ay, "o-", color=COLOURS[0], label="amid serve (7-tool mix)")
    ax.plot(bx, by, "s--", color="black", label="bare MCP SDK server (ping)")
    _size_axis(ax, sorted(set(ax_ + bx)), "agents, each calling once per second")
    top = max(ay + by)
    ax.set_ylim(0, top * 1.35)
    net = " net of idle" if a_net and b_net else ""
    ax.set_ylabel(f"server CPU ms per call{net}")
    ax.set_title("Agents: server CPU per call\nreference: bare MCP SDK server, same run")
    ax.legend(fontsize=7.5, loc="upper right")


def _reviews(ax: Axes, results_dir: Path) -> None:
    d = _load(results_dir, "reviews")
    runs = sorted(
        (v for k, v in d.items() if k.startswith("workers_") and isinstance(v, dict)),
        key=lambda r: float(r.get("review_workers") or 0),
    )

    def series(field: Callable[[dict[str, Any]], Any]) -> tuple[list[float], list[float]]:
        pairs = [(r.get("review_workers"), field(r)) for r in runs]
        kept = [(float(w), float(v)) for w, v in pairs if isinstance(w, int | float) and isinstance(v, int | float)]
        return [w for w, _ in kept], [v for _, v in kept]

    rpm_x, rpm = series(lambda r: r.get("reviews_per_minute"))
    lat_x, lat = series(lambda r: (r.get("verdict_latency_s") or {}).get("p50"))
    if not rpm and not lat:
        raise NoData("no reviews per minute or verdict latency")
    workers = sorted(set(rpm_x + lat_x))
    ax.plot(rpm_x, rpm, "o-", color=COLOURS[0], label="reviews per minute (bwrap)")
    right = ax.twinx()
    rpm_top, lat_top = max(rpm, default=1.0), max(lat, default=1.0)
    right.plot(lat_x, lat, "s--", color=COLOURS[1], label="verdict latency p50 (bwrap)")
    none = d.get("sandbox_none")
    if isinstance(none, dict):
        w = none.get("review_workers")
        n_rpm = none.get("reviews_per_minute")
        n_lat = (none.get("verdict_latency_s") or {}).get("p50")
        if isinstance(w, int | float) and isinstance(n_rpm, int | float):
            ax.plot([w], [n_rpm], "*", color=COLOURS[0], markersize=13, label="reviews per minute, no sandbox")
            rpm_top = max(rpm_top, float(n_rpm))
        if isinstance(w, int | float) and isinstance(n_lat, int | float):
            right.plot([w], [n_lat], "*", color=COLOURS[1], markersize=13, label="verdict p50, no sandbox")
            lat_top = max(lat_top, float(n_lat))
    _size_axis(ax, workers, "review worker processes")
    ax.set_xlim(min(workers) - 0.5, max(workers) + 0.5)
    ax.set_ylim(0, rpm_top * 1.75)
    right.set_ylim(0, lat_top * 1.75)
    ax.set_ylabel("reviews per minute", color=COLOURS[0])
    right.set_ylabel("verdict latency p50, s", color=COLOURS[1])
    ax.set_title("Reviews: throughput and verdict latency\nreference: the same review without a sandbox (★)")
    handles, labels = ax.get_legend_handles_labels()
    h2, l2 = right.get_legend_handles_labels()
    ax.legend(handles + h2, labels + l2, fontsize=7, loc="upper left")


def _jobs(ax: Axes, results_dir: Path) -> None:
    d = _load(results_dir, "jobs")
    sizes_seen: list[float] = []
    drawn = 0
    notes = []
    for backend, label, style, colour in (
        ("local", "local scheduler", "o-", COLOURS[0]),
        ("ray", "Ray backend", "s--", "black"),
    ):
        runs = d.get(backend)
        if not isinstance(runs, dict) or not runs:
            continue
        rows = []
        for run in runs.values():
            if isinstance(run, dict) and all(isinstance(run.get(k), int | float) for k in ("jobs", "jobs_per_s")):
                rows.append(run)
        rows.sort(key=lambda r: float(r["jobs"]))
        if not rows:
            continue
        xs = [float(r["jobs"]) for r in rows]
        ys = [float(r["jobs_per_s"]) for r in rows]
        ax.plot(xs, ys, style, color=colour, label=f"{label}")
        for r in rows:
            ran = r.get("ran")
            if isinstance(ran, int | float) and ran < r["jobs"]:
                window = r.get("drain_window_s")
                within = f" in its {window:g} s window" if isinstance(window, int | float) else ""
                notes.append(f"{label} ran {int(ran)} of {int(r['jobs'])}{within}; the rest were cancelled")
        sizes_seen += xs
        drawn += 1
    if not drawn:
        raise NoData("no jobs per second")
    _log_axes(
        ax,
        sorted(set(sizes_seen)),
        "jobs in one burst (concurrency 8)",
        "throughput, jobs per second",
        "Jobs: dispatch throughput\nreference: Ray backend, same run",
    )
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo / 2, hi * 3)
    ax.legend(fontsize=7.5, loc="upper right")
    if notes:
        ax.text(0.02, 0.03, "\n".join(notes), transform=ax.transAxes, fontsize=6.5, va="bottom", color="dimgray")


PANELS: tuple[tuple[str, str, Callable[[Axes, Path], None]], ...] = (
    ("ledger", "Ledger size", _ledger),
    ("data", "Data size", _data),
    ("agents", "Agents", _agents),
    ("reviews", "Reviews", _reviews),
    ("jobs", "Jobs", _jobs),
)


def _no_data(ax: Axes, title: str, why: str) -> None:
    ax.cla()
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title)
    ax.text(0.5, 0.5, f"no data\n({why})", transform=ax.transAxes, ha="center", va="center", color="gray")


def plot(results_dir: Path, out: Path) -> Path:
    """Draw the five growth panels from results_dir's JSON files into the PNG out; return out."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 10.5))
    flat = list(axes.flat)
    for ax, (name, title, draw) in zip(flat, PANELS, strict=False):
        try:
            draw(ax, results_dir)
        except (NoData, KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            for other in list(fig.axes):  # a twin axis the failed panel may have added
                if other not in flat and other.bbox.bounds == ax.bbox.bounds:
                    other.remove()
            _no_data(ax, title, str(e) if isinstance(e, NoData) else f"{name}_growth.json: {type(e).__name__}")
        ax.grid(True, which="major", alpha=0.3)
    notes = flat[len(PANELS)]
    notes.axis("off")
    notes.text(
        0.02,
        0.95,
        "How cost grows (issue 25)\n\n"
        "Each curve beside its reference from the same run.\n"
        "Measured on a shared 2-core machine under load;\n"
        "server CPU per call is the figure to compare,\n"
        "wall times carry ±20–30 % between runs.\n\n"
        "Redraw: make bench-plot\n"
        "Rerun the benchmarks: make bench-scale",
        transform=notes.transAxes,
        va="top",
        fontsize=10,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the *_growth.json files")
    parser.add_argument("--out", type=Path, default=OUT, help="the PNG to write")
    args = parser.parse_args(argv)
    out = plot(args.results, args.out)
    print(out)
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
