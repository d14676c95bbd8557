"""Generated tasks of every other type: 2-D RGB tissue, detection, classification, enhancement, instances."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from amid.tools.profiling import LabelsTable, ProfileCase, profile_dataset
from tests.tools.profiling.conftest import make_request
from tests.tools.profiling.factories import (
    make_classification,
    make_ct_segmentation,
    make_detection,
    make_enhancement,
    make_instances,
    make_tissue_segmentation,
)


def _values(profile_predicates: list) -> dict[str, bool]:
    return {p.name: p.value for p in profile_predicates}


def test_rgb_tissue_tiles_are_2d_stained_with_measured_class_balance(tmp_path: Path) -> None:
    cases = make_tissue_segmentation(tmp_path)
    labels = {0: "background", 1: "stroma", 2: "nucleus"}
    request = make_request("segmentation", cases, label_values=labels)
    profile = profile_dataset(request)
    values = _values(profile.predicates)
    assert values["dims_2d"] and values["rgb_stain"] and not values["tiles"] and not values["anisotropic"]
    masks = np.stack([np.asarray(Image.open(str(c.label_path))) for c in cases])
    shares = {c.value: c.voxel_share for c in profile.supervision.classes}
    assert shares == {v: pytest.approx(float(np.mean(masks == v))) for v in (0, 1, 2)}
    intensity = profile.representation.intensity
    assert intensity is not None and len(intensity.channels) == 3
    assert profile.representation.rgb_cases == 4
    assert profile.representation.spacing_unit == "pixel"


def test_detection_boxes_are_counted_and_sized_from_the_coco_file(tmp_path: Path) -> None:
    cases, boxes = make_detection(tmp_path)
    profile = profile_dataset(make_request("detection", cases, boxes_json=boxes))
    summary = profile.supervision.boxes
    assert summary is not None
    assert (summary.n_boxes, summary.images_matched, summary.categories) == (12, 4, {"nodule": 12})
    assert summary.boxes_per_image is not None and summary.boxes_per_image.median == 3
    assert summary.width_px is not None and summary.width_px.median == 8
    assert summary.small_fraction == 1.0 and summary.outside_image == 0
    values = _values(profile.predicates)
    assert values["boxes"] and values["small_structures"] and values["dims_2d"]
    assert [r.n_boxes for r in profile.cases] == [3, 3, 3, 3]


def test_classification_table_gives_class_counts_imbalance_and_fold_balance(tmp_path: Path) -> None:
    cases, table = make_classification(tmp_path, {"benign": 9, "malignant": 3})
    folds = {c.case_id: i % 3 for i, c in enumerate(cases)}
    request = make_request("classification", cases, labels_table=LabelsTable(path=table), folds=folds)
    profile = profile_dataset(request)
    assert profile.supervision.class_counts == {"benign": 9, "malignant": 3}
    assert profile.supervision.imbalance_ratio == pytest.approx(3.0)
    assert profile.evaluation.class_counts_per_fold["0"] == {"benign": 3, "malignant": 1}
    values = _values(profile.predicates)
    assert values["class_imbalance"] and values["few_cases"]
    assert profile.cases[-1].class_label == "malignant"
    assert profile.issues == []


def test_regression_targets_are_summarised_and_non_numbers_counted(tmp_path: Path) -> None:
    cases, table = make_classification(tmp_path, {"x": 4})
    Path(table).write_text("case_id,label\nimg_00,1.5\nimg_01,2.5\nimg_02,3.5\nimg_03,n/a\n", encoding="utf-8")
    profile = profile_dataset(make_request("regression", cases, labels_table=LabelsTable(path=table)))
    targets = profile.supervision.target_values
    assert targets is not None and (targets.min, targets.median, targets.max) == (1.5, 2.5, 3.5)
    assert profile.supervision.non_numeric_targets == 1


def test_paired_enhancement_reports_alignment_correlation_and_contrast_shift(tmp_path: Path) -> None:
    cases = make_enhancement(tmp_path)
    profile = profile_dataset(make_request("enhancement", cases))
    pairs = profile.supervision.pairs
    assert pairs is not None and (pairs.n_pairs, pairs.aligned) == (3, 3)
    assert pairs.correlation is not None and pairs.correlation.min > 0.9
    assert pairs.mean_shift is not None and abs(pairs.mean_shift.median) < 2.0
    assert pairs.std_ratio is not None and pairs.std_ratio.max < 1.0  # targets are less noisy
    assert _values(profile.predicates)["paired_enhancement"]


def test_instance_masks_count_objects_per_case(tmp_path: Path) -> None:
    cases = make_instances(tmp_path)
    profile = profile_dataset(make_request("instance_segmentation", cases))
    supervision = profile.supervision
    assert supervision.instances_per_case is not None and supervision.instances_per_case.median == 6
    assert supervision.instance_voxels is not None and supervision.instance_voxels.median == 25
    assert _values(profile.predicates)["instances"]
    assert [r.n_instances for r in profile.cases] == [6, 6, 6]


def test_two_channel_cases_are_multi_channel_and_a_missing_one_is_reported(tmp_path: Path) -> None:
    cases = make_ct_segmentation(tmp_path, n_cases=3)
    second = [c.image_paths[0].replace("_0000", "_0001") for c in cases]
    for source, target in zip(cases, second[:2], strict=False):
        Path(target).write_bytes(Path(source.image_paths[0]).read_bytes())
    two_channel = [
        c.model_copy(update={"image_paths": [c.image_paths[0], s]}) for c, s in zip(cases, second, strict=True)
    ]
    profile = profile_dataset(make_request("segmentation", two_channel))
    assert _values(profile.predicates)["multi_channel"]
    assert profile.supervision.expected_channels == 2
    assert profile.supervision.cases_missing_modalities == 1
    missing = profile.issues_with("missing_modality")
    assert [(i.case_id, Path(str(i.path)).name) for i in missing] == [("ct_002", "ct_002_0001.nii.gz")]
    intensity = profile.representation.intensity
    assert intensity is not None and len(intensity.channels) == 2


def test_unlabelled_test_cases_are_profiled_for_shift_but_not_for_foreground(tmp_path: Path) -> None:
    cases = make_ct_segmentation(tmp_path, n_cases=4)
    cases[3] = cases[3].model_copy(update={"split": "test", "label_path": None})
    profile = profile_dataset(make_request("segmentation", cases))
    assert set(profile.representation.intensity_by_split) == {"train", "test"}
    intensity = profile.representation.intensity
    assert intensity is not None and intensity.channels[0].n_cases == 3
    assert profile.evaluation.n_test_cases == 1
    assert profile.issues_with("missing_label") == []


def test_cases_named_in_extra_fields_give_case_labels_without_a_table(tmp_path: Path) -> None:
    cases, _ = make_classification(tmp_path, {"a": 2})
    labelled = [c.model_copy(update={"extra": {"label": "a"}}) for c in cases]
    labelled.append(ProfileCase(case_id="orphan", image_paths=cases[0].image_paths))
    profile = profile_dataset(make_request("classification", labelled))
    assert profile.supervision.class_counts == {"a": 2}
    assert [i.case_id for i in profile.issues_with("missing_label")] == ["orphan"]
