"""MLE-bench's covered medical competitions import unchanged from their folder and the data their
prepare step wrote (seeded stand-ins, tests/fixtures/mlebench.py), their own grader (our stand-in,
called as MLE-bench calls it) grades perfect and trivial submissions on the test set and on a fold's
answers, and a prepared folder whose images no folder holds is refused naming what was looked for."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from amid.server.errors import InvalidInput
from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.fold_answers import write_fold_answers
from amid.tools.task.importers import import_task
from amid.tools.task.rexmle import infer_modality
from tests.fixtures.mlebench import IDS, RANZCR_LABELS, SPECS, grader_python, make_competition

RUNNER = Path(__file__).resolve().parents[3] / "server" / "reviewer" / "grader_runner.py"
TRIVIAL = {"aptos2019-blindness-detection": 0.0}  # kappa of one grade for all; every AUC of a constant is 0.5


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _write(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def _init(tmp_path: Path, competition_id: str) -> Workspace:
    folder, data = make_competition(tmp_path, competition_id)
    imported = import_task(folder, data)
    return init_workspace(imported, tmp_path / "ws", grader_python=grader_python(tmp_path))


def _grade(workspace: Workspace, submission: Path, answers: Path) -> dict:
    """The task's grader as the reviewer runs it (grader_runner under --grader-python)."""
    grader = workspace.contract().grader
    assert grader is not None
    argv = [
        str(workspace.grader_python()),
        str(RUNNER),
        str(workspace.private_dir / grader.file),
        grader.function,
        str(submission),
        str(submission.parent),
        str(answers),
        str(answers.parent),
        "scores",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _submissions(workspace: Workspace, answers: Path, into: Path) -> tuple[Path, Path]:
    """A perfect submission (the answers in the sample's columns) and a trivial one (each target at
    the training majority)."""
    sample, _ = _rows(workspace.task_dir / (workspace.contract().submission.sample_submission or ""))
    _, truth = _rows(answers)
    _, train = _rows(workspace.task_dir / (workspace.contract().layout.labels_table or ""))
    majority = {c: max({r[c] for r in train}, key=[r[c] for r in train].count) for c in sample[1:]}
    perfect = _write(into / "perfect" / "submission.csv", sample, truth)
    trivial = _write(
        into / "trivial" / "submission.csv", sample, [{sample[0]: r[sample[0]], **majority} for r in truth]
    )
    return perfect, trivial


@pytest.mark.parametrize("competition_id", IDS)
def test_competition_imports_unchanged_with_its_metric_direction_and_image_folder(
    competition_id: str, tmp_path: Path
) -> None:
    folder, data = make_competition(tmp_path, competition_id)
    imported = import_task(folder, data)
    contract = imported.contract
    _, grader_name, _, labels_table, train_images, _ = SPECS[competition_id]
    assert contract.task_type == "classification"
    assert contract.source.format == "mle_bench"
    assert (contract.primary_metric, contract.metrics[0].direction) == (grader_name, "higher_better")
    assert contract.layout.labels_table == labels_table
    assert contract.layout.case_files is not None
    assert contract.layout.case_files.train_images == train_images
    assert contract.layout.case_files.test_images == [t.replace("train", "test") for t in train_images]


@pytest.mark.parametrize("competition_id", IDS)
def test_its_grader_scores_perfect_and_trivial_submissions_on_the_test_set_and_a_fold(
    competition_id: str, tmp_path: Path
) -> None:
    workspace = _init(tmp_path, competition_id)
    grader = workspace.contract().grader
    assert grader is not None and grader.answers is not None
    perfect, trivial = _submissions(workspace, workspace.private_dir / grader.answers, tmp_path / "test")
    assert _grade(workspace, perfect, workspace.private_dir / grader.answers)["metrics"] == {"score": 1.0}
    expected = TRIVIAL.get(competition_id, 0.5)
    assert _grade(workspace, trivial, workspace.private_dir / grader.answers)["metrics"] == {"score": expected}
    folds = json.loads((workspace.task_dir / "folds.json").read_text(encoding="utf-8"))["folds"]
    answers = write_fold_answers(workspace.task_dir, workspace.contract(), folds[0]["val_cases"], tmp_path / "fold")
    perfect, trivial = _submissions(workspace, answers, tmp_path / "fold0")
    assert _grade(workspace, perfect, answers)["metrics"] == {"score": 1.0}
    assert _grade(workspace, trivial, answers)["metrics"] == {"score": expected}


def test_ranzcr_grader_imports_its_class_list_relatively_as_mlebench_does(tmp_path: Path) -> None:
    workspace = _init(tmp_path, "ranzcr-clip-catheter-line-classification")
    grader = workspace.contract().grader
    assert grader is not None and grader.answers is not None
    assert "from .classes import CLASSES" in (workspace.private_dir / grader.file).read_text(encoding="utf-8")
    perfect, _ = _submissions(workspace, workspace.private_dir / grader.answers, tmp_path / "test")
    assert _grade(workspace, perfect, workspace.private_dir / grader.answers)["status"] == "valid"


def test_a_column_constant_over_the_test_set_takes_each_training_case_value_in_fold_answers(tmp_path: Path) -> None:
    """RANZCR's Swan Ganz column is 0 for every test case: it is no constant of the task."""
    workspace = _init(tmp_path, "ranzcr-clip-catheter-line-classification")
    grader = workspace.contract().grader
    assert grader is not None and grader.fold_answers is not None
    kinds = {c.name: c.kind for c in grader.fold_answers}
    assert kinds[RANZCR_LABELS[-1]] == "value"
    _, train = _rows(workspace.task_dir / "public" / "train.csv")
    cases = [r["StudyInstanceUID"] for r in train]
    _, answers = _rows(write_fold_answers(workspace.task_dir, workspace.contract(), cases, tmp_path / "fold"))
    assert [r[RANZCR_LABELS[-1]] for r in answers] == [r[RANZCR_LABELS[-1]] for r in train]
    assert {r[RANZCR_LABELS[-1]] for r in answers} == {"0", "1"}


def test_images_are_found_in_whichever_folder_holds_every_case_and_not_in_a_partial_decoy(tmp_path: Path) -> None:
    """A folder named like a split but holding only some cases' images (a preview set), or a mask
    folder holding all of them, is not the image folder; APTOS's train_images/ is."""
    folder, data = make_competition(tmp_path, "aptos2019-blindness-detection")
    public = data / "aptos2019-blindness-detection" / "prepared" / "public"
    (public / "train").mkdir()
    (public / "masks").mkdir()
    for index, image in enumerate(sorted((public / "train_images").iterdir())):
        shutil.copy(image, public / "masks" / image.name)
        if index < 3:
            shutil.copy(image, public / "train" / image.name)
    layout = import_task(folder, data).contract.layout
    assert layout.case_files is not None
    assert layout.case_files.train_images == ["public/train_images/{case}.png"]


def test_a_prepared_folder_missing_one_training_image_is_refused_naming_the_ids_looked_for(tmp_path: Path) -> None:
    folder, data = make_competition(tmp_path, "aptos2019-blindness-detection")
    images = data / "aptos2019-blindness-detection" / "prepared" / "public" / "train_images"
    gone = sorted(images.iterdir())[0]
    gone.unlink()
    with pytest.raises(InvalidInput) as error:
        import_task(folder, data)
    message = str(error.value)
    assert "no folder holds an image file named by every train case id" in message
    assert "public/train_images/ has 29 of them among 29 images" in message
    assert gone.stem in message and error.value.field == "layout"


def test_ids_that_name_no_file_are_refused_saying_the_layout_is_needed(tmp_path: Path) -> None:
    """RSNA breast-style ids (<patient>_<side>) name no image: the import says so rather than guessing."""
    folder, data = make_competition(tmp_path, "histopathologic-cancer-detection")
    public = data / "histopathologic-cancer-detection" / "prepared" / "public"
    for image in (public / "train").iterdir():
        image.rename(image.with_name(f"patient_{image.name}"))
    with pytest.raises(InvalidInput, match=r"has 0 of them among 30 images.*needs its layout in the contract"):
        import_task(folder, data)


def test_packages_the_benchmark_imports_only_inside_functions_do_not_refuse_the_grader_python(tmp_path: Path) -> None:
    """mlebench.utils imports kaggle and tensorflow inside its download and TFRecord functions; the
    grader environment lacks both and is still accepted (a module-level import would be refused)."""
    folder, data = make_competition(tmp_path, "histopathologic-cancer-detection")
    python = grader_python(tmp_path)
    workspace = init_workspace(import_task(folder, data), tmp_path / "ws", grader_python=python)
    assert workspace.grader_python() == str(python.absolute())
    utils = tmp_path / "grader-env" / "site" / "mlebench" / "utils.py"
    utils.write_text("import kaggle\n" + utils.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InvalidInput, match="kaggle"):
        init_workspace(import_task(folder, data), tmp_path / "ws2", grader_python=python)


def test_a_dicom_series_case_missing_one_sequence_is_refused_not_dropped_for_all(tmp_path: Path) -> None:
    """RSNA-MICCAI cases are folders of four series; a case without T2w names itself and the sequences."""
    folder, data = make_competition(tmp_path, "rsna-miccai-brain-tumor-radiogenomic-classification")
    train = data / "rsna-miccai-brain-tumor-radiogenomic-classification" / "prepared" / "public" / "train"
    case = sorted(train.iterdir())[3]
    shutil.rmtree(case / "T2w")
    with pytest.raises(
        InvalidInput, match=rf"public/train/{case.name}/: its series folders \['FLAIR', 'T1w', 'T1wCE'\] lack \['T2w'\]"
    ):
        import_task(folder, data)


def test_a_leaderboard_left_as_a_git_lfs_pointer_is_refused_naming_git_lfs_pull(tmp_path: Path) -> None:
    """MLE-bench keeps leaderboard.csv in Git LFS: a checkout made without git-lfs holds a pointer file."""
    folder, data = make_competition(tmp_path, "aptos2019-blindness-detection")
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 41234\n"
    (folder / "leaderboard.csv").write_text(pointer)
    with pytest.raises(InvalidInput, match=r"Git LFS pointer.*git lfs pull") as error:
        import_task(folder, data)
    assert error.value.field == "leaderboard.csv"


@pytest.mark.parametrize(
    ("name", "overview", "modality"),
    [
        # MLE-bench's names, and overviews with the words its description.md files use (openai/mle-bench)
        ("APTOS 2019 Blindness Detection", "Diabetic retinopathy ... detect retinopathy ... retinopathy", "fundus"),
        ("RANZCR CLiP - Catheter and Line Position Challenge", "chest radiographs ... chest x-rays", "X-ray"),
        ("RSNA-MICCAI Brain Tumor Radiogenomic Classification", "MRI scans of glioblastoma", "MRI"),
        ("SIIM-ISIC Melanoma Classification", "skin cancer", "dermoscopy"),
        ("UW-Madison GI Tract Image Segmentation", "X-ray beams ... x-ray beams ... MRI guided radiotherapy", "MRI"),
        ("Histopathologic Cancer Detection", "", "pathology"),
        ("Some Challenge", "nothing that names an image", "other"),
    ],
)
def test_the_modality_comes_from_the_name_else_the_overviews_words(name: str, overview: str, modality: str) -> None:
    assert infer_modality(name, overview) == modality
