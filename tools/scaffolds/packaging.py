"""One folder holding exactly what a replay reads: written by a scaffold's `package` step, declared
as the attempt's `artifacts.checkpoint`, frozen at submit and mounted at `{checkpoint}` in the
reviewer's sandbox (which shows no worktree)."""

from __future__ import annotations

import shutil
from pathlib import Path

from amid.server.errors import Conflict


def write_package(dest: Path, sources: dict[str, Path], marker: str) -> int:
    """Replace `dest` with copies of `sources` (path inside the package → file); returns the bytes
    written. An earlier package there (it holds a `marker` match) is replaced; other files are refused."""
    _clear(dest, marker)
    for name, source in sources.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest / name)  # copies, never links: submit refuses links leaving the worktree
    return sum((dest / name).stat().st_size for name in sources)


def _clear(dest: Path, marker: str) -> None:
    if dest.exists() and not dest.is_dir():
        raise Conflict(f"dest: {dest} is a file; name a folder for the package", field="dest")
    if dest.is_dir() and any(dest.iterdir()):
        if not any(dest.glob(marker)):
            raise Conflict(f"dest: {dest} holds other files; name an empty folder or an earlier package", field="dest")
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)
