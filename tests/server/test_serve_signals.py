"""`amid serve` stops cleanly on SIGTERM (kill, systemctl stop, docker stop): exit 0, the ledger
checkpointed (no WAL left), the server marker removed — before and after it started serving."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from amid.server.workspace import Workspace, read_server_marker

pytestmark = pytest.mark.slow


def _serve(workspace: Workspace, log: IO[bytes]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "amid", "serve", "-w", str(workspace.root), "--port", "0"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)


def _wait_until_serving(workspace: Workspace, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "amid serve exited while starting"
        marker = read_server_marker(workspace)
        if marker:
            base = str(marker["url"]).rsplit("/", 1)[0]
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:  # URLError, refused, timed out: not serving yet
                pass
        time.sleep(0.05)
    raise AssertionError("amid serve did not start serving")


def _stops_cleanly(workspace: Workspace, process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert not (workspace.control_dir / "server.json").exists()
    assert not Path(f"{workspace.ledger_path}.wal").exists()


def test_sigterm_while_serving_is_a_clean_stop(workspace: Workspace, tmp_path: Path) -> None:
    with (tmp_path / "serve.log").open("wb") as log:
        process = _serve(workspace, log)
        _wait_until_serving(workspace, process)
        _stops_cleanly(workspace, process)


def test_sigterm_during_start_up_is_a_clean_stop(workspace: Workspace, tmp_path: Path) -> None:
    with (tmp_path / "serve.log").open("wb") as log:
        process = _serve(workspace, log)
        deadline = time.monotonic() + 60
        while not read_server_marker(workspace) and time.monotonic() < deadline:
            time.sleep(0.01)
        _stops_cleanly(workspace, process)


def test_a_sigterm_just_before_uvicorn_takes_the_signals_still_stops_it() -> None:
    """The window between `serve_http`'s last look at the stop flag and uvicorn's own handlers: a
    SIGTERM there reached only our handler, and the server served on until it was killed."""
    import socket
    import threading

    import uvicorn

    from amid.server import serve

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        return None

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    serve._STOP.set()
    try:
        thread = threading.Thread(target=serve._Uvicorn(config).run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive(), "uvicorn kept serving after the stop flag was set"
    finally:
        serve._STOP.clear()
        sock.close()
