"""Infer a benchmark task's data layout from its own answers table, as its prepare step left it.

ReX-MLE (and MLE-bench) challenges describe nothing of their layout in a machine-readable way; what
is certain is the grader's answers table (`private/test_labels.csv`): one row per test case, an id
column (the sample submission's first column), and per column either a file relative to the
answers folder (a label: it exists under private/), a file relative to the public folder (an input
image: it exists under public/), a per-case value (a score, a class), or one constant. Replacing the
case id in each file value gives a template (`test/labels/topcow_ct_{case}.nii.gz`); the training
side of a template is the same path under `train/` in the public folder. That gives the case files
of both splits and, for the reviewer, the recipe to build a validation fold's answers in exactly
the schema the grader reads. Whatever cannot be inferred this way is refused with the file, the
column and what was looked for.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from amid.server.errors import InvalidInput
from amid.tools.task.cases import template_ids
from amid.tools.task.image_folders import IMAGE_ENDINGS, split_images

FILE_ENDINGS = (*IMAGE_ENDINGS, ".json", ".geojson", ".yaml", ".yml", ".txt", ".csv", ".npy", ".npz")


@dataclass
class InferredLayout:
    id_column: str
    train_ids: list[str]
    test_ids: list[str]
    train_images: list[str]
    test_images: list[str]
    channels: list[str]
    train_label: str | None
    labels_table: str | None
    label_ending: str | None
    answer_columns: list[dict[str, Any]] = field(default_factory=list)
    target_values: list[str] = field(default_factory=list)  # the test answers' first value column


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a CSV, every value a string (ids such as `002` keep their zeros)."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInput(f"{path.name}: cannot read the table ({exc})") from None


def ending_of(name: str) -> str:
    if name.endswith("{ext}"):
        return ""
    lower = name.lower()
    return next((e for e in FILE_ENDINGS if lower.endswith(e)), PurePosixPath(name).suffix)


def looks_like_file(value: str) -> bool:
    return "/" in value or value.lower().endswith(FILE_ENDINGS)


def templatise(values: dict[str, str], column: str, table: str) -> str:
    """One template for every row's file, or InvalidInput naming the first row that breaks it."""
    templates = set()
    for case_id, value in values.items():
        if value.count(case_id) != 1:
            raise InvalidInput(
                f"{table}: column {column!r} row {case_id!r}: the file {value!r} does not name the case id once; "
                "cannot tell how its files are named",
                field=column,
            )
        templates.add(value.replace(case_id, "{case}"))
    if len(templates) > 1 and len({t.removesuffix(ending_of(t)) for t in templates}) == 1:
        return next(iter(templates)).removesuffix(ending_of(next(iter(templates)))) + "{ext}"  # mixed endings
    if len(templates) != 1:
        raise InvalidInput(f"{table}: column {column!r} names files in {len(templates)} ways: {sorted(templates)[:3]}")
    return templates.pop()


def train_side(template: str) -> str:
    """`test/labels/x_{case}.nii.gz` → `train/labels/x_{case}.nii.gz` (the first `test` component)."""
    parts = list(PurePosixPath(template).parts)
    for index, part in enumerate(parts):
        if part.lower() in ("test", "testing", "ts"):
            parts[index] = {"test": "train", "testing": "training", "ts": "tr"}[part.lower()]
            if part.isupper():
                parts[index] = parts[index].upper()
            return str(PurePosixPath(*parts))
    return template


def infer(
    task_dir: Path,
    public: str,
    answers: str,
    answers_dir: Path,
    sample: str,
    adapters: dict[str, dict[str, Any]] | None = None,
) -> InferredLayout:
    """`task_dir` holds the public folder at `public`; `answers` is the answers table (a real path);
    `adapters`: answers column → {adapter, train_label, options}, for labels the benchmark converts."""
    header, rows = read_rows(Path(answers))
    sample_header, sample_rows = read_rows(task_dir / sample)
    if not sample_header or sample_header[0] not in header:
        raise InvalidInput(
            f"sample_submission.csv: its first column {sample_header[:1]} is not a column of the answers table "
            f"{header}; the case-id column cannot be told",
            field="dataset.sample_submission",
        )
    id_column = sample_header[0]
    test_ids = [r[id_column] for r in sample_rows if r.get(id_column)]
    by_id = {r[id_column]: r for r in rows}
    missing = [i for i in test_ids if i not in by_id]
    if missing:
        raise InvalidInput(f"{Path(answers).name}: no answers for the sample submission's ids {missing[:5]}")
    layout = _columns(
        task_dir, public, answers_dir, header, by_id, id_column, Path(answers).name, adapters or {}, test_ids
    )
    targets = [c for c in sample_header[1:] if c in header] or header[1:2]
    layout.target_values = [r.get(targets[0]) or "" for r in rows] if targets else []
    return layout


def _columns(
    task_dir: Path,
    public: str,
    answers_dir: Path,
    header: list[str],
    rows: dict[str, dict[str, str]],
    id_column: str,
    table: str,
    adapters: dict[str, dict[str, Any]],
    test_ids: list[str],
) -> InferredLayout:
    inputs: list[tuple[str, str]] = []
    labels: list[tuple[str, str]] = []
    values: list[str] = []
    columns: list[dict[str, Any]] = []
    for column in header:
        if column == id_column:
            continue
        cells = {case: row.get(column) or "" for case, row in rows.items()}
        if len(set(cells.values())) == 1 and not looks_like_file(next(iter(cells.values()))):
            columns.append({"name": column, "kind": "constant", "value": next(iter(cells.values()))})
        elif all(looks_like_file(v) for v in cells.values()):
            template = templatise(cells, column, table)
            first = next(iter(cells.values()))
            if (answers_dir / first).exists():
                labels.append((column, template))
            elif (task_dir / public / first).exists():
                inputs.append((column, template))
            else:
                raise InvalidInput(
                    f"{table}: column {column!r} names {first!r}, found neither under the answers folder nor under "
                    "public/; was the challenge prepared completely?",
                    field=column,
                )
        else:
            values.append(column)
    layout = _assemble(task_dir, public, id_column, inputs, labels, values, columns, table, adapters, test_ids)
    layout.test_ids = test_ids
    return layout


def _assemble(
    task_dir: Path,
    public: str,
    id_column: str,
    inputs: list[tuple[str, str]],
    labels: list[tuple[str, str]],
    values: list[str],
    columns: list[dict[str, Any]],
    table: str,
    adapters: dict[str, dict[str, Any]],
    test_ids: list[str],
) -> InferredLayout:
    if not values and not labels and not inputs:  # every answer constant over a small test set
        values += [c["name"] for c in columns if c["kind"] == "constant"]
        columns = [c for c in columns if c["kind"] != "constant"]
    labels_table = _labels_table(task_dir, public, id_column, values, table) if values else None
    if labels_table is not None:
        columns = _table_constants(task_dir / labels_table, columns, values)
    columns += [{"name": v, "kind": "value", "source_column": v} for v in values]
    train_label: str | None = None
    for column, template in labels:
        source = _train_source(task_dir, public, column, template, table, adapters.get(column))
        columns.append(source)
        if train_label is None and source["kind"] in ("file", "converted"):
            train_label = source["train_source"]
    for column, template in inputs:
        columns.append(
            {
                "name": column,
                "kind": "file",
                "answers_template": template,
                "train_source": f"{public}/{train_side(template)}",
                "input": True,
            }
        )
    train_ids = _train_ids(task_dir, public, id_column, columns, labels_table)
    train_images, test_images, channels = _images(task_dir, public, inputs, train_ids, test_ids, train_label)
    label_ending = ending_of(labels[0][1]) if labels else None
    return InferredLayout(
        id_column, train_ids, [], train_images, test_images, channels, train_label, labels_table, label_ending, columns
    )


def _train_source(
    task_dir: Path, public: str, column: str, template: str, table: str, adapter: dict[str, Any] | None
) -> dict[str, Any]:
    candidate = f"{public}/{train_side(template)}"
    if template_ids(task_dir, candidate) if (task_dir / PurePosixPath(candidate).parent).is_dir() else []:
        return {"name": column, "kind": "file", "answers_template": template, "train_source": candidate}
    if adapter is not None:
        source = f"{public}/{adapter['train_label']}"
        if not template_ids(task_dir, source):
            raise InvalidInput(f"{table}: column {column!r}: no training labels match {source!r}", field=column)
        return {
            "name": column,
            "kind": "converted",
            "answers_template": template,
            "train_source": source,
            "adapter": adapter["adapter"],
            "adapter_options": adapter.get("options") or {},
        }
    if template.lower().endswith(".json"):
        coco = _coco_file(task_dir / public)
        if coco is not None:
            return {"name": column, "kind": "coco_image", "answers_template": template, "train_source": coco}
    raise InvalidInput(
        f"{table}: column {column!r} holds label files like {template!r}, but public/ has no training counterpart "
        f"({candidate!r}, or a COCO annotation file); the folds' answers cannot be built",
        field=column,
    )


def _coco_file(public: Path) -> str | None:
    """A COCO annotation file of the training images (`images` and `annotations` lists) under public/."""
    for path in sorted(public.rglob("*.json")):
        if "test" in path.relative_to(public).parts or path.stat().st_size > 200_000_000:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("images"), list) and "annotations" in data:
            return str(PurePosixPath(public.name) / path.relative_to(public).as_posix())
    return None


def _labels_table(task_dir: Path, public: str, id_column: str, values: list[str], table: str) -> str:
    for path in sorted((task_dir / public).rglob("*.csv")):
        if path.name == "sample_submission.csv" or "test" in path.name:
            continue
        header, _ = read_rows(path)
        if id_column in header and all(v in header for v in values):
            return path.relative_to(task_dir).as_posix()
    raise InvalidInput(
        f"{table}: columns {values} hold per-case values, but no CSV under public/ has {[id_column, *values]} "
        "for the training cases",
        field=values[0],
    )


def _train_ids(
    task_dir: Path, public: str, id_column: str, columns: list[dict[str, Any]], labels_table: str | None
) -> list[str]:
    for column in columns:
        if column["kind"] == "file" and not column.get("input"):
            return template_ids(task_dir, column["train_source"])
    if labels_table is not None:
        _, rows = read_rows(task_dir / labels_table)
        return [r[id_column] for r in rows if r.get(id_column)]
    for column in columns:
        if column["kind"] == "coco_image":
            data = json.loads((task_dir / column["train_source"]).read_text(encoding="utf-8"))
            return sorted(str(PurePosixPath(i["file_name"]).name).rsplit(".", 1)[0] for i in data["images"])
    for column in columns:
        if column.get("input"):
            return template_ids(task_dir, column["train_source"])
    raise InvalidInput("the answers table has no label column to find the training cases by", field="dataset.answers")


def _images(
    task_dir: Path,
    public: str,
    inputs: list[tuple[str, str]],
    train_ids: list[str],
    test_ids: list[str],
    label: str | None,
) -> tuple[list[str], list[str], list[str]]:
    """Input templates of both splits and the channel names: named by the answers' input columns, or
    else the folders whose image files are named by the split's case ids."""
    if inputs:
        channels = [c.removesuffix("_path").removesuffix("_file") or c for c, _ in inputs]
        return ([f"{public}/{train_side(t)}" for _, t in inputs], [f"{public}/{t}" for _, t in inputs], channels)
    skip = str(PurePosixPath(label).parent) if label else None
    train, channels = split_images(task_dir, public, "train", train_ids, skip)
    test, _ = split_images(task_dir, public, "test", test_ids, None, required=False)
    return train, test, channels


def _table_constants(table: Path, columns: list[dict[str, Any]], values: list[str]) -> list[dict[str, Any]]:
    """A column that is constant over the (small) test set but present in the training labels table is
    a per-case value (a class no test case has), not a constant to copy into every fold's answers."""
    header, _ = read_rows(table)
    kept = []
    for column in columns:
        if column["kind"] == "constant" and column["name"] in header:
            values.append(column["name"])
        else:
            kept.append(column)
    return kept
