"""Import a ReX-MLE / MLE-bench challenge as its users have it: the unchanged challenge folder
(`config.yaml`, `grade.py`, `metric_config.json`, `leaderboard.csv`, siblings) plus the data folder
that the benchmark's own `prepare` filled (`<data>/<id>/prepared/{public,private}`).

`config.yaml`'s `dataset.*` paths are relative to that data folder; `competition_type` is the only
machine-readable type; `metadata` is free text, kept as it is. The layout is inferred from the
prepared files (tools/task/answers_layout.py). The task's grader is the whole challenge folder,
copied to `private/grader/`, called as the benchmark's harness calls it; it scores the test
submission and, through answers built from the training labels, the validation folds.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from amid.server.errors import InvalidInput
from amid.tools.task.answers_layout import InferredLayout, ending_of, infer, read_rows
from amid.tools.task.cases import template_folder
from amid.tools.task.challenge_files import ImportedTask, _description, _directions, _read_yaml, _require
from amid.tools.task.contract import TaskContract, parse_contract

GENERIC_COMPETITION_TYPES = ("simple", "code")
TASK_TYPES = {
    "segmentation": "segmentation",
    "detection": "detection",
    "classification": "classification",
    "image_quality_assessment": "regression",
    "regression": "regression",
    "image_enhancement": "enhancement",
    "enhancement": "enhancement",
}
# Words of ReX-MLE's `grader.name` that are not metric keys, and the keys they mean.
GRADER_NAME_SYNONYMS = {"dice": ("dsc", "dice"), "f1_score": ("f1",), "detection_map": ("ap_mean", "map")}
MODALITY_WORDS = [  # first match wins; free text such as "CTA", "Panoramic X-ray", "H&E Histopathology"
    ("pathology", r"h&e|histopath|patholog|\bwsi\b"),
    ("microscopy", r"microscop|fluorescen|phase.contrast|\bcell"),
    # "X-ray beams" are a radiotherapy's, not an image (MLE-bench's uw-madison-gi-tract, an MRI task)
    ("X-ray", r"x-ray(?! beam)|xray|radiograph|panoramic|\bcxr\b|mammogra"),
    ("ultrasound", r"ultrasound|sonograph|\bus\b"),
    ("MRI", r"\bmri?\b|\bmra\b|\bt1|\bt2|flair|\bdwi\b|\badc\b|magnetic"),
    ("CT", r"\bcta?\b|computed tomograph|\bldct\b|low-dose ct"),
    ("fundus", r"fundus|retin"),  # retina, retinal, (diabetic) retinopathy
    ("OCT", r"\boct\b|optical coherence"),
    ("dermoscopy", r"dermoscop|dermatoscop|melanoma|skin lesion"),
    ("endoscopy", r"endoscop|colonoscop|gastroscop"),
]
DESCRIPTION_CHARS = 2000  # of a description read for its modality words: the overview, not the rules
FILE_TYPES = {
    ".nii.gz": "nifti",
    ".nii": "nifti",
    ".png": "png",
    ".tif": "tiff",
    ".tiff": "tiff",
    ".mha": "mha",
    ".mhd": "mha",
    ".nrrd": "nrrd",
    ".json": "json",
    ".geojson": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".txt": "txt",
    ".csv": "csv",
}


def is_benchmark_config(config: Any) -> bool:
    """A real ReX-MLE / MLE-bench config: `dataset.answers` relative to a data folder."""
    return isinstance(config, dict) and isinstance(config.get("dataset"), dict) and "answers" in config["dataset"]


def import_challenge(folder: Path, data_dir: Path | None, primary_metric: str | None = None) -> ImportedTask:
    config = _read_yaml(folder / "config.yaml")
    task_id = str(_require(config, "id", "config.yaml"))
    dataset = config["dataset"]
    data_dir = _data_dir(folder, task_id, dataset, data_dir)
    answers = data_dir / str(_require(dataset, "answers", "config.yaml", "dataset."))
    sample = data_dir / str(_require(dataset, "sample_submission", "config.yaml", "dataset."))
    answers_dir = data_dir / str(dataset["answers_dir"]) if dataset.get("answers_dir") else answers.parent
    for path, key in ((answers, "answers"), (sample, "sample_submission"), (answers_dir, "answers_dir")):
        if not path.exists():
            raise InvalidInput(
                f"config.yaml: dataset.{key} is {path}, which does not exist; run the benchmark's prepare step "
                f"(`python -m rexmle.cli prepare {task_id}`) or pass the data folder it filled with --data-dir",
                field=f"dataset.{key}",
            )
    public_src, private_src = sample.parent, answers.parent
    while private_src != data_dir and private_src.name != "private":
        private_src = private_src.parent
    if private_src == data_dir:
        private_src = answers.parent
    return _build(folder, config, task_id, public_src, private_src, answers, answers_dir, sample, primary_metric)


def _data_dir(folder: Path, task_id: str, dataset: dict[str, Any], given: Path | None) -> Path:
    if given is not None:
        return given.expanduser().resolve()
    # ReX-MLE's default data folder is `<repository>/data`, the repository being three levels up.
    for candidate in (folder.parents[2] / "data" if len(folder.parents) > 2 else None, folder.parent):
        if candidate is not None and (candidate / str(dataset.get("answers", ""))).is_file():
            return candidate
    raise InvalidInput(
        f"config.yaml: dataset.answers ({dataset.get('answers')!r}) is relative to the benchmark's data folder; "
        f"pass it with --data-dir DIR (the folder holding {task_id}/prepared/)",
        field="--data-dir",
    )


def _build(
    folder: Path,
    config: dict[str, Any],
    task_id: str,
    public_src: Path,
    private_src: Path,
    answers: Path,
    answers_dir: Path,
    sample: Path,
    primary_metric: str | None,
) -> ImportedTask:
    public = public_src.name  # the prepared folder keeps its name under task/ ("public")
    sample_rel = f"{public}/{sample.relative_to(public_src).as_posix()}"
    adapters = benchmark_label_adapters(task_id)
    layout = infer(public_src.parent, public, str(answers), answers_dir, sample_rel, adapters)
    directions = _directions(folder) if (folder / "metric_config.json").is_file() else _board_direction(folder, config)
    competition = str(_require(config, "competition_type", "config.yaml"))
    task_type = _task_type(competition, directions, layout)
    primary, why = _primary(config, directions, folder, primary_metric)
    sample_header, _ = read_rows(sample)
    file_column = _file_column(sample)
    grader = _grader_entry(folder, config, private_src, answers, answers_dir)
    metadata = public_metadata(config.get("metadata"), (folder, public_src.parent.parent, private_src))
    description = _description(folder, config) or str(config.get("description") or "")
    named = " ".join(str(v) for v in (metadata.get("modality"), config.get("name")) if v)
    data = {
        "id": re.sub(r"[^a-z0-9._-]+", "-", task_id.lower()),
        "title": str(config.get("name") or task_id),
        "description": description,
        "modality": infer_modality(named, description),
        "anatomy": str(metadata.get("anatomy") or "unspecified"),
        "task_type": task_type,
        "layout": _layout_entry(layout, sample_rel),
        "metrics": [{"name": n, "direction": d} for n, d in directions.items()],
        "primary_metric": primary,
        "prediction": {"file_type": _file_type(sample, file_column, layout.label_ending), "csv_columns": sample_header},
        "submission": {
            "columns": sample_header,
            "id_column": layout.id_column,
            "file_column": file_column,
            "sample_submission": sample_rel,
        },
        "grader": {
            **grader,
            "id_column": layout.id_column,
            "fold_answers": [{k: v for k, v in c.items() if k != "input"} for c in layout.answer_columns],
            "metric_keys": list(directions),
        },
        "source": {
            "format": "mle_bench" if grader["module"].startswith("mlebench.") else "rex_mle",
            "metadata": {**metadata, "competition_type": competition, "primary_metric_rule": why},
        },
    }
    contract: TaskContract = parse_contract(data, source_file="config.yaml")
    private = [(private_src, "answers"), (folder, "grader")]
    origin = {"task": str(folder), "data": str(public_src.parent.parent)}
    return ImportedTask(contract, [(public_src, public)], private, contract.description, origin)


def public_metadata(metadata: Any, origins: tuple[Path, ...]) -> dict[str, Any]:
    """config.yaml's descriptive `metadata` for the public contract: scalars only, and none that names
    a path on this host (an absolute path, or one inside the folders the task came from)."""
    kept: dict[str, Any] = {}
    for key, value in (metadata or {}).items() if isinstance(metadata, dict) else ():
        if isinstance(value, str) and (PurePosixPath(value).is_absolute() or any(str(o) in value for o in origins)):
            continue
        if isinstance(value, (str, int, float)):
            kept[str(key)] = value
    return kept


def _grader_entry(
    folder: Path, config: dict[str, Any], private_src: Path, answers: Path, answers_dir: Path
) -> dict[str, str]:
    """`grader.grade_fn` as the file of the challenge folder it names, and where its answers go."""
    grade_fn = str(((config.get("grader") or {}).get("grade_fn")) or "")
    module, _, function = grade_fn.partition(":")
    if not module or not function:
        raise InvalidInput(
            f"config.yaml: grader.grade_fn {grade_fn!r} must be 'module.path:function'", field="grader.grade_fn"
        )
    grader_file = module.rsplit(".", 1)[-1] + ".py"
    if not (folder / grader_file).is_file():
        raise InvalidInput(
            f"config.yaml: grader.grade_fn names {module}; {grader_file} is not in {folder}: pass the challenge "
            "folder that holds the grader file, unchanged",
            field="grader.grade_fn",
        )
    answers_rel = answers_dir.relative_to(private_src).as_posix()
    return {
        "file": f"grader/{grader_file}",
        "function": function,
        "module": module,
        "answers": "answers/" + answers.relative_to(private_src).as_posix(),
        "answers_dir": "answers" if answers_rel == "." else f"answers/{answers_rel}",
    }


def _layout_entry(layout: InferredLayout, sample_rel: str) -> dict[str, Any]:
    return {
        "train_images": str(template_folder(layout.train_images[0])),  # train/ for train/{case}/FLAIR too
        "test_images": str(template_folder(layout.test_images[0])) if layout.test_images else None,
        "labels_table": layout.labels_table,
        "file_ending": ending_of(layout.train_images[0].replace("{case}", "x")),
        "channels": layout.channels,
        "case_files": {
            "train_images": layout.train_images,
            "train_label": layout.train_label,
            "test_images": layout.test_images,
            "test_ids_table": sample_rel,
            "test_id_column": layout.id_column,
        },
    }


def benchmark_label_adapters(task_id: str) -> dict[str, dict[str, Any]]:
    """Answers column → label adapter, for challenges whose preparation converts its test labels."""
    from amid.registry.loader import label_adapters

    entries = label_adapters().get(task_id, {})
    return {column: entry.model_dump() for column, entry in entries.items()}


def infer_modality(text: str, description: str = "") -> str:
    """The first modality `text` (metadata, name) names; else the one the description's overview names
    most often (APTOS 2019 Blindness Detection: "retinopathy" three times), else "other"."""
    lower = text.lower()
    found = next((modality for modality, pattern in MODALITY_WORDS if re.search(pattern, lower)), None)
    if found is not None:
        return found
    overview = description[:DESCRIPTION_CHARS].lower()
    hits, _, best = max((len(re.findall(p, overview)), -i, m) for i, (m, p) in enumerate(MODALITY_WORDS))
    return best if hits > 0 else "other"


LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def _board_direction(folder: Path, config: dict[str, Any]) -> dict[str, str]:
    """MLE-bench has no metric_config.json: one metric, `grader.name`, whose direction is the
    leaderboard's order (its first row holds the best score), as MLE-bench's own grader decides."""
    name = str(_require(config.get("grader") or {}, "name", "config.yaml", "grader."))
    board = folder / "leaderboard.csv"
    if board.is_file() and board.read_bytes()[:64].startswith(LFS_POINTER):
        raise InvalidInput(
            f"{folder.name}: leaderboard.csv is a Git LFS pointer, not the leaderboard (the checkout was made "
            "without git-lfs); run `git lfs pull` in the benchmark checkout, or add metric_config.json with "
            "metric_directions",
            field="leaderboard.csv",
        )
    _, rows = read_rows(board) if board.is_file() else ([], [])
    scores = [float(r["score"]) for r in rows if _is_number(r.get("score") or "")]
    if len(scores) < 2 or scores[0] == scores[-1]:
        raise InvalidInput(
            f"{folder.name}: no metric_config.json, and leaderboard.csv cannot tell whether a higher {name!r} is "
            "better; add metric_config.json with metric_directions",
            field="metric_config.json",
        )
    return {name: "lower_better" if scores[0] < scores[-1] else "higher_better"}


def _task_type(competition: str, directions: dict[str, str], layout: InferredLayout) -> str:
    label_ending = layout.label_ending
    if competition in GENERIC_COMPETITION_TYPES:  # MLE-bench: "simple" / "code" say nothing of the task
        return _type_from_answers(layout)
    if competition not in TASK_TYPES:
        raise InvalidInput(
            f"config.yaml: competition_type {competition!r} is not one of {sorted(TASK_TYPES)}",
            field="competition_type",
        )
    task_type = TASK_TYPES[competition]
    if task_type == "segmentation" and any(re.fullmatch(r"f1_0\.\d+", m) for m in directions):
        return "instance_segmentation"  # F1 at IoU thresholds: instances are matched, not voxels
    if task_type == "classification" and label_ending in (".yaml", ".yml", ".json"):
        return "graph_classification"  # a file of edges per case, not one class per case
    return task_type


def _type_from_answers(layout: InferredLayout) -> str:
    """A task type from the answers' kinds: label files → segmentation; a per-case value column → a
    class (few distinct values) or a regression target."""
    if layout.label_ending is not None:
        return "segmentation"
    values = layout.target_values
    numeric = [v for v in values if _is_number(v)]
    if len(numeric) == len(values) and len(set(values)) > 20:
        return "regression"
    return "classification"


def _primary(config: dict[str, Any], directions: dict[str, str], folder: Path, given: str | None) -> tuple[str, str]:
    """The primary metric and the rule that chose it (recorded in the contract; never silent)."""
    keys = list(directions)
    if given is not None:
        if given not in directions:
            raise InvalidInput(
                f"--primary-metric {given!r} is not one of the task's metrics {keys}", field="--primary-metric"
            )
        return given, "given at init"
    named = [
        ((config.get("metadata") or {}).get("primary_metric"), "metadata.primary_metric"),
        ((config.get("grader") or {}).get("name"), "grader.name"),
    ]
    for name, where in named:
        if name in directions:
            return str(name), f"config.yaml {where}"
    for name, where in named:
        for synonym in GRADER_NAME_SYNONYMS.get(str(name), ()):
            match = next((k for k in keys if k == synonym or k.startswith(synonym + "_")), None)
            if match:
                return match, f"config.yaml {where} {name!r} means {match!r}"
    board = folder / "leaderboard.csv"
    if board.is_file():
        header, _ = read_rows(board)
        ranked = next((c for c in header if c in directions), None)
        if ranked:
            return ranked, "the first metric column of leaderboard.csv"
    raise InvalidInput(
        f"config.yaml: grader.name {named[1][0]!r} is not a metric of metric_config.json {keys}; "
        "choose one with --primary-metric",
        field="--primary-metric",
    )


def _file_column(sample: Path) -> str | None:
    header, rows = read_rows(sample)
    for column in header[1:]:
        values = [r.get(column) or "" for r in rows]
        if values and all(v and ("/" in v or ending_of(v) in FILE_TYPES) and not _is_number(v) for v in values):
            return column
    return None


def _file_type(sample: Path, file_column: str | None, label_ending: str | None) -> str:
    if file_column is None:
        return "csv"
    _, rows = read_rows(sample)
    return FILE_TYPES.get(ending_of(rows[0][file_column] if rows else ""), FILE_TYPES.get(label_ending or "", "none"))


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True
