"""The package's signature: an in-toto Statement about its files, in a DSSE envelope signed with the
run's Ed25519 key, so a package can be authenticated offline, away from the workspace.

The run's key is made at the first build and kept where only the server reads it: the private key
in `.amid/package-signing.key` (mode 0600; `.amid/` is hidden from every worker's sandbox), the
public key beside it in `.amid/package-signing.pub`. Each package carries a copy of the public key
(`signing-key.pub`), which proves nothing by itself: whoever rewrites a package can re-sign it with
a key of their own and put that one there. Authenticity comes from a key the verifier already
trusts: the workspace's, or the fingerprint `amid finalize` printed (`sha256:<hex of the raw key>`).

    attestation.intoto.json   {payloadType, payload: base64(Statement), signatures: [{keyid, sig}]}
    Statement                 subject: manifest.json and every file it lists, with sha256;
                              predicate: task, contract hash, attempt, commit, lane, agent, review,
                              verdict, verified scores per fold and their means, holdout, artifacts
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from amid.server.errors import Conflict
from amid.server.package.layout import ATTESTATION, MANIFEST, PACKAGE_KEY

KEY_FILE = "package-signing.key"
PUBLIC_FILE = "package-signing.pub"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://amid.dev/package-evidence/v1"
PREDICATE_KEYS = (
    "task_id",
    "contract_hash",
    "attempt_id",
    "commit",
    "lane_id",
    "agent_id",
    "review_id",
    "verdict",
    "budget_class",
    "primary_metric",
    "direction",
    "verified_primary_score",
    "built_at",
)


def fingerprint(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def public_pem(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_public(data: bytes, where: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM; ValueError naming `where` otherwise."""
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where} is not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{where} holds a {type(key).__name__}, not an Ed25519 public key")
    return key


def run_key(control_dir: Path) -> Ed25519PrivateKey:
    """The run's signing key, made on first use (0600, created whole or not at all)."""
    path = control_dir / KEY_FILE
    if not path.exists():
        control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _create(path, Ed25519PrivateKey.generate())
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise Conflict(
            f"signing key: {path} has mode {mode:o}, readable by others; `chmod 600 {path}` "
            "(or delete it to make a new key, and rebuild with amid finalize --force)",
            field="signing_key",
        )
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise Conflict(f"signing key: {path} is not an Ed25519 private key", field="signing_key")
    public = control_dir / PUBLIC_FILE
    if not public.is_file() or public.read_bytes() != public_pem(key.public_key()):
        public.write_bytes(public_pem(key.public_key()))  # the private key is the source of truth
    return key


def _create(path: Path, key: Ed25519PrivateKey) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    handle, tmp = tempfile.mkstemp(prefix=".key-", dir=path.parent)  # mkstemp files are 0600
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(pem)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another build made the key first: that one is kept
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what is signed (type and payload, length-prefixed)."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def statement(package_dir: Path) -> dict[str, Any]:
    """The Statement of a built package, read from its manifest.json and scores.json."""
    manifest_bytes = (package_dir / MANIFEST).read_bytes()
    manifest = json.loads(manifest_bytes)
    scores = json.loads((package_dir / "scores.json").read_text(encoding="utf-8"))
    subject = [{"name": MANIFEST, "digest": {"sha256": hashlib.sha256(manifest_bytes).hexdigest()}}]
    subject += [{"name": f["path"], "digest": {"sha256": f["sha256"]}} for f in manifest["files"]]
    predicate = {key: manifest.get(key) for key in PREDICATE_KEYS}
    predicate |= {
        "verified_metrics": manifest.get("verified_metrics"),
        "fold_scores": scores.get("folds"),
        "holdout": (scores.get("holdout") or {}).get("metrics"),
        "artifacts": [{k: a.get(k) for k in ("role", "fold", "path", "sha256")} for a in manifest["artifacts"]],
    }
    return {"_type": STATEMENT_TYPE, "subject": subject, "predicateType": PREDICATE_TYPE, "predicate": predicate}


def sign_package(package_dir: Path, key: Ed25519PrivateKey) -> str:
    """Write the package's attestation and a copy of the public key; returns the key's fingerprint."""
    payload = json.dumps(statement(package_dir), sort_keys=True, separators=(",", ":")).encode()
    public = key.public_key()
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [
            {"keyid": fingerprint(public), "sig": base64.b64encode(key.sign(pae(PAYLOAD_TYPE, payload))).decode()}
        ],
    }
    _replace(package_dir / ATTESTATION, (json.dumps(envelope, indent=1) + "\n").encode())
    _replace(package_dir / PACKAGE_KEY, public_pem(public))
    return fingerprint(public)


def _replace(target: Path, data: bytes) -> None:
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
