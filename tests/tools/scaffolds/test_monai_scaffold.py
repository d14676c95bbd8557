"""The MONAI lane: a configuration chosen from the profile, and a training/inference entry point that runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import yaml
from PIL import Image

from amid.server.context import Services, ToolContext
from amid.server.ledger import Identity
from amid.server.reviewer.agreement import LABEL_AGREEMENT, label_agreement
from amid.server.workspace import Workspace, init_workspace
from amid.tools.lane_plan import ensure_portfolio
from amid.tools.planning.facts import ChannelIntensity, PlanningFacts
from amid.tools.planning.steps import MONAI_MODEL, monai_steps
from amid.tools.scaffolds.monai_config import MonaiConfig, config_from_facts
from amid.tools.scaffolds.monai_model import package
from amid.tools.scaffolds.monai_seg import build_network
from amid.tools.scaffolds.monai_steps import CPU_EPOCHS, CPU_ITERATIONS
from amid.tools.scaffolds.pinning import PIN_FLAG, scaffold_digest
from amid.tools.task.importers import import_task
from tests.tools.scaffolds.graded import (
    freeze_like_submit,
    grade_with_task_grader,
    moved_away,
    replay_like_the_reviewer,
    run_step,
    submission_rows,
    worktree_of,
)

LANE = "monai-3d-segresnet-swinunetr"


def _facts(**overrides: object) -> PlanningFacts:
    base: dict[str, object] = {
        "task_type": "segmentation",
        "modality": "CT",
        "dims": 3,
        "n_train_cases": 20,
        "predicates": {"dims_3d": True, "sparse_foreground": True},
        "median_shape": [200, 180, 40],
        "median_spacing": [0.8, 0.8, 4.0],
        "label_values": {0: "background", 1: "liver", 2: "lesion"},
        "intensity": [ChannelIntensity(name="CT", mean=90, std=30, percentile_00_5=-50, percentile_99_5=200)],
    }
    return PlanningFacts.model_validate({**base, **overrides})


def test_sparse_3d_ct_gets_segresnet_dice_focal_a_ct_window_and_foreground_crops() -> None:
    cfg = config_from_facts(_facts())
    assert (cfg.network, cfg.spatial_dims, cfg.loss, cfg.intensity) == ("SegResNet", 3, "DiceFocal", "ct_window")
    assert cfg.target_spacing == [0.8, 0.8, 4.0] and cfg.patch_size == [128, 128, 32]
    assert cfg.clip == [-50, 200] and cfg.mean_std == [90, 30] and cfg.pos_neg == [2.0, 1.0]
    assert cfg.label_values == [0, 1, 2] and cfg.out_channels == 3
    assert any("median spacing" in reason for reason in cfg.reasons)


def test_rgb_tiles_get_a_2d_unet_scaled_to_unit_range() -> None:
    cfg = config_from_facts(
        _facts(
            modality="pathology",
            dims=2,
            rgb=True,
            n_channels=1,
            median_shape=[300, 300],
            median_spacing=[1, 1],
            predicates={"dims_2d": True},
            intensity=[],
        )
    )
    assert (cfg.network, cfg.in_channels, cfg.intensity, cfg.loss) == ("BasicUNet", 3, "rgb_0_1", "DiceCE")
    assert cfg.target_spacing is None and cfg.patch_size == [256, 256]


def test_enhancement_gets_l1_and_an_invertible_shared_scaling() -> None:
    cfg = config_from_facts(_facts(task_type="enhancement", predicates={"dims_3d": True, "paired_enhancement": True}))
    assert (cfg.loss, cfg.intensity, cfg.mean_std, cfg.label_values) == ("L1", "global_zscore", [90, 30], [])
    assert cfg.out_channels == cfg.in_channels == 1
    with pytest.raises(ValueError, match="covers"):
        config_from_facts(_facts(task_type="classification"))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_monai_lane_trains_on_the_locked_fold_and_predicts_in_the_task_format(
    services: Services, tmp_path: Path
) -> None:
    workspace = services.workspace
    ensure_portfolio(ToolContext(services=services, caller=Identity(agent_id="w1", role="agent")))
    config = json.loads((workspace.memory_dir / "lanes" / f"{LANE}.monai_config.json").read_text(encoding="utf-8"))
    assert config["network"] == "SegResNet" and config["intensity"] == "ct_window"
    steps = {s.name: s for s in monai_steps(LANE, sys.executable, 5)}
    worktree = worktree_of(workspace)
    cpu = ["--device", "cpu"]
    run_step(steps["smoke_train_fold_0"], worktree)  # seconds; what predict, package and replay accept
    run_step(steps["predict_fold_0"], worktree, cpu)
    fold = json.loads((workspace.task_dir / "folds.json").read_text(encoding="utf-8"))["folds"][0]
    for case_id in fold["val_cases"]:
        prediction = nib.load(worktree / "predictions/fold_0" / f"{case_id}.nii.gz")
        reference = nib.load(workspace.task_dir / "public/train/images" / f"{case_id}_0000.nii.gz")
        assert prediction.shape == reference.shape and np.allclose(prediction.affine, reference.affine)
        assert set(np.unique(np.asarray(prediction.dataobj))) <= {0, 1, 2}
    assert sorted(p.name for p in (worktree / "predictions/fold_0").iterdir()) == sorted(
        f"{case_id}.nii.gz" for case_id in fold["val_cases"]
    )  # the fold's cases only: any other file there is PRED_SCHEMA
    manifest = json.loads((worktree / "predictions/training_manifest.json").read_text(encoding="utf-8"))
    assert manifest["folds"] == {"0": fold["train_cases"]}
    assert len((worktree / ".amid-local/monai/fold_0/train_log.jsonl").read_text(encoding="utf-8").splitlines()) == 1
    stray = worktree / "predictions/fold_0/notes.txt"  # what the reviewer would take as a prediction (PRED_SCHEMA)
    stray.write_text("an earlier run's notes\n", encoding="utf-8")
    refused = subprocess.run(steps["predict_fold_0"].argv, cwd=worktree, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "notes.txt" in refused.stderr
    stray.unlink()
    run_step(steps["package"], worktree)
    model = worktree / MONAI_MODEL
    assert sorted(p.relative_to(model).as_posix() for p in model.rglob("*")) == [
        "fold_0",
        "fold_0/checkpoint.pt",
        "fold_0/monai_config.json",
    ]
    run_step(steps["predict_test"], worktree, cpu)  # from the packaged fold 0
    assert len(submission_rows(worktree / "submission")) == 6
    scores = grade_with_task_grader(workspace, worktree / "submission")
    assert 0.0 <= scores["dice"] <= 1.0
    frozen = freeze_like_submit(model, tmp_path)
    moved_away(worktree / ".amid-local", tmp_path)  # training runs and package gone: the frozen copy only
    cases = fold["val_cases"][:2]
    images = [workspace.task_dir / "public/train/images" / f"{case_id}_0000.nii.gz" for case_id in cases]
    outputs, _ = replay_like_the_reviewer(steps["replay"], frozen, images, tmp_path / "replay", fold=0)
    assert sorted(p.name for p in outputs.iterdir()) == [f"{case_id}.nii.gz" for case_id in cases]
    for case_id in cases:
        replayed = np.asarray(nib.load(outputs / f"{case_id}.nii.gz").dataobj)
        submitted = np.asarray(nib.load(worktree / "predictions/fold_0" / f"{case_id}.nii.gz").dataobj)
        assert label_agreement(replayed, submitted) >= LABEL_AGREEMENT, case_id  # what PRED_NOT_REPRODUCED asks


def test_the_monai_steps_package_the_model_and_replay_from_checkpoint_alone() -> None:
    steps = {s.name: s for s in monai_steps(LANE, "/venv/bin/python", 3)}
    assert list(steps)[-3:] == ["package", "predict_test", "replay"]
    assert steps["package"].argv[-4:] == ["--runs", ".amid-local/monai", "--dest", MONAI_MODEL]
    replay = (
        "{python} -m amid.tools.scaffolds.monai_seg replay --model {checkpoint} --fold {fold} --input-dir {input_dir}"
    )
    pin = [PIN_FLAG, scaffold_digest("monai")]
    assert steps["replay"].argv == [*replay.split(), "--output-dir", "{output_dir}", *pin]
    assert not steps["replay"].job and steps["replay"].run_gpu_job is None
    assert "inference_command" in steps["replay"].note and "artifacts.checkpoint" in steps["package"].note
    assert steps["predict_test"].argv[3:8] == ["predict", "--checkpoint", MONAI_MODEL, "--fold", "0"]


def test_without_a_gpu_every_monai_step_runs_on_cpu_at_the_stated_budget() -> None:
    steps = {s.name: s for s in monai_steps(LANE, "/venv/bin/python", 2, gpus_here=0)}
    jobs = [s for s in steps.values() if s.job]
    assert all(s.gpus == 0 and s.gpu_only is None for s in jobs)
    assert all(s.argv[s.argv.index("--device") + 1] == "cpu" for s in jobs if "--device" in s.argv)
    torch_steps = [s for s in jobs if "--device" in s.argv]
    assert len(torch_steps) == 6 and all(s.env == {"OMP_NUM_THREADS": "1"} and s.cpus == 1 for s in torch_steps)
    train = steps["train_fold_0"].argv
    budget = ["--epochs", str(CPU_EPOCHS), "--iterations", str(CPU_ITERATIONS)]
    assert train[-4:] == budget and f"{CPU_EPOCHS} epochs of {CPU_ITERATIONS} batches" in steps["train_fold_0"].note
    smoke = steps["smoke_train_fold_0"].argv
    assert smoke[smoke.index("--out") + 1] == ".amid-local/monai/fold_0"  # what package and predict_fold_0 read
    assert [s.name for s in steps.values() if s.route == "smoke"] == ["smoke_train_fold_0"]
    assert [s.name for s in steps.values() if s.route == "full"] == [
        "train_fold_0",
        "train_fold_1",
        "predict_fold_1",
        "score_fold_1",
    ]
    assert steps["score_fold_0"].argv[1:] == [
        "-m",
        "amid.tools.scaffolds.score",
        "--predictions",
        "predictions/fold_0",
        "--fold",
        "0",
        "--out",
        ".amid-local/scores/fold_0.json",
    ]


def test_with_a_gpu_the_monai_training_steps_take_it_and_the_configurations_epochs() -> None:
    steps = {s.name: s for s in monai_steps(LANE, "/venv/bin/python", 1, gpus_here=2)}
    for name in ("smoke_train_fold_0", "train_fold_0", "predict_fold_0", "predict_test"):
        assert steps[name].gpus == 1 and "cuda" in steps[name].argv, name
    assert "--epochs" not in steps["train_fold_0"].argv and steps["score_fold_0"].gpus == 0


@pytest.mark.slow
def test_a_packaged_monai_model_alone_replays_in_the_sandbox_in_the_task_format(tmp_path: Path) -> None:
    import torch

    cfg = MonaiConfig(
        task="segmentation",
        spatial_dims=2,
        in_channels=1,
        label_values=[0, 255],
        network="BasicUNet",
        target_spacing=None,
        patch_size=[32, 32],
        intensity="zscore",
        loss="DiceCE",
    )
    runs = tmp_path / "runs"
    (runs / "fold_1").mkdir(parents=True)
    state = {"state_dict": build_network(cfg).state_dict(), "config": cfg.model_dump(), "fold": 1}
    torch.save(state, runs / "fold_1/checkpoint.pt")
    model = tmp_path / "worktree" / MONAI_MODEL
    assert package(runs, model)["folds"] == [1]
    frozen = freeze_like_submit(model, tmp_path)
    moved_away(runs, tmp_path)
    moved_away(model, tmp_path)
    rng = np.random.default_rng(0)
    for case in ("c0", "c1"):
        (tmp_path / "images").mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (40, 36), dtype=np.uint8)).save(tmp_path / "images" / f"{case}_0000.png")
    step = next(s for s in monai_steps(LANE, sys.executable, 3) if s.name == "replay")
    images = sorted((tmp_path / "images").iterdir())
    outputs, _ = replay_like_the_reviewer(step, frozen, images, tmp_path / "replay", fold=1)
    assert sorted(p.name for p in outputs.iterdir()) == ["c0.png", "c1.png"]
    for output in outputs.iterdir():
        with Image.open(output) as written:
            assert written.size == (36, 40) and set(np.unique(np.asarray(written))) <= {0, 255}


def _png_enhancement_task(root: Path) -> Workspace:
    """Grey 40 x 36 PNG pairs: noisy inputs, smooth targets; six cases in three groups."""
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:40, 0:36]
    for i in range(6):
        clean = (120 + 80 * np.sin(xx / (4 + i)) * np.cos(yy / 7)).clip(0, 255)
        noisy = (clean + rng.normal(0, 20, clean.shape)).clip(0, 255)
        for folder, array in (("low", noisy), ("full", clean)):
            (root / folder).mkdir(parents=True, exist_ok=True)
            Image.fromarray(array.astype(np.uint8)).save(root / folder / f"img{i}.png")
    (root / "groups.csv").write_text(
        "case_id,site\n" + "".join(f"img{i},s{i % 3}\n" for i in range(6)), encoding="utf-8"
    )
    task = {
        "id": "tiny-denoise",
        "title": "Tiny denoising",
        "modality": "ultrasound",
        "task_type": "enhancement",
        "layout": {
            "train_images": "low",
            "train_labels": "full",
            "file_ending": ".png",
            "groups_table": "groups.csv",
            "group_key": "site",
        },
        "metrics": [{"name": "psnr", "direction": "higher_better"}],
        "primary_metric": "psnr",
        "prediction": {"file_type": "png"},
        "submission": {"columns": ["case_id", "prediction_path"], "file_column": "prediction_path"},
        "validation": {"k_folds": 3, "seed": 0},
    }
    (root / "task.yaml").write_text(yaml.safe_dump(task), encoding="utf-8")
    return init_workspace(import_task(root / "task.yaml"), root.parent / "ws")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_monai_scaffold_restores_2d_png_pairs_at_their_original_size(tmp_path: Path) -> None:
    from amid.tools.planning.facts import facts_from_profile
    from amid.tools.profile_data import build_request
    from amid.tools.profiling import profile_dataset

    workspace = _png_enhancement_task(tmp_path / "task")
    contract = workspace.contract()
    profile = profile_dataset(build_request(workspace, contract, workspace.folds()))
    facts = facts_from_profile(profile, contract.modality)
    assert facts.holds("paired_enhancement") and facts.dims == 2
    config = config_from_facts(facts, epochs=1)
    config.write(workspace.memory_dir / "lanes" / "paired-enhancement-restoration.monai_config.json")
    steps = {s.name: s for s in monai_steps("paired-enhancement-restoration", sys.executable, 3)}
    worktree = worktree_of(workspace)
    run_step(steps["train_fold_0"], worktree, ["--iterations", "2", "--device", "cpu"])
    run_step(steps["predict_fold_0"], worktree, ["--device", "cpu"])
    for case_id in workspace.folds().folds[0].val_cases:
        with Image.open(worktree / "predictions/fold_0" / f"{case_id}.png") as restored:
            assert restored.size == (36, 40) and restored.mode == "L"
