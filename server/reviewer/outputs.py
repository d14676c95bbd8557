"""What a replay wrote, vetted before anything reads it.

A replay's command is the attempt's own code: it may leave a link in its output folder that points
at a task label or at `private/` (the sandbox hides those paths from the replay, but the host-side
scorer would follow the link), a hard link to such a file (made where no sandbox runs), a fifo that
blocks the reader, or a device. So every entry is looked at without following links: directories
are walked through file descriptors opened with O_NOFOLLOW (a directory swapped for a link in the
meantime cannot redirect the walk), and each regular file with exactly one name is opened with
O_NOFOLLOW, checked again on the open descriptor, and copied into a folder only the reviewer
writes. Scorers read that copy; anything else is reported by its path inside the output folder.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

MAX_DEPTH = 16
NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def vet_outputs(outputs: Path, vetted: Path) -> list[dict[str, str]]:
    """Copy every plain file under `outputs` into `vetted` (same relative paths); return the entries
    that are not plain files ({file, kind}), which are not copied."""
    vetted.mkdir(parents=True, exist_ok=True)
    unsafe: list[dict[str, str]] = []
    fd = os.open(outputs, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _walk(fd, "", vetted, unsafe, 0)
    finally:
        os.close(fd)
    return unsafe


def _walk(dir_fd: int, prefix: str, vetted: Path, unsafe: list[dict[str, str]], depth: int) -> None:
    for name in sorted(os.listdir(dir_fd)):
        rel = f"{prefix}{name}"
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode) and depth < MAX_DEPTH:
            _subfolder(dir_fd, name, rel, vetted, unsafe, depth)
        elif problem := _kind_problem(info, depth):
            unsafe.append({"file": rel, "kind": problem})
        else:
            _copy(dir_fd, name, rel, vetted, unsafe)


def _subfolder(dir_fd: int, name: str, rel: str, vetted: Path, unsafe: list[dict[str, str]], depth: int) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        unsafe.append({"file": rel, "kind": f"folder that cannot be opened without following links ({exc.strerror})"})
        return
    try:
        (vetted / rel).mkdir(exist_ok=True)
        _walk(fd, f"{rel}/", vetted, unsafe, depth + 1)
    finally:
        os.close(fd)


def _kind_problem(info: os.stat_result, depth: int) -> str | None:
    """Why an entry is not a plain output file (None: it is one)."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return f"folder nested deeper than {MAX_DEPTH} levels"
    if not stat.S_ISREG(mode):
        kinds = {
            stat.S_ISFIFO: "fifo",
            stat.S_ISSOCK: "socket",
            stat.S_ISCHR: "character device",
            stat.S_ISBLK: "block device",
        }
        return next((kind for test, kind in kinds.items() if test(mode)), "special file")
    if info.st_nlink != 1:
        return f"hard link ({info.st_nlink} names for one file)"
    return None


def _copy(dir_fd: int, name: str, rel: str, vetted: Path, unsafe: list[dict[str, str]]) -> None:
    """Open without following, re-check the open file itself (it may have been swapped since the
    stat), then copy from that descriptor."""
    try:
        fd = os.open(name, NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        unsafe.append({"file": rel, "kind": f"cannot be opened without following links ({exc.strerror})"})
        return
    with os.fdopen(fd, "rb") as source:
        problem = _kind_problem(os.fstat(source.fileno()), 0)
        if problem:
            unsafe.append({"file": rel, "kind": problem})
            return
        with open(vetted / rel, "wb") as target:
            shutil.copyfileobj(source, target)
