"""Where the nnU-Net lane keeps its files, seen from a worktree (shared by the steps and the scaffold's CLI,
which imports no planning code: a package's code/ carries the CLI's imports alone)."""

from __future__ import annotations

DEFAULT_ROOT = ".amid-local/nnunet"  # ignored by the attempts repository's .gitignore
DEFAULT_TASK_DIR = "../../task"  # the workspace's public task folder, seen from a worktree
DEFAULT_DATASET_ID = 501
DEFAULT_MODEL = ".amid-local/nnunet_model"  # the packaged model: declare it as artifacts.checkpoint
LOGS = ".amid-local/logs"  # to-task copies each fold's nnU-Net training log here: declare it as artifacts.logs
MODULE = "amid.tools.scaffolds.nnunet"
