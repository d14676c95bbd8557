"""Who besides the server can read the workspace's private/ (answers, holdout labels, the grader).

Managed workers never see it: their sandbox covers it. An agent outside the sandbox (one started
from `amid connect` without `--sandboxed`) can read whatever its OS user can: private/ is safe from
it only when that user is another one than the server's and private/ is mode 0700. The server
cannot see which OS user an attached agent runs as, so it says both conditions at start.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SECURE_SETUP = (
    "the secure setup: run `amid serve` as its own OS user, keep private/ mode 0700 (chmod 700 {private}), "
    "and start attached agents as another user or sandboxed (`amid connect CLIENT --agent NAME --sandboxed`)"
)


def private_warnings(private_dir: Path) -> list[str]:
    """What could read `private_dir` besides the server: other OS users (its mode), and agents that run
    as the server's own user outside the sandbox. Empty when private/ does not exist."""
    try:
        info = private_dir.stat()
    except FileNotFoundError:
        return []
    mode = stat.S_IMODE(info.st_mode)
    setup = SECURE_SETUP.format(private=private_dir)
    found = []
    if mode & 0o077:
        found.append(f"private/ ({private_dir}) is mode {mode:04o}: other OS users can read it; {setup}")
    if info.st_uid == os.geteuid():
        found.append(
            f"private/ is owned by this server's user (uid {info.st_uid}): an agent that runs as this user "
            f"outside the sandbox can read the answers and holdout labels; {setup}"
        )
    return found
