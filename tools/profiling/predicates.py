"""Planning predicates (docs/ARCHITECTURE.md §8): named facts about the data, each with the values that decided it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from amid.tools.profiling.evaluation import Evaluation
from amid.tools.profiling.inputs import ProfileRequest
from amid.tools.profiling.inventory import Inventory
from amid.tools.profiling.models import EvidenceValue, Predicate
from amid.tools.profiling.representation import Representation
from amid.tools.profiling.supervision import Supervision

# nnU-Net treats spacing more than 3x finer on other axes as anisotropic (its planner's factor).
ANISOTROPY_RATIO = 3.0
# Below 1 % foreground per case, uniform patch sampling mostly sees background; nnU-Net then relies
# on forced foreground oversampling, and losses need class weighting.
SPARSE_FOREGROUND_RATIO = 0.01
# A median structure under 0.1 % of the image volume is lost by downsampling stages / low-res cascades.
SMALL_STRUCTURE_FRACTION = 0.001
# When most boxes are COCO-"small" (< 32 x 32 px), detectors need high-resolution feature maps.
SMALL_BOX_MAJORITY = 0.5
# 2-D images with a side of 2048 px or more do not fit a network whole and are processed as tiles.
TILE_SIDE_PX = 2048
# Most cases RGB, and channel means differ by more than 2 grey levels (grey saved as RGB does not).
RGB_MAJORITY = 0.5
COLOUR_SPREAD = 2.0
# A dataset is paired when nearly every input has an aligned target.
PAIRED_MAJORITY = 0.9
# Voxel share of the largest over the smallest foreground class; case counts for class tables.
SEGMENTATION_IMBALANCE = 10.0
CLASS_IMBALANCE = 3.0
# Fewer labelled training cases than this leaves under 10 per fold in 5-fold cross-validation.
FEW_CASES = 50
# 16.7 M voxels (256^3, 4096^2): nnU-Net adds a low-resolution cascade, 2-D needs tiling.
LARGE_IMAGE_VOXELS = 16_777_216
# Five or more objects per case makes counting, separating and matching objects part of the task.
MANY_OBJECTS = 5


@dataclass(frozen=True)
class Sections:
    request: ProfileRequest
    inventory: Inventory
    representation: Representation
    supervision: Supervision
    evaluation: Evaluation


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def _predicate(name: str, value: bool, **evidence: EvidenceValue | None) -> Predicate:
    kept = {k: _round(v) if isinstance(v, float) else v for k, v in evidence.items() if v is not None}
    return Predicate(name=name, value=bool(value), evidence=kept)


def _dims(s: Sections) -> int:
    counts = s.representation.spatial_dims
    return int(max(counts, key=lambda k: counts[k])) if counts else 0


def dims_2d(s: Sections) -> Predicate:
    return _predicate("dims_2d", _dims(s) == 2, spatial_dims=str(s.representation.spatial_dims))


def dims_3d(s: Sections) -> Predicate:
    return _predicate("dims_3d", _dims(s) == 3, spatial_dims=str(s.representation.spatial_dims))


def anisotropic(s: Sections) -> Predicate:
    spacing = s.representation.median_spacing
    ratio = max(spacing) / min(spacing) if spacing and min(spacing) > 0 else 1.0
    return _predicate(
        "anisotropic",
        _dims(s) == 3 and ratio > ANISOTROPY_RATIO,
        median_spacing=str([_round(v) for v in spacing]),
        spacing_ratio=ratio,
        threshold=ANISOTROPY_RATIO,
    )


def sparse_foreground(s: Sections) -> Predicate:
    ratio = s.supervision.foreground_ratio
    median = ratio.median if ratio else None
    return _predicate(
        "sparse_foreground",
        median is not None and median < SPARSE_FOREGROUND_RATIO,
        median_foreground_ratio=median,
        threshold=SPARSE_FOREGROUND_RATIO,
    )


def small_structures(s: Sections) -> Predicate:
    boxes = s.supervision.boxes
    if boxes is not None and boxes.n_boxes:
        return _predicate(
            "small_structures",
            boxes.small_fraction >= SMALL_BOX_MAJORITY,
            small_box_fraction=boxes.small_fraction,
            threshold=SMALL_BOX_MAJORITY,
        )
    sizes = [c.component_voxels.median for c in s.supervision.classes if c.value != 0 and c.component_voxels]
    sizes += [s.supervision.instance_voxels.median] if s.supervision.instance_voxels else []
    case_voxels = s.representation.voxels_per_case.median if s.representation.voxels_per_case else None
    fraction = min(sizes) / case_voxels if sizes and case_voxels else None
    return _predicate(
        "small_structures",
        fraction is not None and fraction < SMALL_STRUCTURE_FRACTION,
        smallest_median_structure_voxels=min(sizes) if sizes else None,
        median_case_voxels=case_voxels,
        fraction=fraction,
        threshold=SMALL_STRUCTURE_FRACTION,
    )


def tiles(s: Sections) -> Predicate:
    shape = s.representation.shape
    longest = max((axis.median for axis in shape if axis), default=0.0)
    big = _dims(s) == 2 and longest >= TILE_SIDE_PX
    return _predicate(
        "tiles",
        big or s.representation.tiled_cases > 0,
        median_longest_side=longest,
        tiled_or_pyramidal_cases=s.representation.tiled_cases,
        threshold_px=TILE_SIDE_PX,
    )


def rgb_stain(s: Sections) -> Predicate:
    headers = sum(s.representation.spatial_dims.values())
    share = s.representation.rgb_cases / headers if headers else 0.0
    intensity = s.representation.intensity
    means = [c.mean for c in intensity.channels] if intensity else []
    spread = max(means) - min(means) if len(means) >= 3 else 0.0
    return _predicate(
        "rgb_stain",
        share > RGB_MAJORITY and spread > COLOUR_SPREAD,
        rgb_case_fraction=share,
        channel_mean_spread=spread,
    )


def paired_enhancement(s: Sections) -> Predicate:
    pairs = s.supervision.pairs
    share = pairs.aligned / pairs.n_pairs if pairs and pairs.n_pairs else 0.0
    correlation = pairs.correlation.median if pairs and pairs.correlation else None
    return _predicate(
        "paired_enhancement",
        s.request.task_type == "enhancement" and share >= PAIRED_MAJORITY,
        aligned_pair_fraction=share,
        median_correlation=correlation,
    )


def boxes(s: Sections) -> Predicate:
    summary = s.supervision.boxes
    per_image = summary.boxes_per_image.median if summary and summary.boxes_per_image else None
    # A detection task whose boxes are in a format the profile does not read (3-D box text, point
    # lists) still asks for detectors; the evidence says the boxes were not measured.
    unmeasured = summary is None and s.request.task_type == "detection"
    return _predicate(
        "boxes",
        (summary is not None and summary.n_boxes > 0) or unmeasured,
        n_boxes=summary.n_boxes if summary else None,
        median_boxes_per_image=per_image,
        source="task type detection; boxes not in a COCO file the profile reads" if unmeasured else None,
    )


def class_imbalance(s: Sections) -> Predicate:
    ratio = s.supervision.imbalance_ratio
    threshold = CLASS_IMBALANCE if s.supervision.class_counts else SEGMENTATION_IMBALANCE
    return _predicate(
        "class_imbalance",
        ratio is not None and ratio >= threshold,
        largest_to_smallest_class=ratio,
        threshold=threshold,
        class_counts=str(s.supervision.class_counts) if s.supervision.class_counts else None,
    )


def few_cases(s: Sections) -> Predicate:
    labelled = s.supervision.labelled_train_cases
    return _predicate("few_cases", labelled < FEW_CASES, labelled_train_cases=labelled, threshold=FEW_CASES)


def group_leak_risk(s: Sections) -> Predicate:
    """Any patient (site) with several cases: a split by case, such as nnU-Net's own 5 folds, would leak.

    Locked folds grouped by patient remove the leak from the locked validation, not the risk for
    methods that split by themselves; actual leaks are issues (group_split_across_folds, duplicates).
    """
    e = s.evaluation
    cross = len(e.duplicates_across_splits) + len(e.near_duplicates_across_splits)
    shared = e.n_groups_split_across_folds + e.n_groups_in_train_and_test
    return _predicate(
        "group_leak_risk",
        e.groups_with_several_cases > 0 or shared > 0 or cross > 0,
        groups_split_across_folds=e.n_groups_split_across_folds,
        groups_in_train_and_test=e.n_groups_in_train_and_test,
        duplicate_sets_across_splits=cross,
        groups_with_several_cases=e.groups_with_several_cases,
        folds_given=str(bool(s.request.folds)),
    )


def multi_channel(s: Sections) -> Predicate:
    files = s.supervision.expected_channels
    counts = s.representation.channels_per_case  # the usual count: one 4-D outlier must not decide
    channels = min((int(k) for k in counts), key=lambda k: (-counts[str(k)], k), default=1)
    non_rgb = channels if s.representation.rgb_cases == 0 else files
    return _predicate("multi_channel", max(files, non_rgb) > 1, files_per_case=files, channels_per_case=channels)


def large_images(s: Sections) -> Predicate:
    voxels = s.representation.voxels_per_case.median if s.representation.voxels_per_case else 0.0
    return _predicate(
        "large_images",
        voxels >= LARGE_IMAGE_VOXELS,
        median_voxels_per_case=voxels,
        threshold=LARGE_IMAGE_VOXELS,
    )


def instances(s: Sections) -> Predicate:
    sup = s.supervision
    per_case = sup.instances_per_case.median if sup.instances_per_case else None
    components = max((c.components_per_case.median for c in sup.classes if c.components_per_case), default=None)
    boxes_per_image = sup.boxes.boxes_per_image.median if sup.boxes and sup.boxes.boxes_per_image else None
    objects = max((v for v in (per_case, components, boxes_per_image) if v is not None), default=0.0)
    return _predicate(
        "instances",
        s.request.task_type == "instance_segmentation" or objects >= MANY_OBJECTS,
        median_objects_per_case=objects,
        threshold=MANY_OBJECTS,
    )


RULES: list[Callable[[Sections], Predicate]] = [
    dims_2d,
    dims_3d,
    anisotropic,
    sparse_foreground,
    small_structures,
    tiles,
    rgb_stain,
    paired_enhancement,
    boxes,
    class_imbalance,
    few_cases,
    group_leak_risk,
    multi_channel,
    large_images,
    instances,
]


def build_predicates(sections: Sections) -> list[Predicate]:
    return [rule(sections) for rule in RULES]
