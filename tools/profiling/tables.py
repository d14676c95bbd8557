"""Readers for the non-image supervision files: CSV label tables and COCO-style box files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from amid.server.errors import DataUnreadable
from amid.tools.profiling.inputs import LabelsTable


class CocoImage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int | str
    file_name: str
    width: int | None = None
    height: int | None = None


class CocoBox(BaseModel):
    model_config = ConfigDict(extra="ignore")

    image_id: int | str
    category_id: int | str = 0
    bbox: tuple[float, float, float, float]  # x, y, width, height in pixels (COCO convention)


class CocoCategory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int | str
    name: str = ""


class CocoBoxes(BaseModel):
    """The parts of a COCO detection file a profile needs."""

    model_config = ConfigDict(extra="ignore")

    images: list[CocoImage]
    annotations: list[CocoBox] = []
    categories: list[CocoCategory] = []

    def category_names(self) -> dict[str, str]:
        return {str(c.id): c.name or str(c.id) for c in self.categories}


def read_table(path: str) -> list[dict[str, str]]:
    """Rows of a CSV file with a header line."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataUnreadable(f"{Path(path).name}: cannot read CSV ({type(error).__name__}: {error})") from error


def read_labels(table: LabelsTable) -> dict[str, str]:
    """case id -> label from a labels table; names the missing column when the header lacks one."""
    rows = read_table(table.path)
    columns = set(rows[0]) if rows else set()
    for column in (table.id_column, table.label_column):
        if column not in columns:
            raise DataUnreadable(f"{Path(table.path).name}: no column {column!r}; columns are {sorted(columns)[:10]}")
    return {row[table.id_column]: row[table.label_column] for row in rows}


def read_coco(path: str) -> CocoBoxes:
    """Images, boxes and categories of a COCO-style JSON file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return CocoBoxes.model_validate(json.load(handle))
    except (OSError, json.JSONDecodeError, ValidationError) as error:
        reason = str(error).splitlines()[0]
        raise DataUnreadable(f"{Path(path).name}: not a readable COCO box file ({reason})") from error
