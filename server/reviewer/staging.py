"""The replay's {input_dir}: copies of the input images of the replayed cases, each under a name
that says whose it is.

A case's image keeps its own name where that name holds the case id and differs from the case's
other images (`CASE_0000.nii.gz`, `topcow_ct_CASE_0000.nii.gz`, a series folder `imagesTr/CASE/`
or `imagesTr/CASE_0000/`): NIfTI, PNG and folder-layout tasks see their task's own names. Otherwise
(a template that names the case in a folder, `train/{case}/FLAIR`, gives every case an image called
`FLAIR`) the name is derived from the case id: `CASE` plus the file's ending for one image per case,
`CASE_0000`, `CASE_0001`… per channel. A series folder is copied whole, regular files only: a link
in it is not followed (it could point anywhere the server can read) and is left out, as is anything
that is not a plain file.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

ENDING = re.compile(r"\.[A-Za-z0-9]+(?:\.gz)?$")  # `.nii.gz`, `.png`, `.dcm`; a series folder has none
NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
MAX_DEPTH = 16


class StagingError(Exception):
    """The inputs cannot be laid out for a replay (two images would get one name, a linked folder)."""


def input_names(case_id: str, images: Sequence[Path]) -> list[str]:
    """The names `images` (one per channel) get in {input_dir} for the case `case_id`."""
    names = [image.name for image in images]
    if all(case_id in name for name in names) and len(set(names)) == len(names):
        return names
    endings = ["" if image.is_dir() else _ending(image.name) for image in images]
    if len(images) == 1:
        return [f"{case_id}{endings[0]}"]
    return [f"{case_id}_{channel:04d}{ending}" for channel, ending in enumerate(endings)]


def _ending(name: str) -> str:
    match = ENDING.search(name)
    return match.group(0) if match else ""


def stage_case(case_id: str, images: Sequence[Path], inputs: Path) -> None:
    """Copy one case's images into `inputs` under `input_names`; StagingError on a name taken."""
    for image, name in zip(images, input_names(case_id, images), strict=True):
        target = inputs / name
        if os.path.lexists(target):
            raise StagingError(f"case {case_id!r}: input {name!r} is already taken by another case's image")
        if image.is_dir():
            if image.is_symlink():  # a linked folder could lead anywhere the server reads
                raise StagingError(f"case {case_id!r}: series folder {image.name!r} is a symbolic link")
            copy_series(image, target)
        else:
            shutil.copyfile(image, target)


def copy_series(folder: Path, target: Path) -> None:
    """Copy the regular files of `folder` (and its subfolders) to `target`, following no link."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _copy_tree(fd, target, 0)
    finally:
        os.close(fd)


def _copy_tree(dir_fd: int, target: Path, depth: int) -> None:
    target.mkdir()
    for name in sorted(os.listdir(dir_fd)):
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode) and depth < MAX_DEPTH:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                _copy_tree(fd, target / name, depth + 1)
            finally:
                os.close(fd)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(dir_fd, name, target / name)


def _copy_file(dir_fd: int, name: str, target: Path) -> None:
    """Opened without following a link and checked again on the descriptor (it may have been swapped)."""
    try:
        fd = os.open(name, NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return  # became a link or vanished since the listing: not a file of the series
    with os.fdopen(fd, "rb") as source:
        if stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            with open(target, "wb") as copy:
                shutil.copyfileobj(source, copy)
