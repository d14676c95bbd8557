"""The demo's scripted worker: the whole AMID loop through the real MCP client, no model service.

It does what a coding agent would do, deterministically: read the task and the profile, claim a
lane, write a small model into its worktree (intensity thresholds fitted on the locked fold's
training cases), train and predict through `run_gpu_job` (CPU jobs here), commit, compute its own
fold scores, submit (with the inference command that reproduces its predictions from the frozen
checkpoint: the reviewer replays it in its sandbox), request the independent review and read the verdict.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import Client

from server.errors import JobFailed
from server.mcp_client import call
from server.workspace import Workspace

MODEL_PY = '''\
"""Intensity-threshold segmentation: fit on training cases, predict label maps in the reference geometry.

    python threshold_model.py train TASK_DIR FOLDS_JSON FOLD OUT_DIR
    python threshold_model.py predict MODEL_JSON INPUT_DIR OUTPUT_DIR
"""
import json
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage


def smooth(path):
    image = nib.load(path)
    return image, ndimage.gaussian_filter(np.asarray(image.dataobj, dtype=float), 1.0)


def train(task_dir, folds_json, fold, out):
    folds = json.loads(Path(folds_json).read_text(encoding="utf-8"))
    cases = folds["folds"][fold]["train_cases"]
    samples = {0: [], 1: [], 2: []}
    for case in cases:
        _, volume = smooth(Path(task_dir) / "public/train/images" / f"{case}_0000.nii.gz")
        label = np.asarray(nib.load(Path(task_dir) / "public/train/labels" / f"{case}.nii.gz").dataobj)
        body = volume > -500
        for value in samples:
            mask = (label == value) & body
            samples[value].append(float(np.median(volume[mask])))
    medians = {value: float(np.median(found)) for value, found in samples.items()}
    model = {"organ_min": (medians[0] + medians[1]) / 2, "lesion_max": (medians[1] + medians[2]) / 2,
             "lesion_min": medians[2] - (medians[1] - medians[2]), "medians": medians}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "model.json").write_text(json.dumps(model, indent=1), encoding="utf-8")
    (Path(out) / "manifest.json").write_text(json.dumps({"folds": {str(fold): cases}}), encoding="utf-8")
    print(f"fold {fold}: fitted on {len(cases)} cases: {model}")


def predict(model_json, source, target):
    model = json.loads(Path(model_json).read_text(encoding="utf-8"))
    Path(target).mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(source).glob("*_0000.nii.gz")):
        image, volume = smooth(path)
        organ = ndimage.binary_opening(volume > model["organ_min"])
        # lesions are darker than the organ: holes in its mask, filled slice by slice
        filled = np.stack([ndimage.binary_fill_holes(organ[..., z]) for z in range(volume.shape[-1])], -1)
        lesion = filled & ~organ & (volume > model["lesion_min"]) & (volume <= model["lesion_max"])
        label = np.zeros(volume.shape, np.uint8)
        label[filled] = 1
        label[ndimage.binary_opening(lesion)] = 2
        name = path.name[: -len("_0000.nii.gz")] + ".nii.gz"
        nib.save(nib.Nifti1Image(label, image.affine, image.header), Path(target) / name)
        print(f"predicted {name}")


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        predict(sys.argv[2], sys.argv[3], sys.argv[4])
'''


def _commit(worktree: Path, paths: list[str], message: str) -> str:
    import git

    with git.Repo(worktree) as repo:
        repo.index.add(paths)
        return str(repo.index.commit(message).hexsha)


def _link_inputs(workspace: Workspace, cases: list[str], folder: Path, split: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        source = workspace.task_dir / f"public/{split}/images/{case}_0000.nii.gz"
        (folder / source.name).unlink(missing_ok=True)
        (folder / source.name).symlink_to(source)


async def _job(client: Client, command: list[str]) -> dict[str, Any]:
    job = await call(client, "run_gpu_job", {"command": command, "time_limit_s": 600})
    state = job
    while state["status"] in ("queued", "running"):
        state = await call(client, "get_job", {"job_id": job["job_id"], "wait_s": 30})
    if state["status"] != "succeeded":
        raise JobFailed(f"demo job {' '.join(command[1:3])} {state['status']}: {state['stderr_tail'][-800:]}")
    return state


def _own_scores(workspace: Workspace, folder: Path, cases: list[str]) -> dict[str, float]:
    """The worker's own computation of its fold scores with the contract's conventions."""
    import nibabel as nib
    import numpy as np

    from server.reviewer.scoring import case_values, foreground_labels, mean_value, plan_metrics, summarize_all

    contract = workspace.contract()
    plan, labels = plan_metrics(contract), foreground_labels(contract)
    values: dict[str, list[float]] = {}
    for case in cases:
        reference: Any = nib.load(workspace.task_dir / f"public/train/labels/{case}.nii.gz")
        predicted = np.asarray(nib.load(folder / f"{case}.nii.gz").dataobj)  # type: ignore[attr-defined]
        spacing = reference.header.get_zooms()[:3]
        for name, items in case_values(plan, predicted, np.asarray(reference.dataobj), spacing, labels).items():
            values.setdefault(name, []).extend(items)
    return {name: float(mean_value(s) or 0.0) for name, s in summarize_all(plan, values).items()}


def _write_submission(folder: Path, cases: list[str]) -> None:
    rows = ["case_id,prediction_path", *(f"{case},{case}.nii.gz" for case in cases)]
    (folder / "submission.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


async def run_worker(client: Client, workspace: Workspace, agent_id: str) -> dict[str, Any]:
    """One full attempt on fold 0; returns what happened at each step."""
    steps: dict[str, Any] = {}
    task = await call(client, "get_task")
    profile = await call(client, "profile_data", {"wait_s": 50})
    steps["profile_data"] = ", ".join(k for k, v in (profile["profile"] or {}).get("predicates", {}).items() if v)
    lanes = await call(client, "list_lanes")
    lane = next((x for x in lanes["lanes"] if x["family"] == "calibration"), lanes["lanes"][0])
    claimed = await call(client, "claim_lane", {"lane_id": lane["lane_id"]})
    steps["claim_lane"] = f"{claimed['lane_id']} of {len(lanes['lanes'])} planned lanes"
    worktree = Path(task["worktree"])
    (worktree / "threshold_model.py").write_text(MODEL_PY, encoding="utf-8")
    python, folds_json = sys.executable, str(workspace.task_dir / "folds.json")
    trained = await _job(client, [python, "threshold_model.py", "train", task["task_dir"], folds_json, "0", "outputs"])
    steps["train job"] = f"{trained['job_id']}: {trained['status']}, exit {trained['exit_code']}"
    (worktree / "outputs/train.log").write_text(trained["stdout_tail"] + trained["stderr_tail"], encoding="utf-8")
    val_cases, test_cases = (
        task["folds"][0]["val_cases"],
        sorted(p.name[: -len("_0000.nii.gz")] for p in (workspace.task_dir / "public/test/images").iterdir()),
    )
    _link_inputs(workspace, val_cases, worktree / "inputs/fold0", "train")
    _link_inputs(workspace, test_cases, worktree / "inputs/test", "test")
    for source, target in (("inputs/fold0", "outputs/fold0"), ("inputs/test", "outputs/submission")):
        await _job(client, [python, "threshold_model.py", "predict", "outputs/model.json", source, target])
    _write_submission(worktree / "outputs/submission", test_cases)
    commit = _commit(worktree, ["threshold_model.py", "outputs/model.json"], "Threshold model, fitted on fold 0")
    scores = _own_scores(workspace, worktree / "outputs/fold0", val_cases)
    steps["declared"] = ", ".join(f"{k}={v:.3f}" for k, v in scores.items())
    attempt = await call(client, "submit_attempt", {
        "commit": commit, "folds": [0], "declared_scores": {"0": scores}, "lane_id": claimed["lane_id"],
        "artifacts": {"predictions": {"0": "outputs/fold0"}, "submission": "outputs/submission",
                      "training_manifest": "outputs/manifest.json", "checkpoint": "outputs/model.json",
                      "logs": ["outputs/train.log"]},
        "inference_command": ["{python}", "threshold_model.py", "predict", "{checkpoint}",
                              "{input_dir}", "{output_dir}"],
    })  # fmt: skip
    review = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
    verdict = await call(client, "get_review", {"review_id": review["review_id"], "wait_s": 50})
    while verdict["status"] in ("queued", "running"):
        verdict = await call(client, "get_review", {"review_id": review["review_id"], "wait_s": 50})
    steps["submit_attempt"] = f"{attempt['attempt_id']} at {commit[:8]}"
    steps["verdict"] = verdict["verdict"] or verdict["status"]
    steps["failed checks"] = ", ".join(c["code"] for c in verdict["failed_checks"]) or "none"
    board = await call(client, "leaderboard")
    steps["leaderboard"] = (
        "; ".join(f"#{r['rank']} {r['attempt_id']} {board['metric']}={r['verified_score']:.3f}" for r in board["rows"])
        or "(no accepted attempt)"
    )
    note = f"Threshold model on fold 0: verdict {steps['verdict']}, declared {steps['declared']}."
    await call(client, "post_note", {"kind": "reflection", "title": "First attempt", "body": note,
                                     "lane_id": claimed["lane_id"]})  # fmt: skip
    return steps


def run(client_factory: Any, workspace: Workspace, agent_id: str) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with client_factory() as client:
            return await run_worker(client, workspace, agent_id)

    return asyncio.run(main())
