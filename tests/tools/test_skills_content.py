"""The seeded skills name only real things: tools and their arguments, check and error codes, skills,
lane templates, repository paths and CLI options; and their Python snippets run on a real workspace."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amid.registry.loader import load_lane_templates
from amid.server import errors
from amid.server.cli import registry_search
from amid.server.reviewer.report import CODES
from amid.server.tool_manifest import tool_specs
from amid.server.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
SKILLS = {p.parent.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "skills").glob("*/SKILL.md"))}
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
CALL = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*)\(")
ALL_CAPS_SPAN = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`")
ERROR_CODES = {c.code for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.AmidError)}
TOOLS = {spec.name: spec for spec in tool_specs()}
NEW_SKILLS = (
    "organising-files",
    "reference-repositories",
    "reproducing-a-paper",
    "creating-a-skill",
    "adapting-a-foundation-model",
    "geometry-and-orientation",
    "patient-level-splits",
    "validate-before-inference",
    "submission-checks",
    "metric-conventions",
)


def _outside_python(text: str) -> str:
    return PYTHON_BLOCK.sub("", text)


def _arguments(text: str, start: int) -> list[str]:
    """Top-level `name=` keywords of the call whose '(' is at `start`; strings and nesting skipped."""
    depth, quote, keys, segment = 0, "", [], ""
    for char in text[start:]:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                break
        elif char == "," and depth == 1:
            keys.append(segment)
            segment = ""
            continue
        if depth == 1 and not quote and char not in "([{":
            segment += char
    keys.append(segment)
    return [m.group(1) for s in keys if (m := re.match(r"\s*([a-z_]+)\s*=", s))]


def test_the_new_procedures_are_seeded_with_front_matter() -> None:
    for name in NEW_SKILLS:
        assert name in SKILLS, name
        assert re.match(rf"---\nname: {name}\ndescription: Read .+\n---\n", SKILLS[name]), name


def test_every_tool_call_in_a_skill_names_a_real_tool_and_its_real_arguments() -> None:
    calls = 0
    for skill, text in SKILLS.items():
        prose = _outside_python(text)
        for match in CALL.finditer(prose):
            name = match.group(1)
            if name not in TOOLS:
                assert "_" not in name, f"{skill}: `{name}(` is not a tool of the server"
                continue
            calls += 1
            fields = set(TOOLS[name].input_model.model_fields)
            for argument in _arguments(prose, match.end() - 1):
                assert argument in fields, f"{skill}: {name}({argument}=...) but {name} takes {sorted(fields)}"
    assert calls >= 40


def test_every_code_a_skill_names_is_a_check_code_or_an_error_code() -> None:
    named: set[str] = set()
    for skill, text in SKILLS.items():
        for code in ALL_CAPS_SPAN.findall(text):
            assert code in CODES or code in ERROR_CODES, f"{skill}: `{code}` is no check or error code"
            named.add(code)
    assert set(CODES) <= named
    submission = set(ALL_CAPS_SPAN.findall(SKILLS["submission-checks"]))
    assert {"SUBMISSION_INVALID", "PRED_INCOMPLETE", "PRED_SCHEMA"} <= submission


def test_skills_lanes_paths_and_cli_options_that_skills_name_exist() -> None:
    lanes = {t.id for t in load_lane_templates()}
    options = {opt for param in registry_search.params for opt in getattr(param, "opts", [])}
    for skill, text in SKILLS.items():
        for other in re.findall(r"the `([a-z0-9-]+)` skill", text):
            assert other in SKILLS, f"{skill}: no skill {other!r}"
        for lane in re.findall(r'(?:lane_id|base_template)="([a-z0-9-]+)"', text):
            assert lane in lanes, f"{skill}: no lane template {lane!r}"
        for path in re.findall(r"`((?:registry|tools|skills|server)/[^`\s]*)`", text):
            assert list(ROOT.glob(path.rstrip("/"))), f"{skill}: {path} does not exist"
        for command in re.findall(r"`amid registry search ([^`]*)`", text):
            for option in re.findall(r"--[a-z-]+", command):
                assert option in options, f"{skill}: amid registry search has no {option}"


@pytest.mark.parametrize("skill", ["metric-conventions", "patient-level-splits", "geometry-and-orientation"])
def test_the_python_snippets_of_a_skill_run_in_a_worktree(workspace: Workspace, skill: str) -> None:
    worktree = workspace.worktrees_dir / "ann"
    predictions = worktree / "predictions" / "fold_0"
    predictions.mkdir(parents=True)
    for case in workspace.folds().val_cases(0):  # the reference labels stand in for a perfect model
        shutil.copy(workspace.task_dir / "public" / "train" / "labels" / f"{case}.nii.gz", predictions)
    code = "\n".join(PYTHON_BLOCK.findall(SKILLS[skill]))
    result = subprocess.run([sys.executable, "-c", code], cwd=worktree, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    if skill == "metric-conventions":
        scores = json.loads(result.stdout.strip().splitlines()[-1].replace("'", '"'))
        assert scores == {"dice": 1.0, "hd95": 0.0}
    if skill == "geometry-and-orientation":
        assert "('L', 'P', 'S')" in result.stdout
