"""Reads answered from memory between writes: never an answer a committed write has made stale."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

import pytest

from amid.server.ledger import Ledger
from amid.server.ledger.database import EVERY_TABLE, utcnow, written_tables

ROOT = Path(__file__).resolve().parents[2]
SQL_WRITE = re.compile(r"^\s*(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM)\s", re.I)
WRITE_WORDS = re.compile(r"^\s*(INSERT|UPDATE|DELETE|MERGE|UPSERT|REPLACE|TRUNCATE|COPY|CREATE|DROP|ALTER)\b", re.I)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "l.duckdb")


def test_the_tables_a_read_depends_on_come_from_duckdbs_parser_through_views(ledger: Ledger) -> None:
    tables = ledger.db.tables_read("SELECT lane_id, count(*) FROM v_leaderboard GROUP BY lane_id")
    assert {"attempts", "metrics", "run_state"} <= tables  # v_leaderboard -> v_verified_primary -> run_state
    assert "v_leaderboard" not in tables and "v_verified_primary" not in tables
    cte = ledger.db.tables_read("WITH s AS (SELECT agent_id FROM claims) SELECT * FROM notes JOIN s USING (agent_id)")
    assert {"claims", "notes"} <= cte
    with pytest.raises(ValueError, match="not a SELECT"):
        ledger.db.tables_read("DELETE FROM notes")


def test_a_view_defined_after_the_first_reads_is_followed_down_to_its_tables(ledger: Ledger) -> None:
    assert ledger.db.tables_read("SELECT * FROM notes") == {"notes"}  # the view definitions are read once
    ledger.db.execute("CREATE VIEW v_titles AS SELECT title FROM notes")
    assert ledger.db.tables_read("SELECT * FROM v_titles") == {"notes"}
    ledger.db.execute("CREATE OR REPLACE VIEW v_titles AS SELECT agent_id FROM claims")
    assert ledger.db.tables_read("SELECT * FROM v_titles") == {"claims"}


def _note(ledger: Ledger, title: str) -> int:
    return ledger.notes.add("alice", "observation", None, title, "body", {})


def test_a_cached_read_sees_every_committed_write_to_a_table_it_reads(ledger: Ledger) -> None:
    _note(ledger, "first")
    assert [n["title"] for n in ledger.notes.list()] == ["first"]
    _note(ledger, "second")  # a transaction
    assert [n["title"] for n in ledger.notes.list()] == ["second", "first"]
    ledger.db.execute("UPDATE notes SET title = 'renamed' WHERE title = 'first'")  # outside one
    assert [n["title"] for n in ledger.notes.list()] == ["second", "renamed"]
    ledger.db.fetchall("DELETE FROM notes WHERE title = 'second' RETURNING note_id")  # a write through fetchall
    assert [n["title"] for n in ledger.notes.list()] == ["renamed"]


def test_a_write_to_another_table_keeps_the_answer_and_a_rollback_keeps_it_too(ledger: Ledger) -> None:
    _note(ledger, "kept")
    answers = []
    original = ledger.db.fetchall

    def counting(sql: str, params: object = ()) -> list:
        answers.append(sql)
        return original(sql, params)  # type: ignore[arg-type]

    ledger.db.fetchall = counting  # type: ignore[method-assign]
    ledger.notes.list()
    ledger.activity.log("something", agent_id="alice")  # events, not notes
    ledger.notes.list()
    with pytest.raises(RuntimeError), ledger.db.transaction() as cur:
        cur.execute(
            "INSERT INTO notes (agent_id, kind, title, body, data, created_at) VALUES ('a', 'observation', "
            "'rolled back', 'b', '{}', ?)",
            [utcnow()],
        )
        raise RuntimeError("abandoned")
    assert [n["title"] for n in ledger.notes.list()] == ["kept"]
    assert sum("FROM notes" in sql for sql in answers) == 1  # computed once, answered three times


def test_events_flushed_inside_a_rolled_back_transaction_are_queued_again(ledger: Ledger) -> None:
    ledger.activity.log("tool_call", agent_id="alice", payload={"n": 1}, deferred=True)
    with pytest.raises(RuntimeError), ledger.db.transaction() as cur:
        cur.execute("SELECT count(*) FROM events")  # reads events: the batch is written first
        raise RuntimeError("abandoned")
    assert ledger.db.scalar("SELECT count(*) FROM events WHERE kind = 'tool_call'") == 1


def test_an_expired_claim_is_released_once_its_time_has_come_though_nothing_was_written(ledger: Ledger) -> None:
    ledger.db.execute(
        "INSERT INTO lanes (lane_id, title, family, tier, origin, rank, status, spec, created_at, updated_at) "
        "VALUES ('l1', 'L', 'baseline', 'primary', 'planner', 1, 'open', '{}', ?, ?)",
        [utcnow(), utcnow()],
    )
    now = utcnow()
    ledger.lanes.claim("l1", "alice", now=now, lease_s=60, max_claimants=1)
    assert ledger.lanes.summaries(now + timedelta(seconds=1), 60, True)[0]["claimants"] == ["alice"]
    assert ledger.lanes.summaries(now + timedelta(seconds=30), 60, True)[0]["claimants"] == ["alice"]
    later = ledger.lanes.summaries(now + timedelta(hours=2), 60, True)[0]
    assert later["claimants"] == [] and later["status"] == "open"


def _string_constants(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal, an f-string as one text with each formatted value written `x` (a name, a
    value or a list of names: whichever the statement has there, it still parses)."""
    found, parts = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts.update(id(v) for v in node.values)
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "x" for v in node.values)
            found.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            found.append((node.lineno, node.value))
    return found


def test_every_writing_statement_in_the_code_names_the_table_it_writes() -> None:
    """A write the cache could not see would leave stale answers: every SQL literal that starts
    like a write must be recognised (and by the table it writes)."""
    unrecognised = []
    n_writes = 0
    for path in [*ROOT.glob("server/**/*.py"), *ROOT.glob("tools/**/*.py")]:
        for line, text in _string_constants(ast.parse(path.read_text(encoding="utf-8"))):
            if not WRITE_WORDS.match(text) or " " not in text.strip():
                continue
            if re.match(r"^\s*(CREATE|DROP|ALTER)\s", text, re.I) and written_tables(text) == {EVERY_TABLE}:
                continue
            if not SQL_WRITE.match(text):
                continue  # prose that starts with such a word (a docstring, a message), not SQL
            n_writes += 1
            tables = written_tables(text)
            if not tables or EVERY_TABLE in tables:
                unrecognised.append(f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}")
    assert n_writes > 40 and not unrecognised, unrecognised


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("/* note */ INSERT INTO notes (body) VALUES (?)", {"notes"}),
        ("-- why\nUPDATE attempts SET status = ?", {"attempts"}),
        ("WITH gone AS (SELECT 1 AS id) DELETE FROM claims WHERE claim_id IN (SELECT id FROM gone)", {"claims"}),
        ('INSERT OR REPLACE INTO main."Jobs" (job_id) VALUES (?)', {"jobs"}),
        ("INSERT INTO events VALUES (1); DELETE FROM notes", {"events", "notes"}),
        ("SELECT * FROM attempts", set()),
        ("CHECKPOINT", set()),
        ("ALTER TABLE attempts ADD COLUMN x INT", {EVERY_TABLE}),
        ("COPY attempts FROM 'rows.csv'", {EVERY_TABLE}),
        ("UPDATE attempts SET", {EVERY_TABLE}),  # unparseable: DuckDB refuses it too, and nothing is trusted
    ],
)
def test_the_tables_a_statement_writes_come_from_duckdbs_parser(sql: str, tables: set[str]) -> None:
    # A regex on the text's start missed a write behind a comment or a WITH (stale cached answers).
    assert written_tables(sql) == tables
