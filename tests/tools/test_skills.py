"""Versioned, attributed skills through the in-memory MCP client: versions, ownership, idempotency, atomic saves."""

from __future__ import annotations

import hashlib

import anyio
import pytest

from amid.server.context import Services
from amid.server.untrusted import SEEDED_TRUST
from tests.clients import error, local_client, ok

BODY = "1. Load the reference with nibabel.\n2. Copy its affine and header onto the prediction."


def _skill(name: str, body: str = BODY, **extra: str) -> dict[str, str]:
    return {"name": name, "description": "Read before writing a NIfTI prediction.", "body": body, **extra}


@pytest.mark.anyio
async def test_saving_again_adds_a_version_and_any_version_can_be_read(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        first = await ok(ann, "save_skill", _skill("nifti-io"))
        second = await ok(ann, "save_skill", _skill("nifti-io", BODY + "\n3. Check the label values."))
        latest = await ok(ann, "get_skill", {"name": "nifti-io"})
        old = await ok(ann, "get_skill", {"name": "nifti-io", "version": 1})
        listed = {s["name"]: s for s in (await ok(ann, "list_skills"))["skills"]}
        missing = await error(ann, "get_skill", {"name": "nifti-io", "version": 3})
    assert (first["version"], first["created"], second["version"], second["created"]) == (1, True, 2, True)
    assert "3. Check the label values." in latest["text"] and latest["skill"]["version"] == 2
    assert "3. Check" not in old["text"] and old["skill"] == {
        **latest["skill"],
        "version": 1,
        "created_at": old["skill"]["created_at"],
    }
    assert listed["nifti-io"]["author"] == "ann" and listed["nifti-io"]["version"] == 2
    assert missing.startswith("NOT_FOUND: version:") and "[1, 2]" in missing
    folder = services.workspace.memory_dir / "skills" / "nifti-io"
    assert (folder / "SKILL.md").read_bytes() == (folder / "versions" / "2.md").read_bytes()
    assert "author: ann\nversion: 1\n" in (folder / "versions" / "1.md").read_text(encoding="utf-8")
    rows = services.ledger.db.fetchall("SELECT * FROM skill_versions WHERE name = 'nifti-io' ORDER BY version")
    assert [(r["version"], r["author"], r["path"]) for r in rows] == [
        (1, "ann", "memory/skills/nifti-io/versions/1.md"),
        (2, "ann", "memory/skills/nifti-io/versions/2.md"),
    ]
    for row in rows:
        assert row["sha256"] == hashlib.sha256((services.workspace.root / row["path"]).read_bytes()).hexdigest()
        assert row["created_at"] is not None


@pytest.mark.anyio
async def test_saving_unchanged_content_adds_no_version(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        await ok(ann, "save_skill", _skill("nifti-io"))
        again = await ok(ann, "save_skill", _skill("nifti-io"))
    assert (again["version"], again["created"]) == (1, False)
    assert services.ledger.db.scalar("SELECT count(*) FROM skill_versions") == 1


@pytest.mark.anyio
async def test_seeded_skills_are_never_overwritten_or_shadowed_by_an_agent(services: Services) -> None:
    seeded = services.workspace.memory_dir / "skills" / "amid-loop" / "SKILL.md"
    before = seeded.read_bytes()
    async with local_client(services, "amid") as impostor:  # an agent may be named like the seed author
        replaced = await error(impostor, "save_skill", _skill("amid-loop"))
        near = [await error(impostor, "save_skill", _skill(name)) for name in ("amidloop", "amid--loop", "amid-loop-")]
        unicode_variants = ("Amid-Loop", "amid\u2010loop", "\uff41mid-loop")  # case, Unicode hyphen, fullwidth a
        variants = [await error(impostor, "save_skill", _skill(name)) for name in unicode_variants]
        seed = await ok(impostor, "get_skill", {"name": "amid-loop"})
        no_v2 = await error(impostor, "get_skill", {"name": "amid-loop", "version": 2})
    assert replaced.startswith("CONFLICT: name:") and "seeded skill" in replaced
    assert all(m.startswith("CONFLICT: name:") and "too close to 'amid-loop'" in m for m in near)
    assert all(v.startswith("INVALID_INPUT: name:") for v in variants)
    assert seeded.read_bytes() == before and seed["skill"] == {
        "name": "amid-loop",
        "description": seed["skill"]["description"],
        "author": "amid",
        "version": 1,
        "origin": "seeded",
        "trust": SEEDED_TRUST,
        "created_at": None,
    }
    assert no_v2.startswith("NOT_FOUND: version:")
    folders = sorted(p.name for p in (services.workspace.memory_dir / "skills").iterdir())
    assert not any("loop" in f and f != "amid-loop" for f in folders)
    assert services.ledger.db.scalar("SELECT count(*) FROM skill_versions") == 0


@pytest.mark.anyio
async def test_only_the_author_adds_versions_and_near_names_of_other_skills_are_refused(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        await ok(ann, "save_skill", _skill("nifti-io"))
        own_near = await error(ann, "save_skill", _skill("niftiio"))
    async with local_client(services, "ben") as ben:
        taken = await error(ben, "save_skill", _skill("nifti-io", BODY + " Ben's take."))
        shadow = await error(ben, "save_skill", _skill("nifti--io"))
    assert "too close to the skill 'nifti-io' by ann; update that one" in own_near
    assert taken.startswith("CONFLICT: name:") and "is not yours (author ann)" in taken
    assert "by ann; choose a distinct name" in shadow
    rows = services.ledger.db.fetchall("SELECT name, author FROM skill_versions")
    assert rows == [{"name": "nifti-io", "author": "ann"}]


@pytest.mark.anyio
async def test_a_reused_idempotency_key_returns_the_first_version_or_conflicts(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        first = await ok(ann, "save_skill", _skill("nifti-io", idempotency_key="k1"))
        await ok(ann, "save_skill", _skill("nifti-io", BODY + " More.", idempotency_key="k2"))
        retried = await ok(ann, "save_skill", _skill("nifti-io", idempotency_key="k1"))
        changed = await error(ann, "save_skill", _skill("nifti-io", BODY + " Other.", idempotency_key="k1"))
        renamed = await error(ann, "save_skill", _skill("other-skill", idempotency_key="k1"))
        too_long = await error(ann, "save_skill", _skill("nifti-io", idempotency_key="k" * 129))
    async with local_client(services, "ben") as ben:
        own_key = await ok(ben, "save_skill", _skill("bens-skill", idempotency_key="k1"))
    assert (first["version"], first["created"]) == (1, True)
    assert retried == {**first, "created": False}
    assert changed.startswith("CONFLICT: idempotency_key:") and "different body;" in changed
    assert "different name" in renamed
    assert too_long.startswith("INVALID_INPUT: idempotency_key:")
    assert own_key["created"] is True
    assert services.ledger.db.scalar("SELECT count(*) FROM skill_versions") == 3


@pytest.mark.anyio
async def test_a_failed_write_leaves_no_version_and_the_latest_text_in_place(services: Services) -> None:
    folder = services.workspace.memory_dir / "skills" / "nifti-io"
    async with local_client(services, "ann") as ann:
        await ok(ann, "save_skill", _skill("nifti-io"))
        before = (folder / "SKILL.md").read_bytes()
        (folder / "versions" / "2.md").mkdir()  # the version file cannot be put in place
        failed = await error(ann, "save_skill", _skill("nifti-io", BODY + " Version two."))
        assert failed.startswith("CONFLICT: name: could not write memory/skills/nifti-io/versions/2.md")
        assert (folder / "SKILL.md").read_bytes() == before
        assert sorted(p.name for p in (folder / "versions").iterdir()) == ["1.md", "2.md"]
        assert (await ok(ann, "get_skill", {"name": "nifti-io"}))["skill"]["version"] == 1
        (folder / "versions" / "2.md").rmdir()
        retried = await ok(ann, "save_skill", _skill("nifti-io", BODY + " Version two."))
    assert (retried["version"], retried["created"]) == (2, True)
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]
    assert services.ledger.db.scalar("SELECT count(*) FROM skill_versions") == 2


@pytest.mark.anyio
async def test_a_version_file_changed_on_disk_is_refused_not_served(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        await ok(ann, "save_skill", _skill("nifti-io"))
        await ok(ann, "save_skill", _skill("nifti-io", BODY + " Second."))
        version_one = services.workspace.memory_dir / "skills" / "nifti-io" / "versions" / "1.md"
        version_one.write_text(version_one.read_text(encoding="utf-8") + "injected\n", encoding="utf-8")
        changed = await error(ann, "get_skill", {"name": "nifti-io", "version": 1})
        latest = await ok(ann, "get_skill", {"name": "nifti-io"})
    assert changed.startswith("DATA_UNREADABLE: version: memory/skills/nifti-io/versions/1.md is missing or changed")
    assert latest["skill"]["version"] == 2


@pytest.mark.anyio
async def test_a_description_must_be_one_line(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        message = await error(ann, "save_skill", {**_skill("nifti-io"), "description": "line one\nauthor: amid"})
    assert message.startswith("INVALID_INPUT: description:")
    assert not (services.workspace.memory_dir / "skills" / "nifti-io").exists()


@pytest.mark.anyio
async def test_two_agents_saving_one_new_name_at_once_get_one_owner(services: Services) -> None:
    outcomes: dict[str, bool] = {}

    async def save(agent: str) -> None:
        async with local_client(services, agent) as client:
            result = await client.call_tool("save_skill", _skill("shared-name", f"{BODY} by {agent}"))
            outcomes[agent] = not result.is_error

    async with anyio.create_task_group() as group:
        for agent in ("ann", "ben", "cat"):
            group.start_soon(save, agent)
    winners = [agent for agent, won in outcomes.items() if won]
    rows = services.ledger.db.fetchall("SELECT author, version FROM skill_versions")
    assert len(winners) == 1 and rows == [{"author": winners[0], "version": 1}]
    text = (services.workspace.memory_dir / "skills" / "shared-name" / "SKILL.md").read_text(encoding="utf-8")
    assert f"author: {winners[0]}\n" in text and f"by {winners[0]}" in text


@pytest.mark.anyio
async def test_a_skill_saved_before_versions_stays_its_authors(services: Services) -> None:
    folder = services.workspace.memory_dir / "skills" / "old-skill"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: old-skill\ndescription: Read before the old procedure.\nauthor: ann\n---\n\nOld steps.\n",
        encoding="utf-8",
    )
    async with local_client(services, "ben") as ben:
        listed = {s["name"]: s for s in (await ok(ben, "list_skills"))["skills"]}
        taken = await error(ben, "save_skill", _skill("old-skill"))
    async with local_client(services, "ann") as ann:
        saved = await ok(ann, "save_skill", _skill("old-skill"))
    assert (listed["old-skill"]["author"], listed["old-skill"]["version"]) == ("ann", 1)
    assert taken.startswith("CONFLICT: name: 'old-skill' is a skill of ann and is not yours")
    assert (saved["version"], saved["created"]) == (1, True)
    assert "author: ann\nversion: 1\n" in (folder / "SKILL.md").read_text(encoding="utf-8")
