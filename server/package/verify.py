"""`amid verify-package`: is this the package the server built, and do its numbers hold?

Without a workspace: every file re-hashed against manifest.json (missing, extra and changed files
named), manifest.json against manifest.sha256, the manifest's own consistency (artifact hashes,
scores, review), and the run key's signature over manifest.json and every file (attestation.py):
authenticated with `--public-key` or the workspace's key, otherwise integrity only (`authenticated`
False). With the workspace (`-w`) also what needs the run itself: manifest.json against the sha256
the ledger recorded for the build, the ledger's artifact hashes, verified scores and commit, code/
against the commit in the server's commit store, the predictions re-scored with the reviewer's own
code, and the task's grader on the submission.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from amid.server.package import workspace_checks
from amid.server.package.attestation import TrustedKey, signature_check, statement_check, workspace_key
from amid.server.package.builder import read_manifest
from amid.server.package.checks import PackageCheck, failed, passed, same_numbers, skipped
from amid.server.package.layout import MANIFEST, MANIFEST_HASH, UNLISTED, cached_entry, manifest_digest, tree_files
from amid.server.workspace import Workspace

BYTE_CHECKS = ("files", "signed files")  # checks that compare each file's own bytes


class VerifyReport(BaseModel):
    package: str
    attempt_id: str | None
    checks: list[PackageCheck]
    authenticated: bool = Field(default=False, description="the signature verified with a key the verifier trusts")

    @property
    def passed(self) -> bool:
        return all(c.status != "failed" for c in self.checks)

    def named_files(self) -> list[str]:
        """The files to look at first: those whose bytes differ from the manifest or the signed
        statement when any do (a one-byte edit names that file), else every file a failure names
        (a re-score names its fold's predictions, a grader its submission)."""
        failures = [c for c in self.checks if c.status == "failed"]
        changed = {f for c in failures if c.name in BYTE_CHECKS for f in c.files}
        return sorted(changed or {f for c in failures for f in c.files})


def verify_package(
    package_dir: Path,
    workspace: Workspace | None,
    ledger_record: Callable[[str], dict[str, Any]] | None = None,
    trusted: TrustedKey | None = None,
) -> VerifyReport:
    """Every check; `ledger_record(attempt_id)` reads the ledger's record (through the server when it
    runs); `trusted` is the key to authenticate the signature with (default: the workspace's)."""
    manifest = read_manifest(package_dir)
    if manifest is None:
        check = failed("manifest", f"{MANIFEST} is missing or not a JSON object in {package_dir}", [MANIFEST])
        return VerifyReport(package=str(package_dir), attempt_id=None, checks=[check])
    hashes: dict[str, dict[str, Any]] = {}  # each file hashed once, for the manifest and the signed statement
    checks = [
        manifest_hash_check(package_dir),
        files_check(package_dir, manifest, hashes),
        consistency_check(package_dir, manifest),
    ]
    signature, authenticated = _signature_checks(package_dir, workspace, trusted, hashes)
    checks += signature
    if workspace is None:
        why = "needs -w WORKSPACE (the ledger, the labels and the private answers)"
        checks += [skipped(name, why) for name in ("ledger", "code", "re-score", "grader")]
    else:
        record = ledger_record(str(manifest.get("attempt_id"))) if ledger_record else {}
        checks += workspace_checks.run(package_dir, manifest, workspace, record)
    return VerifyReport(
        package=str(package_dir), attempt_id=manifest.get("attempt_id"), checks=checks, authenticated=authenticated
    )


def _signature_checks(
    package_dir: Path, workspace: Workspace | None, trusted: TrustedKey | None, hashes: dict[str, dict[str, Any]]
) -> tuple[list[PackageCheck], bool]:
    if trusted is None and workspace is not None:
        trusted = workspace_key(workspace.control_dir)
        if trusted is None:
            why = f"the workspace has no package key ({workspace.control_dir.name}/package-signing.pub); rebuild the "
            return [
                failed("signature", why + "package with `amid finalize --force`", ["attestation.intoto.json"])
            ], False
    result = signature_check(package_dir, trusted)
    if result.statement is None:
        return [result.check, skipped("signed files", "needs a signature that verifies")], False
    return [result.check, statement_check(package_dir, result.statement, hashes)], result.authenticated


def manifest_hash_check(package_dir: Path) -> PackageCheck:
    digest = manifest_digest((package_dir / MANIFEST).read_bytes())
    path = package_dir / MANIFEST_HASH
    recorded = path.read_text(encoding="utf-8").split()[0] if path.is_file() and path.read_text().strip() else None
    if recorded is None:
        return failed("manifest hash", f"{MANIFEST_HASH} is missing or empty", [MANIFEST_HASH])
    if recorded != digest:
        return failed(
            "manifest hash", f"{MANIFEST} has sha256 {digest[:16]}…, {MANIFEST_HASH} says {recorded[:16]}…", [MANIFEST]
        )
    return passed("manifest hash", f"{MANIFEST} matches {MANIFEST_HASH} ({digest[:16]}…)")


def files_check(
    package_dir: Path, manifest: dict[str, Any], hashes: dict[str, dict[str, Any]] | None = None
) -> PackageCheck:
    listed = {str(f.get("path")): f for f in manifest.get("files", []) if isinstance(f, dict)}
    present = [rel for rel in tree_files(package_dir) if rel not in UNLISTED]
    missing = sorted(
        rel for rel in listed if not (package_dir / rel).is_file() and not (package_dir / rel).is_symlink()
    )
    extra = sorted(rel for rel in present if rel not in listed)
    changed = sorted(rel for rel in listed if rel not in missing and _differs(package_dir, rel, listed[rel], hashes))
    if missing or extra or changed:
        parts = [
            f"{label}: {', '.join(names[:20])}"
            for label, names in (("missing", missing), ("extra", extra), ("changed", changed))
            if names
        ]
        return failed("files", "; ".join(parts), [*missing, *extra, *changed])
    return passed("files", f"{len(listed)} files match their sha256 and size")


def _differs(package_dir: Path, rel: str, known: dict[str, Any], hashes: dict[str, dict[str, Any]] | None) -> bool:
    found = cached_entry(package_dir, rel, hashes)
    return found["sha256"] != known.get("sha256") or found["size_bytes"] != known.get("size_bytes")


def consistency_check(package_dir: Path, manifest: dict[str, Any]) -> PackageCheck:
    """The manifest agrees with itself: artifact hashes with file hashes, scores and review with its header."""
    files = {str(f.get("path")): f.get("sha256") for f in manifest.get("files", []) if isinstance(f, dict)}
    wrong = [str(a["path"]) for a in manifest.get("artifacts", []) if files.get(str(a.get("path"))) != a.get("sha256")]
    wrong += _scores_disagree(package_dir, manifest) + _review_disagrees(package_dir, manifest)
    if wrong:
        return failed("manifest consistency", f"the manifest disagrees with: {', '.join(wrong[:20])}", wrong)
    return passed("manifest consistency", "artifact hashes, scores.json and review.json agree with the manifest")


def _scores_disagree(package_dir: Path, manifest: dict[str, Any]) -> list[str]:
    scores = _json(package_dir / "scores.json")
    if not isinstance(scores, dict) or scores.get("attempt_id") != manifest.get("attempt_id"):
        return ["scores.json"]
    means, claimed = scores.get("mean") or {}, manifest.get("verified_metrics") or {}
    return [] if same_numbers(means, claimed) else ["scores.json"]


def _review_disagrees(package_dir: Path, manifest: dict[str, Any]) -> list[str]:
    review = _json(package_dir / "review.json")
    keys = (("attempt_id", "attempt_id"), ("commit", "commit"), ("verdict", "verdict"), ("review_id", "review_id"))
    if not isinstance(review, dict) or any(review.get(r) != manifest.get(m) for r, m in keys):
        return ["review.json"]
    return []


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
