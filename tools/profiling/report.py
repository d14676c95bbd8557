"""The full report on disk: profile.json (everything), profile.md (for humans), cases.parquet (per case)."""

from __future__ import annotations

import json
from pathlib import Path

from amid.tools.profiling.dataprofile import DataProfile
from amid.tools.profiling.models import CaseRecord, ChannelStats, Stats

# Parquet column types of the per-case table, in CaseRecord's field order.
CASE_COLUMNS = {
    "case_id": "VARCHAR",
    "split": "VARCHAR",
    "group": "VARCHAR",
    "fold": "BIGINT",
    "file_type": "VARCHAR",
    "n_channels": "BIGINT",
    "shape": "BIGINT[]",
    "spacing": "DOUBLE[]",
    "orientation": "VARCHAR",
    "dtype": "VARCHAR",
    "size_bytes": "BIGINT",
    "content_hash": "VARCHAR",
    "has_label": "BOOLEAN",
    "foreground_ratio": "DOUBLE",
    "n_components": "BIGINT",
    "n_instances": "BIGINT",
    "n_boxes": "BIGINT",
    "class_label": "VARCHAR",
    "intensity_mean": "DOUBLE",
    "intensity_std": "DOUBLE",
    "pair_correlation": "DOUBLE",
    "n_issues": "BIGINT",
    "seconds": "DOUBLE",
}
MARKDOWN_ISSUES = 50


def write_report(profile: DataProfile, out_dir: str | Path) -> dict[str, Path]:
    """Write profile.json, profile.md and cases.parquet into out_dir; return their paths by name."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in ("profile.json", "profile.md", "cases.parquet")}
    paths["profile.json"].write_text(profile.model_dump_json(indent=1), encoding="utf-8")
    paths["profile.md"].write_text(render_markdown(profile), encoding="utf-8")
    write_cases_parquet(profile.cases, paths["cases.parquet"])
    return paths


def write_cases_parquet(cases: list[CaseRecord], path: Path) -> None:
    """One row per case, typed columns, through an in-memory DuckDB (no file database is created).

    The rows go in as one statement, each column a typed list unnested beside the others: DuckDB's
    executemany runs one INSERT per row, about 1.2 ms of the server's CPU per case (0.5 s for 400
    cases), against 0.05 s for all 400 here.
    """
    import duckdb

    assert list(CASE_COLUMNS) == list(CaseRecord.model_fields), "CASE_COLUMNS must follow CaseRecord"
    columns = ", ".join(f'"{name}" {kind}' for name, kind in CASE_COLUMNS.items())
    with duckdb.connect() as connection:
        connection.execute(f"CREATE TABLE cases ({columns})")
        if cases:
            values = [[getattr(case, name) for case in cases] for name in CASE_COLUMNS]
            unnested = ", ".join(f"unnest(?::{kind}[])" for kind in CASE_COLUMNS.values())
            connection.execute(f"INSERT INTO cases SELECT {unnested}", values)
        target = str(path).replace("'", "''")
        connection.execute(f"COPY cases TO '{target}' (FORMAT parquet)")


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _stats(stats: Stats | None) -> str:
    if stats is None:
        return "n/a"
    return f"{_number(stats.min)} / {_number(stats.median)} / {_number(stats.max)}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _channel_rows(channels: list[ChannelStats]) -> list[list[str]]:
    return [
        [
            f"{c.channel} {c.name or ''}".strip(),
            *(_number(v) for v in (c.mean, c.median, c.std, c.min, c.max, c.percentile_00_5, c.percentile_99_5)),
            str(c.n_cases),
        ]
        for c in channels
    ]


def _representation(profile: DataProfile) -> list[str]:
    r = profile.representation
    lines = ["## Representation", ""]
    lines += [f"- spatial dims: {r.spatial_dims}; dtypes: {r.dtypes}; orientations: {r.orientations}"]
    lines += [f"- channels per case: {r.channels_per_case}; RGB cases: {r.rgb_cases}; tiled: {r.tiled_cases}"]
    lines += [f"- median spacing ({r.spacing_unit}): {[round(v, 4) for v in r.median_spacing]}", ""]
    axes = [[str(i), _stats(r.shape[i]), _stats(r.spacing[i]), _stats(r.size_mm[i])] for i in range(len(r.shape))]
    lines += [*_table(["axis", "shape min/median/max", "spacing", "extent"], axes), ""]
    if r.intensity is not None:
        lines += [f"Intensity ({r.intensity.region}):", ""]
        header = ["channel", "mean", "median", "std", "min", "max", "p0.5", "p99.5", "cases"]
        lines += [*_table(header, _channel_rows(r.intensity.channels)), ""]
    return lines


def _supervision(profile: DataProfile) -> list[str]:
    s = profile.supervision
    lines = ["## Supervision", "", f"- source: {s.source}; labelled training cases: {s.labelled_train_cases}"]
    lines += [f"- foreground ratio per case (min/median/max): {_stats(s.foreground_ratio)}"]
    if s.class_counts:
        lines += [f"- class counts: {s.class_counts} (imbalance {_number(s.imbalance_ratio)})"]
    if s.boxes is not None:
        lines += [f"- boxes: {s.boxes.n_boxes}, per image {_stats(s.boxes.boxes_per_image)}"]
    if s.pairs is not None:
        lines += [f"- pairs: {s.pairs.aligned}/{s.pairs.n_pairs} aligned, correlation {_stats(s.pairs.correlation)}"]
    if s.classes:
        rows = [
            [
                f"{c.value} {c.name}",
                _number(c.voxel_share),
                str(c.cases_present),
                _stats(c.components_per_case),
            ]
            for c in s.classes
        ]
        lines += ["", *_table(["class", "voxel share", "cases", "components / case"], rows)]
    return [*lines, ""]


def render_markdown(profile: DataProfile) -> str:
    """A human-readable profile: predicates, issues, and the main numbers of every section."""
    inv, ev = profile.inventory, profile.evaluation
    lines = [f"# Data profile: {profile.task_type}", ""]
    lines += [f"Cases: {inv.n_cases}; files: {inv.n_files} ({inv.total_bytes / 1e6:.1f} MB); "]
    lines += [f"profiled in {profile.seconds:.1f} s with {profile.n_workers} workers.", ""]
    lines += ["## Predicates", ""]
    rows = [[p.name, "yes" if p.value else "no", json.dumps(p.evidence)] for p in profile.predicates]
    lines += [*_table(["predicate", "value", "evidence"], rows), "", f"## Issues ({len(profile.issues)})", ""]
    issue_rows = [
        [i.severity, i.code, i.case_id or "", Path(i.path).name if i.path else "", i.message]
        for i in profile.issues[:MARKDOWN_ISSUES]
    ]
    lines += [*_table(["severity", "code", "case", "file", "message"], issue_rows), ""]
    lines += ["## Inventory", "", f"- file types: {inv.image_file_types} (labels {inv.label_file_types})"]
    lines += [f"- id patterns: {inv.id_patterns}; missing ids: {inv.missing_ids}; layout: {inv.layout}"]
    lines += [f"- duplicate sets: {inv.duplicate_sets}; strata: {inv.strata}", ""]
    lines += _representation(profile) + _supervision(profile)
    lines += ["## Evaluation", "", f"- primary metric: {ev.primary_metric} ({ev.metric_direction})"]
    lines += [f"- folds: {ev.cases_per_fold}; groups split across folds: {ev.groups_split_across_folds}"]
    lines += [f"- duplicates across splits: {ev.duplicates_across_splits}; submission: {ev.submission_columns}"]
    return "\n".join(lines) + "\n"
