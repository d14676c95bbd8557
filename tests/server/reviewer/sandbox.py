"""A scripted worker for reviewer tests: a real worktree, real predictions, real commits.

`AgentSandbox` does what an honest (or a gaming) agent does before `submit_attempt`: writes fold
predictions (NIfTI with the reference geometry unless told otherwise), a training manifest, logs
and a checkpoint in its worktree, commits code with git, and computes its declared scores with the
contract's conventions. Tests then submit through the real in-memory MCP client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import nibabel as nib
import numpy as np
from mcp import Client
from scipy import ndimage

from amid.server.connect import ensure_worktree
from amid.server.workspace import Workspace
from amid.tools.metrics.scoring import case_values, foreground_labels, mean_value, plan_metrics, summarize_all
from amid.tools.task.cases import Case, discover_cases
from tests.clients import error, local_client, ok

Transform = Callable[[str, np.ndarray], np.ndarray]

# A small "model": smoothed intensity thresholds (organ ~110 HU, lesion ~55 HU inside the organ).
# An optional checkpoint ({"mark": seed}) sets a seed-chosen 4 x 4 x 2 block of air to label 1, so
# that honest attempts with other checkpoints never duplicate each other, not even nearly
# (DUPLICATE_PAYLOAD counts a case agreeing at 0.999 or more; two marks agree at about 0.997).
PREDICT_PY = """\
import json
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

source, target = Path(sys.argv[1]), Path(sys.argv[2])
mark = json.loads(Path(sys.argv[3]).read_text())["mark"] if len(sys.argv) > 3 else None
target.mkdir(parents=True, exist_ok=True)
for path in sorted(source.glob("*_0000.nii.gz")):
    image = nib.load(path)
    smooth = ndimage.gaussian_filter(np.asarray(image.dataobj, dtype=float), 1.0)
    organ = ndimage.binary_opening(smooth > 80)
    filled = np.stack([ndimage.binary_fill_holes(organ[..., z]) for z in range(organ.shape[-1])], axis=-1)
    label = np.zeros(smooth.shape, np.uint8)
    label[filled] = 1
    label[filled & ~organ & (smooth > 40)] = 2
    if mark is not None:
        x, y, z = 4 * (mark % 2), 4 * ((mark // 2) % 2), 2 * ((mark // 4) % 10)
        label[x : x + 4, y : y + 4, z : z + 2] = 1
    out = nib.Nifti1Image(label, image.affine)
    nib.save(out, target / (path.name[: -len("_0000.nii.gz")] + ".nii.gz"))
"""


MODEL_REPLAY = ["{python}", "predict.py", "{input_dir}", "{output_dir}", "{checkpoint}"]


def identity(case_id: str, label: np.ndarray) -> np.ndarray:
    return label


def marked(seed: int) -> Transform:
    """Ground truth with a seed-chosen 4 x 4 x 2 block of air set to label 1 (as PREDICT_PY's mark):
    near perfect (Dice ~0.999), and far enough from every other seed's (agreement ~0.997 < 0.999)
    that attempts with different seeds never duplicate each other, not even nearly."""

    def transform(case_id: str, label: np.ndarray) -> np.ndarray:
        out = label.copy()
        x, y, z = 4 * (seed % 2), 4 * ((seed // 2) % 2), 2 * ((seed // 4) % (label.shape[2] // 2))
        out[x : x + 4, y : y + 4, z : z + 2] = 1
        return out

    return transform


def eroded(case_id: str, label: np.ndarray) -> np.ndarray:
    out = np.zeros_like(label)
    for value in np.unique(label[label > 0]):
        out[ndimage.binary_erosion(label == value)] = value
    return out


def empty(case_id: str, label: np.ndarray) -> np.ndarray:
    return np.zeros_like(label)


class AgentSandbox:
    def __init__(self, workspace: Workspace, agent_id: str) -> None:
        self.workspace, self.agent_id = workspace, agent_id
        self.worktree = ensure_worktree(workspace, agent_id)
        self.contract, self.folds = workspace.contract(), workspace.folds()
        self.cases: dict[str, Case] = {
            c.case_id: c for c in discover_cases(workspace.task_dir, self.contract.layout, "train")
        }

    def path(self, rel: str) -> Path:
        path = self.worktree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def label(self, case_id: str) -> nib.Nifti1Image:
        return nib.load(self.workspace.task_dir / str(self.cases[case_id].label_path))  # type: ignore[return-value]

    def write_predictions(
        self,
        fold: int,
        transform: Transform = identity,
        folder: str | None = None,
        cases: list[str] | None = None,
        zooms: tuple[float, ...] | None = None,
    ) -> str:
        folder = folder or f"outputs/fold{fold}"
        for case_id in cases if cases is not None else self.folds.val_cases(fold):
            source = self.label(case_id)
            array = transform(case_id, np.asarray(source.dataobj)).astype(np.uint8)
            affine = np.array(source.affine, dtype=float)
            if zooms is not None:  # resampled header: same orientation, other voxel size
                affine[:3, :3] = affine[:3, :3] / np.array(source.header.get_zooms()[:3]) * np.array(zooms)
            nib.save(nib.Nifti1Image(array, affine), self.path(f"{folder}/{case_id}.nii.gz"))
        return folder

    def predict_with_model(self, fold: int, folder: str | None = None, checkpoint: str | None = None) -> str:
        """Run the committed threshold model on the fold's validation images."""
        import subprocess
        import sys
        import tempfile

        folder = folder or f"outputs/model-fold{fold}"
        with tempfile.TemporaryDirectory() as tmp:
            for case_id in self.folds.val_cases(fold):
                source = self.workspace.task_dir / self.cases[case_id].image_paths[0]
                (Path(tmp) / source.name).symlink_to(source)
            argv = [sys.executable, "predict.py", tmp, str(self.worktree / folder)]
            subprocess.run([*argv, *([checkpoint] if checkpoint else [])], cwd=self.worktree, check=True)
        return folder

    def model_payload(self, commit: str, fold: int, seed: int, **overrides: Any) -> dict[str, Any]:
        """An honest attempt: the committed model's predictions with a checkpoint of its own, and the
        inference command that reproduces them."""
        checkpoint = self.write_text(f"outputs/model-{seed}.json", json.dumps({"mark": seed}))
        folder = self.predict_with_model(fold, f"outputs/model{seed}-fold{fold}", checkpoint)
        artifacts = {"checkpoint": checkpoint, **overrides.pop("artifacts", {})}
        overrides.setdefault("inference_command", MODEL_REPLAY)
        return self.payload(commit, fold, folder, artifacts=artifacts, **overrides)

    def write_submission(self, folder: str, drop: int = 0, columns: str = "case_id,prediction_path") -> str:
        """A test submission: a small box per test image (valid geometry), submission.csv indexing it."""
        test_images = self.workspace.task_dir / str(self.contract.layout.test_images)
        rows = []
        for image_path in sorted(test_images.glob("*_0000.nii.gz"))[drop:]:
            case_id = image_path.name[: -len("_0000.nii.gz")]
            image = nib.load(image_path)
            label = np.zeros(image.shape, np.uint8)  # type: ignore[attr-defined]
            label[20:40, 20:40, 5:15] = 1
            target = self.path(f"{folder}/predictions/{case_id}.nii.gz")
            nib.save(nib.Nifti1Image(label, image.affine), target)  # type: ignore[attr-defined]
            pair = [case_id, f"predictions/{case_id}.nii.gz"]
            rows.append(",".join(pair if columns.startswith("case_id") else pair[::-1]))
        self.write_text(f"{folder}/submission.csv", columns + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return folder

    def write_manifest(self, per_fold: dict[int, list[str]], rel: str = "outputs/manifest.json") -> str:
        self.path(rel).write_text(json.dumps({"folds": {str(k): v for k, v in per_fold.items()}}), encoding="utf-8")
        return rel

    def honest_manifest(self, folds: list[int], rel: str = "outputs/manifest.json") -> str:
        return self.write_manifest({f: self.folds.folds[f].train_cases for f in folds}, rel)

    def write_text(self, rel: str, text: str, encoding: str = "utf-8") -> str:
        self.path(rel).write_text(text, encoding=encoding)
        return rel

    def write_evidence(self, tag: str = "") -> dict[str, Any]:
        logs = self.write_text(
            f"outputs/train{tag}.log", f"epoch 1 loss 0.42 {self.agent_id} {tag}\n", encoding="utf-8"
        )
        checkpoint = self.path(f"outputs/model{tag}.pt")
        checkpoint.write_bytes(np.random.default_rng(len(tag) + 1).bytes(256) + tag.encode())
        return {"logs": [logs], "checkpoint": str(checkpoint.relative_to(self.worktree))}

    def commit(self, files: dict[str, str] | None = None, message: str = "attempt") -> str:
        files = {"predict.py": PREDICT_PY, **(files or {})}
        for rel, text in files.items():
            self.path(rel).write_text(text, encoding="utf-8")
        with git.Repo(self.worktree) as repo:
            repo.index.add(list(files))
            return str(repo.index.commit(message).hexsha)

    def scores(self, fold: int, folder: str) -> dict[str, float]:
        """The agent's own computation of its fold scores, with the contract's conventions."""
        plan, labels = plan_metrics(self.contract), foreground_labels(self.contract)
        values: dict[str, list[float]] = {}
        for case_id in self.folds.val_cases(fold):
            reference = self.label(case_id)
            pred_path = self.worktree / folder / f"{case_id}.nii.gz"
            ref = np.asarray(reference.dataobj)
            pred = np.asarray(nib.load(pred_path).dataobj) if pred_path.exists() else np.zeros_like(ref)  # type: ignore[attr-defined]
            spacing = reference.header.get_zooms()[:3]
            for name, items in case_values(plan, pred, ref, spacing, labels).items():
                values.setdefault(name, []).extend(items)
        return {name: float(mean_value(s) or 0.0) for name, s in summarize_all(plan, values).items()}

    def payload(self, commit: str, fold: int, folder: str, **overrides: Any) -> dict[str, Any]:
        """submit_attempt arguments for one fold, honest unless overridden."""
        artifacts = {
            "predictions": {str(fold): folder},
            "training_manifest": self.honest_manifest([fold], f"outputs/manifest-{folder.replace('/', '-')}.json"),
            **self.write_evidence(folder.replace("/", "-")),
            **overrides.pop("artifacts", {}),
        }
        return {
            "commit": commit,
            "folds": [fold],
            "declared_scores": {str(fold): self.scores(fold, folder)},
            "artifacts": artifacts,
            **overrides,
        }


async def submit_and_review(client: Client, payload: dict[str, Any]) -> dict[str, Any]:
    """submit_attempt → request_review → get_review until the verdict (bounded waits, no sleeps)."""
    attempt = await call(client, "submit_attempt", payload)
    queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
    return await verdict(client, queued["review_id"])


async def verdict(client: Client, review_id: str, rounds: int = 8) -> dict[str, Any]:
    for _ in range(rounds):
        review = await call(client, "get_review", {"review_id": review_id, "wait_s": 20})
        if review["status"] in ("done", "failed"):
            return review
    raise AssertionError(f"review {review_id} has no verdict after {rounds} bounded waits: {review}")


def failed_codes(review: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["code"]: c for c in review["failed_checks"]}


client_for = local_client  # the reviewer tests' name for the shared in-process client
call = ok
call_error = error
