#!/usr/bin/env bash
# Build the grader environment for ReX-MLE challenges: a virtual environment where the real
# `rexmle` package (from a checkout of rajpurkarlab/ReX-MLE) and the packages its prepare.py and
# grade.py files import resolve. Prints the environment's python on the last line.
#
#   bash benchmarks/rexmle/grader_env.sh REXMLE_CHECKOUT [VENV_DIR]
#
# REXMLE_CHECKOUT is the repository root (it holds rex-mle/rexmle/). `rexmle` is put on the path
# with a .pth file: the checkout has no installable package metadata.
set -euo pipefail
CHECKOUT="$(cd "${1:?usage: grader_env.sh REXMLE_CHECKOUT [VENV_DIR]}" && pwd)"
VENV="${2:-${AMID_CACHE:-$HOME/.cache/amid}/rexmle-grader}"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
test -d "$CHECKOUT/rex-mle/rexmle" || { echo "grader_env: $CHECKOUT/rex-mle/rexmle not found" >&2; exit 2; }
if [ ! -f "$VENV/.complete" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip "setuptools>=77" wheel
  # torch 2.13.0 is the CPU build on this machine's disk; monai's metrics utils need it.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q numpy scipy pandas scikit-learn scikit-image pillow pyyaml \
    click tqdm requests appdirs gdown tifffile nibabel pydicom SimpleITK pynrrd \
    opencv-python-headless connected-components-3d numba pycocotools surface-distance "monai>=1.2"
  touch "$VENV/.complete"
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$CHECKOUT/rex-mle" > "$SITE/rexmle_checkout.pth"
"$VENV/bin/python" -c 'import rexmle.grade_helpers, surface_distance, pycocotools, cv2, monai' >&2
echo "$VENV/bin/python"
