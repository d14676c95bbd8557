"""Every ReX-MLE challenge imports unchanged from its folder and the data its prepare step wrote
(seeded stand-ins of all 20, tests/fixtures/rexmle.py), and what cannot be imported is refused with
the file, the field and the fix."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from amid.server.cli import main
from amid.server.errors import InvalidInput
from amid.server.workspace import init_workspace
from amid.tools.task.cases import discover_cases
from amid.tools.task.importers import import_task
from tests.fixtures.rexmle import IDS, SPECS, grader_python, make_challenge

EXPECTED = {  # id → (task type, primary metric, training cases)
    "dentex": ("detection", "ap_mean", 7),
    "isles22": ("segmentation", "dice", 7),
    "ldct-iqa": ("regression", "score", 15),
    "neurips-cellseg": ("instance_segmentation", "f1_0.5", 7),
    "panther-task1": ("segmentation", "dsc", 7),  # grader.name 'dice' means the metric key 'dsc'
    "panther-task2": ("segmentation", "dsc", 7),
    "puma-track1-task1": ("segmentation", "dice", 7),
    "puma-track1-task2": ("detection", "f1", 7),
    "puma-track2-task1": ("segmentation", "dice", 7),
    "puma-track2-task2": ("detection", "f1", 7),
    "seg_a": ("segmentation", "dsc_50pc", 7),  # not the first metric (hd_50pc)
    "topbrain-track1": ("segmentation", "dice", 7),
    "topbrain-track2": ("segmentation", "dice", 7),
    "topcow-track1-task1": ("segmentation", "dice", 7),
    "topcow-track1-task2": ("detection", "boundary_iou", 7),
    "topcow-track1-task3": ("graph_classification", "anterior_acc", 7),
    "topcow-track2-task1": ("segmentation", "dice", 7),
    "topcow-track2-task2": ("detection", "boundary_iou", 7),
    "topcow-track2-task3": ("graph_classification", "anterior_acc", 7),
    "usenhance": ("enhancement", "lncc", 7),
}


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def _sample_ids(data_dir: Path, challenge_id: str) -> list[str]:
    with (data_dir / challenge_id / "prepared/public/sample_submission.csv").open(encoding="utf-8") as handle:
        return [row[0] for row in list(csv.reader(handle))[1:]]


def _config(folder: Path) -> dict:
    return yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))


def _rewrite(folder: Path, change: dict) -> None:
    config = _config(folder)
    for dotted, value in change.items():
        *parents, key = dotted.split(".")
        target = config
        for part in parents:
            target = target[part]
        target[key] = value
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def test_there_is_a_fixture_of_each_real_challenge() -> None:
    assert set(IDS) == set(EXPECTED) and len(IDS) == 20


@pytest.mark.parametrize("challenge_id", IDS)
def test_challenge_imports_unchanged_with_its_type_metric_and_cases(challenge_id: str, tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, challenge_id)
    before = (_tree_digest(folder), _tree_digest(data_dir))
    imported = import_task(folder, data_dir=data_dir)
    contract = imported.contract
    task_type, primary, n_train = EXPECTED[challenge_id]

    assert (_tree_digest(folder), _tree_digest(data_dir)) == before
    assert contract.task_type == task_type and contract.source.format == "rex_mle"
    assert contract.primary_metric == primary and primary in SPECS[challenge_id].metrics
    assert [m.name for m in contract.metrics] == list(SPECS[challenge_id].metrics)
    task_dir = imported.public_copies[0][0].parent  # the prepared folder: contract paths start with public/
    test_ids = [c.case_id for c in discover_cases(task_dir, contract.layout, "test")]
    assert test_ids == _sample_ids(data_dir, challenge_id)  # as strings: `002`, `0000` keep their zeros
    assert len(discover_cases(task_dir, contract.layout, "train")) == n_train
    assert len(contract.layout.channels) == (3 if challenge_id == "isles22" else 1)
    grader = contract.grader
    assert grader is not None and grader.module == f"rexmle.challenges.{challenge_id}.grade"
    assert (grader.file, grader.function) == ("grader/grade.py", "grade")
    assert (folder, "grader") in imported.private_copies  # the whole folder: grade.py and its siblings


def test_isles_channels_are_its_three_sequences_in_answers_order(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, "isles22")
    layout = import_task(folder, data_dir=data_dir).contract.layout
    assert layout.channels == ["dwi", "adc", "flair"]
    assert layout.case_files is not None and layout.case_files.train_label == "public/train/{case}_msk.nii.gz"


def test_ldct_training_tif_and_test_tiff_are_both_found(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, "ldct-iqa")
    contract = import_task(folder, data_dir=data_dir).contract
    files = contract.layout.case_files
    assert files is not None and files.train_images == ["public/train/images/{case}.tif"]
    assert files.test_images == ["public/test/images/{case}.tiff"]
    assert contract.layout.labels_table == "public/train_labels.csv"


def test_without_data_dir_the_import_names_the_option(tmp_path: Path) -> None:
    folder, _ = make_challenge(tmp_path, "topcow-track1-task1")
    with pytest.raises(InvalidInput) as caught:
        import_task(folder)
    assert caught.value.field == "--data-dir"
    message = str(caught.value)
    assert "config.yaml" in message and "dataset.answers" in message and "--data-dir DIR" in message


def test_unprepared_data_names_dataset_answers_and_the_prepare_step(tmp_path: Path) -> None:
    folder, _ = make_challenge(tmp_path, "panther-task1")
    empty = tmp_path / "empty-data"
    empty.mkdir()
    with pytest.raises(InvalidInput) as caught:
        import_task(folder, data_dir=empty)
    message = str(caught.value)
    assert caught.value.field == "dataset.answers" and "config.yaml" in message
    assert "panther-task1/prepared/private/test_labels.csv" in message and "prepare panther-task1" in message


def test_partly_prepared_data_names_the_answers_column_and_the_missing_file(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, "seg_a")
    (data_dir / "seg_a/prepared/private/test/labels/K5.seg.nrrd").unlink()  # the answers table's first row
    with pytest.raises(InvalidInput) as caught:
        import_task(folder, data_dir=data_dir)
    message = str(caught.value)
    assert caught.value.field == "label_path" and message.startswith("test_labels.csv:")
    assert "test/labels/K5.seg.nrrd" in message and "prepared completely" in message


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"competition_type": "survival"}, "competition_type", ["'survival'", "segmentation", "detection"]),
        ({"grader.grade_fn": "rexmle.challenges.isles22.grading:grade"}, "grader.grade_fn", ["grading.py"]),
        ({"grader.grade_fn": "grade.py"}, "grader.grade_fn", ["'module.path:function'"]),
    ],
)
def test_a_broken_config_is_refused_naming_file_field_and_fix(
    tmp_path: Path, change: dict, field: str, words: list[str]
) -> None:
    folder, data_dir = make_challenge(tmp_path, "isles22")
    _rewrite(folder, change)
    with pytest.raises(InvalidInput) as caught:
        import_task(folder, data_dir=data_dir)
    message = str(caught.value)
    assert caught.value.field == field and message.startswith("config.yaml:") and field in message
    assert all(w in message for w in words), message
    assert "Traceback" not in message and 'File "' not in message


def test_amid_init_without_data_dir_exits_with_one_line_naming_it(tmp_path: Path) -> None:
    folder, _ = make_challenge(tmp_path, "seg_a")
    result = CliRunner().invoke(main, ["init", str(folder), "-w", str(tmp_path / "ws")])
    assert result.exit_code == 2 and "--data-dir" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "ws").exists()


def test_init_records_the_grader_interpreter_and_copies_the_whole_folder(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, "topbrain-track1")
    python = grader_python(tmp_path)
    workspace = init_workspace(import_task(folder, data_dir=data_dir), tmp_path / "ws", grader_python=python)
    assert workspace.grader_python() == str(python.absolute())
    grader = workspace.private_dir / "grader"
    assert {"grade.py", "leaderboard.csv", "metric_config.json", "valid_neighbors_ct_all.json"} <= {
        p.name for p in grader.iterdir()
    }
    assert (workspace.private_dir / "answers/test_labels.csv").is_file()
    assert len(workspace.folds().case_groups) == 7


@pytest.mark.parametrize("challenge_id", ["dentex", "isles22", "neurips-cellseg"])
def test_fixtures_are_seeded(challenge_id: str, tmp_path: Path) -> None:
    first, again, other = (
        make_challenge(tmp_path / name, challenge_id, seed) for name, seed in (("a", 3), ("b", 3), ("c", 4))
    )
    assert [_tree_digest(p) for p in first] == [_tree_digest(p) for p in again]
    assert _tree_digest(first[1]) != _tree_digest(other[1])


# Runs under the grader wrapper: every fixture grader, called as ReX-MLE's harness calls it, on a
# submission made of the private answers themselves, then on one whose first file is missing.
HARNESS = """
import csv, importlib.util, json, shutil, sys
from pathlib import Path
import pandas as pd
from rexmle.grade_helpers import InvalidSubmissionError

root, out = Path(sys.argv[1]), {}
for folder in sorted((root / "rex-mle/rexmle/challenges").iterdir()):
    prepared = root / "data" / folder.name / "prepared"
    spec = importlib.util.spec_from_file_location(f"grade_{len(out)}", folder / "grade.py")
    grader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grader)
    answers = list(csv.DictReader((prepared / "private/test_labels.csv").open()))
    sample = list(csv.DictReader((prepared / "public/sample_submission.csv").open()))
    submission = root / "submissions" / folder.name
    by_id = {a[grader.ID_COLUMN]: a for a in answers}
    for row in sample:
        answer = by_id[row[grader.ID_COLUMN]]
        if grader.KIND == "table":
            row[grader.PRED_COLUMN] = answer[grader.LABEL_COLUMN]
            continue
        (submission / row[grader.PRED_COLUMN]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(prepared / "private" / answer[grader.LABEL_COLUMN], submission / row[grader.PRED_COLUMN])
    submission.mkdir(parents=True, exist_ok=True)
    with (submission / "submission.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(sample[0]))
        writer.writeheader()
        writer.writerows(sample)
    def run():
        tables = (pd.read_csv(submission / "submission.csv"), pd.read_csv(prepared / "private/test_labels.csv"))
        return grader.grade(*tables, submission_dir=submission, answers_dir=prepared / "private")
    result = run()
    if grader.KIND == "table":
        (submission / "submission.csv").write_text("image_id,quality_score\\n0000,1.0\\n")
    else:
        (submission / sample[0][grader.PRED_COLUMN]).unlink()
    try:
        run()
        refusal = None
    except InvalidSubmissionError as exc:
        refusal = str(exc)
    out[folder.name] = {"result": result, "refusal": refusal}
print(json.dumps(out))
"""


def test_every_fixture_grader_scores_its_own_answers_perfect_and_refuses_a_missing_case(tmp_path: Path) -> None:
    for challenge_id in IDS:
        make_challenge(tmp_path, challenge_id)
    done = subprocess.run(
        [str(grader_python(tmp_path)), "-c", HARNESS, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    graded = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(graded) == sorted(IDS)
    for challenge_id, outcome in graded.items():
        metrics = SPECS[challenge_id].metrics
        result = outcome["result"]
        assert list(result) == SPECS[challenge_id].result_keys, challenge_id
        result = {m: result[SPECS[challenge_id].result_names.get(m, m)] for m in metrics}
        perfect = {
            m: (3.0 if m == "score" else 100.0 if m == "psnr" else 1.0) if d == "higher_better" else 0.0
            for m, d in metrics.items()
        }
        assert {m: result[m] for m in metrics} == pytest.approx(perfect), challenge_id
        assert outcome["refusal"] and ("not found" in outcome["refusal"] or "differ" in outcome["refusal"]), (
            challenge_id
        )


def test_a_holdout_on_a_benchmark_import_is_refused_naming_the_option(tmp_path: Path) -> None:
    from amid.server.holdout_split import with_holdout_fraction

    folder, data = make_challenge(tmp_path, "isles22")
    contract = import_task(folder, data_dir=data).contract
    with pytest.raises(InvalidInput, match="--holdout-fraction") as caught:
        with_holdout_fraction(contract, 0.2)
    assert "benchmark import" in caught.value.message
    assert with_holdout_fraction(contract, 0.0).validation.holdout_fraction == 0.0
