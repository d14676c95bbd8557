"""Where each file lives in a package, and the hashes of a package's tree.

manifest.json     every other file with sha256 and size (manifest.sha256: the hash of manifest.json)
attestation.intoto.json, signing-key.pub   the run key's signature of manifest.json and every file
code/             the attempt's commit, checked out from the server's commit store
weights/          the checkpoint under its declared name ({checkpoint} of the inference command)
predictions/      fold-<k>/<file>: validation predictions as frozen
submission/       submission.csv and its files
logs/, training/  the training logs (by worktree path) and the training manifest
scores.json, review.json, lineage.json, README.md
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any

from amid.server.artifacts import sha256_of

MANIFEST = "manifest.json"
MANIFEST_HASH = "manifest.sha256"
ATTESTATION = "attestation.intoto.json"  # the signed statement (server/package/signing.py)
PACKAGE_KEY = "signing-key.pub"  # the signer's public key, as the package claims it
UNLISTED = frozenset({MANIFEST, MANIFEST_HASH, ATTESTATION, PACKAGE_KEY})  # the only files the manifest does not list


def package_path(artifact: dict[str, Any]) -> str:
    """The package-relative path of one frozen file (roles as submit_attempt records them)."""
    role, member, declared = artifact["role"], artifact["member"], PurePosixPath(artifact["declared_path"])
    inner = PurePosixPath(member) if member else PurePosixPath(declared.name)
    if role == "predictions":
        place = PurePosixPath("predictions", f"fold-{artifact['fold']}", inner)
    elif role == "submission":
        place = PurePosixPath("submission", inner)
    elif role == "checkpoint":
        place = PurePosixPath("weights", declared_name(artifact), *([member] if member else []))
    elif role == "logs":
        place = PurePosixPath("logs", declared)
    elif role == "training_manifest":
        place = PurePosixPath("training", declared.name)
    else:
        place = PurePosixPath("evidence", role, declared)
    if place.is_absolute() or ".." in place.parts:
        raise ValueError(f"artifact path {place} leaves the package")
    return place.as_posix()


def declared_name(artifact: dict[str, Any]) -> str:
    """The name the agent declared: the file's, or the folder's for a file inside a declared folder."""
    declared, member = artifact["declared_path"], artifact["member"]
    if member and declared.endswith("/" + member):
        return PurePosixPath(declared[: -len(member) - 1]).name
    return PurePosixPath(declared).name


def entry(root: Path, rel: str) -> dict[str, Any]:
    """One manifest entry: a file's sha256 and size, or a symlink's target (hashed as its text)."""
    path = root / rel
    if path.is_symlink():
        target = os.readlink(path)
        return {
            "path": rel,
            "sha256": hashlib.sha256(target.encode()).hexdigest(),
            "size_bytes": len(target),
            "symlink": target,
        }
    return {"path": rel, "sha256": sha256_of(path), "size_bytes": path.stat().st_size}


def cached_entry(root: Path, rel: str, memo: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """`entry`, computed once per `memo` (verify-package hashes each file for the manifest and the signature)."""
    if memo is None:
        return entry(root, rel)
    if rel not in memo:
        memo[rel] = entry(root, rel)
    return memo[rel]


def tree_files(root: Path) -> list[str]:
    """Every file and symlink under `root` (package-relative, sorted), folders left out."""
    found = []
    for folder, dirnames, filenames in os.walk(root):
        names = [*filenames, *(d for d in dirnames if (Path(folder) / d).is_symlink())]
        dirnames[:] = sorted(d for d in dirnames if not (Path(folder) / d).is_symlink())
        found += [Path(os.path.relpath(Path(folder) / n, root)).as_posix() for n in names]
    return sorted(found)


def manifest_digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()
