"""Whether a process still runs, for the markers and folders a killed process leaves behind."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True when `pid` names a running process (one of another user's counts: it cannot be signalled)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
