"""What a managed worker's sandbox must show for its CLI to start, however the user installed it.

npm puts a CLI behind links: `node_modules/.bin/claude` (a local install), `<prefix>/bin/claude`
(a global or user-local prefix), each pointing into the package, whose script names its
interpreter on its first line (`#!/usr/bin/env node`) and may start a binary of another package
(Codex's `codex.js` runs the platform package's `codex`). So the sandbox gets the whole
`node_modules` tree the CLI lives in, read-only (never the folder above it, which may be the
user's home), every link on the way from the name the worker is started by, and the interpreter's
folder with the links to it. A native binary outside any `node_modules` gets its own folder.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from amid.server.sandbox import SYSTEM_LINKS

MAX_LINKS = 32  # a loop of links is refused by the OS at 40
# Shown read-only to every worker (the system and its merged-/usr links): their links exist there already.
SYSTEM_TOPS = ("usr", "etc", *SYSTEM_LINKS)


@dataclass(frozen=True)
class Install:
    """Folders to show read-only, and (target, path) links to recreate, for one CLI."""

    folders: tuple[Path, ...]
    links: tuple[tuple[str, str], ...]


def cli_install(binary: str, search_path: str) -> Install:
    """The folders and links a CLI started as `binary` needs; `search_path` is the worker's PATH
    (where `#!/usr/bin/env node` finds its interpreter)."""
    links, real = link_chain(Path(binary))
    folders = [package_root(real)]
    interpreter = _interpreter(real, search_path)
    if interpreter is not None:
        more, real_interpreter = link_chain(interpreter)
        links += more
        folders.append(real_interpreter.parent)
    return Install(tuple(folders), tuple(links))


def link_chain(path: Path) -> tuple[list[tuple[str, str]], Path]:
    """Resolve `path` as the kernel does, component by component, recording every link met on the
    way as (target as written, the link's own resolved path): recreated in that order inside the
    sandbox, they lead to the same file. Links the system folders show anyway are left out."""
    links: list[tuple[str, str]] = []
    current, parts = Path("/"), list(Path(os.path.abspath(path)).parts[1:])
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent
            continue
        candidate = current / part
        if not candidate.is_symlink():
            current = candidate
            continue
        if len(links) >= MAX_LINKS:
            raise OSError(f"{path}: more than {MAX_LINKS} links")
        target = os.readlink(candidate)
        if not _system_shows(candidate):
            links.append((target, str(candidate)))
        parts = list(Path(target).parts[1:] if os.path.isabs(target) else Path(target).parts) + parts
        current = Path("/") if os.path.isabs(target) else current
    return links, current


def _system_shows(path: Path) -> bool:
    top = path.parts[1] if len(path.parts) > 1 else ""
    return top in SYSTEM_TOPS


def package_root(real: Path) -> Path:
    """The outermost `node_modules` folder holding `real` (its dependencies and sibling packages are
    there too), or `real`'s own folder for a binary outside npm."""
    outermost = next((parent for parent in reversed(real.parents) if parent.name == "node_modules"), None)
    return outermost or real.parent


def _interpreter(script: Path, search_path: str) -> Path | None:
    """The program a `#!` script runs: `#!/usr/bin/env node` looks `node` up on `search_path`."""
    try:
        with script.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        name = next((w for w in words[1:] if not w.startswith("-")), None)
        found = shutil.which(name, path=search_path) if name else None
        return Path(found) if found else None
    return Path(words[0])
