#!/usr/bin/env bash
# Build the grader environment for MLE-bench competitions: a virtual environment where the real
# `mlebench` package (from a checkout of openai/mle-bench) and what its prepare.py and grade.py files
# of the medical competitions import resolve. Prints the environment's python on the last line.
#
#   bash benchmarks/mlebench/grader_env.sh MLEBENCH_CHECKOUT [VENV_DIR]
#
# MLEBENCH_CHECKOUT is the repository root (it holds mlebench/). `mlebench` is put on the path with a
# .pth file rather than installed: its declared dependencies (tensorflow, docker, kaggle, openai, ...)
# serve the agent harness and the Kaggle download, not preparing from raw files or grading.
set -euo pipefail
CHECKOUT="$(cd "${1:?usage: grader_env.sh MLEBENCH_CHECKOUT [VENV_DIR]}" && pwd)"
VENV="${2:-${AMID_CACHE:-$HOME/.cache/amid}/mlebench-grader}"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
test -d "$CHECKOUT/mlebench/competitions" || { echo "grader_env: $CHECKOUT/mlebench/competitions not found" >&2; exit 2; }
if [ ! -f "$VENV/.complete" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q numpy scipy "pandas>=2.2" "scikit-learn>=1.5" pyyaml appdirs py7zr tqdm \
    pillow pycocotools
  touch "$VENV/.complete"
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$CHECKOUT" > "$SITE/mlebench_checkout.pth"
"$VENV/bin/python" -c 'import mlebench.grade_helpers, mlebench.competitions.utils, mlebench.registry' >&2
echo "$VENV/bin/python"
