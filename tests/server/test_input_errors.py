"""Exact input errors through the real MCP client: strict types and unknown names at every depth,
values cut short, OS refusals of paths as INVALID_INPUT, closed schemas, and idempotency keys on
the write tools (kept in the ledger across a restart)."""

from __future__ import annotations

import pytest

from amid.server.connect import ensure_worktree
from amid.server.context import Services
from amid.server.ledger import Ledger
from tests.clients import error, local_client, ok
from tests.reliability.fuzzing import prepare_worktree

NOTE = {"kind": "observation", "title": "CT noise", "body": "fold 0 differs"}
SUBMIT = {"commit": "HEAD", "folds": [0], "declared_scores": {"0": {"dice": 0.5}}}


@pytest.mark.anyio
async def test_unknown_argument_names_are_refused_naming_them_and_the_accepted_ones(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        top = await error(ann, "read_notes", {"limit": 2, "lane": "x", "kindd": "focus"})
        nested = await error(ann, "submit_attempt", {**SUBMIT, "artifacts": {"predictions": {"0": "p"}, "log": []}})
    assert top.startswith("INVALID_INPUT: arguments: got unknown names 'lane', 'kindd'; expected only lane_id, kind,")
    assert nested.startswith("INVALID_INPUT: artifacts: got an unknown name 'log'; expected only predictions,")
    assert services.ledger.db.scalar("SELECT count(*) FROM attempts") == 0


@pytest.mark.anyio
async def test_strings_and_numbers_are_not_taken_for_booleans_or_integers(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        for bad in ("yes", "true", 1):
            text = await error(ann, "list_lanes", {"include_excluded": bad})
            assert text == f"INVALID_INPUT: include_excluded: got {bad!r}; expected true or false " + (
                "(a JSON boolean, not a string or number)"
            )
        for bad in ("5", 5.0, True):
            assert (await error(ann, "read_notes", {"limit": bad})).startswith(f"INVALID_INPUT: limit: got {bad!r}")
        await ok(ann, "read_notes", {"limit": 5})
        missing_job = await error(ann, "get_job", {"job_id": "j", "wait_s": 1})  # an int for a float
        assert "job_id: got 'j'; expected a job id" in missing_job


@pytest.mark.anyio
async def test_a_wrong_value_deep_inside_is_named_by_its_path(services: Services) -> None:
    artifacts = {"predictions": {"0": "p"}, "logs": ["a.log", 7]}
    async with local_client(services, "ann") as ann:
        item = await error(ann, "submit_attempt", {**SUBMIT, "artifacts": artifacts})
        key = await error(ann, "submit_attempt", {**SUBMIT, "declared_scores": {"zero": {}}, "artifacts": artifacts})
        missing = await error(ann, "post_note", {"kind": "observation", "body": "b"})
    assert item == "INVALID_INPUT: artifacts.logs.1: got 7; expected a string"
    assert key.startswith("INVALID_INPUT: declared_scores.zero: got 'zero' (as an object key); expected an integer")
    assert missing == "INVALID_INPUT: title: got nothing; expected a value: this argument is required"


@pytest.mark.anyio
async def test_a_megabyte_argument_is_cut_short_in_the_reply(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        result = await ann.call_tool("post_note", {**NOTE, "title": "t" * 1_000_000})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and len(text) < 600
    assert "… (999802 more characters); expected a string of at most 200 characters" in text
    assert services.ledger.db.scalar("SELECT count(*) FROM notes") == 0


@pytest.mark.anyio
async def test_paths_the_file_system_refuses_are_invalid_input_naming_the_field(services: Services) -> None:
    prepare_worktree(ensure_worktree(services.workspace, "ann"))
    async with local_client(services, "ann") as ann:
        long_name = await error(ann, "run_gpu_job", {"command": ["/nonexistent"], "cwd": "a" * 300})
        loop = await error(ann, "run_gpu_job", {"command": ["/nonexistent"], "cwd": "loop/x"})
        fifo = await error(ann, "submit_attempt", {**SUBMIT, "artifacts": {"predictions": {"0": "fifo"}}})
    assert long_name.startswith("INVALID_INPUT: cwd: got 'aaaa") and "(ENAMETOOLONG: File name too long)" in long_name
    assert loop.startswith("INVALID_INPUT: cwd: got 'loop/x'; expected a path the file system accepts (ELOOP")
    assert fifo == "INVALID_INPUT: artifacts.predictions.0: 'fifo' is not a regular file or a folder"
    assert services.ledger.db.scalar("SELECT count(*) FROM jobs") == 0


@pytest.mark.anyio
async def test_a_list_argument_sent_as_json_text_is_parsed_as_the_sdk_did(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        text = await error(ann, "submit_attempt", {**SUBMIT, "folds": "[0]", "artifacts": '{"predictions": {}}'})
    assert text.startswith("INVALID_INPUT: artifacts.predictions: got []; expected a folder for each fold [0]")


@pytest.mark.anyio
async def test_every_published_schema_refuses_unknown_names(services: Services) -> None:
    async with local_client(services, "boss", role="supervisor") as boss:
        tools = (await boss.list_tools()).tools
    assert tools and all(t.input_schema["additionalProperties"] is False for t in tools)
    submit = next(t for t in tools if t.name == "submit_attempt").input_schema
    assert submit["$defs"]["ArtifactPaths"]["additionalProperties"] is False
    assert submit["properties"]["declared_scores"]["additionalProperties"] == {
        "additionalProperties": {"type": "number"},
        "type": "object",
    }


@pytest.mark.anyio
async def test_a_repeated_note_key_returns_the_first_note_even_after_a_restart(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        first = await ok(ann, "post_note", {**NOTE, "idempotency_key": "n-1"})
        again = await ok(ann, "post_note", {**NOTE, "idempotency_key": "n-1"})
        other = await error(ann, "post_note", {**NOTE, "body": "other", "idempotency_key": "n-1"})
    assert first["created"] is True and again == {**first, "created": False}
    assert other.startswith("CONFLICT: idempotency_key: got 'n-1', used at ") and "other arguments" in other
    services.ledger.close()
    services.ledger = Ledger(services.workspace.ledger_path)
    async with local_client(services, "ann") as ann:
        restarted = await ok(ann, "post_note", {**NOTE, "idempotency_key": "n-1"})
        await ok(ann, "post_note", NOTE)
    async with local_client(services, "ben") as ben:
        theirs = await ok(ben, "post_note", {**NOTE, "idempotency_key": "n-1"})
    assert restarted == again and theirs["created"] is True and theirs["note_id"] != first["note_id"]
    assert services.ledger.db.scalar("SELECT count(*) FROM notes") == 3


@pytest.mark.anyio
async def test_a_repeated_release_key_returns_the_first_release_instead_of_a_conflict(services: Services) -> None:
    async with local_client(services, "ann") as ann:
        lane = (await ok(ann, "list_lanes"))["lanes"][0]["lane_id"]
        await ok(ann, "claim_lane", {"lane_id": lane, "idempotency_key": "c-1"})
        released = await ok(ann, "release_lane", {"lane_id": lane, "idempotency_key": "r-1"})
        retried = await ok(ann, "release_lane", {"lane_id": lane, "idempotency_key": "r-1"})
        unkeyed = await error(ann, "release_lane", {"lane_id": lane})
    assert retried == {**released, "created": False}
    assert unkeyed.startswith("CONFLICT: lane_id: got ") and "expected a lane you hold a claim on" in unkeyed


@pytest.mark.anyio
async def test_a_repeated_worker_transition_key_records_one_transition(services: Services) -> None:
    call = {"agent_id": "w1", "backend": "scripted", "state": "running", "event": "started", "idempotency_key": "t1"}
    services.ledger.identities.create_token("w1", "agent")  # a worker is registered with its token first
    async with local_client(services, "boss", role="supervisor") as boss:
        first = await ok(boss, "record_worker", call)
        again = await ok(boss, "record_worker", call)
        other = await error(boss, "record_worker", {**call, "state": "paused"})
    assert again == {**first, "created": False} and other.startswith("CONFLICT: idempotency_key: got 't1'")
    assert services.ledger.db.scalar("SELECT count(*) FROM worker_transitions WHERE agent_id = 'w1'") == 1
