"""The checks of `verify-package` that need the run's workspace: the ledger's record of the build,
the commit store, the labels and the task's grader."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from amid.server.package.checks import PackageCheck, failed, passed, same_numbers
from amid.server.package.layout import MANIFEST, manifest_digest
from amid.server.workspace import Workspace


def run(
    package_dir: Path, manifest: dict[str, Any], workspace: Workspace, record: dict[str, Any]
) -> list[PackageCheck]:
    checks = [ledger_check(package_dir, manifest, record), code_check(package_dir, manifest, workspace)]
    try:
        from amid.server.package import rescore

        ctx = rescore.context(package_dir, manifest, workspace)
        checks.append(rescore_check(package_dir, manifest, rescore.fold_scores(ctx)))
        checks.append(grader_check(manifest, rescore.submission(ctx)))
    except Exception as exc:  # a package that cannot even be re-scored fails, never passes
        checks.append(failed("re-score", f"could not re-score: {type(exc).__name__}: {exc}", ["predictions"]))
    return checks


def ledger_check(package_dir: Path, manifest: dict[str, Any], record: dict[str, Any]) -> PackageCheck:
    """manifest.json is a build the server recorded, and agrees with the ledger's attempt."""
    digest = manifest_digest((package_dir / MANIFEST).read_bytes())
    builds = record.get("builds") or []
    if not builds:
        return failed("ledger", f"the ledger records no package build of {manifest.get('attempt_id')}", [MANIFEST])
    if digest not in {b["manifest_sha256"] for b in builds}:
        latest = builds[-1]["manifest_sha256"]
        return failed(
            "ledger",
            f"{MANIFEST} has sha256 {digest[:16]}…; the ledger recorded {latest[:16]}… for the "
            f"build of {manifest.get('attempt_id')}: the manifest was edited",
            [MANIFEST],
        )
    wrong = _ledger_disagreements(package_dir, manifest, record)
    if wrong:
        return failed("ledger", f"differs from the ledger: {', '.join(wrong[:20])}", wrong)
    return passed(
        "ledger",
        f"{MANIFEST} is the build the ledger recorded ({digest[:16]}…); artifacts, commit and "
        "verified scores agree with the ledger",
    )


def _ledger_disagreements(package_dir: Path, manifest: dict[str, Any], record: dict[str, Any]) -> list[str]:
    key = ("role", "fold", "member", "declared_path")
    known = {tuple(a[k] for k in key): a["sha256"] for a in record.get("artifacts", [])}
    wrong = [
        str(a["path"]) for a in manifest.get("artifacts", []) if known.get(tuple(a[k] for k in key)) != a["sha256"]
    ]
    if len(manifest.get("artifacts", [])) != len(known):
        wrong.append(f"{MANIFEST} (artifacts)")
    if record.get("commit") != manifest.get("commit"):
        wrong.append(f"{MANIFEST} (commit)")
    path = package_dir / "scores.json"
    scores = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    verified = record.get("verified_folds") or {}
    if set(verified) != set(scores.get("folds") or {}) or any(
        not same_numbers(verified[f], scores["folds"][f]) for f in verified
    ):
        wrong.append("scores.json")
    return wrong


# Where an AMID scaffold's modules go (code/amid/; the other three in packages built before the one
# namespace, which verify as they did); only the files the manifest lists there are excused.
VENDORED_ROOTS = ("code/amid/", "code/tools/", "code/server/", "code/registry/")


def code_check(package_dir: Path, manifest: dict[str, Any], workspace: Workspace) -> PackageCheck:
    """code/ holds exactly the tree of the commit in the server's commit store (git blob ids)."""
    import git

    commit = str(manifest.get("commit"))
    try:
        with git.Repo(workspace.commit_store) as store:
            listing = store.git.ls_tree("-r", "-z", "--full-tree", commit)
    except (git.GitCommandError, git.NoSuchPathError, git.InvalidGitRepositoryError) as exc:
        return failed("code", f"commit {commit[:12]} is not in the commit store: {exc}", ["code"])
    expected = {}
    for item in filter(None, listing.split("\0")):
        meta, path = item.split("\t", 1)
        _mode, kind, blob = meta.split()
        if kind == "blob":
            expected[f"code/{path}"] = blob
    code = package_dir / "code"
    present = {p.relative_to(package_dir).as_posix(): p for p in code.rglob("*") if p.is_file() or p.is_symlink()}
    # the AMID scaffold the inference command runs, added beside the commit (hashed in the manifest's files)
    listed = (manifest.get("vendored_scaffold") or {}).get("files", [])
    vendored = {rel for rel in listed if rel.startswith(VENDORED_ROOTS) and rel.endswith(".py")} - set(expected)
    present = {rel: path for rel, path in present.items() if rel not in vendored}
    wrong = sorted(rel for rel in expected if rel not in present or _blob_id(present[rel]) != expected[rel])
    wrong += sorted(rel for rel in present if rel not in expected)
    if wrong:
        return failed("code", f"code/ differs from commit {commit[:12]}: {', '.join(wrong[:20])}", wrong)
    return passed(
        "code", f"code/ is the tree of commit {commit[:12]} in the server's commit store ({len(expected)} files)"
    )


def _blob_id(path: Path) -> str:
    data = str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def rescore_check(
    package_dir: Path, manifest: dict[str, Any], rescored: dict[str, dict[str, float | None]]
) -> PackageCheck:
    scores = json.loads((package_dir / "scores.json").read_text(encoding="utf-8"))
    claimed = scores.get("folds") or {}
    wrong_folds = sorted(
        f for f in set(claimed) | set(rescored) if not same_numbers(claimed.get(f, {}), rescored.get(f, {}))
    )
    if wrong_folds:
        named = [
            str(a["path"])
            for a in manifest.get("artifacts", [])
            if a["role"] == "predictions" and str(a["fold"]) in wrong_folds
        ]
        detail = "; ".join(
            f"fold {f}: scores.json {claimed.get(f)} vs re-scored {rescored.get(f)}" for f in wrong_folds
        )
        return failed("re-score", f"{detail}; predictions: {', '.join(named[:20])}", ["scores.json", *named])
    primary = scores.get("primary_metric")
    values = ", ".join(f"fold {f} {primary} {v.get(primary)}" for f, v in sorted(rescored.items()))
    return passed("re-score", f"the reviewer's scoring reproduces scores.json ({values})")


def grader_check(manifest: dict[str, Any], check: Any) -> PackageCheck:
    if not any(a["role"] == "submission" for a in manifest.get("artifacts", [])):
        return passed("grader", "no submission in the package; nothing to grade")
    if check.passed:
        return passed("grader", check.message)
    reasons = check.evidence.get("reasons") or []
    named = sorted(
        {
            str(a["path"])
            for a in manifest.get("artifacts", [])
            if a["role"] == "submission" and any(str(a.get("member") or "") in r for r in reasons)
        }
    )
    return failed("grader", check.message, named or ["submission"])
