"""Importers: a native task.yaml, a ReX-MLE / MLE-bench challenge folder, an nnU-Net raw dataset.

Each importer returns an `ImportedTask`: the contract (paths relative to the workspace's task/
folder) and which source folders to copy where. Nothing is written here; `amid init` does the
copying into a fresh workspace. Every error names the file and the field.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from amid.server.errors import InvalidInput
from amid.tools.task.challenge_files import (
    ImportedTask,
    _description,
    _directions,
    _read_json,
    _read_yaml,
    _require,
)
from amid.tools.task.contract import TaskContract, parse_contract
from amid.tools.task.rexmle import import_challenge

DEFAULT_CONVENTIONS: dict[str, dict[str, Any]] = {
    "dice": {"empty_both": 1.0},
    "hd95": {"empty_both": 0.0, "empty_one": "cap", "cap_mm": 100.0, "symmetric": True},
}
MRI_CHANNELS = {"mri", "mr", "t1", "t1w", "t1c", "t2", "t2w", "flair", "adc", "dwi", "ce-t1"}


def import_task(source: Path, data_dir: Path | None = None, primary_metric: str | None = None) -> ImportedTask:
    """Recognise the format of `source` and import it. `data_dir`: a benchmark's data folder (ReX-MLE,
    MLE-bench: the folder its prepare step filled); `primary_metric` overrides the inferred one."""
    source = source.expanduser().resolve()
    if source.is_file() and source.suffix in (".yaml", ".yml"):
        return import_native(source)
    if not source.is_dir():
        raise InvalidInput(f"TASK: {source} is neither a task.yaml nor a folder", field="TASK")
    if (source / "task.yaml").is_file():
        return import_native(source / "task.yaml")
    if (source / "config.yaml").is_file():
        config = _read_yaml(source / "config.yaml")
        answers = str(((config.get("dataset") or {}) if isinstance(config, dict) else {}).get("answers") or "")
        own_layout = isinstance(config, dict) and (config.get("metadata") or {}).get("layout")
        if isinstance(config, dict) and not own_layout and not (answers and (source / answers).is_file()):
            return import_challenge(source, data_dir, primary_metric)
        return import_rex_mle(source)
    if (source / "dataset.json").is_file():
        spec = _read_json(source / "dataset.json")
        if isinstance(spec, dict) and "training" in spec and "channel_names" not in spec:
            return import_msd(source, spec)
        return import_nnunet(source)
    raise InvalidInput(
        f"TASK: {source} holds no task.yaml, config.yaml (ReX-MLE) or dataset.json (nnU-Net raw)",
        field="TASK",
    )


def import_native(path: Path) -> ImportedTask:
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise InvalidInput(f"{path.name}: expected a mapping at the top level, got {type(data).__name__}")
    private_dir = data.pop("private", None)
    source = data.get("source") if isinstance(data.get("source"), dict) else None
    declared = source.pop("origin", None) if source is not None else None  # a path: not for the public contract
    data.setdefault("source", {"format": "native"})
    contract = parse_contract(data, source_file=path.name)
    root = path.parent
    copies = [(root / rel, rel) for rel in _layout_paths(contract)]
    private = [(root / private_dir, ".")] if private_dir else []
    origin = {"task": str(path), **({"declared": str(declared)} if declared else {})}
    return ImportedTask(contract, copies, private, contract.description, origin)


def _layout_paths(contract: TaskContract) -> list[str]:
    layout = contract.layout
    paths = [layout.train_images, layout.train_labels, layout.test_images, layout.labels_table]
    paths += [layout.groups_table, contract.submission.sample_submission]
    return [p for p in dict.fromkeys(paths) if p]


def _detect_layout(folder: Path) -> dict[str, Any]:
    public = folder / "public"
    for images, labels in (("train/images", "train/labels"), ("imagesTr", "labelsTr")):
        if (public / images).is_dir():
            layout: dict[str, Any] = {"train_images": f"public/{images}"}
            if (public / labels).is_dir():
                layout["train_labels"] = f"public/{labels}"
            test = "test/images" if images.startswith("train") else "imagesTs"
            if (public / test).is_dir():
                layout["test_images"] = f"public/{test}"
            return layout
    raise InvalidInput(
        "config.yaml: field metadata.layout is missing and no public/train/images or public/imagesTr found",
        field="metadata.layout",
    )


def _csv_header(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return next(csv.reader(handle), [])


def import_rex_mle(folder: Path) -> ImportedTask:
    config = _read_yaml(folder / "config.yaml")
    task_id = _require(config, "id", "config.yaml")
    metadata = config.get("metadata") or {}
    task_type = _require(metadata, "task_type", "config.yaml", "metadata.")
    directions = _directions(folder)
    grader = config.get("grader") or {}
    primary = grader.get("name") if grader.get("name") in directions else next(iter(directions))
    layout = metadata.get("layout") or _detect_layout(folder)
    sample = (config.get("dataset") or {}).get("sample_submission")
    columns = _csv_header(folder / sample) if sample and (folder / sample).is_file() else ["case_id"]
    file_column = next((c for c in columns[1:] if c.endswith("path") or c.endswith("file")), None)
    conventions = metadata.get("metric_conventions") or {}
    data = {
        "id": re.sub(r"[^a-z0-9._-]+", "-", str(task_id).lower()),
        "title": config.get("name") or str(task_id),
        "description": _description(folder, config),
        "modality": metadata.get("modality", "other"),
        "anatomy": metadata.get("anatomy", "unspecified"),
        "task_type": task_type,
        "layout": layout,
        "metrics": [
            {"name": n, "direction": d, "convention": conventions.get(n, DEFAULT_CONVENTIONS.get(n, {}))}
            for n, d in directions.items()
        ],
        "primary_metric": primary,
        "prediction": _prediction_schema(task_type, layout),
        "submission": {
            "columns": columns,
            "id_column": columns[0],
            "file_column": file_column,
            "sample_submission": sample,
        },
        "grader": _grader(grader, folder),
        "source": {"format": "rex_mle"},
    }
    contract = parse_contract(data, source_file="config.yaml")
    private = [(folder / "private", ".")] if (folder / "private").is_dir() else []
    if contract.grader:
        private.append((folder / Path(contract.grader.file).name, contract.grader.file))
    public = [(folder / "public", "public")]
    return ImportedTask(contract, public, private, contract.description, {"task": str(folder)})


def _grader(grader: dict[str, Any], folder: Path) -> dict[str, str] | None:
    spec = grader.get("grade_fn")
    if not spec:
        return None
    if ":" not in str(spec):
        raise InvalidInput(f"config.yaml: field grader.grade_fn {spec!r} must be 'module:function'")
    module, function = str(spec).split(":", 1)
    if not (folder / f"{module}.py").is_file():
        raise InvalidInput(f"config.yaml: field grader.grade_fn names {module}.py, which is not in the folder")
    return {"file": f"grader/{module}.py", "function": function}


def _prediction_schema(task_type: str, layout: dict[str, Any]) -> dict[str, Any]:
    ending = str(layout.get("file_ending", ".nii.gz"))
    if task_type in ("segmentation", "instance_segmentation", "enhancement"):
        file_type = "nifti" if ".nii" in ending else "tiff" if "tif" in ending else "png"
        labels = [int(v) for v in (layout.get("label_values") or {})]
        return {"file_type": file_type, "label_values": labels if task_type == "segmentation" else []}
    return {"file_type": "csv"}


def import_nnunet(folder: Path) -> ImportedTask:
    spec = _read_json(folder / "dataset.json")
    channels = _require(spec, "channel_names", "dataset.json")
    labels = _require(spec, "labels", "dataset.json")
    ending = _require(spec, "file_ending", "dataset.json")
    if not (folder / "imagesTr").is_dir() or not (folder / "labelsTr").is_dir():
        raise InvalidInput(f"{folder.name}: an nnU-Net raw dataset needs imagesTr/ and labelsTr/")
    label_values = {int(v): str(k) for k, v in labels.items() if isinstance(v, int)}
    first = str(channels.get("0", "")).lower()
    modality = "CT" if first == "ct" else "MRI" if first in MRI_CHANNELS else "other"
    layout = {
        "train_images": "imagesTr",
        "train_labels": "labelsTr",
        "test_images": "imagesTs" if (folder / "imagesTs").is_dir() else None,
        "file_ending": ending,
        "channels": [str(channels[k]) for k in sorted(channels, key=int)],
        "label_values": label_values,
    }
    data = {
        "id": re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()),
        "title": str(spec.get("name") or folder.name),
        "description": str(spec.get("description") or ""),
        "modality": modality,
        "task_type": "segmentation",
        "layout": layout,
        "metrics": [
            {"name": "dice", "direction": "higher_better", "convention": DEFAULT_CONVENTIONS["dice"]},
            {"name": "hd95", "direction": "lower_better", "convention": DEFAULT_CONVENTIONS["hd95"]},
        ],
        "primary_metric": "dice",
        "prediction": {"file_type": "nifti" if ".nii" in ending else "png", "label_values": sorted(label_values)},
        "submission": {"columns": ["case_id", "prediction_path"], "file_column": "prediction_path"},
        "source": {"format": "nnunet"},
    }
    contract = parse_contract(data, source_file="dataset.json")
    copies = [(folder / rel, rel) for rel in ("imagesTr", "labelsTr", "imagesTs") if (folder / rel).is_dir()]
    return ImportedTask(contract, copies, [], contract.description, {"task": str(folder)})


def import_msd(folder: Path, spec: dict[str, Any]) -> ImportedTask:
    """A Medical Segmentation Decathlon (v1) task: `dataset.json` with `modality`, `labels` as
    value → name, and `training` / `test` lists of paths; one NIfTI per case holds every channel."""
    modality = _require(spec, "modality", "dataset.json")
    labels = _require(spec, "labels", "dataset.json")
    training = _require(spec, "training", "dataset.json")
    if not isinstance(training, list) or not all(isinstance(t, dict) and "image" in t for t in training):
        raise InvalidInput("dataset.json: field training must be a list of {image, label} paths", field="training")
    ids = [_msd_case(str(t["image"]), "imagesTr") for t in training]
    missing = [i for i in ids if not (folder / "imagesTr" / f"{i}.nii.gz").is_file()]
    if missing:
        raise InvalidInput(f"dataset.json: training cases {missing[:5]} have no file in imagesTr/", field="training")
    channels = [str(modality[k]) for k in sorted(modality, key=int)]
    first = channels[0].lower()
    has_test = (folder / "imagesTs").is_dir()
    layout = {
        "train_images": "imagesTr",
        "train_labels": "labelsTr",
        "test_images": "imagesTs" if has_test else None,
        "file_ending": ".nii.gz",
        "channels": channels,
        "label_values": {int(k): str(v) for k, v in labels.items()},
        "case_files": {
            "train_images": ["imagesTr/{case}.nii.gz"],
            "train_label": "labelsTr/{case}.nii.gz",
            "test_images": ["imagesTs/{case}.nii.gz"] if has_test else [],
        },
    }
    data = {
        "id": re.sub(r"[^a-z0-9._-]+", "-", str(spec.get("name") or folder.name).lower()),
        "title": str(spec.get("name") or folder.name),
        "description": str(spec.get("description") or ""),
        "modality": "CT" if first == "ct" else "MRI" if first in MRI_CHANNELS or "mr" in first else "other",
        "task_type": "segmentation",
        "layout": layout,
        "metrics": [
            {"name": "dice", "direction": "higher_better", "convention": DEFAULT_CONVENTIONS["dice"]},
            {"name": "hd95", "direction": "lower_better", "convention": DEFAULT_CONVENTIONS["hd95"]},
        ],
        "primary_metric": "dice",
        "prediction": {"file_type": "nifti", "label_values": sorted(int(k) for k in labels)},
        "submission": {"columns": ["case_id", "prediction_path"], "file_column": "prediction_path"},
        "source": {"format": "msd", "metadata": {"reference": str(spec.get("reference", ""))}},
    }
    contract = parse_contract(data, source_file="dataset.json")
    copies = [(folder / rel, rel) for rel in ("imagesTr", "labelsTr", "imagesTs") if (folder / rel).is_dir()]
    return ImportedTask(contract, copies, [], contract.description, {"task": str(folder)})


def _msd_case(path: str, folder: str) -> str:
    name = path.replace("\\", "/").split("/")[-1]
    if not name.endswith(".nii.gz"):
        raise InvalidInput(f"dataset.json: {path!r} is not a .nii.gz file in {folder}/", field="training")
    return name[: -len(".nii.gz")]
