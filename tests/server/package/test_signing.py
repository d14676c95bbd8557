"""The package's Ed25519 signature, checked offline by `amid verify-package --public-key`: an honest
package verifies, and every forgery that rewrites files, hashes and manifest together fails."""

from __future__ import annotations

import base64
import hashlib
import json
import stat
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from amid.server.errors import Conflict
from amid.server.package.layout import ATTESTATION, MANIFEST, MANIFEST_HASH, PACKAGE_KEY, UNLISTED, entry, tree_files
from amid.server.package.signing import KEY_FILE, PUBLIC_FILE, fingerprint, public_pem, run_key, sign_package, statement
from tests.server.package.conftest import amid

ATTEMPT, COMMIT, REVIEW = "att-00003", "a" * 40, "rev-00002"


def write_package(root: Path, seed: int = 0) -> Path:
    """A small package laid out as the builder writes one: code, weights, predictions, scores, review."""
    rng = np.random.default_rng(seed)
    package = root / "package"
    files = {
        "code/train.py": b"print('fit')\n",
        "weights/model.pt": rng.bytes(512),
        "predictions/fold-0/case_001.nii.gz": rng.bytes(256),
        "README.md": b"# package\n",
    }
    for rel, data in files.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_bytes(data)
    folds = {"0": {"dice": 0.61}}
    dump(package / "scores.json", {"attempt_id": ATTEMPT, "folds": folds, "mean": {"dice": 0.61}, "holdout": {}})
    dump(package / "review.json", {"attempt_id": ATTEMPT, "commit": COMMIT, "verdict": "accepted", "review_id": REVIEW})
    listed = [entry(package, rel) for rel in tree_files(package) if rel not in UNLISTED]
    artifacts = [
        {
            "role": "predictions",
            "fold": 0,
            "member": None,
            "declared_path": "out/case_001.nii.gz",
            "path": "predictions/fold-0/case_001.nii.gz",
        }
    ]
    for artifact in artifacts:
        artifact |= {k: v for k, v in entry(package, artifact["path"]).items() if k in ("sha256", "size_bytes")}
    write_manifest(
        package,
        {
            "attempt_id": ATTEMPT,
            "commit": COMMIT,
            "lane_id": "nnunet",
            "task_id": "t",
            "contract_hash": "c" * 64,
            "review_id": REVIEW,
            "verdict": "accepted",
            "verified_primary_score": 0.61,
            "verified_metrics": {"dice": 0.61},
            "artifacts": artifacts,
            "files": listed,
        },
    )
    sign_package(package, run_key(root / ".amid"))
    return package


def dump(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def write_manifest(package: Path, manifest: dict) -> None:
    text = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    (package / MANIFEST).write_bytes(text)
    (package / MANIFEST_HASH).write_text(f"{hashlib.sha256(text).hexdigest()}  {MANIFEST}\n", encoding="utf-8")


def trusted_fingerprint(root: Path) -> str:
    return fingerprint(run_key(root / ".amid").public_key())


def line(output: str, check: str) -> str:
    return next(row for row in output.splitlines() if row.startswith(check + " "))


def forge_scores(package: Path, dice: float = 0.99) -> None:
    """The cheater's full rewrite: a better score in scores.json, its hash and the verified metrics in
    the manifest, and manifest.sha256, all consistent with each other."""
    scores = json.loads((package / "scores.json").read_text(encoding="utf-8"))
    scores["folds"]["0"]["dice"], scores["mean"]["dice"] = dice, dice
    dump(package / "scores.json", scores)
    manifest = json.loads((package / MANIFEST).read_text(encoding="utf-8"))
    manifest["verified_primary_score"], manifest["verified_metrics"] = dice, {"dice": dice}
    for item in manifest["files"]:
        if item["path"] == "scores.json":
            item.update(entry(package, "scores.json"))
    write_manifest(package, manifest)


def resign_with(package: Path, key: Ed25519PrivateKey, *, swap_key_file: bool) -> None:
    """Sign the forged package with the forger's own key (and, if asked, put that key in the package)."""
    payload = json.dumps(statement(package), sort_keys=True, separators=(",", ":")).encode()
    signed = b"DSSEv1 %d %s %d %s" % (28, b"application/vnd.in-toto+json", len(payload), payload)
    envelope = {
        "payloadType": "application/vnd.in-toto+json",
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": "x", "sig": base64.b64encode(key.sign(signed)).decode()}],
    }
    (package / ATTESTATION).write_text(json.dumps(envelope), encoding="utf-8")
    if swap_key_file:
        (package / PACKAGE_KEY).write_bytes(public_pem(key.public_key()))


def test_a_signed_package_verifies_offline_with_the_fingerprint_or_the_key_file(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    by_fingerprint = amid("verify-package", str(package), "--public-key", trusted_fingerprint(tmp_path))
    by_file = amid("verify-package", str(package), "--public-key", str(tmp_path / ".amid" / PUBLIC_FILE))
    for result in (by_fingerprint, by_file):
        assert result.exit_code == 0, result.output
        assert "passed" in line(result.output, "signature") and "trusted key" in line(result.output, "signature")
        assert "passed" in line(result.output, "signed files") and "signed by the trusted key" in result.output
    envelope = json.loads((package / ATTESTATION).read_text(encoding="utf-8"))
    signed = json.loads(base64.b64decode(envelope["payload"]))
    assert signed["_type"] == "https://in-toto.io/Statement/v1"
    assert {s["name"] for s in signed["subject"]} == {MANIFEST, *(f["path"] for f in manifest_files(package))}
    assert signed["predicate"]["attempt_id"] == ATTEMPT and signed["predicate"]["fold_scores"] == {"0": {"dice": 0.61}}


def manifest_files(package: Path) -> list[dict]:
    return json.loads((package / MANIFEST).read_text(encoding="utf-8"))["files"]


def test_without_a_trusted_key_it_says_integrity_only_and_exits_3(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    result = amid("verify-package", str(package))
    assert result.exit_code == 3, result.output
    assert "integrity only, NOT authenticity" in line(result.output, "signature")
    assert "NOT authenticated" in result.output
    as_json = json.loads(amid("verify-package", str(package), "--json").output)
    assert as_json["passed"] is True and as_json["authenticated"] is False


@pytest.mark.parametrize(
    "rel",
    [
        "code/train.py",
        "weights/model.pt",
        "predictions/fold-0/case_001.nii.gz",
        "scores.json",
        "review.json",
        "README.md",
    ],
)
def test_one_changed_byte_of_any_file_fails_naming_it(tmp_path: Path, rel: str) -> None:
    package = write_package(tmp_path)
    data = bytearray((package / rel).read_bytes())
    data[len(data) // 2] ^= 0x01
    (package / rel).write_bytes(bytes(data))
    result = amid("verify-package", str(package), "--public-key", trusted_fingerprint(tmp_path))
    assert result.exit_code == 1
    assert "failed" in line(result.output, "signed files") and rel in line(result.output, "signed files")


def test_scores_hashes_and_manifest_rewritten_together_fail_against_the_signature(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    forge_scores(package)
    result = amid("verify-package", str(package), "--public-key", trusted_fingerprint(tmp_path))
    assert result.exit_code == 1
    for check in ("manifest hash", "files", "manifest consistency"):
        assert " passed " in line(result.output, check), check  # the forgery is consistent with itself
    signed_files = line(result.output, "signed files")
    assert "failed" in signed_files and "scores.json" in signed_files and MANIFEST in signed_files


@pytest.mark.parametrize("swap_key_file", [True, False])
def test_a_forgery_re_signed_with_another_key_fails_against_the_trusted_key(
    tmp_path: Path, swap_key_file: bool
) -> None:
    package = write_package(tmp_path)
    forge_scores(package)
    resign_with(package, Ed25519PrivateKey.generate(), swap_key_file=swap_key_file)
    trusted = amid("verify-package", str(package), "--public-key", trusted_fingerprint(tmp_path))
    key_file = amid("verify-package", str(package), "--public-key", str(tmp_path / ".amid" / PUBLIC_FILE))
    alone = amid("verify-package", str(package))
    for result in (trusted, key_file):
        assert result.exit_code == 1 and "failed" in line(result.output, "signature"), result.output
    assert alone.exit_code == (3 if swap_key_file else 1)  # re-signed whole, only a trusted key tells


def test_a_key_swapped_inside_the_package_fails(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    (package / PACKAGE_KEY).write_bytes(public_pem(Ed25519PrivateKey.generate().public_key()))
    trusted = amid("verify-package", str(package), "--public-key", trusted_fingerprint(tmp_path))
    alone = amid("verify-package", str(package))
    assert trusted.exit_code == 1 and "not the trusted key" in line(trusted.output, "signature")
    assert alone.exit_code == 1 and "does not verify" in line(alone.output, "signature")


def test_the_run_key_is_private_made_once_and_refused_when_others_can_read_it(tmp_path: Path) -> None:
    control = tmp_path / ".amid"
    control.mkdir()
    first, again = run_key(control), run_key(control)
    assert fingerprint(first.public_key()) == fingerprint(again.public_key())
    assert stat.S_IMODE((control / KEY_FILE).stat().st_mode) == 0o600
    assert (control / PUBLIC_FILE).read_bytes() == public_pem(first.public_key())
    (control / KEY_FILE).chmod(0o644)
    with pytest.raises(Conflict) as caught:
        run_key(control)
    assert caught.value.field == "signing_key" and "chmod 600" in caught.value.message


def test_a_public_key_that_is_neither_a_file_nor_a_fingerprint_is_a_usage_error(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    result = amid("verify-package", str(package), "--public-key", "sha256:1234")
    assert result.exit_code == 2 and "--public-key" in result.output and "64 hex digits" in result.output


def test_a_kept_package_is_signed_by_the_run_key_only_when_its_attestation_verifies(tmp_path: Path) -> None:
    from amid.server.package.builder import _signed_by

    package = write_package(tmp_path)
    key = run_key(tmp_path / ".amid")
    assert _signed_by(package, key.public_key())
    (package / ATTESTATION).unlink()  # a package built before packages were signed
    assert not _signed_by(package, key.public_key())
    sign_package(package, key)
    assert _signed_by(package, key.public_key()) and not _signed_by(package, Ed25519PrivateKey.generate().public_key())
