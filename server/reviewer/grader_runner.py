"""Run a task author's grader on one submission, in its own process, as its benchmark's harness does.

    python grader_runner.py GRADER_PY FUNCTION SUBMISSION_CSV SUBMISSION_DIR ANSWERS_CSV ANSWERS_DIR MODE
    python grader_runner.py --imports GRADER_PY

The call is ReX-MLE's / MLE-bench's: `grade(pd.read_csv(submission), pd.read_csv(answers),
submission_dir=Path, answers_dir=Path)` (keyword arguments the function declares), with the
grader's own folder first on `sys.path` and as the working directory, so its sibling files and
modules resolve. MODE `validity` reports only whether the grader accepted the submission (a test
score never leaves this process); MODE `scores` also reports the numeric results (validation folds,
whose answers the server built from public training labels). The last line of stdout is the JSON
verdict; whatever the grader prints goes to stderr. `--imports` tries every module the grader file
imports and reports those that fail (at `amid init`, before any review needs them). Runs under the
grader's interpreter: it imports nothing of AMID.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

INVALID_NAMES = ("InvalidSubmissionError", "InvalidSubmission")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--imports"]:
        return _check_imports(Path(argv[1]))
    grader, function, submission_csv, submission_dir, answers_csv, answers_dir, mode = argv
    folder = str(Path(grader).parent)
    sys.path.insert(0, folder)
    os.chdir(folder)
    with contextlib.redirect_stdout(sys.stderr):
        verdict = _grade(grader, function, submission_csv, submission_dir, answers_csv, answers_dir)
    if mode != "scores":
        verdict.pop("metrics", None)
    print(json.dumps(verdict))
    return 0


def _grade(
    grader: str, function: str, submission_csv: str, submission_dir: str, answers_csv: str, answers_dir: str
) -> dict[str, Any]:
    try:
        # Imported by its own name from its own folder (first on sys.path and on PYTHONPATH), so
        # worker processes the grader starts (joblib, multiprocessing) can import it again.
        module = _import(Path(grader))
        grade = getattr(module, function)
        import pandas as pd

        submission, answers = pd.read_csv(submission_csv), pd.read_csv(answers_csv)
    except Exception as exc:  # the grader cannot even start: a failed check, never "valid"
        return {"status": "error", "reason": _describe(exc)}
    parameters = inspect.signature(grade).parameters
    kwargs: dict[str, Any] = {}
    if "submission_dir" in parameters:
        kwargs["submission_dir"] = Path(submission_dir)
    if "answers_dir" in parameters:
        kwargs["answers_dir"] = Path(answers_dir)
    try:
        result = grade(submission, answers, **kwargs)
    except Exception as exc:
        invalid = any(c.__name__ in INVALID_NAMES for c in type(exc).__mro__)
        return {"status": "invalid" if invalid else "error", "reason": _describe(exc)}
    return {"status": "valid", "reason": "", "metrics": _numbers(result)}


def _check_imports(grader: Path) -> int:
    """Try every module the grader imports (anywhere in the file, optional ones included: dentex
    grades differently without pycocotools), and those its benchmark's own modules import (rexmle's
    medical_utils and pynrrd), from its folder; print {"failed": [...]} as JSON."""
    sys.path.insert(0, str(grader.parent))
    os.chdir(grader.parent)
    failed: list[dict[str, Any]] = []
    files, seen = [grader], set()
    with contextlib.redirect_stdout(sys.stderr):
        while files:
            source = files.pop()
            # The benchmark's own modules: only what runs on import (MLE-bench's utils import kaggle
            # and tensorflow inside download and TFRecord functions that no grader calls).
            for name in _imported_names(source, in_functions=source == grader):
                if name in seen:
                    continue
                seen.add(name)
                try:
                    module = importlib.import_module(name)
                except ModuleNotFoundError as exc:
                    failed.append(
                        {"module": name, "missing": (exc.name or name).split(".")[0], "reason": _describe(exc)}
                    )
                    continue
                except Exception as exc:  # installed but broken (a numpy its build does not match)
                    failed.append({"module": name, "missing": None, "reason": _describe(exc)})
                    continue
                files += [Path(f) for f in [getattr(module, "__file__", None)] if f and _own_code(f)]
    print(json.dumps({"failed": failed}))
    return 0


def _own_code(path: str) -> bool:
    """A module of the benchmark's own checkout (not an installed package nor the standard library)."""
    import sysconfig

    installed = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return path.endswith(".py") and not any(path.startswith(p) for p in installed) and "-packages" not in path


def _imported_names(source: Path, in_functions: bool = True) -> list[str]:
    """The absolute module names of the file's import statements (relative ones are its own); those
    inside functions too when `in_functions`."""
    import ast

    names: list[str] = []
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return names
    nodes: list[ast.AST] = list(ast.walk(tree)) if in_functions else []
    stack: list[ast.AST] = [] if in_functions else list(tree.body)
    while stack:  # module level: every node outside function bodies (try/if blocks included)
        node = stack.pop()
        nodes.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack += list(ast.iter_child_nodes(node))
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


def _import(grader: Path) -> Any:
    """The grader by its own name; one that imports its siblings relatively (MLE-bench's ranzcr
    `from .classes import CLASSES`) as a module of its folder's package, as its benchmark imports it."""
    try:
        return importlib.import_module(grader.stem)
    except ImportError as exc:
        if "relative import" not in str(exc):
            raise
    sys.path.insert(0, str(grader.parent.parent))
    return importlib.import_module(f"{grader.parent.name}.{grader.stem}")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1500]


def _numbers(result: Any) -> dict[str, float | None]:
    """The grader's numeric results (a dict of metrics, or one score)."""
    items = result.items() if isinstance(result, dict) else [("score", result)]
    numbers: dict[str, float | None] = {}
    for key, value in items:
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        numbers[str(key)] = number if math.isfinite(number) else None
    return numbers


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
