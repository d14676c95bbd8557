"""Human queries for Python callers and the CLI: `query()` and the text forms of a page of rows.

`query(source, sql, params)` runs one SELECT on the ledger's read path (server/ledger/readonly.py)
from anywhere: inside the server (`Services` or `Ledger`), or from a workspace folder, through the
running server or on the file itself when none runs. Values come back JSON-able on every path
(timestamps as ISO strings, lists as lists), so a caller sees the same thing wherever it runs.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from amid.server.context import Services
from amid.server.ledger import Ledger
from amid.server.ledger.readonly import DEFAULT_LIMIT, DEFAULT_TIME_LIMIT_S
from amid.server.workspace import Workspace

MAX_CELL_CHARS = 60  # in the aligned table only; --json and --csv print every value whole


def query(
    source: Workspace | Services | Ledger,
    sql: str,
    params: Sequence[Any] = (),
    *,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of one read-only SELECT (`?` placeholders filled from `params`)."""
    result = page(source, sql, params, limit=limit, offset=offset, time_limit_s=time_limit_s)
    return result["columns"], result["rows"]


def page(source: Workspace | Services | Ledger, sql: str, params: Sequence[Any] = (), **paging: Any) -> dict[str, Any]:
    """The full answer: columns, rows, offset and has_more (another page follows)."""
    from amid.server import admin

    body = {"query": sql, "params": list(params), **paging}
    if isinstance(source, Workspace):
        from amid.server.local_client import call

        return call(source, "sql", body)
    ledger = source.ledger if isinstance(source, Services) else source
    return admin.sql(ledger, body)


def as_table(columns: list[str], rows: list[list[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in rows) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        shown = (v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric, strict=True))
        lines.append("  ".join(shown).rstrip())
    return "\n".join(lines)


def as_csv(columns: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([["" if v is None else _text(v) for v in row] for row in rows])
    return out.getvalue().rstrip("\n")


def as_json(columns: list[str], rows: list[list[Any]]) -> str:
    return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=1)


def _text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def _cell(value: Any) -> str:
    text = "" if value is None else _text(value).replace("\n", " ")
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"
