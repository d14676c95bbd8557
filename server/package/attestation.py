"""`verify-package`'s signature checks: the attestation verifies with a key the verifier trusts, and
every file of the package is the one the signed statement names.

The trusted key is the workspace's (`-w`), or the `--public-key` given: a PEM file or the fingerprint
`amid finalize` printed. Without one the signature is checked with the key the package carries,
which shows the files were not changed after *someone* signed them (integrity), not that the run's
server did (authenticity): the report says so and `authenticated` stays False.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from amid.server.package.checks import PackageCheck, failed, passed, same_numbers
from amid.server.package.layout import ATTESTATION, MANIFEST, PACKAGE_KEY, UNLISTED, cached_entry, tree_files
from amid.server.package.signing import (
    PAYLOAD_TYPE,
    PREDICATE_KEYS,
    PUBLIC_FILE,
    STATEMENT_TYPE,
    fingerprint,
    load_public,
    pae,
)

FINGERPRINT = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


@dataclass(frozen=True)
class TrustedKey:
    fingerprint: str  # sha256:<hex>
    source: str  # where the verifier got it, for the report
    public: Ed25519PublicKey | None = None  # None: only the fingerprint is known


def trusted_key(value: str) -> TrustedKey:
    """`--public-key`: a PEM file, or a fingerprint (`sha256:` and 64 hex digits); ValueError otherwise."""
    path = Path(value).expanduser()
    if path.is_file():
        public = load_public(path.read_bytes(), f"--public-key {value}")
        return TrustedKey(fingerprint(public), f"--public-key {value}", public)
    match = FINGERPRINT.fullmatch(value.strip().lower())
    if match is None:
        raise ValueError(
            f"--public-key: {value!r} is neither a file nor a fingerprint (sha256:<64 hex digits>, "
            "as `amid finalize` prints it)"
        )
    return TrustedKey("sha256:" + match.group(1), "--public-key fingerprint")


def workspace_key(control_dir: Path) -> TrustedKey | None:
    path = control_dir / PUBLIC_FILE
    if not path.is_file():
        return None
    public = load_public(path.read_bytes(), str(path))
    return TrustedKey(fingerprint(public), f"the workspace ({path})", public)


@dataclass(frozen=True)
class SignatureResult:
    check: PackageCheck
    statement: dict[str, Any] | None  # the signed statement, when the signature verified
    authenticated: bool  # verified with a trusted key


def signature_check(package_dir: Path, trusted: TrustedKey | None) -> SignatureResult:
    try:
        payload, signature = _envelope(package_dir / ATTESTATION)
        carried = load_public((package_dir / PACKAGE_KEY).read_bytes(), PACKAGE_KEY)
    except (OSError, ValueError) as exc:
        return SignatureResult(
            failed("signature", f"no usable signature: {exc}", [ATTESTATION, PACKAGE_KEY]), None, False
        )
    if trusted is not None and fingerprint(carried) != trusted.fingerprint:
        detail = (
            f"{PACKAGE_KEY} is key {fingerprint(carried)}, not the trusted key {trusted.fingerprint} "
            f"from {trusted.source}: the package was signed (or its key swapped) by someone else"
        )
        return SignatureResult(failed("signature", detail, [PACKAGE_KEY, ATTESTATION]), None, False)
    key = trusted.public if trusted is not None and trusted.public is not None else carried
    try:
        key.verify(signature, pae(PAYLOAD_TYPE, payload))
    except InvalidSignature:
        whose = f"the trusted key {trusted.fingerprint}" if trusted else f"the package's own key {fingerprint(key)}"
        detail = f"{ATTESTATION} does not verify with {whose}: the statement or its signature was changed"
        return SignatureResult(failed("signature", detail, [ATTESTATION]), None, False)
    statement = json.loads(payload)
    if trusted is None:
        detail = (
            f"signed by {fingerprint(key)}, the key the package itself carries: integrity only, NOT "
            "authenticity (anyone can re-sign a package); pass --public-key FILE|FINGERPRINT "
            "(amid finalize printed it) or -w WORKSPACE"
        )
        return SignatureResult(passed("signature", detail), statement, False)
    return SignatureResult(
        passed("signature", f"signed by the trusted key {trusted.fingerprint} ({trusted.source})"), statement, True
    )


def _envelope(path: Path) -> tuple[bytes, bytes]:
    try:
        envelope = json.loads(path.read_text(encoding="utf-8"))
        if envelope.get("payloadType") != PAYLOAD_TYPE or len(envelope.get("signatures") or []) != 1:
            raise ValueError(f"{ATTESTATION} is not one DSSE envelope of {PAYLOAD_TYPE} with one signature")
        payload = base64.b64decode(envelope["payload"], validate=True)
        return payload, base64.b64decode(envelope["signatures"][0]["sig"], validate=True)
    except (KeyError, TypeError, AttributeError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"{ATTESTATION} is malformed ({type(exc).__name__})") from None


def statement_check(
    package_dir: Path, statement: dict[str, Any], hashes: dict[str, dict[str, Any]] | None = None
) -> PackageCheck:
    """Every file is the one the signed statement names, none is added, and its predicate is the manifest's."""
    if statement.get("_type") != STATEMENT_TYPE or not isinstance(statement.get("subject"), list):
        return failed(
            "signed files", f"the signed payload is not an in-toto Statement ({STATEMENT_TYPE})", [ATTESTATION]
        )
    signed = {str(s.get("name")): (s.get("digest") or {}).get("sha256") for s in statement["subject"]}
    if outside := sorted(rel for rel in signed if not _inside(rel)):
        return failed("signed files", f"the statement names files outside the package: {outside[:5]}", [ATTESTATION])
    present = [rel for rel in tree_files(package_dir) if rel not in UNLISTED or rel == MANIFEST]
    wrong = sorted(
        rel
        for rel in signed
        if not _exists(package_dir / rel) or cached_entry(package_dir, rel, hashes)["sha256"] != signed[rel]
    )
    wrong += sorted(rel for rel in present if rel not in signed)
    wrong += _predicate_disagrees(package_dir, statement.get("predicate") or {}) if not wrong else []
    if wrong:
        return failed("signed files", f"differ from the signed statement: {', '.join(wrong[:20])}", wrong)
    return passed("signed files", f"{len(signed)} files match the sha256 the signed statement names")


def _predicate_disagrees(package_dir: Path, predicate: dict[str, Any]) -> list[str]:
    manifest = json.loads((package_dir / MANIFEST).read_text(encoding="utf-8"))
    scores = json.loads((package_dir / "scores.json").read_text(encoding="utf-8"))
    wrong = [f"{MANIFEST} ({key})" for key in PREDICATE_KEYS if predicate.get(key) != manifest.get(key)]
    folds, signed_folds = scores.get("folds") or {}, predicate.get("fold_scores") or {}
    if set(folds) != set(signed_folds) or any(not same_numbers(folds[f], signed_folds[f]) for f in folds):
        wrong.append("scores.json (folds)")
    return wrong


def _exists(path: Path) -> bool:
    return path.is_file() or path.is_symlink()


def _inside(rel: str) -> bool:
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts
