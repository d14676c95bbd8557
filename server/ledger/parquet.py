"""Every table and view of a ledger snapshot as Parquet files, secrets left out.

It runs on a snapshot copy (Database.snapshot_to), in an instance of its own: the COPY statements
need file access, which the human read path does not have, and the agents' connection is never
held longer than the copy. Only the statements written here run on that instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

# Columns never exported: a token hash would let anyone holding the export test guesses offline.
SECRET_COLUMNS = {"tokens": frozenset({"token_hash"})}

_RELATIONS = """
SELECT table_name AS name, 'table' AS kind FROM duckdb_tables() WHERE schema_name = 'main' AND NOT internal
UNION ALL
SELECT view_name, 'view' FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal
ORDER BY kind, name
"""


@dataclass(frozen=True)
class ExportedRelation:
    name: str
    kind: str  # table | view
    file: str  # name inside the export folder
    rows: int
    columns: list[str]
    omitted: list[str]


def write_parquet(snapshot: Path, folder: Path) -> list[ExportedRelation]:
    """One `<name>.parquet` per table and view of `snapshot`, written into `folder`."""
    con = duckdb.connect(str(snapshot), read_only=True, config={"threads": 1})
    try:
        relations = con.execute(_RELATIONS).fetchall()
        return [_write_one(con, name, kind, folder) for name, kind in relations]
    finally:
        con.close()


def _write_one(con: duckdb.DuckDBPyConnection, name: str, kind: str, folder: Path) -> ExportedRelation:
    described = con.execute(f"DESCRIBE {_ident(name)}").fetchall()
    secret = SECRET_COLUMNS.get(name, frozenset())
    columns = [str(row[0]) for row in described if row[0] not in secret]
    target = folder / f"{name}.parquet"
    select = f"SELECT {', '.join(_ident(c) for c in columns)} FROM {_ident(name)}"
    quoted = str(target).replace("'", "''")
    con.execute(f"COPY ({select}) TO '{quoted}' (FORMAT parquet)")
    rows = con.execute(f"SELECT count(*) FROM {_ident(name)}").fetchone()
    omitted = sorted(secret & {str(row[0]) for row in described})
    return ExportedRelation(name, kind, target.name, int(rows[0]) if rows else 0, columns, omitted)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
