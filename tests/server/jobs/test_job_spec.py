from __future__ import annotations

from pathlib import Path

import pytest

from amid.server.errors import InvalidInput
from amid.server.jobs.spec import JobSpec, JobState, ledger_row


def test_a_valid_spec_gets_defaults(tmp_path: Path) -> None:
    spec = JobSpec.create(command=["python", "train.py"], cwd=str(tmp_path))
    assert (spec.gpus, spec.cpus, spec.min_free_gpu_mb, spec.time_limit_s) == (0, 1, 0, 3600)


@pytest.mark.parametrize(
    ("fields", "field", "hint"),
    [
        ({"command": []}, "command", "at least 1"),
        ({"command": [""]}, "command", "must not be empty"),
        ({"cwd": "relative/dir"}, "cwd", "absolute path"),
        ({"gpus": 17}, "gpus", "less than or equal to 16"),
        ({"cpus": 0}, "cpus", "greater than or equal to 1"),
        ({"time_limit_s": 0}, "time_limit_s", "greater than or equal to 1"),
        ({"time_limit_s": 8 * 24 * 3600}, "time_limit_s", "604800"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env", "cannot be overridden"),
        ({"env": {"1BAD-NAME": "x"}}, "env", "variable names"),
        ({"tags": {"lane id": "x"}}, "tags", "keys of 1-64"),
        ({"surprise": 1}, "surprise", "Extra inputs are not permitted"),
    ],
)
def test_a_bad_field_is_refused_with_its_name_and_the_fix(
    tmp_path: Path, fields: dict[str, object], field: str, hint: str
) -> None:
    values: dict[str, object] = {"command": ["true"], "cwd": str(tmp_path), **fields}
    with pytest.raises(InvalidInput) as caught:
        JobSpec.create(**values)
    assert caught.value.field is not None and caught.value.field.startswith(field)
    assert hint in caught.value.message


def test_the_spec_is_frozen(tmp_path: Path) -> None:
    spec = JobSpec.create(command=["true"], cwd=str(tmp_path))
    with pytest.raises(ValueError, match="frozen"):
        spec.gpus = 2


def test_the_ledger_row_stores_the_working_directory_relative_to_the_workspace(tmp_path: Path) -> None:
    worktree = tmp_path / "repo" / "worktrees" / "agent-a"
    worktree.mkdir(parents=True)
    spec = JobSpec.create(command=["python", "t.py"], cwd=str(worktree), gpus=1, tags={"lane": "nnunet"})
    state = JobState(
        job_id="job-1",
        agent_id="agent-a",
        spec=spec,
        status="queued",
        backend="local",
        created_at="2026-01-01",
    )
    row = ledger_row(state, tmp_path)
    assert row["cwd"] == "repo/worktrees/agent-a"
    assert row["command"] == ["python", "t.py"] and row["gpus"] == 1
    assert row["tags"] == {"lane": "nnunet", "sandbox": "none"}
