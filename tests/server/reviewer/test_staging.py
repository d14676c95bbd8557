"""The replay's {input_dir} (server/reviewer/staging.py): each case's images under a name that says
whose they are, series folders copied whole with regular files only, and nothing in them followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from amid.server.reviewer.staging import StagingError, input_names, stage_case
from tests.tools.profiling.real_files import REGULAR_CT, copy_slices, series_files


def _file(path: Path, data: bytes = b"image") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_files_named_by_their_case_keep_the_task_s_own_names(tmp_path: Path) -> None:
    images = [_file(tmp_path / "imagesTr/c1_0000.nii.gz"), _file(tmp_path / "imagesTr/c1_0001.nii.gz")]
    assert input_names("c1", images) == ["c1_0000.nii.gz", "c1_0001.nii.gz"]
    assert input_names("002", [_file(tmp_path / "topcow_ct_002_0000.nii.gz")]) == ["topcow_ct_002_0000.nii.gz"]
    assert input_names("case_a", [copy_slices(series_files(REGULAR_CT), tmp_path / "imagesTr/case_a")]) == ["case_a"]


def test_series_named_by_their_sequence_are_named_by_the_case_one_per_channel(tmp_path: Path) -> None:
    flair, t1w = (copy_slices(series_files(REGULAR_CT), tmp_path / f"train/00000/{s}") for s in ("FLAIR", "T1w"))
    assert input_names("00000", [flair]) == ["00000"]
    assert input_names("00000", [flair, t1w]) == ["00000_0000", "00000_0001"]
    image = _file(tmp_path / "train/00000/image.png")
    assert input_names("00000", [image]) == ["00000.png"]


def test_channels_that_share_a_name_get_one_name_each(tmp_path: Path) -> None:
    """`t1/{case}.nii.gz` and `t2/{case}.nii.gz`: both are `c1.nii.gz`, the second would overwrite the first."""
    images = [_file(tmp_path / "t1/c1.nii.gz", b"t1"), _file(tmp_path / "t2/c1.nii.gz", b"t2")]
    (tmp_path / "inputs").mkdir()
    stage_case("c1", images, tmp_path / "inputs")
    assert (tmp_path / "inputs/c1_0000.nii.gz").read_bytes() == b"t1"
    assert (tmp_path / "inputs/c1_0001.nii.gz").read_bytes() == b"t2"


def test_a_series_folder_is_copied_whole_and_byte_for_byte(tmp_path: Path) -> None:
    for case in ("00000", "00002"):
        copy_slices(series_files(REGULAR_CT), tmp_path / f"train/{case}/FLAIR", prefix="Image-")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for case in ("00000", "00002"):
        stage_case(case, [tmp_path / f"train/{case}/FLAIR"], inputs)
    assert sorted(p.name for p in inputs.iterdir()) == ["00000", "00002"]  # not one `FLAIR` for both
    source = sorted((tmp_path / "train/00000/FLAIR").iterdir())
    copied = sorted((inputs / "00000").iterdir())
    assert [p.name for p in copied] == [p.name for p in source] and len(copied) == 5
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(source, copied, strict=True))


def test_links_and_special_files_in_a_series_folder_are_not_followed_or_copied(tmp_path: Path) -> None:
    """A series folder holding a link to a label file, a linked subfolder and a fifo: the replay gets
    the slices, none of the linked bytes, and no fifo to block on."""
    label = _file(tmp_path / "labels/secret.csv", b"case,label\n00000,1\n")
    series = copy_slices(series_files(REGULAR_CT), tmp_path / "train/00000/FLAIR")
    (series / "label.dcm").symlink_to(label)
    (series / "labels").symlink_to(label.parent, target_is_directory=True)
    os.mkfifo(series / "pipe.dcm")
    _file(series / "nested/extra.dcm", b"nested slice")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    stage_case("00000", [series], inputs)
    names = sorted(str(p.relative_to(inputs / "00000")) for p in (inputs / "00000").rglob("*"))
    assert names == ["000.dcm", "001.dcm", "002.dcm", "003.dcm", "004.dcm", "nested", "nested/extra.dcm"]
    assert not any(p.is_symlink() for p in (inputs / "00000").rglob("*"))


def test_a_linked_series_folder_or_a_taken_name_fails_the_staging(tmp_path: Path) -> None:
    series = copy_slices(series_files(REGULAR_CT), tmp_path / "train/real")
    (tmp_path / "train/c1").symlink_to(series, target_is_directory=True)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    with pytest.raises(StagingError, match=r"'c1'.*symbolic link"):
        stage_case("c1", [tmp_path / "train/c1"], inputs)
    stage_case("c1", [_file(tmp_path / "a/c1_x.png")], inputs)
    with pytest.raises(StagingError, match=r"'c1_x\.png' is already taken"):
        stage_case("c1_x", [_file(tmp_path / "b/c1_x.png")], inputs)
    stage_case("c2", [series], inputs)  # an honest series beside them is staged
    assert len(list((inputs / "c2").iterdir())) == 5
