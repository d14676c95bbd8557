"""AMID's metrics library: pure functions on arrays, conventions explicit, no server imports.

Every function takes (prediction, reference, ...) in that order. Conventions (empty masks, NaN
aggregation, caps, pooling of directed distances, tolerances) are fields of `MetricConvention`,
never hidden defaults; `METRICS` lists every metric with its direction and default convention, and
`summarize` aggregates per-case values with the convention's NaN rule.
"""

from amid.tools.metrics.classification import accuracy, auc, balanced_accuracy, f1
from amid.tools.metrics.conventions import MetricConvention, image_diagonal_mm
from amid.tools.metrics.detection import CocoSummary, box_iou_3d, coco_summary
from amid.tools.metrics.enhancement import lncc, psnr, ssim
from amid.tools.metrics.instances import (
    centroid_f1,
    centroid_f1_labels,
    instance_centroids,
    instance_f1,
    instance_f1_at,
    iou_matrix,
)
from amid.tools.metrics.lesions import lesion_count_difference, lesion_f1, lesion_volume_difference_ml
from amid.tools.metrics.overlap import cldice, dice, dice_micro, dice_per_class
from amid.tools.metrics.registry import METRICS, MetricSpec, MetricSummary, summarize
from amid.tools.metrics.regression import krocc, plcc, srocc
from amid.tools.metrics.surface import (
    SurfaceDistances,
    hausdorff_distance,
    hd_from_distances,
    masd,
    masd_from_distances,
    nsd,
    nsd_from_distances,
    surface_distances,
)
from amid.tools.metrics.topology import betti0_error, components

__all__ = [
    "METRICS",
    "CocoSummary",
    "MetricConvention",
    "MetricSpec",
    "MetricSummary",
    "SurfaceDistances",
    "accuracy",
    "auc",
    "balanced_accuracy",
    "betti0_error",
    "box_iou_3d",
    "centroid_f1",
    "centroid_f1_labels",
    "cldice",
    "coco_summary",
    "components",
    "dice",
    "dice_micro",
    "dice_per_class",
    "f1",
    "hausdorff_distance",
    "hd_from_distances",
    "image_diagonal_mm",
    "instance_centroids",
    "instance_f1",
    "instance_f1_at",
    "iou_matrix",
    "krocc",
    "lesion_count_difference",
    "lesion_f1",
    "lesion_volume_difference_ml",
    "lncc",
    "masd",
    "masd_from_distances",
    "nsd",
    "nsd_from_distances",
    "plcc",
    "psnr",
    "srocc",
    "ssim",
    "summarize",
    "surface_distances",
]
