"""Interrupting a worker leaves nothing of its process group behind: bubblewrap's outer process ends at
the SIGTERM, while the namespace's init (and the in-box forwarder) ignore it; what the leader leaves must
end too."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from amid.registry.loader import worker_backend
from amid.server.supervisor.workers.process import WorkerProcess

LEADER_AND_DEAF_CHILD = """
import os, signal, sys, time
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a namespace's init and the forwarder do
    time.sleep(120)
    os._exit(0)
print(child, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_an_interrupt_ends_the_group_member_that_ignored_its_sigterm(tmp_path: Path) -> None:
    process = WorkerProcess(
        worker_backend("scripted"),
        [sys.executable, "-c", LEADER_AND_DEAF_CHILD],
        tmp_path,
        dict(os.environ),
        tmp_path / "worker.log",
    )
    deadline = time.monotonic() + 20
    while not process.tail and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(process.tail[0])
    try:
        assert process.interrupt(grace_s=5) == -signal.SIGTERM  # the leader ended at the SIGTERM
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "a member of the worker's group outlived the interrupt"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
