"""One replay of an attempt's declared inference command: at its frozen commit (a detached
checkout), with its frozen checkpoint, on copies of the input images of some cases (never their
labels), in the replay sandbox (server/sandbox.py). The validation replay (PRED_NOT_REPRODUCED) and
the holdout replay (HOLDOUT_GAP) both come through here.

The command is argv (no shell) with placeholders, filled with the paths the replay sees:
{input_dir} (one file or DICOM series folder per case and channel, named as in the task where that
name holds the case id: CASE_0000.nii.gz, CASE/; else CASE<ending>, or CASE_0000… per channel, see
server/reviewer/staging.py), {output_dir}
(write CASE<file_ending> there), {checkpoint} (the frozen checkpoint under its declared name: a file,
or the declared folder itself, named as declared), {code_dir} (the checkout, also the working directory),
{fold} (the fold whose cases are replayed; the first declared fold for the holdout), {case_ids}
(the replayed case ids, comma-separated: benchmark file names need not start with the id) and
{python} (the server's interpreter). It runs as a bounded subprocess with `replay_timeout_s`.

What the command wrote is vetted before anything reads it (server/reviewer/outputs.py): every entry
of the output folder must be a regular file with one name, opened without following links, and is
copied into a folder the replay cannot reach; `ReplayRun.outputs` is that copy. A link (to a label,
say), a hard link, a fifo or a device is a failed replay whose evidence names the file.

Lines of its stdout/stderr that name the workspace (task labels, private/, worktrees) or show a
refused network call are findings: the sandbox made the access fail, and ILLEGAL_DATA_ACCESS
reports it with the line.

GPU replays (design; not wired yet): the review process owns no GPU. An attempt that declares its
replay needs GPUs gets its wrapped argv (bwrap with the NVIDIA device nodes, `Mounts.gpu`) run as a
job of the server's scheduler (server/jobs: same argv, cwd and limit; GPUs picked and pinned there),
requested through a file in reviews/ that the server turns into a job; the review waits on the
job's state file with a deadline. CPU replays run here, as now.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from amid.server.repo import detached_worktree
from amid.server.reviewer.bounded import Outcome, run_bounded
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.outputs import vet_outputs
from amid.server.reviewer.report import Check, fired, head, ok
from amid.server.reviewer.staging import StagingError, stage_case
from amid.server.sandbox import Mounts, SandboxKind, SandboxUnavailable, placeholders, replay_env, resolve_kind, wrap
from amid.tools.scaffolds.pinning import before_namespace

CODE = "PRED_NOT_REPRODUCED"
STDERR_EVIDENCE = 1500
RELATIVE = re.compile(r"(?:\.\./)+(?:task|private|worktrees|artifacts|repo)(?:/|\b)")  # from a worktree
NETWORK = re.compile(
    r"Network is unreachable|Connection refused|Temporary failure in name resolution|"
    r"Name or service not known|No address associated with hostname|\[Errno (?:101|111|-2|-3)\]"
)


@dataclass(frozen=True)
class ReplayCase:
    case_id: str
    images: tuple[Path, ...]  # host files or series folders, one per channel, copied into {input_dir} (staging.py)


@dataclass
class ReplayRun:
    purpose: str
    argv: list[str]
    outcome: Outcome
    outputs: Path
    sandbox: SandboxKind | None
    findings: list[dict[str, Any]] = field(default_factory=list)
    unsafe_outputs: list[dict[str, str]] = field(default_factory=list)  # entries that are not plain files

    @property
    def exited_cleanly(self) -> bool:
        return not self.outcome.timed_out and self.outcome.returncode == 0

    @property
    def succeeded(self) -> bool:
        return self.exited_cleanly and not self.unsafe_outputs

    def failure(self, timeout_s: float) -> str:
        if self.outcome.timed_out:
            return f"timed out after {timeout_s:.0f} s"
        if self.outcome.returncode != 0:
            return f"exit {self.outcome.returncode}"
        first = self.unsafe_outputs[0]
        return (
            f"{len(self.unsafe_outputs)} outputs are not regular files of the output folder "
            f"(first: {first['file']}, {first['kind']})"
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "exit_code": self.outcome.returncode,
            "timed_out": self.outcome.timed_out,
            "stderr_tail": self.outcome.stderr_tail[-STDERR_EVIDENCE:],
            "sandbox": self.sandbox,
            "replay_seconds": round(self.outcome.seconds, 2),
            "unsafe_outputs": head(self.unsafe_outputs),
            "n_unsafe_outputs": len(self.unsafe_outputs),
        }


def fill(argv: list[str], values: dict[str, str]) -> list[str]:
    """Placeholders replaced in every argument (plain replacement: arguments may hold other braces)."""
    filled = []
    for part in argv:
        for key, value in values.items():
            part = part.replace(key, value)
        filled.append(part)
    return filled


@contextmanager
def replay(ctx: ReviewContext, cases: list[ReplayCase], purpose: str, fold: int | None = None) -> Iterator[ReplayRun]:
    """Run the attempt's command on `cases` ({fold}: `fold`, else the first declared fold); the
    outputs folder lives until the block ends. Findings are also added to `ctx.replay_findings`."""
    fold = ctx.job.folds[0] if fold is None else fold
    checkout = detached_worktree(ctx.workspace.commit_store, ctx.job.commit)
    with checkout as tree, tempfile.TemporaryDirectory(prefix=f"amid-{purpose}-") as tmp:
        run = _run(ctx, cases, purpose, fold, tree, Path(tmp))
        ctx.replay_findings.extend(run.findings)
        yield run


def _run(ctx: ReviewContext, cases: list[ReplayCase], purpose: str, fold: int, tree: Path, tmp: Path) -> ReplayRun:
    try:
        mounts = _mounts(ctx, cases, tree, tmp)
        kind = resolve_kind(ctx.job.replay_sandbox)
    except (SandboxUnavailable, StagingError) as exc:
        return ReplayRun(purpose, [], Outcome(None, False, "", str(exc), 0.0), tmp / "outputs", None)
    values = {
        **placeholders(kind, mounts, ctx.job.python),
        "{fold}": str(fold),
        "{case_ids}": ",".join(case.case_id for case in cases),
    }
    argv = fill(ctx.job.inference_command or [], values)
    if refusal := before_namespace(argv, tree):
        return ReplayRun(purpose, argv, Outcome(None, False, "", refusal, 0.0), tmp / "outputs", kind)
    command, cwd = wrap(kind, argv, mounts)
    outcome = run_bounded(command, cwd, ctx.job.replay_timeout_s, replay_env(tmp / "home", kind))
    vetted = tmp / "vetted"  # the replay never sees this folder: what scorers read cannot change
    unsafe = vet_outputs(mounts.outputs, vetted)
    return ReplayRun(purpose, argv, outcome, vetted, kind, _findings(ctx, purpose, outcome), unsafe)


def _mounts(ctx: ReviewContext, cases: list[ReplayCase], tree: Path, tmp: Path) -> Mounts:
    inputs, outputs, home = tmp / "inputs", tmp / "outputs", tmp / "home"
    for folder in (inputs, outputs, home):
        folder.mkdir()
    for case in cases:
        stage_case(case.case_id, case.images, inputs)
    name, files = _checkpoint(ctx)
    return Mounts(tree, inputs, outputs, name, files, hidden=(ctx.workspace.root,))


def _checkpoint(ctx: ReviewContext) -> tuple[str | None, dict[str, Path]]:
    """The frozen checkpoint's declared name and its files (path inside it → frozen file)."""
    refs = [ref for ref in ctx.files("checkpoint") if ctx.usable(ref)]
    if not refs:
        return None, {}
    return declared_name(refs[0]), {ref.member or "": ctx.path(ref) for ref in refs}


def declared_name(ref: ArtifactRef) -> str:
    """The name the agent declared: the file's, or the folder's for a file of a declared folder (not the
    folder's first file: `{checkpoint}` names the folder the package step wrote)."""
    declared = PurePath(ref.declared_path)
    if ref.member and declared.as_posix().endswith("/" + ref.member):
        return PurePath(declared.as_posix()[: -len(ref.member) - 1]).name
    return declared.name


def _findings(ctx: ReviewContext, purpose: str, outcome: Outcome) -> list[dict[str, Any]]:
    root = ctx.workspace.root
    places = sorted({str(root), str(root.resolve())}, key=len, reverse=True)
    workspace = re.compile("|".join(re.escape(p) for p in places))
    found = []
    for stream, text in (("stderr", outcome.stderr_tail), ("stdout", outcome.stdout)):
        for number, line in enumerate(text.splitlines(), 1):
            for kind, rule in (
                ("workspace path", workspace),
                ("relative workspace path", RELATIVE),
                ("network", NETWORK),
            ):
                if match := rule.search(line):
                    found.append(
                        {
                            "source": f"{purpose} replay",
                            "file": stream,
                            "line": number,
                            "kind": kind,
                            "match": match.group(0),
                            "text": line.strip()[:200],
                        }
                    )
    return found


def replay_failed(ctx: ReviewContext, run: ReplayRun, cases: list[str], code: str = CODE) -> Check:
    """`code` (PRED_NOT_REPRODUCED) for a replay that failed, timed out or wrote what is not a plain file."""
    why = run.failure(ctx.job.replay_timeout_s)
    tail = "" if run.exited_cleanly else run.outcome.stderr_tail.strip()[-200:]
    message = f"the inference command failed on the {run.purpose} replay ({why})" + (f": {tail}" if tail else "")
    return fired(code, message, cases=head(cases), n_cases=len(cases), **run.evidence())


def replay_verdict(compared: list[dict[str, Any]], run: ReplayRun, code: str = CODE, what: str = "replayed") -> Check:
    """`code` (PRED_NOT_REPRODUCED) from per-case comparisons ({fold, case_id, agreement, threshold,
    labels?, worst_label?, …}): every case must reach its threshold."""
    differing = [c for c in compared if c["agreement"] < c["threshold"]]
    evidence = {
        "cases": head(sorted(compared, key=lambda c: c["agreement"])),
        "n_cases": len(compared),
        "n_differing": len(differing),
        "sandbox": run.sandbox,
        "argv": run.argv,
        "replay_seconds": round(run.outcome.seconds, 2),
    }
    if differing:
        first = min(differing, key=lambda c: c["agreement"])
        label = f" label {first['worst_label']}" if "worst_label" in first else ""
        return fired(
            code,
            f"{len(differing)} of {len(compared)} {what} cases differ from the frozen predictions "
            f"(worst: fold {first['fold']} {first['case_id']}{label}, agreement {first['agreement']:.3f} "
            f"< {first['threshold']})",
            **evidence,
        )
    low = min(c["agreement"] for c in compared)
    return ok(
        code,
        f"the {what} outputs reproduce all {len(compared)} validation cases, every label (lowest agreement {low:.4f})",
        **evidence,
    )
