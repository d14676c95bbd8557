"""Answers over real HTTP: one JSON body, or a stream where a call can report progress and asks for it."""

from __future__ import annotations

import asyncio
import json

import httpx2

from amid.server.mcp_client import connect
from amid.server.response_mode import wants_stream
from tests.server.conftest import Running

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _post(running: Running, message: dict) -> httpx2.Response:
    headers = {**HEADERS, "authorization": f"Bearer {running.tokens['alice']}"}
    return httpx2.post(running.url, json=message, headers=headers, timeout=30)


def _call(name: str, arguments: dict, meta: dict | None = None) -> dict:
    params: dict = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


def test_a_call_without_a_progress_token_is_answered_in_one_json_body(running: Running) -> None:
    response = _post(running, _call("get_task", {"include_case_ids": False}))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    reply = response.json()
    assert reply["id"] == 7 and not reply["result"].get("isError")
    assert reply["result"]["structuredContent"]["task_id"]


def test_tools_list_and_errors_come_in_one_json_body(running: Running) -> None:
    listed = _post(running, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed.headers["content-type"].startswith("application/json")
    assert "get_task" in {tool["name"] for tool in listed.json()["result"]["tools"]}
    refused = _post(running, _call("get_review", {"review_id": "rev_nope"}))
    assert refused.headers["content-type"].startswith("application/json")
    assert refused.json()["result"]["isError"] is True


def test_a_progress_reporting_call_that_asks_for_progress_gets_a_stream(running: Running) -> None:
    response = _post(running, _call("list_jobs", {}, meta={"progressToken": 3}))  # list_jobs reports none
    assert response.headers["content-type"].startswith("application/json")
    streamed = _post(running, _call("get_job", {"job_id": "job_nope"}, meta={"progressToken": 3}))
    assert streamed.headers["content-type"].startswith("text/event-stream")
    data = [line[5:].strip() for line in streamed.text.splitlines() if line.startswith("data:")]
    reply = json.loads(data[-1])
    assert reply["id"] == 7 and reply["result"]["isError"] is True  # no such job, answered on the stream


def test_the_real_sdk_client_reads_both_kinds_of_answer(running: Running) -> None:
    async def both() -> tuple[bool, bool]:
        async with connect(running.url, running.tokens["alice"]) as client:
            plain = await client.call_tool("list_jobs", {})
            seen: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                seen.append(done)

            streamed = await client.call_tool("get_job", {"job_id": "job_nope"}, progress_callback=on_progress)
            return plain.is_error, streamed.is_error

    assert asyncio.run(both()) == (False, True)


def test_the_decision_reads_only_well_formed_calls_of_streaming_tools() -> None:
    tools = frozenset({"get_job"})
    call = _call("get_job", {"job_id": "j"}, meta={"progressToken": "p"})
    assert wants_stream(json.dumps(call).encode(), tools)
    assert not wants_stream(json.dumps(_call("get_job", {"job_id": "j"})).encode(), tools)
    assert not wants_stream(json.dumps(_call("get_job", {}, meta={"progressToken": None})).encode(), tools)
    assert not wants_stream(json.dumps(_call("get_task", {}, meta={"progressToken": 1})).encode(), tools)
    assert not wants_stream(json.dumps([call]).encode(), tools)  # a batch
    assert not wants_stream(b"{not json", tools)
    assert not wants_stream(json.dumps({**call, "params": "x"}).encode(), tools)
