"""Process identity and process-group control on Linux, read from /proc.

A pid alone does not identify a process across a server restart: pids are reused. A process is
named by (pid, start time in clock ticks since boot, boot id); it is the same process only if all
three match. Zombies count as dead: on machines whose PID 1 does not reap, orphans stay zombies
for ever. Stdlib-only, because the wrapper imports it before recording its pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any, NamedTuple

_PROC = Path("/proc")


class ProcessIdentity(NamedTuple):  # a NamedTuple, not a dataclass: the wrapper must start fast
    pid: int
    start_ticks: int
    boot_id: str

    def to_json(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> ProcessIdentity:
        return cls(int(payload["pid"]), int(payload["start_ticks"]), str(payload["boot_id"]))


def boot_id() -> str:
    return (_PROC / "sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (which may itself hold spaces or ')')."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of a live process, or None if it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    # fields[0] is the state; the start time is field 22 of stat, index 19 after the name.
    return ProcessIdentity(pid, int(fields[19]), boot_id())


def is_alive(identity: ProcessIdentity) -> bool:
    """True when the very process named by `identity` still runs (not a zombie, not a reused pid)."""
    fields = _stat_fields(identity.pid)
    if fields is None or fields[0] in ("Z", "X"):
        _reap_if_child(identity.pid)
        return False
    return int(fields[19]) == identity.start_ticks and boot_id() == identity.boot_id


def _reap_if_child(pid: int) -> None:
    """Collect the exit status of our own finished child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes in process group `pgid`."""
    return _members(field=2, value=pgid)


def session_members(session_id: int) -> list[int]:
    """Pids of the live (non-zombie) processes in session `session_id`."""
    return _members(field=3, value=session_id)


def _members(field: int, value: int) -> list[int]:
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[field]) == value:
            members.append(int(entry.name))
    return members


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def terminate_group(pgid: int, grace_s: float) -> bool:
    """SIGTERM the whole group, wait up to `grace_s` for it to empty, then SIGKILL what is left.

    Returns True when SIGKILL was needed.
    """
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(pgid):
        if time.monotonic() >= deadline:
            signal_group(pgid, signal.SIGKILL)
            _wait_group_empty(pgid, 5.0)
            return True
        time.sleep(0.05)
    return False


def _wait_group_empty(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
