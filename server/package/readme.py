"""The package's README.md: what the model is, how it was verified, how to re-run and re-check it."""

from __future__ import annotations

import shlex
from typing import Any

from amid.server.package.evidence import PackageEvidence

PLACEHOLDERS = {
    "{python}": "the Python interpreter to run it with (the package's environment lists the versions)",
    "{code_dir}": "the code folder: `code/` of this package (also the working directory)",
    "{checkpoint}": "the model: `weights/{name}` of this package",
    "{input_dir}": "a folder of input images, one file (or DICOM series folder) per case and channel, named as in "
    "the task where that name holds the case id (CASE_0000.nii.gz, CASE/), else CASE<ending> (CASE_0000… per channel)",
    "{output_dir}": "an empty folder the command writes one prediction per case into (CASE + the task's file ending)",
    "{fold}": "the validation fold whose model to use (the attempt's first fold for new data)",
    "{case_ids}": "the case ids in {input_dir}, comma-separated",
}


CHECKING = [
    "## Checking this package",
    "",
    "```bash",
    "amid verify-package package -w WORKSPACE   # WORKSPACE: the run's workspace",
    "amid verify-package package --public-key sha256:…   # away from it: the fingerprint amid finalize printed",
    "```",
    "",
    "It checks the run key's signature (`attestation.intoto.json`) and every file against `manifest.json` and "
    "the signed statement (and the manifest against the ledger's record of this build), re-scores "
    "`predictions/` against the validation labels with the reviewer's own scoring code and compares with "
    "`scores.json`, and re-runs the task's grader on `submission/`. Without `-w` only the signature and the "
    "hashes are checked; without a trusted key (`-w` or `--public-key`) the signature is checked with "
    "`signing-key.pub`, the key this package carries, which anyone could have replaced: exit 3, integrity only.",
    "",
]

CONTENTS = [
    "## Contents",
    "",
    "| path | what |",
    "|---|---|",
    "| `manifest.json` | task, contract hash, attempt, commit, lane, agent, verified metrics, environment, "
    "every other file with sha256 and size |",
    "| `code/` | the code at the commit, from the server's commit store |",
    "| `weights/` | the checkpoint, as frozen at submission |",
    "| `predictions/fold-K/` | the validation predictions, as frozen |",
    "| `submission/` | `submission.csv` and its files |",
    "| `scores.json` | per-fold verified scores and the holdout result |",
    "| `review.json` | the reviewer's full report |",
    "| `lineage.json` | the parent attempts with their commits and verdicts |",
    "| `attestation.intoto.json` | the run key's signature over an in-toto statement of every file and the scores |",
    "| `signing-key.pub` | the public key this package carries (trust the fingerprint amid finalize printed) |",
    "",
]


def render(ev: PackageEvidence, scores: dict[str, Any], checkpoint_name: str | None) -> str:
    primary, direction = ev.run["primary_metric"], ev.run["primary_direction"]
    lines = [
        f"# Final model package: {ev.run['task_id']}",
        "",
        f"Attempt **{ev.attempt_id}** by `{ev.attempt['agent_id']}` on lane `{ev.attempt['lane_id']}` "
        f"({(ev.lane or {}).get('status', '?')}), commit `{ev.commit}`.",
        f"Verified {primary} ({direction.replace('_', ' ')}): **{_num(ev.evidence['verified_score'])}** "
        f"(mean over folds {', '.join(scores['folds'])}; the reviewer's own re-score, never the agent's claim).",
        "",
        *_verification(ev, scores),
        "## Re-running inference",
        "",
        "```bash",
        shlex.join(ev.attempt["inference_command"] or ["(no inference command was declared)"]),
        "```",
        "",
        *_placeholder_lines(ev.attempt["inference_command"] or [], checkpoint_name),
        *_example(ev, checkpoint_name),
        "",
        *CHECKING,
        *CONTENTS,
    ]
    return "\n".join(lines)


def _verification(ev: PackageEvidence, scores: dict[str, Any]) -> list[str]:
    metrics = sorted(scores["mean"])
    return [
        "## How it was verified",
        "",
        f"The independent reviewer (review `{ev.review['review_id']}`, verdict `{ev.evidence['verdict']}`) "
        "re-scored the frozen validation predictions against the locked folds, replayed the inference command "
        "in a sandbox on every validation case, on perturbed copies of them (a model of the image, not a "
        "lookup) and on the server-held holdout, checked the test submission with the task's grader, and ran "
        "every check code of `review.json`.",
        "",
        "| fold | " + " | ".join(metrics) + " |",
        "|---|" + "---|" * len(metrics),
        *(
            f"| {fold} | " + " | ".join(_num(values.get(m)) for m in metrics) + " |"
            for fold, values in scores["folds"].items()
        ),
        "",
        _holdout_line(scores),
        "",
    ]


def _placeholder_lines(argv: list[str], checkpoint_name: str | None) -> list[str]:
    used = [key for key in PLACEHOLDERS if any(key in part for part in argv)]
    if not used:
        return []
    name = checkpoint_name or "(none)"
    return ["Placeholders:", "", *(f"- `{key}`: {PLACEHOLDERS[key].replace('{name}', name)}" for key in used)]


def _example(ev: PackageEvidence, checkpoint_name: str | None) -> list[str]:
    """The command filled in for this package, run from its code/ folder."""
    argv = ev.attempt["inference_command"]
    if not argv:
        return []
    values = {
        "{python}": "python",
        "{code_dir}": ".",
        "{checkpoint}": f"../weights/{checkpoint_name or ''}",
        "{input_dir}": "/path/to/images",
        "{output_dir}": "/path/to/predictions",
        "{fold}": str((ev.attempt["folds"] or [0])[0]),
        "{case_ids}": "CASE_A,CASE_B",
    }
    filled = [_fill(part, values) for part in argv]
    return ["", "For example, from this package's `code/` folder:", "", "```bash", shlex.join(filled), "```"]


def _fill(part: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        part = part.replace(key, value)
    return part


def _holdout_line(scores: dict[str, Any]) -> str:
    check = scores["holdout"]["check"]
    if not check:
        return "No holdout gate ran for this attempt."
    values = ", ".join(f"{m} {_num(v)}" for m, v in sorted(scores["holdout"]["metrics"].items()))
    state = "passed" if check["passed"] else f"fired ({check['severity']})"
    return f"Holdout gate {state}: {check['message']}" + (f" (holdout {values})." if values else ".")


def _num(value: Any) -> str:
    return "–" if value is None else f"{float(value):.4f}"
