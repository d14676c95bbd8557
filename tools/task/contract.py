"""The task contract (docs/ARCHITECTURE.md §5): what the run optimises, on which data, judged how.

The contract is frozen after `amid init`: it is written once to `task/contract.yaml`, hashed, and
a change means a new run. Paths inside it are relative to the workspace's `task/` folder so the
workspace can move between hosts (docs/ARCHITECTURE.md §14).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from amid.server.errors import InvalidInput
from amid.tools.task.modality import Modality

TaskType = Literal[
    "segmentation",
    "instance_segmentation",
    "detection",
    "classification",
    "regression",
    "enhancement",
    "graph_classification",
]
Direction = Literal["higher_better", "lower_better"]
PredictionFileType = Literal["nifti", "png", "tiff", "mha", "nrrd", "csv", "json", "yaml", "txt", "none"]

SLUG = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricDef(_Frozen):
    """One metric of the task, with the conventions the reviewer must apply."""

    name: Annotated[str, Field(min_length=1, description="metric name, e.g. dice, hd95, auc")]
    direction: Direction
    convention: dict[str, Any] = Field(
        default_factory=dict,
        description="explicit conventions: empty_both, empty_one, cap_mm, percentile, tolerance_mm, …",
    )
    tolerance: Annotated[float, Field(ge=0, description="allowed |declared - verified| before mismatch")] = 1e-3


class CaseFiles(_Frozen):
    """Where one case's files are, as templates relative to task/ in which `{case}` is the case id.

    Imported benchmarks name files in their own ways (`topcow_ct_002_0000.nii.gz` for case `002`,
    `.tif` training and `.tiff` test images, `CASE_label.tiff`, one file per MRI sequence); a
    template per channel says it exactly, where a single file ending and id pattern cannot.
    """

    train_images: list[str] = Field(min_length=1, description="one template per input channel")
    train_label: str | None = Field(default=None, description="template of the training label file, if any")
    test_images: list[str] = Field(default_factory=list, description="one template per input channel")
    test_ids_table: str | None = Field(default=None, description="CSV under task/ listing the test case ids")
    test_id_column: str | None = None

    @field_validator("train_images", "test_images")
    @classmethod
    def _templates_name_the_case(cls, value: list[str]) -> list[str]:
        for template in value:
            if template.count("{case}") != 1 or "{ext}" in template.removesuffix("{ext}"):
                raise ValueError(f"template {template!r} must hold {{case}} exactly once and {{ext}} only at its end")
        return value


class DataLayout(_Frozen):
    """Where the public data lives, relative to the workspace's task/ folder."""

    train_images: str = Field(description="folder of training inputs")
    train_labels: str | None = Field(default=None, description="folder of training labels (masks/targets)")
    test_images: str | None = Field(default=None, description="folder of test inputs")
    labels_table: str | None = Field(default=None, description="CSV of per-case labels (classification)")
    file_ending: str = Field(default=".nii.gz", description="file name ending of images and labels")
    channels: list[str] = Field(default_factory=lambda: ["image"], min_length=1)
    case_id_pattern: str = Field(
        default=r"^(?P<case>.+?)(_(?P<channel>\d{4}))?$",
        description="regex applied to the file stem; group 'case' is the case id, 'channel' the channel",
    )
    groups_table: str | None = Field(default=None, description="CSV mapping case_id → group (patient/site)")
    group_key: str | None = Field(default=None, description="column of groups_table used for grouping")
    label_values: dict[int, str] = Field(default_factory=dict, description="label value → class name")
    case_files: CaseFiles | None = Field(
        default=None, description="per-case file templates; when set they, not the folders, locate each case's files"
    )

    @field_validator("case_id_pattern")
    @classmethod
    def _pattern_has_case_group(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        if "case" not in compiled.groupindex:
            raise ValueError("needs a named group (?P<case>...)")
        return value


class PredictionSchema(_Frozen):
    file_type: PredictionFileType
    label_values: list[int] = Field(default_factory=list)
    csv_columns: list[str] = Field(default_factory=list)
    geometry_must_match: bool = True


class SubmissionContract(_Frozen):
    filename: str = "submission.csv"
    id_column: str = "case_id"
    columns: list[str] = Field(min_length=1, description="required CSV columns, id column first")
    file_column: str | None = Field(default=None, description="column holding a relative prediction path")
    sample_submission: str | None = None


class ValidationProtocol(_Frozen):
    k_folds: Annotated[int, Field(ge=2, le=20)] = 5
    seed: int = 0
    holdout_fraction: Annotated[float, Field(ge=0.0, le=0.5)] = 0.0


class Budget(_Frozen):
    wall_clock_hours: Annotated[float, Field(gt=0)] | None = None
    gpus: Annotated[int, Field(ge=0)] = 1
    gpu_hours: Annotated[float, Field(gt=0)] | None = None


class EvidenceRequirements(_Frozen):
    logs: bool = True
    checkpoint: bool = True
    training_manifest: bool = True


class AnswerColumn(_Frozen):
    """One column of the grader's answers table, and how to fill it for a training case.

    `kind` file: the value is `answers_template` with the case id, naming a file under the answers
    folder; for a training case the reviewer places `train_source` (under task/) there. value: the
    value comes from the training labels table's `source_column`. constant: every row holds `value`.
    coco_image: the file is the one-image slice (images, annotations, categories) of the COCO file
    `train_source`. converted: `adapter` turns the training label `train_source` into the answers'
    format (the benchmark's preparation converted its test labels the same way).
    """

    name: str
    kind: Literal["file", "coco_image", "converted", "value", "constant"]
    answers_template: str | None = None
    train_source: str | None = None
    adapter: str | None = Field(default=None, description="converted: the label adapter (tools/task/label_adapters)")
    adapter_options: dict[str, Any] = Field(default_factory=dict)
    source_column: str | None = None
    value: str | None = None


class GraderRef(_Frozen):
    """A task author's own grader: `function` of `file` (under private/), with the answers it grades against.

    It is called as its benchmark's harness calls it: `function(submission_df, answers_df,
    submission_dir=Path, answers_dir=Path)`, with the whole challenge folder beside `file`.
    """

    file: str
    function: str = "grade"
    module: str | None = Field(default=None, description="the benchmark's own module path, for the record")
    answers: str | None = Field(default=None, description="answers CSV under private/")
    answers_dir: str | None = Field(default=None, description="folder under private/ passed as answers_dir")
    id_column: str | None = Field(default=None, description="case-id column of the answers table")
    fold_answers: list[AnswerColumn] | None = Field(
        default=None, description="how to build the answers of a validation fold; set: the grader scores folds"
    )
    metric_keys: list[str] = Field(default_factory=list, description="keys of the grader's result that are metrics")


class SourceRef(_Frozen):
    """What kind of source the task came from. Where it came from is not here: the import folder
    holds what the public view leaves out (holdout labels, answers), so it is kept beside the
    server's files (`Workspace.origin`), never in the contract every agent reads."""

    format: Literal["native", "rex_mle", "mle_bench", "nnunet", "msd"]
    origin: str | None = Field(
        default=None, description="unset: only contracts written before the origin moved out of them carry it"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="the source's own descriptive fields, kept as they are (free text)"
    )


class TaskContract(_Frozen):
    schema_version: Literal[1] = 1
    id: Annotated[str, Field(pattern=SLUG)]
    title: str = Field(min_length=1)
    description: str = ""
    modality: Modality
    anatomy: str = "unspecified"
    task_type: TaskType
    layout: DataLayout
    metrics: list[MetricDef] = Field(min_length=1)
    primary_metric: str
    prediction: PredictionSchema
    submission: SubmissionContract
    validation: ValidationProtocol = ValidationProtocol()
    budget: Budget = Budget()
    evidence: EvidenceRequirements = EvidenceRequirements()
    grader: GraderRef | None = None
    source: SourceRef

    @model_validator(mode="after")
    def _primary_metric_is_declared(self) -> TaskContract:
        names = [m.name for m in self.metrics]
        if self.primary_metric not in names:
            raise ValueError(f"primary_metric {self.primary_metric!r} is not one of the metrics {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"metric names repeat: {names}")
        return self

    def metric(self, name: str) -> MetricDef:
        return next(m for m in self.metrics if m.name == name)

    @property
    def primary(self) -> MetricDef:
        return self.metric(self.primary_metric)


def contract_hash(contract: TaskContract) -> str:
    """sha256 of the canonical JSON form: stable across YAML formatting."""
    canonical = json.dumps(contract_data(contract), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def contract_data(contract: TaskContract) -> dict[str, Any]:
    """The contract as written and hashed. An unset `source.origin` is left out, so a new contract
    names no import folder, and an old one (origin set) keeps the hash it was recorded with."""
    data = contract.model_dump(mode="json")
    if data["source"].get("origin") is None:
        data["source"].pop("origin", None)
    return data


def parse_contract(data: object, *, source_file: str) -> TaskContract:
    """Validate raw data into a contract; errors name the file and every bad field."""
    try:
        return TaskContract.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{source_file}: {describe_validation_error(exc)}") from None


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"field {where}: {err['msg']}")
    return "; ".join(parts)


def write_contract(contract: TaskContract, path: Path) -> str:
    path.write_text(yaml.safe_dump(contract_data(contract), sort_keys=False), encoding="utf-8")
    return contract_hash(contract)


# libyaml's loader where PyYAML was built with it (every wheel is): the contract is read at a
# server's first call, and the pure-Python loader takes ~20 ms for it.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_contract(path: Path) -> TaskContract:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{path.name}: not valid YAML ({exc})") from None
    return parse_contract(data, source_file=path.name)
