"""The store of submitted evidence, owned per attempt: `artifacts/frozen/<folder>/<sha256>`, read-only.

`collect` turns an agent's declared path into the files it names, each confined to the agent's
worktree (symlinks resolved, no `..`, nothing under `private/` or `.git/`, regular readable files
only); `freeze` copies a file into the store while hashing the very bytes it copies, so the stored
hash always matches the stored bytes even if the agent keeps writing to its own copy.

Ownership: each submission freezes into a folder of its own (`new_folder`), and the attempt
recorded from it is the only one whose ledger rows point there. Byte-identical files of two
attempts are two copies, so deleting or rewriting one attempt's copy (an agent removing "its"
checkpoint, an unconfined replay writing through its checkpoint link) can change that attempt's
evidence only, never another's. Rows written before this layout name `artifacts/<sha256>`, a file
that attempts of that time may share; they are still read where they point.

Durability: `freeze` and `write_manifest` fsync the file and then its folder (after the rename)
before they return, and both return before the ledger transaction that acknowledges the attempt
commits (attempts run `freeze` first, and `write_manifest` inside the transaction); so an
acknowledged attempt's evidence survives a power loss as well as a killed server.

The ledger's side (DuckDB 2.0, defaults kept): each COMMIT is appended to `amid.duckdb.wal` and
fsynced before it returns (`fsync_mode` STANDARD); the WAL is checkpointed into `amid.duckdb`
automatically once it passes `checkpoint_threshold` (16 MiB) and when the server closes the ledger
on a clean stop (SIGINT, SIGTERM); after a kill, the next open replays the WAL.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from amid.server.errors import Forbidden, InvalidInput, shown
from amid.server.paths import agent_worktree, confine, os_errors_as_input, readable_file
from amid.server.workspace import Workspace

CHUNK = 1 << 20
MAX_FILES = 20000
FORBIDDEN_PARTS = frozenset({"private", ".git"})
FROZEN_DIR = "frozen"


@dataclass(frozen=True)
class DeclaredFile:
    source: Path  # resolved, inside the worktree
    declared_path: str  # worktree-relative, as recorded in the ledger
    member: str | None  # path inside a declared folder; None for a declared file


@dataclass(frozen=True)
class FrozenFile:
    sha256: str
    size_bytes: int
    frozen_path: str  # workspace-relative


def collect(workspace: Workspace, agent_id: str, declared: str, field: str) -> list[DeclaredFile]:
    """The files a declared path names: the file itself, or every file under the folder."""
    if any(part == ".." for part in PurePath(declared).parts):
        raise Forbidden(f"{field}: {shown(declared)} contains '..'; name paths inside your worktree", field=field)
    root = agent_worktree(workspace, agent_id)
    with os_errors_as_input(field, declared):
        path = _confined(workspace, agent_id, root, declared, field)
        if path.is_file():
            return [_regular(DeclaredFile(path, str(path.relative_to(root)), None), field)]
        if path.exists() and not path.is_dir():
            raise InvalidInput(f"{field}: {shown(declared)} is not a regular file or a folder", field=field)
        if not path.is_dir():
            raise InvalidInput(f"{field}: {shown(declared)} does not exist in your worktree {root}", field=field)
        return _walk(workspace, agent_id, root, path, declared, field)


def _walk(workspace: Workspace, agent_id: str, root: Path, path: Path, declared: str, field: str) -> list[DeclaredFile]:
    found = []
    for folder, dirnames, filenames in os.walk(path):
        for name in sorted(dirnames):
            if (Path(folder) / name).is_symlink():
                raise Forbidden(
                    f"{field}: {shown(declared)} holds a symlinked folder {shown(name)}; copy the files", field=field
                )
        dirnames.sort()
        for name in sorted(filenames):
            rel = os.path.relpath(Path(folder) / name, root)
            source = _confined(workspace, agent_id, root, rel, field)
            member = Path(os.path.relpath(Path(folder) / name, path)).as_posix()
            found.append(_regular(DeclaredFile(source, rel, member), field))
            if len(found) > MAX_FILES:
                raise InvalidInput(f"{field}: {shown(declared)} holds more than {MAX_FILES} files", field=field)
    if not found:
        raise InvalidInput(f"{field}: folder {shown(declared)} is empty", field=field)
    return found


def _regular(declared: DeclaredFile, field: str) -> DeclaredFile:
    if not readable_file(declared.source):
        raise InvalidInput(
            f"{field}: {shown(declared.declared_path)} is not a regular file this server may read; "
            "submit plain files (chmod u+r)",
            field=field,
        )
    return declared


def _confined(workspace: Workspace, agent_id: str, root: Path, declared: str, field: str) -> Path:
    resolved = confine(workspace, agent_id, declared, field)
    inside = resolved.relative_to(root).parts
    if FORBIDDEN_PARTS & set(inside):
        raise Forbidden(
            f"{field}: {shown(declared)} lies under private/ or .git/; submit your own outputs", field=field
        )
    return resolved


class ArtifactStore:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.root = workspace.sub("artifacts")

    def new_folder(self) -> Path:
        """A fresh folder for one submission's files; only the attempt recorded from it points there."""
        parent = self.root / FROZEN_DIR
        if not parent.is_dir():  # workspaces made before per-attempt folders
            parent.mkdir(exist_ok=True)
            fsync_dir(self.root)
        folder = parent / uuid.uuid4().hex
        folder.mkdir()
        fsync_dir(parent)
        return folder

    def discard(self, folder: Path) -> None:
        """Remove a submission's folder that no attempt points to (a refused or repeated submission)."""
        if folder.parent == self.root / FROZEN_DIR:
            shutil.rmtree(folder, ignore_errors=True)

    def freeze(self, source: Path, folder: Path, progress: Callable[[int], None] | None = None) -> FrozenFile:
        """Copy `source` into `folder/<sha256>` (read-only), hashing the bytes as they are copied."""
        handle, tmp_name = tempfile.mkstemp(prefix=".incoming-", dir=folder)
        try:
            with os.fdopen(handle, "wb") as out, source.open("rb") as src:
                sha256, size = _copy_hashing(src, out, progress)
            target = folder / sha256
            if target.exists():  # the same bytes twice in one submission: one owner, one copy
                os.unlink(tmp_name)
            else:
                os.chmod(tmp_name, 0o444)
                os.replace(tmp_name, target)
                fsync_dir(folder)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return FrozenFile(sha256, size, target.relative_to(self.workspace.root).as_posix())

    def sweep_incoming(self) -> list[str]:
        """Remove the partial copies a freeze cut short left behind (a SIGKILL between `mkstemp` and
        the rename): `.incoming-*` files and unrenamed manifest `.tmp` files. Called when the server
        starts, when no freeze can be in flight; returns the workspace-relative paths removed."""
        if not self.root.is_dir():
            return []
        partial = [*self.root.glob(".incoming-*"), *self.root.glob(f"{FROZEN_DIR}/*/.incoming-*")]
        partial += self.root.glob("manifests/*.tmp")
        removed = []
        for path in sorted(partial):
            if path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed.append(path.relative_to(self.workspace.root).as_posix())
        return removed

    def write_manifest(self, attempt_id: str, manifest: dict[str, Any]) -> str:
        folder = self.root / "manifests"
        folder.mkdir(exist_ok=True)
        path = folder / f"{attempt_id}.json"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            out.write(json.dumps(manifest, indent=1, sort_keys=True))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
        fsync_dir(folder)
        return f"artifacts/manifests/{attempt_id}.json"


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable: the new name is on disk once this returns."""
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _copy_hashing(src: Any, out: Any, progress: Callable[[int], None] | None) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while chunk := src.read(CHUNK):
        digest.update(chunk)
        out.write(chunk)
        size += len(chunk)
        if progress:
            progress(len(chunk))
    out.flush()
    os.fsync(out.fileno())
    return digest.hexdigest(), size


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
