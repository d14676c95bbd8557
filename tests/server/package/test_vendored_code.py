"""code/ is the commit's tree plus, where the inference command runs an AMID scaffold, that scaffold's files:
verify-package excuses exactly the files the manifest lists as vendored, nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from amid.server.package.builder import vendored_record
from amid.server.package.workspace_checks import code_check
from amid.server.repo import detached_worktree, store_commit
from amid.server.workspace import Workspace
from amid.tools.scaffolds.nnunet_steps import commands
from amid.tools.scaffolds.vendoring import vendor

REPLAY = commands(sys.executable, "demo-liver-lesion-ct", "3d_fullres", 1, gpus_here=0)[-1].argv


def _package_with_vendored_code(workspace: Workspace, tmp_path: Path) -> tuple[Path, dict[str, object]]:
    commit = subprocess.run(
        ["git", "rev-parse", "main"], cwd=workspace.repo_dir, check=True, capture_output=True, text=True
    ).stdout.strip()
    store_commit(workspace.commit_store, workspace.repo_dir, commit)  # as submit_attempt keeps it
    package = tmp_path / "package"
    with detached_worktree(workspace.commit_store, commit) as tree:
        shutil.copytree(tree, package / "code", symlinks=True)
    written = vendor(REPLAY, package / "code")
    return package, {"commit": commit, **vendored_record(REPLAY, written)}


def test_code_holding_the_commit_and_the_listed_scaffold_files_passes(workspace: Workspace, tmp_path: Path) -> None:
    package, manifest = _package_with_vendored_code(workspace, tmp_path)
    vendored = manifest["vendored_scaffold"]
    assert isinstance(vendored, dict) and "code/amid/tools/scaffolds/nnunet.py" in vendored["files"]
    check = code_check(package, manifest, workspace)
    assert check.status == "passed", check.detail


def test_a_file_added_to_code_beside_the_scaffold_still_fails(workspace: Workspace, tmp_path: Path) -> None:
    package, manifest = _package_with_vendored_code(workspace, tmp_path)
    (package / "code/amid/tools/scaffolds/lookup.py").write_text("ANSWERS = {}\n", encoding="utf-8")
    check = code_check(package, manifest, workspace)
    assert check.status == "failed" and check.files == ["code/amid/tools/scaffolds/lookup.py"]


def test_a_manifest_without_the_vendored_list_excuses_nothing(workspace: Workspace, tmp_path: Path) -> None:
    package, manifest = _package_with_vendored_code(workspace, tmp_path)
    check = code_check(package, {"commit": manifest["commit"]}, workspace)
    assert check.status == "failed" and "code/amid/tools/scaffolds/nnunet.py" in check.files
