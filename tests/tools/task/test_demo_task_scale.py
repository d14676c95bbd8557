"""make_demo_task(scale=k): the same patients on a grid k times finer (the large-volume task)."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from amid.server.errors import InvalidInput
from amid.tools.task.demo_task import make_demo_task

CASES = ("p000s0", "p003s1", "p007s0")


def label_mm3(task: Path, case_id: str) -> tuple[tuple[int, ...], tuple[float, ...], dict[int, float]]:
    image = nib.load(task / f"public/train/labels/{case_id}.nii.gz")
    array = np.asarray(image.dataobj)
    zooms = tuple(float(z) for z in image.header.get_zooms())
    voxel_mm3 = float(np.prod(zooms))
    return array.shape, zooms, {label: float((array == label).sum()) * voxel_mm3 for label in (1, 2)}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("scaled")
    return {k: make_demo_task(root / f"scale{k}", seed=7, scale=k) for k in (1, 2)}


def test_scale_2_keeps_the_anatomy_in_mm_on_a_grid_twice_as_fine(tasks: dict[int, Path]) -> None:
    for case_id in CASES:
        shape1, zooms1, mm3_1 = label_mm3(tasks[1], case_id)
        shape2, zooms2, mm3_2 = label_mm3(tasks[2], case_id)
        assert shape1 == (64, 64, 20) and shape2 == (128, 128, 40)
        assert zooms2 == pytest.approx([z / 2 for z in zooms1])
        assert mm3_2[1] == pytest.approx(mm3_1[1], rel=0.03)  # the organ: a large ellipsoid
        assert mm3_2[2] == pytest.approx(mm3_1[2], rel=0.10)  # lesions of a few voxels at scale 1
        image = nib.load(tasks[2] / f"public/train/images/{case_id}_0000.nii.gz")
        assert image.shape == shape2 and np.asarray(image.dataobj).dtype == np.int16
        assert np.allclose(np.diag(image.affine)[:3], [-0.4, -0.4, 2.0])  # LPS, as at scale 1


def test_scale_keeps_cases_tables_and_challenge_files(tasks: dict[int, Path]) -> None:
    for rel in ("public/train/patients.csv", "private/answers.csv", "config.yaml", "grade.py"):
        assert (tasks[2] / rel).read_bytes() == (tasks[1] / rel).read_bytes()
    names = {k: sorted(p.relative_to(t).as_posix() for p in t.rglob("*.nii.gz")) for k, t in tasks.items()}
    assert names[1] == names[2] and len(names[1]) == 52


def test_scale_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="scale"):
        make_demo_task(tmp_path / "task", scale=0)
