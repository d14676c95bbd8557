"""Runnable lane scaffolds: nnU-Net (dataset conversion, locked splits, exact commands, conversion back)
and a MONAI training/inference entry point. Run as `python -m amid.tools.scaffolds.nnunet …` and
`python -m amid.tools.scaffolds.monai_seg …` from a worker's worktree, usually through `run_gpu_job`."""
