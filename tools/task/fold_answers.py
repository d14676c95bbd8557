"""Answers of training cases in the schema of a benchmark grader's own answers table.

A benchmark's grader reads an answers table (`test_labels.csv`) and the files it names; the import
recorded, per column, how to fill it for a training case (`GraderRef.fold_answers`). Writing those
answers for a validation fold lets the task's own grader score predictions on that fold. Plain
Python: the reviewer uses it, and so can an agent that wants its fold score on the grader's scale:

    python -m amid.tools.task.fold_answers TASK_DIR CASE_ID... --into DIR   (prints the table's path)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from pathlib import Path, PurePosixPath

from amid.server.errors import DataUnreadable, InvalidInput
from amid.tools.task.cases import Case, case_file, discover_cases, fill
from amid.tools.task.contract import AnswerColumn, TaskContract, load_contract

ANSWERS_NAME = ".amid_fold_answers.csv"


def write_fold_answers(task_dir: Path, contract: TaskContract, case_ids: list[str], into: Path) -> Path:
    """Answers of the given training cases in the schema of the grader's answers table; files go
    under `into` (the answers_dir of the grader call). Returns the table's path."""
    grader = contract.grader
    if grader is None or grader.fold_answers is None:
        raise InvalidInput("the task's grader has no recipe for fold answers (not a benchmark import)")
    id_column = grader.id_column or contract.submission.id_column
    table = _labels_table(task_dir, contract)
    cases = {c.case_id: c for c in discover_cases(task_dir, contract.layout, "train")}
    unknown = [c for c in case_ids if c not in cases]
    if unknown:
        raise InvalidInput(f"case ids {unknown[:5]} are not training cases of the task", field="case_ids")
    into.mkdir(parents=True, exist_ok=True)
    rows = [_row(task_dir, grader.fold_answers, cases[c], table, into) for c in case_ids]
    path = into / ANSWERS_NAME
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[id_column, *(c.name for c in grader.fold_answers)])
        writer.writeheader()
        writer.writerows({id_column: case_id, **row} for case_id, row in zip(case_ids, rows, strict=True))
    return path


def _labels_table(task_dir: Path, contract: TaskContract) -> dict[str, dict[str, str]]:
    rel = contract.layout.labels_table
    if rel is None:
        return {}
    id_column = (contract.grader.id_column if contract.grader else None) or contract.submission.id_column
    with (task_dir / rel).open(encoding="utf-8", newline="") as handle:
        return {row[id_column]: row for row in csv.DictReader(handle)}


def _row(
    task_dir: Path, columns: list[AnswerColumn], case: Case, table: dict[str, dict[str, str]], into: Path
) -> dict[str, str]:
    case_id = case.case_id
    row: dict[str, str] = {}
    for column in columns:
        if column.kind == "constant":
            row[column.name] = column.value or ""
        elif column.kind == "value":
            if case_id not in table:
                raise DataUnreadable(f"the training labels table has no row for case {case_id!r}")
            row[column.name] = table[case_id][column.source_column or column.name]
        else:
            row[column.name] = _answer_file(task_dir, column, case, into)
    return row


def _answer_file(task_dir: Path, column: AnswerColumn, case: Case, into: Path) -> str:
    assert column.answers_template is not None and column.train_source is not None
    case_id = case.case_id
    source = task_dir / case_file(task_dir, column.train_source, case_id)
    rel = fill(column.answers_template, case_id)
    if rel.endswith("{ext}"):
        rel = rel.removesuffix("{ext}") + _ending(source.name, case_id)
    target = into / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if column.kind == "file":
        os.symlink(source, target)
    elif column.kind == "coco_image":
        _coco_slice(source, case_id, target)
    else:
        from amid.tools.task.label_adapters import convert

        image = str(task_dir / case.image_paths[0])
        convert(column.adapter or "", source, target, {**column.adapter_options, "image": image})
    return rel


def _ending(name: str, case_id: str) -> str:
    return name[name.index(case_id) + len(case_id) :] if case_id in name else PurePosixPath(name).suffix


def _coco_slice(source: Path, case_id: str, target: Path) -> None:
    """One image's part of a COCO file: its `images` entry, its annotations, every other key as is."""
    data = json.loads(source.read_text(encoding="utf-8"))
    images = [i for i in data.get("images", []) if PurePosixPath(str(i.get("file_name", ""))).stem == case_id]
    if not images:
        raise DataUnreadable(f"{source.name}: no image named {case_id!r} in its images list")
    ids = {i["id"] for i in images}
    sliced = {k: v for k, v in data.items() if k not in ("images", "annotations")}
    sliced["images"] = images
    sliced["annotations"] = [a for a in data.get("annotations", []) if a.get("image_id") in ids]
    target.write_text(json.dumps(sliced), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amid.tools.task.fold_answers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("task_dir", type=Path, help="the workspace's task/ folder")
    parser.add_argument("case_ids", nargs="+", help="training case ids (e.g. a fold's validation cases)")
    parser.add_argument("--into", type=Path, required=True, help="folder to write the answers into")
    args = parser.parse_args(argv)
    contract = load_contract(args.task_dir / "contract.yaml")
    print(write_fold_answers(args.task_dir, contract, args.case_ids, args.into))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
