"""A review process dies with the server: killed with SIGKILL, the server leaves its forkserver
(the review process's parent) alive, so the review process watches the server's pid itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

# The "server": starts a busy child the way the reviewer pool does (forkserver), prints its pid, waits.
SERVER = textwrap.dedent(
    """
    import multiprocessing, os, sys, time

    def busy(server_pid):
        from amid.server.reviewer.bounded import exit_with
        exit_with(server_pid, poll_s=0.1)
        time.sleep(120)  # a long review: never reads its pipe

    if __name__ == "__main__":
        child = multiprocessing.get_context("forkserver").Process(target=busy, args=(os.getpid(),))
        child.start()
        print(child.pid, flush=True)
        time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
        return handle.read().split()[2] != "Z"  # a zombie has died


def test_a_busy_review_process_dies_soon_after_its_server_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "fake_server.py"  # a file: forkserver children import their target from it
    script.write_text(SERVER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert server.stdout is not None
    child = int(server.stdout.readline())
    time.sleep(1.0)  # let the child reach its busy sleep (a crash at start-up would fail the next line)
    assert _alive(child), "the busy child did not start"
    server.send_signal(signal.SIGKILL)
    server.wait()
    server.stdout.close()
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the review process outlived its killed server"
