"""Shared memory through the in-memory MCP client: notes and skills."""

from __future__ import annotations

import pytest

from amid.server.context import Services
from amid.server.untrusted import unframe
from tests.clients import local_client, ok


def titles(page: dict) -> list[str]:
    return [(unframe(n["content"]) or "").splitlines()[0] for n in page["notes"]]


@pytest.mark.anyio
async def test_notes_are_shared_paged_and_rendered_to_memory(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        for i in range(3):
            await ok(ann, "post_note", {"kind": "observation", "title": f"finding {i}", "body": "CT noise differs"})
    async with local_client(services, "ben") as ben:
        page = await ok(ben, "read_notes", {"limit": 2})
        assert titles(page) == ["# finding 2", "# finding 1"]
        rest = await ok(ben, "read_notes", {"limit": 2, "before_id": page["next_before_id"]})
        assert titles(rest) == ["# finding 0"] and rest["next_before_id"] is None
    files = sorted(p.name for p in (services.workspace.memory_dir / "notes").iterdir())
    assert files[0].startswith("00001-finding-0")


@pytest.mark.anyio
async def test_a_focus_note_must_name_its_evidence_budget_and_exit(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        result = await ann.call_tool("post_note", {"kind": "focus", "title": "tune lr", "body": "plan", "focus": "lr"})
        assert result.is_error
        assert "evidence, remaining_budget, abandon_condition" in result.content[0].text  # type: ignore[union-attr]
        done = await ok(
            ann,
            "post_note",
            {
                "kind": "focus",
                "title": "tune lr",
                "body": "plan",
                "focus": "lr sweep",
                "evidence": "fold0 0.81",
                "remaining_budget": "2 GPU h",
                "abandon_condition": "no gain > 0.005 after 3 runs",
            },
        )
    text = (services.workspace.root / done["path"]).read_text(encoding="utf-8")
    assert "**abandon condition**: no gain > 0.005 after 3 runs" in text
    assert services.ledger.db.scalar("SELECT count(*) FROM notes") == 1


@pytest.mark.anyio
async def test_skills_are_seeded_listed_saved_and_protected_from_other_authors(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        names = [s["name"] for s in (await ok(ann, "list_skills", {}))["skills"]]
        assert "amid-loop" in names
        loop = await ok(ann, "get_skill", {"name": "amid-loop"})
        assert "submit_attempt" in loop["text"]
        saved = await ok(
            ann,
            "save_skill",
            {
                "name": "nifti-geometry",
                "description": "Read before writing NIfTI.",
                "body": "Copy the reference affine and header zooms.",
            },
        )
        assert saved["path"] == "memory/skills/nifti-geometry/SKILL.md"
    async with local_client(services, "ben") as ben:
        denied = await ben.call_tool(
            "save_skill",
            {"name": "nifti-geometry", "description": "mine now, really", "body": "overwrite attempt of the procedure"},
        )
        assert denied.is_error and "is not yours" in denied.content[0].text  # type: ignore[union-attr]
        denied = await ben.call_tool(
            "save_skill",
            {
                "name": "amid-loop",
                "description": "replace the loop skill",
                "body": "overwrite attempt of the procedure",
            },
        )
        assert denied.is_error
        listed_full = (await ok(ben, "list_skills", {}))["skills"]
        listed = {s["name"]: s["author"] for s in listed_full}
    assert listed["nifti-geometry"] == "ann" and listed["amid-loop"] == "amid"
    assert {s["name"]: s["origin"] for s in listed_full}["amid-loop"] == "seeded"
