"""Skills: reusable procedures as SKILL.md folders in memory/skills/ (seeded ones plus agents' own)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from server.context import ToolContext
from server.errors import Conflict, NotFound
from server.toolkit import ALL_ROLES, WORKERS, ToolResult, ToolSpec

FRONT_MATTER = re.compile(r"^---\nname: (?P<name>.+)\ndescription: (?P<description>.+)\n(?:.*\n)*?---\n", re.M)
SKILL_NAME = r"^[a-z0-9][a-z0-9-]{1,47}$"


class SkillInfo(BaseModel):
    name: str
    description: str
    author: str


def _skills_dir(ctx: ToolContext) -> Path:
    return ctx.workspace.memory_dir / "skills"


def _read(path: Path) -> tuple[SkillInfo, str]:
    text = path.read_text(encoding="utf-8")
    match = FRONT_MATTER.match(text)
    author_match = re.search(r"^author: (.+)$", text, re.M)
    author = author_match.group(1) if author_match else "amid"
    name = match.group("name") if match else path.parent.name
    description = match.group("description") if match else "(no description)"
    return SkillInfo(name=name, description=description, author=author), text


class ListSkillsInput(BaseModel):
    pass


class ListSkillsResult(ToolResult):
    skills: list[SkillInfo]


def list_skills(ctx: ToolContext, request: ListSkillsInput) -> ListSkillsResult:
    """List the run's skills: name and when to read each (description)."""
    return ListSkillsResult(skills=[_read(p)[0] for p in sorted(_skills_dir(ctx).glob("*/SKILL.md"))])


class GetSkillInput(BaseModel):
    name: Annotated[str, Field(pattern=SKILL_NAME)]


class GetSkillResult(ToolResult):
    skill: SkillInfo
    text: str


def get_skill(ctx: ToolContext, request: GetSkillInput) -> GetSkillResult:
    """Read one skill's full text."""
    path = _skills_dir(ctx) / request.name / "SKILL.md"
    if not path.is_file():
        raise NotFound(f"name: no skill {request.name!r}; see list_skills", field="name")
    info, text = _read(path)
    return GetSkillResult(skill=info, text=text)


class SaveSkillInput(BaseModel):
    name: Annotated[str, Field(pattern=SKILL_NAME, description="lowercase-with-dashes")]
    description: Annotated[str, Field(min_length=10, max_length=300, description="when to read it")]
    body: Annotated[str, Field(min_length=20, max_length=20000, description="markdown procedure")]


class SaveSkillResult(ToolResult):
    name: str
    path: str


def save_skill(ctx: ToolContext, request: SaveSkillInput) -> SaveSkillResult:
    """Save a reusable procedure as a skill for every agent; you may update only skills you wrote."""
    folder = _skills_dir(ctx) / request.name
    path = folder / "SKILL.md"
    if path.is_file() and _read(path)[0].author != ctx.caller.agent_id:
        raise Conflict(f"name: skill {request.name!r} exists and is not yours; choose another name", field="name")
    folder.mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {request.name}\ndescription: {request.description}\nauthor: {ctx.caller.agent_id}\n---\n\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(front + request.body.rstrip() + "\n", encoding="utf-8")
    tmp.replace(path)
    ctx.ledger.activity.log("skill_saved", agent_id=ctx.caller.agent_id, subject_type="skill", subject_id=request.name)
    return SaveSkillResult(name=request.name, path=ctx.workspace.relative(path))


LIST = ToolSpec("list_skills", "List skills", ListSkillsInput, ListSkillsResult, list_skills, roles=ALL_ROLES,
                read_only=True)  # fmt: skip
GET = ToolSpec("get_skill", "Get a skill", GetSkillInput, GetSkillResult, get_skill, roles=ALL_ROLES, read_only=True)
SAVE = ToolSpec("save_skill", "Save a skill", SaveSkillInput, SaveSkillResult, save_skill, roles=WORKERS)
TOOLS = [LIST, GET, SAVE]
