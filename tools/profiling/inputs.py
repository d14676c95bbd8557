"""What a profile is asked to look at: the cases of one task and the contract facts that judge them.

The tool wrapper builds a `ProfileRequest` from the task contract and the workspace layout; the
profiling library never reads the contract itself.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from amid.server.errors import invalid
from amid.tools.task.contract import TaskType

Split = Literal["train", "test"]


class ProfileCase(BaseModel):
    """One case: its image files (one per channel), its label or target, and its grouping."""

    model_config = ConfigDict(frozen=True)

    case_id: Annotated[str, Field(min_length=1, description="Case identifier, unique in the task.")]
    split: Annotated[Split, Field(description="'train' (public labels) or 'test' (to predict).")] = "train"
    image_paths: Annotated[
        list[str], Field(min_length=1, description="Absolute image paths, one per channel, in channel order.")
    ]
    label_path: Annotated[
        str | None,
        Field(description="Mask (segmentation), instance mask, or target image (enhancement); None if absent."),
    ] = None
    label_file: Annotated[
        str | None,
        Field(description="A label that is not an image (GeoJSON, edge YAML, box text): supervision, not voxels."),
    ] = None
    group: Annotated[str | None, Field(description="Patient, site or other group id that must not leak.")] = None
    extra: Annotated[
        dict[str, str],
        Field(description="Further per-case fields: class label, stratum (site, scanner, stain)."),
    ] = Field(default_factory=dict)


class LabelsTable(BaseModel):
    """A CSV that holds one label (class or value) per case, for classification and regression."""

    model_config = ConfigDict(frozen=True)

    path: Annotated[str, Field(description="Absolute path of the CSV file.")]
    id_column: Annotated[str, Field(description="Column holding the case id.")] = "case_id"
    label_column: Annotated[str, Field(description="Column holding the class or target value.")] = "label"


class ProfileRequest(BaseModel):
    """Everything `profile_dataset` needs; its fields (and the files' sizes and times) make the cache key."""

    model_config = ConfigDict(frozen=True)

    task_type: TaskType
    cases: Annotated[list[ProfileCase], Field(min_length=1)]
    label_values: Annotated[
        dict[int, str] | None,
        Field(description="Label value -> name from the contract, background included."),
    ] = None
    channel_names: Annotated[dict[int, str] | None, Field(description="Channel index -> name, e.g. CT.")] = None
    labels_table: LabelsTable | None = None
    boxes_json: Annotated[str | None, Field(description="Absolute path of a COCO-style box file.")] = None
    primary_metric: str | None = None
    metric_direction: Literal["maximize", "minimize"] | None = None
    folds: Annotated[dict[str, int] | None, Field(description="Locked folds: case_id -> fold index.")] = None
    group_key: Annotated[str | None, Field(description="Name of the grouping (patient, site).")] = None
    submission_columns: list[str] = Field(default_factory=list)
    max_voxel_samples: Annotated[
        int, Field(ge=1000, description="Voxels sampled per channel over the whole dataset (seeded).")
    ] = 10_000_000
    seed: int = 1234
    n_workers: Annotated[int | None, Field(ge=1, description="Worker processes; None: one per CPU.")] = None

    @model_validator(mode="after")
    def _check_cases(self) -> ProfileRequest:
        counts = Counter(case.case_id for case in self.cases)
        repeated = sorted(case_id for case_id, n in counts.items() if n > 1)
        if repeated:
            raise invalid("cases", repeated[:5], "unique case_id values")
        for case in self.cases:
            for path in [*case.image_paths, case.label_path, case.label_file]:
                if path is not None and not Path(path).is_absolute():
                    raise invalid(f"cases[{case.case_id}].path", path, "an absolute path")
        unknown = sorted(set(self.folds or {}) - set(counts))
        if unknown:
            raise invalid("folds", unknown[:5], "case ids that appear in cases")
        return self

    @property
    def segmentation_like(self) -> bool:
        """Whether label files are label maps (class or instance values per voxel)."""
        return self.task_type in ("segmentation", "instance_segmentation")
