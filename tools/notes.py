"""Shared memory: notes every agent can read. A focus note commits to a plan with an exit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from server.context import ToolContext
from server.errors import NotFound, shown
from server.toolkit import ALL_ROLES, WORKERS, Created, IdempotencyKey, ToolResult, ToolSpec, receipt_for

NoteKind = Literal["observation", "reflection", "focus", "decision"]
FOCUS_FIELDS = ("focus", "evidence", "remaining_budget", "abandon_condition")


class PostNoteInput(BaseModel):
    kind: NoteKind
    title: Annotated[str, Field(min_length=3, max_length=200)]
    body: Annotated[str, Field(min_length=1, max_length=8000, description="markdown")]
    lane_id: str | None = None
    focus: str | None = Field(default=None, description="focus notes: what you will try next")
    evidence: str | None = Field(default=None, description="focus notes: the verified results behind it")
    remaining_budget: str | None = Field(default=None, description="focus notes: time/GPU you will spend")
    abandon_condition: str | None = Field(default=None, description="focus notes: when you will stop")
    idempotency_key: IdempotencyKey = None

    @model_validator(mode="after")
    def _focus_notes_are_complete(self) -> PostNoteInput:
        if self.kind == "focus":
            missing = [name for name in FOCUS_FIELDS if not getattr(self, name)]
            if missing:
                raise ValueError(f"a focus note needs {', '.join(missing)}")
        return self


class NoteView(BaseModel):
    note_id: int
    agent_id: str
    kind: str
    lane_id: str | None
    title: str
    body: str
    created_at: str


class PostNoteResult(ToolResult):
    note_id: int
    path: str
    created: Created = True


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "note"


def post_note(ctx: ToolContext, request: PostNoteInput) -> PostNoteResult:
    """Write a note to the shared memory (observation, reflection, focus with exit condition, decision)."""
    if request.lane_id and not ctx.ledger.db.scalar("SELECT count(*) FROM lanes WHERE lane_id = ?", [request.lane_id]):
        raise NotFound(f"lane_id: no lane {shown(request.lane_id)}; see list_lanes", field="lane_id")
    data = {name: getattr(request, name) for name in FOCUS_FIELDS if getattr(request, name)}

    def result_of(note_id: int) -> dict[str, object]:
        return {"note_id": note_id, "path": ctx.workspace.relative(_note_path(ctx, note_id, request.title))}

    note_id = ctx.ledger.notes.add(
        ctx.caller.agent_id, request.kind, request.lane_id, request.title, request.body, data,
        receipt=receipt_for(POST_NOTE, ctx, request), result_of=result_of,
    )  # fmt: skip
    path = _note_path(ctx, note_id, request.title)
    extra = "".join(f"- **{k.replace('_', ' ')}**: {v}\n" for k, v in data.items())
    lane = f" · lane {request.lane_id}" if request.lane_id else ""
    header = f"# {request.title}\n\n_{request.kind} by {ctx.caller.agent_id}{lane}_\n\n"
    path.write_text(header + extra + ("\n" if extra else "") + request.body + "\n", encoding="utf-8")
    return PostNoteResult(note_id=note_id, path=ctx.workspace.relative(path))


def _note_path(ctx: ToolContext, note_id: int, title: str) -> Path:
    return ctx.workspace.memory_dir / "notes" / f"{note_id:05d}-{_slug(title)}.md"


class ReadNotesInput(BaseModel):
    lane_id: str | None = None
    kind: NoteKind | None = None
    agent_id: str | None = None
    before_id: int | None = Field(default=None, description="paging: notes older than this id")
    limit: Annotated[int, Field(ge=1, le=50)] = 10


class ReadNotesResult(ToolResult):
    notes: list[NoteView]
    next_before_id: int | None


def read_notes(ctx: ToolContext, request: ReadNotesInput) -> ReadNotesResult:
    """Read the shared notes, newest first; filter by lane, kind or author; page with before_id."""
    rows = ctx.ledger.notes.list(
        lane_id=request.lane_id, kind=request.kind, agent_id=request.agent_id,
        before_id=request.before_id, limit=request.limit + 1,
    )  # fmt: skip
    notes = [
        NoteView(
            **{k: r[k] for k in NoteView.model_fields if k != "created_at"}, created_at=r["created_at"].isoformat()
        )
        for r in rows[: request.limit]
    ]
    return ReadNotesResult(notes=notes, next_before_id=notes[-1].note_id if len(rows) > request.limit else None)


POST_NOTE = "post_note"
POST = ToolSpec(POST_NOTE, "Post a note", PostNoteInput, PostNoteResult, post_note, roles=WORKERS, keyed=True)
READ = ToolSpec(
    "read_notes", "Read notes", ReadNotesInput, ReadNotesResult, read_notes, roles=ALL_ROLES, read_only=True
)
TOOLS = [POST, READ]
