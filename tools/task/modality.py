"""The imaging modalities, named once: what a task contract, the foundation-model registry, the lane
templates and registry queries speak of."""

from __future__ import annotations

from typing import Literal

# What a model or a dataset images ("multi": several of these in one task or model).
ImagedModality = Literal[
    "CT",
    "MRI",
    "PET",
    "X-ray",
    "ultrasound",
    "pathology",
    "microscopy",
    "fundus",
    "OCT",
    "endoscopy",
    "dermoscopy",
    "multi",
]
# A task's modality: one of those, or "other" where none fits (no model or template claims "other").
Modality = Literal[ImagedModality, "other"]
