"""Human SQL runs on a read path that cannot read files, write, advance sequences or stall agents."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from amid.server import queries
from amid.server.errors import InvalidInput
from amid.server.ledger import Ledger
from amid.server.ledger.readonly import SqlRefused, open_reader, translate
from amid.server.workspace import Workspace
from tests.server.conftest import Running

SEQUENCE = "SELECT last_value FROM duckdb_sequences() WHERE sequence_name = 'event_seq'"
NEVER_ENDS = "SELECT sum(hash(a.range * b.range)) FROM range(1000000000) a, range(1000) b"


@pytest.fixture
def ledger(workspace: Workspace) -> Iterator[Ledger]:
    ledger = Ledger(workspace.ledger_path)
    for kind in ("alpha", "beta", "gamma"):
        ledger.activity.log(kind, agent_id="alice")
    yield ledger
    ledger.close()


def _secret(ws: Workspace) -> str:
    (ws.control_dir / "admin.secret").write_text("s3cret", encoding="utf-8")
    return str(ws.control_dir / "admin.secret")


REFUSED = [
    ("SELECT * FROM read_csv_auto('{ws}/private/answers.csv')", "SQL_FILE_ACCESS", "file access is disabled"),
    ("SELECT * FROM read_text('{secret}')", "SQL_FILE_ACCESS", "file access is disabled"),
    ("SELECT * FROM read_blob('{secret}')", "SQL_FILE_ACCESS", "file access is disabled"),
    ("SELECT * FROM glob('{ws}/private/**')", "SQL_FILE_ACCESS", "file access is disabled"),
    ("SELECT * FROM read_parquet('{ws}/exports/x.parquet')", "SQL_FILE_ACCESS", "file access is disabled"),
    ("SELECT * FROM read_text('/etc/passwd')", "SQL_FILE_ACCESS", "file access is disabled"),
    ("SELECT * FROM '/etc/passwd'", "SQL_FILE_ACCESS", "human SQL reads ledger tables"),
    ("SELECT nextval('event_seq')", "SQL_SIDE_EFFECT", "duckdb_sequences()"),
    ("SELECT kind FROM events WHERE event_id > setval('event_seq', 1)", "SQL_SIDE_EFFECT", "duckdb_sequences()"),
    ("COPY events TO '{ws}/leak.csv'", "SQL_NOT_SELECT", "COPY statements are refused"),
    ("ATTACH '{ws}/other.duckdb' AS other", "SQL_NOT_SELECT", "ATTACH statements are refused"),
    ("INSTALL httpfs", "SQL_NOT_SELECT", "LOAD statements are refused"),
    ("LOAD httpfs", "SQL_NOT_SELECT", "LOAD statements are refused"),
    ("PRAGMA enable_profiling", "SQL_NOT_SELECT", "PRAGMA statements are refused"),
    ("SET enable_external_access = true", "SQL_NOT_SELECT", "SET statements are refused"),
    ("EXPORT DATABASE '{ws}/dump'", "SQL_NOT_SELECT", "EXPORT statements are refused"),
    ("CALL pragma_version()", "SQL_NOT_SELECT", "CALL statements are refused"),
    ("EXPLAIN ANALYZE DELETE FROM events", "SQL_NOT_SELECT", "EXPLAIN statements are refused"),
    ("SELECT 1; DELETE FROM events", "SQL_STATEMENTS", "send exactly one SELECT"),
    ("CREATE TABLE leak AS SELECT 1", "SQL_NOT_SELECT", "CREATE statements are refused"),
    ("DROP TABLE events", "SQL_NOT_SELECT", "DROP statements are refused"),
    ("INSERT INTO events (occurred_at, kind) VALUES (now(), 'x')", "SQL_NOT_SELECT", "INSERT statements are refused"),
    ("UPDATE events SET kind = 'x'", "SQL_NOT_SELECT", "UPDATE statements are refused"),
    ("DELETE FROM events", "SQL_NOT_SELECT", "DELETE statements are refused"),
    ("SELEC kind FROM events", "SQL_PARSE", "fix the SQL text"),
    ("SELECT * FROM no_such_view", "SQL_ERROR", "duckdb_views()"),
]


@pytest.mark.parametrize(("template", "code", "fix"), REFUSED, ids=[r[0][:40] for r in REFUSED])
def test_each_unsafe_query_is_refused_with_its_code_and_nothing_changes(
    ledger: Ledger, workspace: Workspace, template: str, code: str, fix: str
) -> None:
    query = template.format(ws=workspace.root, secret=_secret(workspace))
    before = (ledger.db.scalar("SELECT count(*) FROM events"), ledger.db.scalar(SEQUENCE))
    with pytest.raises(SqlRefused, match="sql: ") as refused:
        ledger.db.human_query(query)
    assert refused.value.code == code and fix in refused.value.message
    assert (ledger.db.scalar("SELECT count(*) FROM events"), ledger.db.scalar(SEQUENCE)) == before
    assert not (workspace.root / "leak.csv").exists() and not (workspace.root / "dump").exists()


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        ("SELECT * FROM read_text('/etc/passwd')", duckdb.PermissionException),
        ("SELECT nextval('event_seq')", duckdb.InvalidInputException),
        ("INSERT INTO events (occurred_at, kind) VALUES (now(), 'x')", duckdb.InvalidInputException),
        ("SET enable_external_access = true", duckdb.InvalidInputException),
        ("SET threads = 8", duckdb.InvalidInputException),
        ("ATTACH ':memory:' AS scratch", duckdb.Error),
    ],
)
def test_the_reader_itself_refuses_without_the_parser_check(
    ledger: Ledger, tmp_path: Path, statement: str, error: type[Exception]
) -> None:
    """Defence in depth: the snapshot's DuckDB settings stop these even if a statement slipped through."""
    copy = tmp_path / "copy.duckdb"
    ledger.db.snapshot_to(copy)
    reader = open_reader(copy)
    try:
        with pytest.raises(error):
            reader.execute(statement)
        assert reader.execute("SELECT current_setting('enable_external_access')").fetchone() == (False,)
    finally:
        reader.close()


def test_a_slow_query_is_stopped_at_its_time_limit_and_never_blocks_the_writer(ledger: Ledger) -> None:
    outcome: list[BaseException] = []
    before = ledger.db.scalar("SELECT count(*) FROM events")

    def human() -> None:
        try:
            ledger.db.human_query(NEVER_ENDS, time_limit_s=3)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=human)
    thread.start()
    snapshots = ledger.db.path.parent / ".amid" / "snapshots"
    deadline = time.monotonic() + 30
    while not any(snapshots.glob("*.duckdb")) and time.monotonic() < deadline:  # the query has its reader
        time.sleep(0.01)
    ledger.activity.log("written_while_a_human_query_runs", agent_id="alice")  # needs the writer's lock
    assert thread.is_alive(), "the write had to wait for the human query"
    thread.join()
    assert isinstance(outcome[0], SqlRefused) and outcome[0].code == "SQL_TIMEOUT"
    assert "--time-limit" in outcome[0].message
    assert ledger.db.human_query("SELECT count(*) FROM events").rows == [(before + 1,)]


def test_rows_come_in_pages_and_a_new_write_is_seen_by_the_next_query(ledger: Ledger) -> None:
    sql = "SELECT kind FROM events WHERE agent_id IS NOT NULL ORDER BY event_id"
    first = ledger.db.human_query(sql, limit=2)
    second = ledger.db.human_query(sql, limit=2, offset=2)
    assert [first.rows, first.has_more] == [[("alpha",), ("beta",)], True]
    assert [second.rows, second.has_more, second.offset] == [[("gamma",)], False, 2]
    ledger.activity.log("delta", agent_id="bob")
    assert ledger.db.human_query(sql, limit=1, offset=3).rows == [("delta",)]
    params = ledger.db.human_query("SELECT count(*) FROM events WHERE agent_id = ?", ["bob"])
    assert params.rows == [(1,)]


@pytest.mark.parametrize(("limit", "offset", "time_limit_s"), [(0, 0, 1.0), (100_001, 0, 1.0), (5, -1, 1.0), (5, 0, 0)])
def test_a_bad_page_or_time_limit_is_refused_naming_the_field(
    ledger: Ledger, limit: int, offset: int, time_limit_s: float
) -> None:
    with pytest.raises(SqlRefused) as refused:
        ledger.db.human_query("SELECT 1", limit=limit, offset=offset, time_limit_s=time_limit_s)
    assert refused.value.code == "SQL_PAGE"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (duckdb.InterruptException("INTERRUPT Error: Interrupted!"), "SQL_TIMEOUT"),
        (duckdb.PermissionException("Permission Error: Cannot access file"), "SQL_FILE_ACCESS"),
        (duckdb.OutOfMemoryException("Out of Memory Error"), "SQL_MEMORY"),
        (duckdb.InvalidInputException("attached in read-only mode!"), "SQL_READ_ONLY"),
        (duckdb.ParserException("Parser Error: syntax error"), "SQL_PARSE"),
        (duckdb.CatalogException("Catalog Error: Table x does not exist"), "SQL_ERROR"),
    ],
)
def test_every_duckdb_error_is_translated_to_one_code(error: duckdb.Error, code: str) -> None:
    assert translate(error, 3.0).code == code


def _cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "amid", "sql", *args, "-w", str(ws.root)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_amid_sql_prints_a_table_json_and_csv_without_a_server(ledger: Ledger, workspace: Workspace) -> None:
    ledger.close()
    sql = "SELECT kind, event_id FROM events WHERE agent_id = 'alice' ORDER BY event_id"
    table = _cli(workspace, sql, "--limit", "2").stdout.splitlines()
    assert table[0].split() == ["kind", "event_id"] and set(table[1]) <= {"-", " "}
    assert table[2].split()[0] == "alpha" and table[2].index("alpha") == table[0].index("kind")
    assert table[-1] == "(2 rows; more rows: run again with --offset 2)"
    as_json = json.loads(_cli(workspace, sql, "--json").stdout)
    assert [row["kind"] for row in as_json] == ["alpha", "beta", "gamma"]
    rows = list(csv.reader(io.StringIO(_cli(workspace, sql, "--csv", "--offset", "1").stdout)))
    assert rows[0] == ["kind", "event_id"] and [r[0] for r in rows[1:]] == ["beta", "gamma"]
    refused = _cli(workspace, "SELECT nextval('event_seq')")
    assert refused.returncode == 2 and refused.stderr.startswith("amid: SQL_SIDE_EFFECT: sql: nextval()")


def test_refusals_keep_their_code_through_the_running_server(running: Running) -> None:
    secret = running.workspace.control_dir / "admin.secret"
    refused = _cli(running.workspace, f"SELECT * FROM read_text('{secret}')")
    assert refused.returncode == 2 and refused.stderr.startswith("amid: SQL_FILE_ACCESS: sql: file access is disabled")
    assert secret.read_text(encoding="utf-8") not in refused.stdout + refused.stderr
    with pytest.raises(InvalidInput, match=r"^SQL_TIMEOUT: sql: stopped after the time limit of 1 s"):
        queries.query(running.workspace, NEVER_ENDS, time_limit_s=1)
    columns, rows = queries.query(running.workspace, "SELECT role FROM agents WHERE agent_id = ?", ["boss"])
    assert columns == ["role"] and rows == [["supervisor"]]
