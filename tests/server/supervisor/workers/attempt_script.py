"""The whole attempt a scripted model walks a real coding-agent CLI through, shared by the three endpoints.

The script is a generator of protocol-free steps: an AMID tool call, a file written with the CLI's own
edit tool, a command run in the CLI's own shell, and a closing text. It receives each step's tool result
(the text the CLI sent back to the model) and decides the next step from it: the task folder, the job id
and its status, the scores, the commit, the attempt id and the review id are read out of the results.

An endpoint stays stateless: from one request's conversation it collects the tool results so far, replays
them through a fresh generator (`next_step`) and answers with the step that comes next, in its protocol.
So the three real-CLI tests run the same attempt and differ only in how a step is spelled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from amid.server.demo_model import MODEL_PY

FOLD = 0
COMMIT_MESSAGE = "Threshold model, fold 0 (written and committed by the CLI)"

# The agent's own validation: predict the locked fold's validation cases with the model script, score them
# with the task's metric conventions and print one SCORE line per metric (what it declares at submission).
VALIDATE_PY = '''\
"""Predict the locked fold's validation cases and score them: python validate.py TASK_DIR FOLD MODEL_JSON OUT_DIR"""
import json
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np

from amid.tools.metrics.scoring import case_values, foreground_labels, mean_value, plan_metrics, summarize_all
from amid.tools.task.contract import load_contract

task_dir, fold, model_json, out = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
cases = json.loads((task_dir / "folds.json").read_text(encoding="utf-8"))["folds"][fold]["val_cases"]
inputs = Path(f"inputs/fold{fold}")
inputs.mkdir(parents=True, exist_ok=True)
for case in cases:
    link = inputs / f"{case}_0000.nii.gz"
    link.unlink(missing_ok=True)
    link.symlink_to(task_dir / f"public/train/images/{case}_0000.nii.gz")
subprocess.run([sys.executable, "threshold_model.py", "predict", model_json, str(inputs), str(out)], check=True)
contract = load_contract(task_dir / "contract.yaml")
plan, labels, values = plan_metrics(contract), foreground_labels(contract), {}
for case in cases:
    reference = nib.load(task_dir / f"public/train/labels/{case}.nii.gz")
    predicted = np.asarray(nib.load(out / f"{case}.nii.gz").dataobj)
    spacing = reference.header.get_zooms()[:3]
    for name, items in case_values(plan, predicted, np.asarray(reference.dataobj), spacing, labels).items():
        values.setdefault(name, []).extend(items)
for name, summary in summarize_all(plan, values).items():
    print(f"SCORE {name}={float(mean_value(summary) or 0.0)!r}")
'''


class ScriptStopped(RuntimeError):
    """A tool result was not what the attempt needs (a refused tool, a failed job): the model stops and says so."""


@dataclass(frozen=True)
class Mcp:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Write:
    path: str  # absolute, in the worker's worktree
    content: str


@dataclass(frozen=True)
class Shell:
    command: str


@dataclass(frozen=True)
class Finish:
    text: str


Step = Mcp | Write | Shell | Finish
Script = Callable[[], Generator[Step, str, None]]


def next_step(script: Script, results: list[str]) -> Step:
    """The step after `results` (the tool results so far, in order); a stopped or finished script ends the turn."""
    steps = script()
    try:
        step = next(steps)
        for result in results:
            step = steps.send(result)
    except StopIteration:
        return Finish("Done.")
    except ScriptStopped as exc:
        return Finish(f"SCRIPT STOPPED: {exc}")
    return step


def get_task_only() -> Generator[Step, str, None]:
    """The short script of the heartbeat tests: read the task, end the turn."""
    yield Mcp("get_task", {"include_case_ids": False})


def whole_attempt(python: str) -> Script:
    """Write, train (a CPU job), validate, commit, submit, request the review and wait for its verdict."""

    def script() -> Generator[Step, str, None]:
        task = yield Mcp("get_task", {"include_case_ids": False})
        task_dir, worktree = str(find(task, "task_dir")), str(find(task, "worktree"))
        lanes = yield Mcp("list_lanes", {})
        claimed = yield Mcp("claim_lane", {"lane_id": _primary_lane(lanes)})
        lane_id = str(find(claimed, "lane_id"))
        yield Write(f"{worktree}/threshold_model.py", MODEL_PY)
        yield Write(f"{worktree}/validate.py", VALIDATE_PY)
        train = [python, "threshold_model.py", "train", task_dir, f"{task_dir}/folds.json", str(FOLD), "outputs"]
        job = yield Mcp("run_gpu_job", {"command": train, "gpus": 0, "time_limit_s": 600})
        job_id = str(find(job, "job_id"))
        while find(job, "status") in ("queued", "running"):
            job = yield Mcp("get_job", {"job_id": job_id, "wait_s": 30})
        if find(job, "status") != "succeeded":
            raise ScriptStopped(f"job {job_id} ended {find(job, 'status')}: {job[-600:]}")
        yield Write(f"{worktree}/outputs/train.log", f"{find(job, 'stdout_tail')}{find(job, 'stderr_tail')}")
        validated = yield Shell(
            f"{python} validate.py {task_dir} {FOLD} outputs/model.json outputs/fold{FOLD} "
            "> outputs/validate.log 2>&1; cat outputs/validate.log"
        )
        scores = scores_in(validated)
        committed = yield Shell(
            "git add threshold_model.py validate.py outputs/model.json && "
            f"git commit -q -m {json.dumps(COMMIT_MESSAGE)} && echo COMMIT $(git rev-parse HEAD)"
        )
        commit = _matched(r"COMMIT ([0-9a-f]{40})", committed, "the commit the shell printed")
        submitted = yield Mcp("submit_attempt", _submission(commit, lane_id, scores))
        attempt_id = str(find(submitted, "attempt_id"))
        requested = yield Mcp("request_review", {"attempt_id": attempt_id})
        review_id = str(find(requested, "review_id"))
        review = yield Mcp("get_review", {"review_id": review_id, "wait_s": 50})
        while find(review, "status") in ("queued", "running"):
            review = yield Mcp("get_review", {"review_id": review_id, "wait_s": 50})
        yield Finish(f"Attempt {attempt_id} at {commit[:8]}: {find(review, 'verdict')}.")

    return script


def _submission(commit: str, lane_id: str, scores: dict[str, float]) -> dict[str, Any]:
    return {
        "commit": commit,
        "folds": [FOLD],
        "declared_scores": {str(FOLD): scores},
        "lane_id": lane_id,
        "budget_class": "real",
        "artifacts": {
            "predictions": {str(FOLD): f"outputs/fold{FOLD}"},
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
    }


def _primary_lane(lanes: str) -> str:
    """The calibration lane, as the demo's honest worker picks it (else the first primary lane)."""
    listed = [lane for lane in dicts_in(lanes) if "lane_id" in lane and "tier" in lane]
    primary = [lane for lane in listed if lane["tier"] == "primary"]
    chosen = [lane for lane in primary if lane.get("family") == "calibration"] + primary
    if not chosen:
        raise ScriptStopped(f"list_lanes named no primary lane: {lanes[:300]}")
    return str(chosen[0]["lane_id"])


def scores_in(text: str) -> dict[str, float]:
    found = {name: float(value) for name, value in re.findall(r"SCORE ([A-Za-z0-9_.:-]+)=([-+0-9.eE]+)", text)}
    if not found:
        raise ScriptStopped(f"the validation printed no SCORE lines: {text[-600:]}")
    return found


def _matched(pattern: str, text: str, what: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise ScriptStopped(f"no {what} in the tool result: {text[-600:]}")
    return match.group(1)


def find(text: str, key: str) -> Any:
    """`key`'s value in the outermost JSON object of a tool result that has it, however the CLI wrapped
    the result (a text block, JSON text inside a JSON string, a content list)."""
    for found in dicts_in(text):
        if key in found:
            return found[key]
    raise ScriptStopped(f"no {key!r} in the tool result: {text[-600:]}")


def dicts_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object in `text`, breadth first: outer objects before the ones inside them, strings that
    hold JSON decoded too."""
    queue: list[Any] = list(_decoded(text))
    while queue:
        value = queue.pop(0)
        if isinstance(value, dict):
            yield value
            queue += list(value.values())
        elif isinstance(value, list):
            queue += value
        elif isinstance(value, str) and ("{" in value or "[" in value):
            queue += list(_decoded(value))


def _decoded(text: str) -> Iterator[Any]:
    decoder, at = json.JSONDecoder(), 0
    while (at := _next_open(text, at)) >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at += 1
            continue
        yield value
        at = end


def _next_open(text: str, start: int) -> int:
    found = [i for i in (text.find("{", start), text.find("[", start)) if i >= 0]
    return min(found) if found else -1
