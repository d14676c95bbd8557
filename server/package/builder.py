"""Builds `package/` from one attempt that may be final (docs/ARCHITECTURE.md §12).

Everything is written into a temporary sibling folder, hashed into `manifest.json`, and renamed
into place, so `package/` is always a whole package or none. A second build of the same attempt
keeps the package that is there (when it still matches its manifest and the ledger's record);
a package of another attempt is replaced only when asked (`replace_other`, `force`). Each build is
recorded in the ledger with the sha256 of its manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from amid.server.errors import Conflict
from amid.server.ledger import Ledger
from amid.server.ledger.packages import Packages
from amid.server.package import content, readme
from amid.server.package.attestation import TrustedKey, signature_check, statement_check
from amid.server.package.environment import environment
from amid.server.package.evidence import PackageEvidence, gather
from amid.server.package.layout import (
    MANIFEST,
    MANIFEST_HASH,
    UNLISTED,
    declared_name,
    entry,
    manifest_digest,
    package_path,
    tree_files,
)
from amid.server.package.signing import fingerprint, run_key, sign_package
from amid.server.repo import detached_worktree, stored_commit
from amid.server.workspace import Workspace
from amid.tools.scaffolds.vendoring import scaffold_in, vendor

PACKAGE_DIR = "package"
CHUNK = 1 << 20
_building = threading.Lock()  # one build at a time per server (choose_final and the admin route)


@dataclass(frozen=True)
class BuiltPackage:
    path: str  # workspace-relative
    attempt_id: str
    manifest_sha256: str
    n_files: int
    size_bytes: int
    built: bool  # False: the package already there was kept
    key_fingerprint: str  # the run key that signed it (sha256 of the raw Ed25519 public key)


def build(
    ledger: Ledger, workspace: Workspace, attempt_id: str, *, by: str, force: bool = False, replace_other: bool = False
) -> BuiltPackage:
    """Build (or keep) the package of `attempt_id`; NotFound / Conflict when it cannot be final."""
    with _building:
        evidence = gather(ledger, attempt_id)
        key = run_key(workspace.control_dir)
        target = workspace.sub(PACKAGE_DIR)
        if not force and (kept := _keep_existing(ledger, target, attempt_id, replace_other, key)):
            return kept
        staging = Path(tempfile.mkdtemp(prefix=".package-", dir=workspace.root))
        try:
            digest, n_files, size = _write(evidence, workspace, staging, by)
            signer = sign_package(staging, key)
            _swap(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        Packages(ledger.db).record(attempt_id, PACKAGE_DIR, digest, (n_files, size), by)
        return BuiltPackage(PACKAGE_DIR, attempt_id, digest, n_files, size, built=True, key_fingerprint=signer)


def read_manifest(package_dir: Path) -> dict[str, Any] | None:
    path = package_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _keep_existing(
    ledger: Ledger, target: Path, attempt_id: str, replace_other: bool, key: Ed25519PrivateKey
) -> BuiltPackage | None:
    """The package already in place, if it is this attempt's and intact; None: build a new one. One
    not signed by the run key (built before packages were signed) is signed where it lies."""
    if not target.is_dir() or not any(target.iterdir()):
        return None
    manifest = read_manifest(target)
    if manifest is None or manifest.get("attempt_id") != attempt_id:
        if replace_other:
            return None
        held = f"the package of {manifest.get('attempt_id')}" if manifest else "files that are not a package"
        raise Conflict(
            f"attempt_id: package/ holds {held}; pass --force to replace it with {attempt_id}'s", field="attempt_id"
        )
    digest = manifest_digest((target / MANIFEST).read_bytes())
    record = Packages(ledger.db).latest(attempt_id)
    damaged = _damaged(target, manifest)
    if record is None or record["manifest_sha256"] != digest or damaged:
        why = damaged[0] if damaged else "its manifest is not the one the ledger recorded"
        raise Conflict(
            f"attempt_id: package/ of {attempt_id} fails verification ({why}); "
            "run `amid verify-package package -w WS`, or rebuild it with --force",
            field="attempt_id",
        )
    public = key.public_key()
    if not _signed_by(target, public):
        sign_package(target, key)
    files = manifest.get("files", [])
    size = sum(f["size_bytes"] for f in files)
    return BuiltPackage(
        PACKAGE_DIR, attempt_id, digest, len(files), size, built=False, key_fingerprint=fingerprint(public)
    )


def _signed_by(target: Path, public: Ed25519PublicKey) -> bool:
    """The package's attestation verifies with `public` and names exactly the files there."""
    signed = signature_check(target, TrustedKey(fingerprint(public), "the run key", public)).statement
    return signed is not None and statement_check(target, signed).status == "passed"


def _damaged(target: Path, manifest: dict[str, Any]) -> list[str]:
    listed = {f["path"]: f for f in manifest.get("files", [])}
    found = [rel for rel in tree_files(target) if rel not in UNLISTED]
    problems = [f"{rel}: not in the manifest" for rel in found if rel not in listed]
    for rel, known in listed.items():
        if not (target / rel).is_file() and not (target / rel).is_symlink():
            problems.append(f"{rel}: missing")
        elif entry(target, rel)["sha256"] != known["sha256"]:
            problems.append(f"{rel}: changed")
    return problems


def _write(ev: PackageEvidence, workspace: Workspace, staging: Path, by: str) -> tuple[str, int, int]:
    os.chmod(staging, 0o755)
    vendored = _write_code(ev, workspace, staging / "code")
    for artifact in ev.artifacts:
        _copy_checked(workspace.root / artifact["frozen_path"], staging / package_path(artifact), artifact)
    _copy_review(ev, workspace, staging / "review.json")
    scores = content.scores(ev)
    _write_json(staging / "scores.json", scores)
    _write_json(staging / "lineage.json", content.lineage(ev))
    (staging / "README.md").write_text(readme.render(ev, scores, _checkpoint_name(ev)), encoding="utf-8")
    files = [entry(staging, rel) for rel in tree_files(staging) if rel not in UNLISTED]
    record = content.manifest(ev, files, environment(), by) | vendored_record(ev.attempt["inference_command"], vendored)
    text = (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()
    (staging / MANIFEST).write_bytes(text)
    digest = manifest_digest(text)
    (staging / MANIFEST_HASH).write_text(f"{digest}  {MANIFEST}\n", encoding="utf-8")
    return digest, len(files), sum(f["size_bytes"] for f in files)


def _write_code(ev: PackageEvidence, workspace: Workspace, into: Path) -> list[str]:
    """The commit as the reviewer replayed it: a read-tree checkout from the server's commit store
    (`git archive` would honour the attempt's own export-ignore / export-subst attributes), plus the AMID
    scaffold its inference command runs, so code/ re-runs without AMID (tools/scaffolds/vendoring.py).
    Returns the scaffold files added (code/-relative)."""
    stored = stored_commit(workspace.commit_store, ev.attempt_id)
    if stored != ev.commit:
        raise Conflict(
            f"commit: {ev.commit[:12]} of {ev.attempt_id} is not intact in the server's commit store "
            "(COMMIT_UNKNOWN); run `amid audit`",
            field="commit",
        )
    with detached_worktree(workspace.commit_store, ev.commit) as tree:
        shutil.copytree(tree, into, symlinks=True)
    return vendor(ev.attempt["inference_command"] or [], into)


def vendored_record(argv: list[str] | None, vendored: list[str]) -> dict[str, Any]:
    """The manifest's account of the scaffold files in code/ that are not the commit's (none: no entry)."""
    found = scaffold_in(argv or [])
    if not vendored or found is None:
        return {}
    return {"vendored_scaffold": {"scaffold": found[0], "sha256": found[1], "files": [f"code/{f}" for f in vendored]}}


def _copy_checked(source: Path, target: Path, artifact: dict[str, Any]) -> None:
    """Copy a frozen file, hashing the bytes copied; a file that changed since it was frozen stops the build."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    try:
        with source.open("rb") as src, target.open("wb") as out:
            while chunk := src.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except FileNotFoundError:
        raise Conflict(
            f"artifacts: {artifact['frozen_path']} ({artifact['role']} {artifact['declared_path']}) "
            "is missing (ARTIFACT_MISSING); run `amid audit`",
            field="artifacts",
        ) from None
    if digest.hexdigest() != artifact["sha256"]:
        raise Conflict(
            f"artifacts: {artifact['frozen_path']} ({artifact['role']} {artifact['declared_path']}) "
            "changed since it was frozen (ARTIFACT_CHANGED); run `amid audit`",
            field="artifacts",
        )


def _copy_review(ev: PackageEvidence, workspace: Workspace, target: Path) -> None:
    """The reviewer's report file; when it is gone, the same verdict as the ledger recorded it
    (checks and verified metrics), marked as such."""
    report = ev.review.get("report_path")
    source = workspace.root / str(report) if report else None
    if source is not None and source.is_file():
        shutil.copyfile(source, target)
        return
    missing = f"reviews/{ev.review['review_id']}.json"
    _write_json(
        target,
        {
            "review_id": ev.review["review_id"],
            "attempt_id": ev.attempt_id,
            "commit": ev.commit,
            "verdict": ev.evidence["verdict"],
            "checks": ev.checks,
            "metrics": ev.verified,
            "source": f"ledger: the report file {report or missing} is missing",
        },
    )


def _checkpoint_name(ev: PackageEvidence) -> str | None:
    names = [declared_name(a) for a in ev.artifacts if a["role"] == "checkpoint"]
    return names[0] if names else None


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")


def _swap(staging: Path, target: Path) -> None:
    """Put the staged package at `target`: one rename, or two when an old package must step aside."""
    if target.is_dir() and not any(target.iterdir()):
        target.rmdir()
    if not target.exists():
        os.rename(staging, target)
        return
    old = Path(tempfile.mkdtemp(prefix=".package-old-", dir=target.parent))
    os.rename(target, old / "package")
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)
