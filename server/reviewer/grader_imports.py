"""Does the grader's interpreter import what the grader imports? Asked once, at `amid init`.

A benchmark's own environment file may not declare every package its graders import (ReX-MLE's
`rexmle.yml` lacks pycocotools, numba, tifffile and pynrrd). Found at review time, that is a failed
review per attempt; found at init, it is one refusal that names the packages and the command that
installs them. The grader file's import statements are read (ast) and tried, in the grader's
interpreter and folder, by grader_runner.py --imports.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from amid.server.errors import InvalidInput, JobFailed
from amid.server.reviewer.bounded import child_env

RUNNER = Path(__file__).with_name("grader_runner.py")
IMPORT_TIMEOUT_S = 600.0  # monai and torch take a while to import on a cold disk
# Module names whose package on PyPI is named otherwise.
PIP_NAMES = {
    "cv2": "opencv-python-headless",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "nrrd": "pynrrd",
    "cc3d": "connected-components-3d",
    "surface_distance": "surface-distance",
    "SimpleITK": "SimpleITK",
    "pydicom": "pydicom",
    "nibabel": "nibabel",
}


def failed_imports(python: Path, grader_file: Path) -> list[dict[str, str | None]]:
    """The grader's imports that fail under `python`: module, missing top-level name (None when the
    module is installed but raised), and the reason."""
    env = child_env({"PYTHONNOUSERSITE": "1"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(grader_file.parent), env.get("PYTHONPATH", "")) if p)
    argv = [str(python), str(RUNNER), "--imports", str(grader_file)]
    try:
        done = subprocess.run(
            argv, cwd=grader_file.parent, env=env, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JobFailed(f"--grader-python: {python} could not try the grader's imports ({exc})") from exc
    try:
        return list(json.loads(done.stdout.strip().splitlines()[-1])["failed"])
    except (IndexError, ValueError, KeyError, TypeError):
        tail = done.stderr.strip()[-600:]
        raise JobFailed(f"--grader-python: {python} could not try the grader's imports: {tail}") from None


def check_grader_imports(python: Path, grader_file: Path) -> None:
    """Refuse a grader interpreter that cannot import what the grader imports, naming the packages."""
    failed = failed_imports(python, grader_file)
    if not failed:
        return
    missing = sorted({str(f["missing"]) for f in failed if f["missing"]})
    broken = [f"{f['module']} ({f['reason']})" for f in failed if not f["missing"]]
    packages = sorted(PIP_NAMES.get(name, name) for name in missing)
    parts = [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"failing on import: {'; '.join(broken)[:600]}"] if broken else []
    fix = f"install them: {python} -m pip install {' '.join(packages)}" if packages else "repair those packages"
    raise InvalidInput(
        f"--grader-python: {python} cannot import what {grader_file.name} imports ({'; '.join(parts)}); {fix}, "
        "or pass an interpreter that has them",
        field="--grader-python",
    )
