"""profile_data: the evidence-backed data profile, cached by a fingerprint of the data.

The profile is computed once (at `amid init`, or on the first call) and written to
`memory/profile/` (profile.json, profile.md, cases.parquet). A call returns the cached compact
profile at once; `refresh=true`, or data that changed, recomputes it in a background thread, and
a call that would outlast the client's timeout returns `running` so the agent polls again.
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from amid.server.context import Services, ToolContext
from amid.server.toolkit import ALL_ROLES, Progress, ToolResult, ToolSpec
from amid.server.workspace import Workspace
from amid.tools.task.answers_layout import IMAGE_ENDINGS
from amid.tools.task.cases import Case, discover_cases
from amid.tools.task.contract import TaskContract
from amid.tools.task.folds import LockedFolds

REPORT_DIR = "memory/profile"
ProgressFn = Callable[[int, int, str], None]


def _strata(task_dir: Path, contract: TaskContract) -> dict[str, dict[str, str]]:
    """Every column of the groups table (patient, scanner, site…) as per-case strata."""
    table = contract.layout.groups_table
    if not table or not (task_dir / table).is_file():
        return {}
    with (task_dir / table).open(newline="", encoding="utf-8") as handle:
        return {row["case_id"]: {k: v for k, v in row.items() if k != "case_id"} for row in csv.DictReader(handle)}


def _profile_case(task_dir: Path, case: Case, strata: dict[str, dict[str, str]], train_ids: set[str]) -> Any:
    from amid.tools.profiling import ProfileCase

    # Benchmarks may reuse ids across splits (ldct-iqa: train 0000… and test 0000…).
    case_id = f"test/{case.case_id}" if case.split == "test" and case.case_id in train_ids else case.case_id
    # Label files that are not images (GeoJSON, COCO, box text, edge YAML) are not voxel statistics,
    # but they are the case's supervision: kept as its label file, so the case counts as labelled.
    label = str(task_dir / case.label_path) if case.label_path else None
    image_label = label is not None and label.lower().endswith(IMAGE_ENDINGS)
    return ProfileCase(
        case_id=case_id,
        split=case.split,  # type: ignore[arg-type]
        image_paths=[str(task_dir / p) for p in case.image_paths],
        label_path=label if image_label else None,
        label_file=None if image_label else label,
        group=case.group if case.split == "train" else None,
        extra=strata.get(case.case_id, {}),
    )


def _coco_file(task_dir: Path, contract: TaskContract) -> str | None:
    """The training COCO annotation file of a benchmark import (its answers are per-image slices)."""
    grader = contract.grader
    columns = grader.fold_answers or [] if grader else []
    source = next((c.train_source for c in columns if c.kind == "coco_image" and c.train_source), None)
    return str(task_dir / source) if source else None


def _labels_table(task_dir: Path, contract: TaskContract) -> Any:
    """The labels table with the columns the reviewer scores: the prediction's id and value columns
    where the table has them (ldct-iqa: image_id, quality_score), else its first two columns."""
    from amid.tools.profiling import LabelsTable

    rel = contract.layout.labels_table
    if rel is None:
        return None
    path = task_dir / rel
    named = contract.prediction.csv_columns
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        header = []  # the profile reports the unreadable table itself
    if len(header) < 2:
        return LabelsTable(path=str(path))
    id_column = named[0] if named and named[0] in header else header[0]
    label_column = named[1] if len(named) > 1 and named[1] in header else header[1]
    return LabelsTable(path=str(path), id_column=id_column, label_column=label_column)


def build_request(workspace: Workspace, contract: TaskContract, folds: LockedFolds) -> Any:
    """The profiling request for a workspace: public train and test cases, contract facts, locked folds."""
    from amid.tools.profiling import ProfileRequest

    task_dir = workspace.task_dir.resolve()
    strata = _strata(task_dir, contract)
    cases = [*discover_cases(task_dir, contract.layout, "train"), *discover_cases(task_dir, contract.layout, "test")]
    train_ids = {c.case_id for c in cases if c.split == "train"}
    layout = contract.layout
    return ProfileRequest(
        task_type=contract.task_type,
        cases=[_profile_case(task_dir, case, strata, train_ids) for case in cases],
        label_values=dict(layout.label_values) or None,
        channel_names=dict(enumerate(layout.channels)),
        labels_table=_labels_table(task_dir, contract),
        boxes_json=_coco_file(task_dir, contract),
        primary_metric=contract.primary_metric,
        metric_direction="maximize" if contract.primary.direction == "higher_better" else "minimize",
        folds={case: fold.fold for fold in folds.folds for case in fold.val_cases},
        group_key=folds.group_key,
        submission_columns=list(contract.submission.columns),
    )


def load_cached(workspace: Workspace, fingerprint: str) -> Any | None:
    from amid.tools.profiling import DataProfile

    path = workspace.sub(REPORT_DIR) / "profile.json"
    if not path.is_file():
        return None
    profile = DataProfile.model_validate_json(path.read_text(encoding="utf-8"))
    return profile if profile.fingerprint == fingerprint else None


def compute_profile(workspace: Workspace, request: Any, progress: ProgressFn | None = None) -> Any:
    from amid.tools.profiling import profile_dataset, write_report

    profile = profile_dataset(request, progress)
    write_report(profile, workspace.sub(REPORT_DIR))
    return profile


class ProfileRunner:
    """One background computation at a time per server; callers wait on it with a bound."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._fingerprint: str | None = None
        self._error: str | None = None
        self.progress: tuple[int, int, str] = (0, 0, "")

    def start(self, request: Any, fingerprint: str) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._fingerprint, self._error = fingerprint, None
            self._done.clear()
            self._thread = threading.Thread(target=self._run, args=(request,), name="amid-profile", daemon=True)
            self._thread.start()

    def _run(self, request: Any) -> None:
        try:
            compute_profile(self.workspace, request, lambda d, t, m: setattr(self, "progress", (d, t, m)))
        except Exception as exc:  # reported to the caller: a bad file must never crash the server
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def wait(self, timeout_s: float) -> tuple[bool, str | None]:
        return self._done.wait(timeout_s), self._error


_RUNNER_LOCK = threading.Lock()


def runner(services: Services) -> ProfileRunner:
    with _RUNNER_LOCK:
        if services.profiler is None:
            services.profiler = ProfileRunner(services.workspace)
        return services.profiler


class ProfileInput(BaseModel):
    refresh: bool = Field(default=False, description="recompute even if the cached profile is current")
    wait_s: Annotated[float, Field(ge=0, le=55, description="wait this long for a computation")] = 40


class ProfileResult(ToolResult):
    status: Literal["ready", "running", "failed"]
    fingerprint: str
    profile: dict[str, Any] | None = Field(description="sections, predicates with evidence, issues")
    report_dir: str
    message: str = ""


def profile_data(ctx: ToolContext, request: ProfileInput, progress: Progress | None = None) -> ProfileResult:
    """The data profile: inventory, geometry, intensities, labels, leakage risks, planning predicates with
    evidence, issues. Cached; refresh=true recomputes."""
    profile_request = build_request(ctx.workspace, ctx.contract, ctx.folds)
    from amid.tools.profiling import fingerprint

    key = fingerprint(profile_request)
    cached = None if request.refresh else load_cached(ctx.workspace, key)
    if cached is None:
        background = runner(ctx.services)
        background.start(profile_request, key)
        finished, error = _wait(background, min(request.wait_s, ctx.settings.max_wait_s), progress)
        if error:
            return ProfileResult(status="failed", fingerprint=key, profile=None, report_dir=REPORT_DIR, message=error)
        cached = load_cached(ctx.workspace, key) if finished else None
        if cached is None:
            done, total, what = background.progress
            message = f"profiling: {done}/{total} cases ({what}); call profile_data again"
            return ProfileResult(
                status="running", fingerprint=key, profile=None, report_dir=REPORT_DIR, message=message
            )
    compact = cached.compact().model_dump(mode="json")
    return ProfileResult(status="ready", fingerprint=key, profile=compact, report_dir=REPORT_DIR)


def _wait(background: ProfileRunner, budget_s: float, progress: Progress | None) -> tuple[bool, str | None]:
    step = 5.0
    waited = 0.0
    while waited < budget_s:
        finished, error = background.wait(min(step, budget_s - waited))
        if finished:
            return True, error
        waited += step
        if progress:
            done, total, what = background.progress
            progress(done, total or None, what)
    return False, None


TOOL = ToolSpec(
    name="profile_data",
    title="Profile the data",
    input_model=ProfileInput,
    output_model=ProfileResult,
    run=profile_data,
    roles=ALL_ROLES,
    read_only=True,
    wants_progress=True,
)


def provide_profile(services: Services) -> Any:
    """The current full profile, computed here if the cache is stale (the lane planner's provider)."""
    request = build_request(services.workspace, services.contract, services.folds)
    from amid.tools.profiling import fingerprint

    return load_cached(services.workspace, fingerprint(request)) or compute_profile(services.workspace, request)
