"""Vetting what a replay wrote (server/reviewer/outputs.py), on a real file system: links, hard
links, fifos and linked folders are reported by name and never copied; plain files are copied."""

from __future__ import annotations

import os
from pathlib import Path

from amid.server.reviewer.outputs import vet_outputs


def _outputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    outputs, secret = tmp_path / "outputs", tmp_path / "private" / "label.nii.gz"
    (outputs / "sub").mkdir(parents=True)
    secret.parent.mkdir()
    secret.write_bytes(b"the holdout label")
    return outputs, secret, tmp_path / "vetted"


def test_plain_files_in_nested_folders_are_copied_and_nothing_is_reported(tmp_path: Path) -> None:
    outputs, _, vetted = _outputs(tmp_path)
    (outputs / "case1.nii.gz").write_bytes(b"one")
    (outputs / "sub" / "case2.nii.gz").write_bytes(b"two")
    assert vet_outputs(outputs, vetted) == []
    assert (vetted / "case1.nii.gz").read_bytes() == b"one" and (vetted / "sub/case2.nii.gz").read_bytes() == b"two"


def test_a_symlink_to_a_label_is_reported_by_name_and_not_followed(tmp_path: Path) -> None:
    outputs, secret, vetted = _outputs(tmp_path)
    (outputs / "case1.nii.gz").symlink_to(secret)
    (outputs / "dangling.nii.gz").symlink_to("/nonexistent/inside/the/sandbox")  # resolves only on the host
    unsafe = vet_outputs(outputs, vetted)
    assert unsafe == [
        {"file": "case1.nii.gz", "kind": "symbolic link"},
        {"file": "dangling.nii.gz", "kind": "symbolic link"},
    ]
    assert not (vetted / "case1.nii.gz").exists()


def test_a_hard_link_to_an_outside_file_is_reported(tmp_path: Path) -> None:
    outputs, secret, vetted = _outputs(tmp_path)
    os.link(secret, outputs / "case1.nii.gz")
    assert vet_outputs(outputs, vetted) == [{"file": "case1.nii.gz", "kind": "hard link (2 names for one file)"}]
    assert not (vetted / "case1.nii.gz").exists()


def test_a_fifo_and_a_linked_folder_are_reported_without_blocking(tmp_path: Path) -> None:
    outputs, secret, vetted = _outputs(tmp_path)
    os.mkfifo(outputs / "sub" / "case1.nii.gz")
    (outputs / "labels").symlink_to(secret.parent, target_is_directory=True)
    unsafe = vet_outputs(outputs, vetted)
    assert {"file": "sub/case1.nii.gz", "kind": "fifo"} in unsafe
    assert {"file": "labels", "kind": "symbolic link"} in unsafe and len(unsafe) == 2
    assert not (vetted / "labels").exists()
