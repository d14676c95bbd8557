"""The last uncoded error paths, each now a coded tool error or a one-line CLI error: a very deep JSON
body, out-of-range and unknown identifiers, an exception AMID did not raise on purpose, the server
dying mid-call, the reviewer's fork server, and partial copies a killed freeze left behind."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from amid.server.artifacts import ArtifactStore
from amid.server.context import Services
from amid.server.reviewer.pool import ReviewerPool
from amid.server.workspace import Workspace, clear_server_marker, write_server_marker
from tests.clients import error, local_client, ok
from tests.server.conftest import Running

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
NOTE = {"kind": "observation", "title": "CT noise", "body": "fold 0 differs"}


def test_a_50000_deep_json_body_with_a_valid_token_is_a_client_error_not_a_500(running: Running) -> None:
    headers = {**HEADERS, "authorization": f"Bearer {running.tokens['alice']}"}
    deep = httpx2.post(running.url, content=b"[" * 50_000 + b"]" * 50_000, headers=headers, timeout=60)
    assert 400 <= deep.status_code < 500, deep.text[:300]
    honest = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert httpx2.post(running.url, json=honest, headers=headers, timeout=60).status_code == 200  # still serving


@pytest.mark.anyio
async def test_read_notes_refuses_an_out_of_range_before_id_at_once(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        note_id = (await ok(ann, "post_note", NOTE))["note_id"]
        started = time.monotonic()
        huge = await error(ann, "read_notes", {"before_id": 10**400})
        zero = await error(ann, "read_notes", {"before_id": 0})
        elapsed = time.monotonic() - started
        page = await ok(ann, "read_notes", {"before_id": note_id + 1})
    assert huge.startswith("INVALID_INPUT: before_id: got 1000") and len(huge) < 600
    assert zero.startswith("INVALID_INPUT: before_id: got 0")
    assert elapsed < 3.0  # it took 6 s and came back uncoded
    assert [n["note_id"] for n in page["notes"]] == [note_id]


@pytest.mark.anyio
async def test_read_and_post_notes_check_that_a_named_lane_or_author_exists(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        await ok(ann, "post_note", NOTE)
        lane = await error(ann, "read_notes", {"lane_id": "no-such-lane"})
        author = await error(ann, "read_notes", {"agent_id": "nobody"})
        posted = await error(ann, "post_note", {**NOTE, "lane_id": "no-such-lane"})
        long_lane = await error(ann, "read_notes", {"lane_id": "l" * 1_000_000})
        mine = await ok(ann, "read_notes", {"agent_id": "ann"})
    assert lane == "NOT_FOUND: lane_id: got 'no-such-lane'; expected a lane of the run (see list_lanes)"
    assert author.startswith("NOT_FOUND: agent_id: got 'nobody'; expected an agent of the run")
    assert posted == lane
    assert long_lane.startswith("INVALID_INPUT: lane_id: got 'llll") and len(long_lane) < 600
    assert len(mine["notes"]) == 1


@pytest.mark.anyio
async def test_record_worker_refuses_a_megabyte_or_unknown_agent_id(services: Services) -> None:
    call = {"backend": "scripted", "state": "running", "event": "started"}
    services.ledger.identities.create_token("worker-1", "agent")
    async with local_client(services, "boss", role="supervisor") as boss:
        result = await boss.call_tool("record_worker", {**call, "agent_id": "w" * 1_000_000})
        unknown = await error(boss, "record_worker", {**call, "agent_id": "ghost"})
        known = await ok(boss, "record_worker", {**call, "agent_id": "worker-1"})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and "INVALID_INPUT: agent_id:" in text and len(text) < 600  # it answered 2 MB
    assert unknown.startswith("NOT_FOUND: agent_id: got 'ghost'; expected a worker's agent id")
    assert known["state"] == "running"
    assert services.ledger.db.scalar("SELECT count(*) FROM workers") == 1


@pytest.mark.anyio
async def test_an_exception_amid_did_not_raise_is_a_coded_internal_error_logged_with_its_traceback(
    services: Services, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**_: object) -> list[dict[str, object]]:  # a bug in the ledger layer, with a server path in it
        raise RuntimeError("cannot open /srv/amid/private/answers.csv")

    async with local_client(services, "ann") as ann:
        monkeypatch.setattr(services.ledger.notes, "list", broken)
        with caplog.at_level(logging.ERROR, logger="amid.tools"):
            text = await error(ann, "read_notes", {})
        monkeypatch.undo()
        await ok(ann, "read_notes", {})  # the next call is served as usual
    assert text.startswith("INTERNAL: read_notes: got a server failure (RuntimeError, ref ")
    assert "private" not in text and "Traceback" not in text and "answers.csv" not in text
    ref = text.split("ref ", 1)[1].split(")", 1)[0]
    (record,) = [r for r in caplog.records if ref in r.getMessage()]
    assert record.exc_info is not None and "answers.csv" in str(record.exc_info[1])


@pytest.fixture
def dying_server(workspace: Workspace) -> Iterator[Workspace]:
    """A 'server' that takes each admin request and hangs up without answering (as one killed mid-call)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    write_server_marker(workspace, f"http://127.0.0.1:{port}/mcp", "secret")  # this process: a live pid
    try:
        yield workspace
    finally:
        clear_server_marker(workspace)
        listener.close()


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["status"], ["token", "list"]])
def test_the_cli_prints_one_line_when_the_server_dies_mid_call(dying_server: Workspace, command: list[str]) -> None:
    cli = [sys.executable, "-m", "amid", *command, "-w", str(dying_server.root)]
    result = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "stopped answering" in result.stderr
    assert "RemoteDisconnected" in result.stderr and "is it still running?" in result.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_reviewers_fork_server_stops_with_the_pool(services: Services) -> None:
    from multiprocessing import forkserver

    for _ in range(2):  # a second pool after the first closed starts a fresh fork server and stops it too
        pool = ReviewerPool(services.ledger, services.workspace, services.settings)
        pool.start()
        deadline = time.monotonic() + 120
        while getattr(forkserver._forkserver, "_forkserver_pid", None) is None:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the pool started no fork server"
            time.sleep(0.05)
        pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
        assert _alive(pid)
        pool.close()
        assert not _alive(pid)  # it outlived the pool (and the server) by 3-7 s


def test_partial_copies_of_a_killed_freeze_are_swept_when_the_server_starts(workspace: Workspace) -> None:
    store = ArtifactStore(workspace)
    folder = store.new_folder()
    frozen = store.freeze(_file(workspace.root / "model.bin", b"weights"), folder)
    partial = [folder / ".incoming-abc123", store.root / ".incoming-old", store.root / "manifests" / "att-1.tmp"]
    for path in partial:
        _file(path, b"half a copy")
    from amid.server.serve import _open
    from amid.server.settings import Settings

    services = _open(Settings(workspace=workspace.root, port=0, replay_sandbox="none"))
    try:
        swept = services.ledger.activity.events(kind="artifacts_swept")
    finally:
        services.ledger.close()
    assert not [p for p in partial if p.exists()]
    assert (workspace.root / frozen.frozen_path).read_bytes() == b"weights"  # whole frozen files stay
    assert len(swept) == 1 and ".incoming-abc123" in swept[0]["payload"]


def _file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
