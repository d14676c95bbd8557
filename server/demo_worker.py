"""The scripted agent: the whole AMID loop through the real MCP client, deterministic, no model service.

It does what a coding agent would do: read the task and the profile, claim a lane, write a small
model into its worktree (intensity thresholds fitted on the locked fold's training cases), train
and predict through `run_gpu_job` (CPU jobs here), commit, compute its own fold scores, submit
(with the inference command that reproduces its predictions from the frozen checkpoint: the
reviewer replays it in its sandbox), request the independent review and read the verdict; then it
follows the run and answers the supervisor's heartbeats (a focus note after a plateau, another
attempt as the promoted lane's optimizer, reflection and consolidation notes).

It knows only what an agent knows: the tool results (task folder, its worktree, folds, lanes) and
its own worktree. `amid.server.supervisor.workers.scripted` runs it as a managed worker's "CLI" with a
session store, so an interrupted and resumed session continues where it stopped: every step is
recorded once done, and submissions carry idempotency keys.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client

from amid.server.demo_model import MODEL_PY
from amid.server.errors import JobFailed
from amid.server.mcp_client import ToolCallFailed, call
from amid.tools.task.contract import load_contract


def _commit(worktree: Path, paths: list[str], message: str) -> str:
    """Commit `paths`; a step re-run after an interruption finds its commit already made and reuses it."""
    import git

    with git.Repo(worktree) as repo:
        _clear_stale_locks(repo)
        repo.index.add(paths)
        head = repo.head.commit if repo.head.is_valid() else None
        if head is not None and head.message.strip() == message and not repo.index.diff(head):
            return str(head.hexsha)
        return str(repo.index.commit(message).hexsha)


def _clear_stale_locks(repo: Any) -> None:
    """Remove the lock files a session killed mid-commit left behind (SIGTERM ends the worker at once, so
    no `finally` runs): the index's and the branch's (and HEAD's). A resumed session is its worktree's only
    writer, started after the interrupted one exited, so any lock it finds is stale; kept, it would fail
    every later commit and the pool would pause the worker as crashing."""
    locks = [Path(f"{repo.index.path}.lock"), Path(repo.git_dir) / "HEAD.lock"]
    if not repo.head.is_detached:
        locks.append(Path(repo.common_dir) / f"{repo.head.reference.path}.lock")
    for lock in locks:
        lock.unlink(missing_ok=True)


def _link_inputs(task_dir: Path, cases: list[str], folder: Path, split: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        source = task_dir / f"public/{split}/images/{case}_0000.nii.gz"
        (folder / source.name).unlink(missing_ok=True)
        (folder / source.name).symlink_to(source)


def _own_scores(task_dir: Path, folder: Path, cases: list[str]) -> dict[str, float]:
    """The worker's own computation of its fold scores with the contract's conventions."""
    import nibabel as nib
    import numpy as np

    from amid.tools.metrics.scoring import case_values, foreground_labels, mean_value, plan_metrics, summarize_all

    contract = load_contract(task_dir / "contract.yaml")
    plan, labels = plan_metrics(contract), foreground_labels(contract)
    values: dict[str, list[float]] = {}
    for case in cases:
        reference: Any = nib.load(task_dir / f"public/train/labels/{case}.nii.gz")
        predicted = np.asarray(nib.load(folder / f"{case}.nii.gz").dataobj)  # type: ignore[attr-defined]
        spacing = reference.header.get_zooms()[:3]
        for name, items in case_values(plan, predicted, np.asarray(reference.dataobj), spacing, labels).items():
            values.setdefault(name, []).extend(items)
    return {name: float(mean_value(s) or 0.0) for name, s in summarize_all(plan, values).items()}


def _write_submission(folder: Path, cases: list[str]) -> None:
    rows = ["case_id,prediction_path", *(f"{case},{case}.nii.gz" for case in cases)]
    (folder / "submission.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


@dataclass
class WorkerPlan:
    """What one scripted worker does: its lane (None: the calibration lane), the fold it validates on,
    whether it cheats (copies the validation labels as its predictions) and whether it resubmits its
    predictions under a new commit (a duplicate the reviewer rejects: no improvement, so a plateau)."""

    agent_id: str
    lane_id: str | None = None
    fold: int = 0
    cheat: bool = False
    resubmit: bool = False
    steps: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)  # digests of the heartbeat prompts already acted on


def default_plan(agent_id: str, cheaters: set[str]) -> WorkerPlan:
    """Deterministic plans from the worker's number (`worker-N`): cheaters take a secondary lane, the
    honest workers the calibration lane first and then the other primary lanes, each on its own fold;
    honest workers resubmit once (an unimproved attempt: the plateau the supervisor reacts to)."""
    number = int(agent_id.rsplit("-", 1)[-1]) if agent_id.rsplit("-", 1)[-1].isdigit() else 1
    return WorkerPlan(agent_id, fold=number - 1, cheat=agent_id in cheaters, resubmit=agent_id not in cheaters)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ScriptedWorker:
    """A worker that reads every tool result's inbox, as an attached agent would. `save` is called
    after every finished step (the managed CLI persists the plan there)."""

    def __init__(self, client: Client, plan: WorkerPlan, save: Callable[[WorkerPlan], None] | None = None) -> None:
        self.client, self.plan = client, plan
        self.save = save or (lambda plan: None)
        self.inbox: list[str] = []
        self.task: dict[str, Any] = {}

    @property
    def task_dir(self) -> Path:
        return Path(self.task["task_dir"])

    @property
    def worktree(self) -> Path:
        return Path(self.task["worktree"])

    def done(self, step: str, value: Any) -> None:
        self.plan.steps[step] = value
        self.save(self.plan)

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await call(self.client, tool, arguments)
        self.inbox.extend(result.get("inbox", []))
        return result

    async def job(self, command: list[str]) -> dict[str, Any]:
        state = await self.call("run_gpu_job", {"command": command, "time_limit_s": 600})
        while state["status"] in ("queued", "running"):
            state = await self.call("get_job", {"job_id": state["job_id"], "wait_s": 30})
        if state["status"] != "succeeded":
            raise JobFailed(f"demo job {' '.join(command[1:3])} {state['status']}: {state['stderr_tail'][-800:]}")
        return state

    async def review(self, attempt_id: str) -> dict[str, Any]:
        review = await self.call("request_review", {"attempt_id": attempt_id})
        verdict = await self.call("get_review", {"review_id": review["review_id"], "wait_s": 50})
        while verdict["status"] in ("queued", "running"):
            verdict = await self.call("get_review", {"review_id": review["review_id"], "wait_s": 50})
        return verdict

    async def claim(self) -> str:
        lanes = (await self.call("list_lanes"))["lanes"]
        lane_id = self.plan.lane_id or self._choose(lanes)
        claimed = await self.call("claim_lane", {"lane_id": lane_id})
        self.plan.lane_id = str(claimed["lane_id"])
        self.done("claim_lane", f"{claimed['lane_id']} of {len(lanes)} planned lanes")
        return self.plan.lane_id

    def _choose(self, lanes: list[dict[str, Any]]) -> str:
        if self.plan.cheat:
            return str(next(x for x in lanes if x["tier"] == "secondary")["lane_id"])
        calibration = [x for x in lanes if x["tier"] == "primary" and x["family"] == "calibration"]
        primary = calibration + [x for x in lanes if x["tier"] == "primary" and x["family"] != "calibration"]
        # Where one lane is primary (no training stack installed: the nnU-Net lanes fall back), the honest
        # workers go on to the secondary lanes past the first (the cheat's), then the fallback ones.
        others = [x for x in lanes if x["tier"] == "secondary"][1:] + [x for x in lanes if x["tier"] == "fallback"]
        honest = primary + others
        return str(honest[self.plan.fold % len(honest)]["lane_id"])

    async def train_and_predict(self) -> list[str]:
        worktree, fold, python, task_dir = self.worktree, self.plan.fold, sys.executable, self.task_dir
        (worktree / "threshold_model.py").write_text(MODEL_PY, encoding="utf-8")
        folds_json = str(task_dir / "folds.json")
        trained = await self.job(
            [python, "threshold_model.py", "train", str(task_dir), folds_json, str(fold), "outputs"]
        )
        (worktree / "outputs/train.log").write_text(trained["stdout_tail"] + trained["stderr_tail"], encoding="utf-8")
        val_cases = list(self.task["folds"][fold]["val_cases"])
        test_cases = sorted(p.name[: -len("_0000.nii.gz")] for p in (task_dir / "public/test/images").iterdir())
        _link_inputs(task_dir, val_cases, worktree / f"inputs/fold{fold}", "train")
        _link_inputs(task_dir, test_cases, worktree / "inputs/test", "test")
        for source, target in ((f"inputs/fold{fold}", f"outputs/fold{fold}"), ("inputs/test", "outputs/submission")):
            await self.job([python, "threshold_model.py", "predict", "outputs/model.json", source, target])
        _write_submission(worktree / "outputs/submission", test_cases)
        if self.plan.cheat:  # the validation labels are public: copy them as "predictions"
            for case in val_cases:
                label = task_dir / f"public/train/labels/{case}.nii.gz"
                (worktree / f"outputs/fold{fold}/{case}.nii.gz").write_bytes(label.read_bytes())
        self.done("train job", f"{trained['job_id']}: {trained['status']}, exit {trained['exit_code']}")
        return val_cases

    async def submit(self, commit: str, label: str) -> dict[str, Any]:
        fold = str(self.plan.fold)
        return await self.call(
            "submit_attempt",
            {
                "commit": commit,
                "folds": [self.plan.fold],
                "declared_scores": {fold: self.plan.scores},
                "lane_id": self.plan.lane_id,
                "budget_class": "real",
                "idempotency_key": f"{self.plan.agent_id}:{label}",
                "artifacts": {
                    "predictions": {fold: f"outputs/fold{fold}"},
                    "submission": "outputs/submission",
                    "training_manifest": "outputs/manifest.json",
                    "checkpoint": "outputs/model.json",
                    "logs": ["outputs/train.log"],
                },
                "inference_command": [
                    "{python}",
                    "threshold_model.py",
                    "predict",
                    "{checkpoint}",
                    "{input_dir}",
                    "{output_dir}",
                ],
            },
        )

    async def attempt(self, commit: str, label: str) -> dict[str, Any]:
        """Submit (once: the step is recorded) and wait for the review (requesting it again is a no-op)."""
        submitted = f"{label} submitted"
        if submitted not in self.plan.steps:
            made = await self.submit(commit, label)
            self.done(submitted, {"attempt_id": made["attempt_id"], "commit": commit})
        attempt = self.plan.steps[submitted]
        verdict = await self.review(attempt["attempt_id"])
        codes = ", ".join(c["code"] for c in verdict["failed_checks"] if c["severity"] == "error") or "none"
        self.done(label, f"{attempt['attempt_id']} at {commit[:8]}: {verdict['verdict']} (failed: {codes})")
        return verdict

    async def first_attempt(self) -> None:
        """Profile, claim, train, predict, commit, score, submit, review, reflect (each step once)."""
        if "profile_data" not in self.plan.steps:
            profile = await self.call("profile_data", {"wait_s": 50})
            found = (profile["profile"] or {}).get("predicates", {})
            self.done("profile_data", ", ".join(k for k, v in found.items() if v))
        if "claim_lane" not in self.plan.steps:
            await self.claim()
        if "attempt 1" not in self.plan.steps:
            if "attempt 1 submitted" in self.plan.steps:  # interrupted while its review ran
                commit = str(self.plan.steps["attempt 1 submitted"]["commit"])
            else:
                val_cases = await self.train_and_predict()
                commit = _commit(
                    self.worktree,
                    ["threshold_model.py", "outputs/model.json"],
                    f"Threshold model, fold {self.plan.fold}",
                )
                folder = self.worktree / f"outputs/fold{self.plan.fold}"
                self.plan.scores = _own_scores(self.task_dir, folder, val_cases)
                self.done("declared", ", ".join(f"{k}={v:.3f}" for k, v in self.plan.scores.items()))
            verdict = await self.attempt(commit, "attempt 1")
            self.done("verdict", verdict["verdict"] or verdict["status"])
        if "reflection 1" not in self.plan.steps:
            body = f"Fold {self.plan.fold}: {self.plan.steps['attempt 1']}."
            note = await self.call(
                "post_note",
                {"kind": "reflection", "title": "First attempt", "lane_id": self.plan.lane_id, "body": body},
            )
            self.done("reflection 1", f"note {note['note_id']}")

    async def again(self, label: str) -> None:
        """The same model and predictions under a new commit: the reviewer sees no improvement."""
        (self.worktree / "NOTES.md").write_text(f"{label}: same model, re-run\n", encoding="utf-8")
        commit = _commit(self.worktree, ["NOTES.md"], label)
        await self.attempt(commit, label)

    async def answer(self, prompt: str) -> None:
        """Act on one heartbeat prompt (delivered by resume or seen in an inbox), once."""
        key = _digest(prompt)
        if key in self.plan.answered:
            return
        try:
            await self._act_on(prompt)
        except ToolCallFailed as exc:  # as an agent would: read the error, note it, go on
            self.done(f"error answering heartbeat {key}", exc.message[:300])
        self.plan.answered.append(key)
        self.save(self.plan)

    async def _act_on(self, prompt: str) -> None:
        if "Plateau on lane" in prompt and "focus note" not in self.plan.steps:
            note = await self.call(
                "post_note",
                {
                    "kind": "focus",
                    "title": "Plateau: change the model, not the commit",
                    "body": "Next: a learned model.",
                    "lane_id": self.plan.lane_id,
                    "focus": "replace thresholds by a small learned model",
                    "evidence": self.plan.steps.get("attempt 1") or "my reviewed attempts on this lane",
                    "remaining_budget": "what the stage leaves",
                    "abandon_condition": "no verified gain after two attempts",
                },
            )
            self.done("focus note", f"note {note['note_id']} after the plateau heartbeat")
        elif _works_a_promoted_lane(prompt) and self.plan.resubmit and "attempt 3" not in self.plan.steps:
            await self.again("attempt 3")

    async def answer_all(self, prompts: list[str]) -> None:
        """Answer heartbeats, a plateau's focus note first (until it is posted, attempts do not count)."""
        for prompt in sorted(prompts, key=lambda text: "Plateau on lane" not in text):
            await self.answer(prompt)

    async def follow(self, timeout_s: float) -> str:
        """Answer heartbeats from the inbox until the run is done (or timeout_s passes); the stage."""
        deadline = time.monotonic() + timeout_s
        while True:
            await self.answer_all(self.take_inbox())
            stage = str((await self.call("get_task", {"include_case_ids": False}))["stage"])
            if stage == "done" or time.monotonic() >= deadline:
                return stage
            if not self.inbox:
                await asyncio.sleep(1.0)

    def take_inbox(self) -> list[str]:
        """The heartbeat prompts seen in tool results since the last call (without their `[kind #id]`)."""
        taken, self.inbox = self.inbox, []
        return [line.split("] ", 1)[-1] for line in taken]


def _works_a_promoted_lane(prompt: str) -> bool:
    """The optimizer and the challenger each try again (the challenger lane must plateau too before finalization)."""
    return any(f"Your role now: {role}" in prompt for role in ("optimizer", "challenger"))


async def run_worker(
    client: Client,
    plan: WorkerPlan,
    *,
    prompt: str | None = None,
    follow_s: float = 0.0,
    save: Callable[[WorkerPlan], None] | None = None,
) -> WorkerPlan:
    """One session of a scripted worker: finish its first attempt cycle if it has not, answer the prompts
    it was resumed with, resubmit once if its plan says so, then (with follow_s) follow the run,
    answering heartbeats, until it is done. Every step is recorded once done, so a session interrupted
    anywhere and resumed continues where it stopped."""
    worker = ScriptedWorker(client, plan, save)
    worker.task = await worker.call("get_task")
    await worker.first_attempt()  # heartbeats are about reviewed attempts: the first one comes first
    delivered = [part.strip() for part in (prompt or "").split("\n\n") if part.strip()]
    await worker.answer_all(delivered + worker.take_inbox())
    if plan.resubmit and "attempt 2" not in plan.steps:
        await worker.again("attempt 2")
    if follow_s:
        worker.done("stage seen", await worker.follow(follow_s))
    return plan
