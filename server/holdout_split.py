"""The server-held holdout at `amid init` (docs/ARCHITECTURE.md §5): a seeded fraction of the training groups
(patients, sites; a case is its own group when the task has none) moves, images and labels, into
`private/holdout/`, and no public file keeps a trace of it.

The trace removal (`scrub_public_tables`): every CSV / TSV / JSON file under task/ loses the rows
(CSV) or list items and object keys (JSON) that name a held-out case id (as a whole token, so
`p003s0` in `train/images/p003s0_0000.nii.gz` counts and `p003s01` does not) or carry a held-out
group in the group-key column. What is removed is kept under `private/holdout/` at the same
relative path, so a tabular task's holdout labels stay with the server.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from amid.server.errors import InvalidInput, invalid
from amid.tools.task.cases import Case
from amid.tools.task.contract import TaskContract, ValidationProtocol

TABLE_ENDINGS = (".csv", ".tsv")
JSON_ENDINGS = (".json",)


def with_holdout_fraction(contract: TaskContract, fraction: float) -> TaskContract:
    """The contract with `validation.holdout_fraction` set (`amid init --holdout-fraction F`)."""
    try:
        validation = ValidationProtocol.model_validate(
            {**contract.validation.model_dump(), "holdout_fraction": fraction}
        )
    except ValidationError:
        raise invalid("--holdout-fraction", fraction, "a fraction from 0 to 0.5 of the training groups") from None
    grader = contract.grader
    if fraction > 0 and grader is not None and grader.fold_answers is not None:
        # A benchmark task's folds are scored by its own grader; its holdout replay would need the
        # same (answers of held-out cases in the grader's schema), which the gate does not do yet.
        raise invalid(
            "--holdout-fraction",
            fraction,
            "0 for a benchmark import (ReX-MLE / MLE-bench): its holdout gate is not built",
        )
    return contract.model_copy(update={"validation": validation})


def split_holdout(task_dir: Path, private_dir: Path, contract: TaskContract, cases: list[Case]) -> list[Case]:
    """Move the held-out groups' files into private/holdout/, write private/holdout.json, scrub the
    public tables; returns the cases that stay public."""
    fraction = contract.validation.holdout_fraction
    if fraction <= 0:
        return cases
    _refuse_links(task_dir)
    chosen = choose_groups(cases, fraction, contract.validation.seed)
    held = [c for c in cases if _group(c) in chosen]
    for case in held:
        for rel in (*case.image_paths, case.label_path):
            if rel:
                dest = private_dir / "holdout" / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(task_dir / rel), dest)
                _prune_emptied(task_dir, (task_dir / rel).parent)
    manifest = [c.model_dump() for c in held]
    (private_dir / "holdout.json").write_text(json.dumps({"cases": manifest}, indent=1), encoding="utf-8")
    names = HeldNames(frozenset(c.case_id for c in held), frozenset(chosen))
    scrub_public_tables(task_dir, private_dir / "holdout", names, contract.layout.group_key)
    return [c for c in cases if _group(c) not in chosen]


def _prune_emptied(task_dir: Path, folder: Path) -> None:
    """A case folder the move emptied (`train/<case>/` of `train/{case}/FLAIR`) goes too: left behind,
    it would read as a public case whose series are missing."""
    while folder != task_dir and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _refuse_links(task_dir: Path) -> None:
    """Held-out files move and public tables are rewritten: never through a symbolic link into the
    user's data. (`--link` makes hard links: a move renames the workspace's name only, and
    `_replace_text` writes a new file instead of into the shared one.)"""
    for folder, dirs, files in os.walk(task_dir):
        linked = [name for name in (*dirs, *files) if (Path(folder) / name).is_symlink()]
        if linked:
            raise InvalidInput(
                f"validation.holdout_fraction: {Path(folder) / linked[0]} is a symbolic link into your data; a "
                "server-held holdout moves files out of task/, so copy the data or set the fraction to 0",
                field="validation.holdout_fraction",
            )


def _replace_text(path: Path, text: str) -> None:
    """Write `text` as a new file in `path`'s place: a hard link to the user's data keeps its bytes."""
    tmp = path.with_name(f".{path.name}.scrubbed")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def choose_groups(cases: list[Case], fraction: float, seed: int) -> set[str]:
    """Whole groups, shuffled with the seed, until at least `fraction` of the cases are held out."""
    groups = sorted({_group(c) for c in cases})
    random.Random(seed + 1).shuffle(groups)
    chosen: set[str] = set()
    while groups and sum(_group(c) in chosen for c in cases) < fraction * len(cases):
        chosen.add(groups.pop())
    return chosen


def _group(case: Case) -> str:
    return case.group or case.case_id


@dataclass(frozen=True)
class HeldNames:
    """Recognises held-out names in table cells, JSON strings and keys.

    A *distinctive* name (3+ characters with a letter: `p003s0`, `P003`) counts wherever it stands
    as a whole token; a bare number (`7`, `012`) only as a whole id-column cell (header with `id`
    or `case`) or inside a file path, so a label `1` or a score `1.5` never drops a row."""

    case_ids: frozenset[str]
    groups: frozenset[str]

    @cached_property
    def _tokens(self) -> re.Pattern[str] | None:
        return _token_pattern([n for n in self.case_ids | self.groups if _distinctive(n)])

    @cached_property
    def _in_paths(self) -> re.Pattern[str] | None:
        return _token_pattern(list(self.case_ids))

    def named(self, text: str, id_column: bool = False) -> bool:
        if self._tokens is not None and self._tokens.search(text):
            return True
        if id_column and (text in self.case_ids or text in self.groups):
            return True
        return PATH_LIKE.search(text) is not None and self._in_paths is not None and bool(self._in_paths.search(text))


PATH_LIKE = re.compile(r"/|\\|\.[A-Za-z]")


def _distinctive(name: str) -> bool:
    return len(name) >= 3 and any(ch.isalpha() for ch in name)


def _token_pattern(names: list[str]) -> re.Pattern[str] | None:
    if not names:
        return None
    ordered = sorted(names, key=len, reverse=True)
    return re.compile(r"(?<![0-9A-Za-z])(?:" + "|".join(re.escape(n) for n in ordered) + r")(?![0-9A-Za-z])")


def scrub_public_tables(task_dir: Path, keep_dir: Path, held: HeldNames, group_key: str | None) -> list[str]:
    """Remove held-out rows and items from every public table; returns the files changed."""
    if not held.case_ids:
        return []
    changed = []
    for path in sorted(Path(folder) / name for folder, _, files in os.walk(task_dir) for name in files):
        name = path.name.lower()
        if name.endswith(TABLE_ENDINGS):
            removed = _scrub_table(path, held, group_key)
        elif name.endswith(JSON_ENDINGS):
            removed = _scrub_json(path, held)
        else:
            continue
        if removed is not None:
            dest = keep_dir / path.relative_to(task_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(removed, encoding="utf-8")
            changed.append(str(path.relative_to(task_dir)))
    return changed


def _scrub_table(path: Path, held: HeldNames, group_key: str | None) -> str | None:
    """Drop held-out rows in place; the removed rows (with the header) as text, or None if none."""
    text = path.read_text(encoding="utf-8", errors="replace")
    delimiter = "\t" if path.name.lower().endswith(".tsv") else ","
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        return None
    header, body = rows[0], rows[1:]
    id_columns = {i for i, h in enumerate(header) if h == group_key or ID_HEADER.search(h)}

    def gone(row: list[str]) -> bool:
        return any(held.named(cell, i in id_columns) for i, cell in enumerate(row))

    removed = [row for row in body if gone(row)]
    if not removed:
        return None
    _replace_text(path, _csv_text([header, *(r for r in body if not gone(r))], delimiter))
    return _csv_text([header, *removed], delimiter)


ID_HEADER = re.compile(r"(?:^|[_\s-])(?:id|case|patient|subject|group|site)", re.IGNORECASE)  # not "width"


def _csv_text(rows: list[list[str]], delimiter: str) -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _scrub_json(path: Path, held: HeldNames) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    kept, removed = _prune(data, held)
    if removed is None:
        return None
    _replace_text(path, json.dumps(kept, indent=1) + "\n")
    return json.dumps(removed, indent=1) + "\n"


def _prune(value: Any, held: HeldNames) -> tuple[Any, Any]:
    """(value without held-out list items and keys, what was removed or None)."""
    if isinstance(value, list):
        kept, removed = [], []
        for item in value:
            if _names_held(item, held):
                removed.append(item)
                continue
            inner, gone = _prune(item, held)
            kept.append(inner)
            removed.extend([gone] if gone is not None else [])
        return kept, removed or None
    if isinstance(value, dict):
        out, gone_keys = {}, {}
        for key, item in value.items():
            if held.named(key):
                gone_keys[key] = item
                continue
            out[key], gone = _prune(item, held)
            if gone is not None:
                gone_keys[key] = gone
        return out, gone_keys or None
    return value, None


def _names_held(item: Any, held: HeldNames) -> bool:
    """A list item goes whole when it is, or directly holds, a held-out name (an id field counts exactly)."""
    if isinstance(item, str):
        return held.named(item)
    if isinstance(item, dict):
        return any(isinstance(v, str) and held.named(v, bool(ID_HEADER.search(k))) for k, v in item.items())
    if isinstance(item, list):
        return any(isinstance(v, str) and held.named(v) for v in item)
    return False
