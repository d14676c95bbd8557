"""`amid init --grader-python PY` tries what the task's grader imports, in PY, from the grader's folder
(its own imports, optional ones included, and those of the benchmark's own modules it imports), and
refuses an interpreter that lacks any, naming the packages and the command that installs them; no
workspace is left behind. An interpreter that has them all is recorded as before."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from amid.server.errors import InvalidInput
from amid.server.reviewer.grader_imports import check_grader_imports, failed_imports
from amid.server.workspace import init_workspace
from amid.tools.task.importers import import_task
from tests.fixtures.rexmle import grader_python, make_challenge

PYTHON = Path(sys.executable)
# Absent from AMID's environment (as from ReX-MLE's rexmle.yml): pynrrd's `nrrd` and `numba`.
GRADER = """
import json
from pathlib import Path

import numpy as np

try:
    import numba  # optional in the file, but the grader computes otherwise without it
except ImportError:
    numba = None

from helpers import load


def grade(submission, answers):
    from nrrd import read  # imported where it is used, as ReX-MLE's graders do
    return {"score": 1.0}
"""
HELPERS = "import json\n"


def _grader(root: Path, source: str = GRADER, helpers: str = HELPERS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "helpers.py").write_text(helpers, encoding="utf-8")
    (root / "grade.py").write_text(source, encoding="utf-8")
    return root / "grade.py"


def test_every_failing_import_of_the_grader_is_named(tmp_path: Path) -> None:
    failed = failed_imports(PYTHON, _grader(tmp_path / "task"))
    assert sorted(f["missing"] for f in failed) == ["nrrd", "numba"]  # numpy and the sibling module import


def test_an_import_of_the_benchmarks_own_module_is_followed_into_it(tmp_path: Path) -> None:
    grader = _grader(tmp_path / "task", "from helpers import load\n", helpers="import nrrd\n")
    assert [(f["module"], f["missing"]) for f in failed_imports(PYTHON, grader)] == [("helpers", "nrrd")]


def test_the_refusal_names_the_packages_and_the_pip_command(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_grader_imports(PYTHON, _grader(tmp_path / "task"))
    message = caught.value.message
    assert caught.value.field == "--grader-python" and "grade.py" in message
    assert f"{PYTHON} -m pip install numba pynrrd" in message  # pynrrd: the package that provides `nrrd`


def test_a_grader_whose_imports_all_resolve_passes(tmp_path: Path) -> None:
    check_grader_imports(PYTHON, _grader(tmp_path / "task", "import numpy\nfrom helpers import load\n"))


def test_init_refuses_a_grader_environment_without_what_the_grader_imports(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, "seg_a")
    grade = folder / "grade.py"
    grade.write_text(grade.read_text(encoding="utf-8") + "\n\ndef _nrrd():\n    import nrrd\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"missing nrrd.*-m pip install pynrrd"):
        init_workspace(import_task(folder, data_dir=data_dir), tmp_path / "ws", grader_python=grader_python(tmp_path))
    assert not (tmp_path / "ws").exists()


def test_init_records_a_grader_environment_that_imports_everything(tmp_path: Path) -> None:
    folder, data_dir = make_challenge(tmp_path, "seg_a")
    python = grader_python(tmp_path)
    workspace = init_workspace(import_task(folder, data_dir=data_dir), tmp_path / "ws", grader_python=python)
    assert workspace.grader_python() == str(python.absolute())
