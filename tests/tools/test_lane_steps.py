"""Lane steps as data over MCP, fitted to the machine's devices; the replay's scaffold pin and {checkpoint} name."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.context import Services, ToolContext
from amid.server.errors import Conflict
from amid.server.jobs.gpu import GpuInfo, StaticInventory
from amid.server.jobs.local import LocalBackend
from amid.server.jobs.scheduler import JobScheduler
from amid.server.ledger import Identity, Ledger
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.replay import declared_name
from amid.server.settings import Settings
from amid.server.workspace import Workspace
from amid.tools.jobs import RunJobInput
from amid.tools.lane_plan import ensure_portfolio
from amid.tools.scaffolds import pinning
from amid.tools.scaffolds.nnunet_steps import SMOKE_EPOCHS, SMOKE_ITERATIONS
from amid.tools.scaffolds.pinning import PIN_CODE, PIN_FLAG, check_pin, scaffold_digest
from tests.clients import local_client, ok

NNUNET = "nnunet-3d-fullres"
ONE_GPU = [GpuInfo(index=0, uuid="GPU-0", name="test", memory_total_mb=8000, memory_free_mb=8000, utilization_pct=0)]


@pytest.fixture(scope="module", params=[0, 1], ids=["no-gpu", "one-gpu"])
def machine(
    request: pytest.FixtureRequest, _pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Services, int]]:
    """The demo workspace planned on a machine whose scheduler sees 0 or 1 GPU (NVML declared, not probed)."""
    gpus: int = request.param
    root = tmp_path_factory.mktemp(f"gpus{gpus}") / "ws"
    shutil.copytree(_pristine_workspace, root, symlinks=True)
    workspace = Workspace.open(root)
    ledger = Ledger(workspace.ledger_path)
    services = Services(settings=Settings(workspace=root, port=0), workspace=workspace, ledger=ledger)
    inventory = StaticInventory(ONE_GPU[:gpus])
    backend = LocalBackend(python=sys.executable, base_env=dict(os.environ))
    scheduler = JobScheduler(workspace.sub("jobs"), backend, inventory, max_concurrent=1)
    services.scheduler = scheduler
    try:
        ensure_portfolio(ToolContext(services=services, caller=Identity(agent_id="planner", role="supervisor")))
        yield services, gpus
    finally:
        scheduler.close()
        ledger.close()


@pytest.mark.anyio
async def test_claim_lane_returns_steps_to_pass_to_run_gpu_job_as_they_are(machine: tuple[Services, int]) -> None:
    services, gpus = machine
    async with local_client(services, f"w{gpus}") as client:
        claimed = await ok(client, "claim_lane", {"lane_id": NNUNET})
    steps = {step["name"]: step for step in claimed["steps"]}
    jobs = [step for step in claimed["steps"] if step["job"]]
    for step in jobs:  # each one is a valid run_gpu_job request, argv and env included
        assert step["run_gpu_job"] == {
            "command": step["argv"],
            "env": step["env"],
            "gpus": step["gpus"],
            "cpus": step["cpus"],
            "time_limit_s": step["time_limit_s"],
        }
        RunJobInput.model_validate(step["run_gpu_job"])
        assert shlex.join(step["argv"]) in claimed["lane_file"]  # the human text comes from the same data
    assert steps["replay"]["job"] is False and steps["replay"]["run_gpu_job"] is None
    assert steps["replay"]["argv"][:3] == ["{python}", "-m", "amid.tools.scaffolds.nnunet"]
    assert "'{python}'" not in claimed["lane_file"]  # no shell quoting an agent must undo
    names = list(steps)
    assert names.index("score_fold_0") < names.index("package") < names.index("predict_test")


@pytest.mark.anyio
async def test_steps_fit_the_devices_the_scheduler_has(machine: tuple[Services, int]) -> None:
    services, gpus = machine
    async with local_client(services, f"w{gpus}") as client:
        claimed = await ok(client, "claim_lane", {"lane_id": NNUNET})
    steps = {step["name"]: step for step in claimed["steps"]}
    trainers = [steps["smoke_train_fold_0"], steps["train_fold_0"], steps["predict_test"]]
    assert [step["gpus"] for step in trainers] == [gpus] * 3
    plan = steps["plan_and_preprocess"]  # nnU-Net's worker pools sized to the cores the step asks for
    cores = str(plan["cpus"])
    assert plan["cpus"] <= (os.cpu_count() or 1) and plan["argv"][plan["argv"].index("-npfp") + 1] == cores
    assert {steps[n]["env"]["nnUNet_def_n_proc"] for n in ("plan_and_preprocess", "smoke_train_fold_0")} == {cores}
    if gpus:
        assert not [step["name"] for step in claimed["steps"] if "cpu" in step["argv"]]
        return
    budget = ["--epochs", str(SMOKE_EPOCHS), "--iterations", str(SMOKE_ITERATIONS), "--disable-tta"]
    assert steps["smoke_train_fold_0"]["argv"][-7:] == ["--device", "cpu", *budget]
    assert steps["train_fold_0"]["argv"][-2:] == ["-device", "cpu"] and "days" in steps["train_fold_0"]["note"]
    assert steps["predict_test"]["argv"][-2:] == ["--device", "cpu"]
    assert not [step["name"] for step in claimed["steps"] if step["gpus"]]  # nothing a CPU machine refuses


def _copy_of_the_scaffold(tmp_path: Path) -> Path:
    copy = tmp_path / "scaffolds"
    copy.mkdir()
    for name in pinning.SCAFFOLD_FILES["nnunet"]:
        shutil.copyfile(Path(pinning.__file__).parent / name, copy / name)
    return copy


def test_a_replay_pinned_to_other_scaffold_code_is_refused_naming_both_digests(tmp_path: Path) -> None:
    copy = _copy_of_the_scaffold(tmp_path)
    pinned = scaffold_digest("nnunet")
    check_pin("nnunet", pinned, copy)  # the same code: accepted
    check_pin("nnunet", None, copy)  # a command that pins nothing is not refused here
    with (copy / "nnunet_model.py").open("a", encoding="utf-8") as changed:
        changed.write("\n# an upgrade that changes how predictions are written\n")
    with pytest.raises(Conflict, match=rf"{PIN_CODE}: the installed nnunet scaffold \(\w{{12}}.*\({pinned[:12]}\)"):
        check_pin("nnunet", pinned, copy)


def test_the_replay_command_refuses_before_predicting_when_its_pin_differs(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "amid.tools.scaffolds.nnunet",
        "replay",
        "--model",
        str(tmp_path),
        "--folds",
        "0",
        "--input-dir",
        str(tmp_path),
        "--output-dir",
        str(tmp_path / "out"),
        PIN_FLAG,
        "0" * 64,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"CONFLICT: {PIN_FLAG}: {PIN_CODE}" in done.stderr
    assert not (tmp_path / "out").exists()


def test_checkpoint_names_the_declared_folder_not_its_first_file() -> None:
    member = ArtifactRef(
        role="checkpoint",
        fold=None,
        member="amid_conversion.json",
        sha256="0" * 64,
        declared_path=".amid-local/nnunet_model/amid_conversion.json",
        frozen_path="f/a",
    )
    weights = "fold_0/checkpoint_final.pth"
    nested = member.model_copy(update={"member": weights, "declared_path": f".amid-local/nnunet_model/{weights}"})
    single = member.model_copy(update={"member": None, "declared_path": "outputs/model.pt"})
    assert [declared_name(ref) for ref in (member, nested, single)] == ["nnunet_model", "nnunet_model", "model.pt"]
