"""The package the demo's supervisor built (through choose_final and the registered builder), and
`amid verify-package` catching every kind of tampering with the file named."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from amid.server.ledger import Ledger
from amid.server.package import read_package_summary
from amid.server.package.environment import KEY_PACKAGES
from amid.server.workspace import Workspace
from tests.conftest import DemoRun
from tests.server.package.conftest import amid

FOLDERS = ("code", "weights", "predictions", "submission", "logs", "training")
DOCUMENTS = ("manifest.json", "manifest.sha256", "scores.json", "review.json", "lineage.json", "README.md")


def manifest_of(package: Path) -> dict:
    return json.loads((package / "manifest.json").read_text(encoding="utf-8"))


def first(package: Path, prefix: str) -> str:
    return next(f["path"] for f in manifest_of(package)["files"] if f["path"].startswith(prefix))


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def test_the_demo_finalization_builds_the_package_with_every_part(demo_run: DemoRun) -> None:
    package = demo_run.workspace / "package"
    assert all((package / name).is_file() for name in DOCUMENTS)
    assert all((package / name).is_dir() for name in FOLDERS)
    manifest = manifest_of(package)
    ledger = Ledger(demo_run.workspace / "amid.duckdb", read_only=True)
    try:
        choice = ledger.supervision.final_choice()
        attempt = ledger.attempts.get(manifest["attempt_id"])
        contract_hash = ledger.activity.get_state("contract_hash")
    finally:
        ledger.close()
    assert choice is not None and choice["attempt_id"] == manifest["attempt_id"]
    assert choice["package_path"] == "package"
    assert choice["package_sha256"] == hashlib.sha256((package / "manifest.json").read_bytes()).hexdigest()
    assert manifest["commit"] == attempt["commit_sha"] and manifest["lane_id"] == attempt["lane_id"]
    assert manifest["contract_hash"] == contract_hash and manifest["task_id"] == "demo-liver-lesion-ct"
    assert manifest["verified_primary_score"] == pytest.approx(choice["verified_score"])
    assert set(manifest["environment"]["packages"]) == set(KEY_PACKAGES)
    assert manifest["environment"]["python"] and manifest["environment"]["gpu"]
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    on_disk = {p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file()}
    assert on_disk - set(listed) == {"manifest.json", "manifest.sha256", "attestation.intoto.json", "signing-key.pub"}
    for rel, digest in listed.items():
        assert hashlib.sha256((package / rel).read_bytes()).hexdigest() == digest, rel
    assert (package / "submission" / "submission.csv").is_file()
    assert any(a["role"] == "checkpoint" and a["path"].startswith("weights/") for a in manifest["artifacts"])


def test_scores_review_and_lineage_come_from_the_ledger(demo_run: DemoRun) -> None:
    package = demo_run.workspace / "package"
    manifest = manifest_of(package)
    scores = json.loads((package / "scores.json").read_text(encoding="utf-8"))
    review = json.loads((package / "review.json").read_text(encoding="utf-8"))
    ledger = Ledger(demo_run.workspace / "amid.duckdb", read_only=True)
    try:
        verified = ledger.attempts.scores(manifest["attempt_id"], "reviewer")
    finally:
        ledger.close()
    assert {int(f): v for f, v in scores["folds"].items()} == verified
    assert scores["holdout"]["check"]["code"] == "HOLDOUT_GAP" and scores["holdout"]["check"]["passed"]
    assert review["attempt_id"] == manifest["attempt_id"] and review["verdict"] == "accepted"
    assert json.loads((package / "lineage.json").read_text(encoding="utf-8"))["commit"] == manifest["commit"]
    readme = (package / "README.md").read_text(encoding="utf-8")
    assert manifest["attempt_id"] in readme and "{checkpoint}" in readme and "amid verify-package" in readme


def test_read_package_summary_gives_the_report_what_it_shows(demo_run: DemoRun, tmp_path: Path) -> None:
    summary = read_package_summary(demo_run.workspace / "package")
    assert summary is not None and summary["attempt_id"] == manifest_of(demo_run.workspace / "package")["attempt_id"]
    assert summary["n_files"] > 10 and "predictions" in summary["folders"]
    assert read_package_summary(tmp_path) is None


def test_verify_package_passes_on_the_built_package_with_the_workspace(run_copy: Workspace) -> None:
    result = amid("verify-package", str(run_copy.root / "package"), "-w", str(run_copy.root))
    assert result.exit_code == 0, result.output
    names = (
        "manifest hash",
        "files",
        "manifest consistency",
        "signature",
        "signed files",
        "ledger",
        "code",
        "re-score",
        "grader",
    )
    for name in names:
        assert any(line.startswith(name) and " passed " in line for line in result.output.splitlines()), name
    assert "all checks passed, signed by the trusted key" in result.output
    signature = next(line for line in result.output.splitlines() if line.startswith("signature"))
    assert "the workspace (" in signature


@pytest.mark.parametrize("prefix", ["code/", "weights/", "predictions/", "submission/submission.csv", "review.json"])
def test_a_flipped_byte_fails_verification_naming_the_file(package_copy: Path, prefix: str) -> None:
    rel = first(package_copy, prefix)
    flip_byte(package_copy / rel)
    result = amid("verify-package", str(package_copy))
    assert result.exit_code == 1
    assert f"changed: {rel}" in result.output and "FAILED" in result.output


def test_a_removed_file_fails_verification_naming_it(package_copy: Path) -> None:
    rel = first(package_copy, "predictions/")
    (package_copy / rel).unlink()
    result = amid("verify-package", str(package_copy))
    assert result.exit_code == 1 and f"missing: {rel}" in result.output


def test_an_added_file_fails_verification_naming_it(package_copy: Path) -> None:
    (package_copy / "weights" / "better.pt").write_bytes(b"not the model that was reviewed")
    result = amid("verify-package", str(package_copy))
    assert result.exit_code == 1 and "extra: weights/better.pt" in result.output


def test_an_edited_manifest_fails_against_its_hash_file(package_copy: Path) -> None:
    manifest = manifest_of(package_copy)
    manifest["verified_primary_score"] = 0.99
    (package_copy / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    result = amid("verify-package", str(package_copy))
    assert result.exit_code == 1
    assert any(line.startswith("manifest hash") and "failed" in line for line in result.output.splitlines())
    assert "files: manifest.json" in result.output


def rehash_after_editing(package: Path, rel: str) -> None:
    """The cheater's way: change a file, then its hashes in manifest.json, then manifest.sha256."""
    flip_byte(package / rel)
    manifest = manifest_of(package)
    digest = hashlib.sha256((package / rel).read_bytes()).hexdigest()
    for item in [*manifest["files"], *manifest["artifacts"]]:
        if item["path"] == rel:
            item["sha256"] = digest
    text = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    (package / "manifest.json").write_bytes(text)
    (package / "manifest.sha256").write_text(f"{hashlib.sha256(text).hexdigest()}  manifest.json\n")


def test_an_edit_with_updated_hashes_is_caught_by_the_ledger_and_the_re_score(run_copy: Workspace) -> None:
    package = run_copy.root / "package"
    rel = first(package, "predictions/")
    rehash_after_editing(package, rel)
    alone = amid("verify-package", str(package))
    assert alone.exit_code == 1, alone.output  # the signed statement still names the old hashes
    signed_files = next(line for line in alone.output.splitlines() if line.startswith("signed files"))
    assert "failed" in signed_files and rel in signed_files and "manifest.json" in signed_files
    result = amid("verify-package", str(package), "-w", str(run_copy.root))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    ledger_line = next(line for line in lines if line.startswith("ledger"))
    assert "failed" in ledger_line and "manifest.json" in ledger_line and "was edited" in ledger_line
    rescore_line = next(line for line in lines if line.startswith("re-score"))
    assert "failed" in rescore_line and rel in rescore_line
