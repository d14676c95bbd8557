"""A generated 3-D CT segmentation task: geometry, class balance, intensities, predicates, parallel runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from amid.tools.profiling import ProfileCase, profile_dataset
from tests.tools.profiling.conftest import SAMPLES, ct_request
from tests.tools.profiling.factories import CT_SHAPE, load_voxels

FLOAT32_08 = float(np.float32(0.8))
CASE_VOXELS = int(np.prod(CT_SHAPE))


def _foreground_values(cases: list[ProfileCase]) -> list[np.ndarray]:
    values = []
    for case in cases:
        image = load_voxels(case.image_paths[0])
        label = load_voxels(str(case.label_path))
        values.append(image[label > 0].astype(np.float64))
    return values


def test_ct_profile_reports_anisotropic_ras_geometry_from_headers(ct_cases: list[ProfileCase]) -> None:
    profile = profile_dataset(ct_request(ct_cases))
    representation = profile.representation
    assert representation.median_spacing == [FLOAT32_08, FLOAT32_08, 4.0]
    assert representation.orientations == {"RAS": 6}
    assert representation.dtypes == {"int16": 6}
    assert [axis.median for axis in representation.shape if axis] == [24, 24, 8]
    assert representation.anisotropy is not None and representation.anisotropy.median == pytest.approx(5.0)
    assert profile.inventory.n_cases == {"train": 6}
    assert profile.inventory.image_file_types == {"nifti": 6}
    assert profile.inventory.id_patterns == {"ct_{3}": 6}
    assert profile.inventory.strata == {"site": {"site_0": 3, "site_1": 3}}
    assert profile.issues == []


def test_ct_profile_measures_class_balance_and_components(ct_cases: list[ProfileCase]) -> None:
    supervision = profile_dataset(ct_request(ct_cases)).supervision
    background, lesion = supervision.classes
    assert (lesion.value, lesion.name, lesion.cases_present) == (1, "lesion", 6)
    assert lesion.voxel_share == pytest.approx(18 / CASE_VOXELS)
    assert lesion.foreground_share == pytest.approx(1.0)
    assert background.voxel_share == pytest.approx(1 - 18 / CASE_VOXELS)
    assert lesion.components_per_case is not None and lesion.components_per_case.max == 1
    assert lesion.component_voxels is not None and lesion.component_voxels.median == 18
    assert lesion.component_mm3 is not None
    assert lesion.component_mm3.median == pytest.approx(18 * FLOAT32_08**2 * 4.0)
    assert supervision.foreground_ratio is not None
    assert supervision.foreground_ratio.median == pytest.approx(18 / CASE_VOXELS)
    assert supervision.unexpected_label_values == []


def test_foreground_intensities_match_exact_equal_weight_statistics(ct_cases: list[ProfileCase]) -> None:
    channel = profile_dataset(ct_request(ct_cases)).representation.intensity
    assert channel is not None and channel.region.startswith("foreground")
    stats = channel.channels[0]
    values = _foreground_values(ct_cases)
    pooled = np.concatenate(values)  # equal voxel counts per case: pooling is equal weighting
    assert stats.mean == pytest.approx(pooled.mean(), rel=1e-9)
    assert stats.std == pytest.approx(pooled.std(), rel=1e-9)
    assert (stats.min, stats.max) == (pooled.min(), pooled.max())
    assert stats.median == pytest.approx(np.median(pooled), abs=1.0)
    assert stats.n_cases == 6
    assert stats.n_samples == 6 * (SAMPLES // 6)


def test_ct_predicates_carry_the_values_that_set_them(ct_cases: list[ProfileCase]) -> None:
    profile = profile_dataset(ct_request(ct_cases))
    values = {p.name: p.value for p in profile.predicates}
    assert values["dims_3d"] and not values["dims_2d"]
    assert values["anisotropic"] and values["sparse_foreground"] and values["few_cases"]
    assert not values["rgb_stain"] and not values["boxes"] and not values["multi_channel"]
    assert profile.predicate("anisotropic").evidence["spacing_ratio"] == pytest.approx(5.0)
    assert profile.predicate("sparse_foreground").evidence["median_foreground_ratio"] == pytest.approx(
        18 / CASE_VOXELS, rel=1e-5
    )
    assert profile.predicate("few_cases").evidence["labelled_train_cases"] == 6
    assert values["group_leak_risk"]  # two cases per patient and no locked folds yet
    assert profile.predicate("group_leak_risk").evidence["groups_with_several_cases"] == 3


def test_parallel_profile_equals_the_in_process_one_and_reports_progress(ct_cases: list[ProfileCase]) -> None:
    seen: list[tuple[int, int]] = []
    parallel = profile_dataset(ct_request(ct_cases, n_workers=2), progress=lambda d, t, _: seen.append((d, t)))
    serial = profile_dataset(ct_request(ct_cases, n_workers=1))
    assert parallel.n_workers == 2
    ignore: Any = {"seconds": True, "n_workers": True, "cases": {"__all__": {"seconds"}}}
    assert parallel.model_dump(exclude=ignore) == serial.model_dump(exclude=ignore)
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert [done for done, _ in seen] == list(range(7))


def test_case_records_hold_per_case_geometry_and_foreground(ct_cases: list[ProfileCase]) -> None:
    records = profile_dataset(ct_request(ct_cases)).cases
    assert [r.case_id for r in records] == [c.case_id for c in ct_cases]
    first = records[0]
    assert (first.shape, first.orientation, first.dtype, first.file_type) == ([24, 24, 8], "RAS", "int16", "nifti")
    assert first.foreground_ratio == pytest.approx(18 / CASE_VOXELS)
    assert first.n_components == 1 and first.has_label and first.group == "patient_0"
    assert first.content_hash is not None and len(first.content_hash) == 64
