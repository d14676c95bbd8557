"""`amid finalize` and `amid verify-package` (registered in server/cli.py COMMAND_MODULES)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from amid.server.cli_options import workspace_option

# Not 0: a script that trusts exit 0 must not pass a package anyone could have re-signed; not 1
# (a check failed) nor 2 (click's usage error).
UNAUTHENTICATED = 3


@click.command("finalize")
@workspace_option
@click.option("--attempt", "attempt_id", default=None, help="the attempt to package [the final choice, else the best]")
@click.option("--force", is_flag=True, help="replace a final choice or package of another attempt; rebuild")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def finalize_command(workspace: Path, attempt_id: str | None, force: bool, as_json: bool) -> None:
    """Record the final attempt (accepted, real, holdout-gated, on a promoted or challenger lane;
    default: the supervisor's choice, else the best verified primary metric) and build package/."""
    from amid.server.local_client import call
    from amid.server.package.signing import PUBLIC_FILE
    from amid.server.workspace import Workspace

    ws = Workspace.open(workspace)
    result = call(ws, "finalize", {"attempt_id": attempt_id, "force": force})
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    verb = "built" if result["built"] else "kept (already built)"
    click.echo(
        f"final attempt {result['attempt_id']} (choice {result['choice_id']}"
        f"{', replaced the earlier choice' if result['replaced'] else ''}); package {verb}: "
        f"{ws.root / result['path']}"
    )
    click.echo(f"{result['n_files']} files, {result['size_bytes']} bytes, manifest sha256 {result['manifest_sha256']}")
    key = result["key_fingerprint"]
    click.echo(
        f"signed with the run's Ed25519 key {key} (public key: {ws.control_dir / PUBLIC_FILE}); keep this "
        f"fingerprint to check the package anywhere: amid verify-package PKG --public-key {key}"
    )


@click.command("verify-package")
@click.argument("package_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "--workspace",
    "-w",
    type=click.Path(path_type=Path),
    default=None,
    help="the run's workspace: also check the ledger's record, the code, re-score, re-grade",
)
@click.option(
    "--public-key",
    "public_key",
    default=None,
    metavar="FILE|FINGERPRINT",
    help="the run's public key (PEM file) or the fingerprint amid finalize printed [with -w: the workspace's key]",
)
@click.option("--json", "as_json", is_flag=True, help="print the checks as JSON")
def verify_package_command(package_dir: Path, workspace: Path | None, public_key: str | None, as_json: bool) -> None:
    """Re-hash every file of a package against its manifest and its signed statement, check the
    signature with a trusted key and, with -w, against the ledger; re-score the predictions and re-run
    the task's grader. Exit 0: all passed and the signer is the trusted key; 1: a check failed (named);
    3: intact, but no trusted key was given, so who signed it is unknown (integrity only)."""
    from amid.server.package.verify import verify_package

    trusted = _trusted(public_key)
    ws, record = _workspace_and_record(workspace)
    report = verify_package(package_dir, ws, record, trusted)
    if as_json:
        click.echo(json.dumps({**report.model_dump(), "passed": report.passed}, indent=1))
    else:
        _print(report)
    if not report.passed:
        sys.exit(1)
    if not report.authenticated:
        sys.exit(UNAUTHENTICATED)


def _trusted(public_key: str | None) -> Any:
    if public_key is None:
        return None
    from amid.server.package.attestation import trusted_key

    try:
        return trusted_key(public_key)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--public-key") from None


def _workspace_and_record(workspace: Path | None) -> tuple[Any, Any]:
    if workspace is None:
        return None, None
    from amid.server.local_client import call
    from amid.server.workspace import Workspace

    ws = Workspace.open(workspace)
    return ws, lambda attempt_id: call(ws, "package_record", {"attempt_id": attempt_id})


def _print(report: Any) -> None:
    click.echo(f"{'check':<22} {'result':<8} detail")
    for check in report.checks:
        click.echo(f"{check.name:<22} {check.status:<8} {check.detail}")
    failed = [c for c in report.checks if c.status == "failed"]
    if failed:
        named = report.named_files()  # the changed file itself, when a file's bytes changed
        click.echo(f"package {report.package}: FAILED ({', '.join(c.name for c in failed)}); files: {', '.join(named)}")
    elif report.authenticated:
        click.echo(f"package {report.package} of {report.attempt_id}: all checks passed, signed by the trusted key")
    else:
        click.echo(
            f"package {report.package} of {report.attempt_id}: intact, but NOT authenticated: no trusted key "
            "(pass --public-key FILE|FINGERPRINT or -w WORKSPACE); exit 3"
        )
