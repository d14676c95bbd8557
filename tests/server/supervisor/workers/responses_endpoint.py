"""A scripted OpenAI Responses endpoint: the true edge for a real Codex CLI worker (offline).

Codex POSTs `{base_url}/responses` with `stream: true`, its conversation as `input` items and the MCP
tools among `tools`. The first turn of a conversation answers with a `function_call` of the AMID
`get_task` tool; a turn whose input ends with that call's output, or whose last user message is a
heartbeat, ends with a short message. The stream carries the SSE events the Responses API sends
(`response.created`, `response.output_item.added`, deltas, `response.output_item.done`,
`response.completed`). Every request body is kept, so a test can read what the CLI sent on resume.
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.supervisor.workers.scripted_endpoint import Reply, ScriptedEndpoint, reply

TOOL = "get_task"
USAGE = {
    "input_tokens": 1,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 1,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 2,
}


def tool_names(tools: list[dict[str, Any]], prefix: str = "") -> list[tuple[str, str]]:
    """(namespace, name) of every function tool, namespaces (MCP servers) walked into."""
    found = []
    for tool in tools:
        if tool.get("type") == "namespace":
            found += tool_names(tool.get("tools", []), tool.get("name", ""))
        elif "name" in tool:
            found.append((prefix, tool["name"]))
    return found


def _amid_tool(body: dict[str, Any]) -> tuple[str, str] | None:
    return next(((ns, n) for ns, n in tool_names(body.get("tools", [])) if n.endswith(TOOL) and "amid" in ns + n), None)


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def _wants_tool(body: dict[str, Any]) -> bool:
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    users = [n for n, i in enumerate(items) if i.get("type", "message") == "message" and i.get("role") == "user"]
    if not users or _amid_tool(body) is None:
        return False
    last = users[-1]
    answered = any(i.get("type") == "function_call_output" for i in items[last:])
    return not answered and "HEARTBEAT" not in text_of(items[last])


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _stream(body: dict[str, Any], n: int) -> bytes:
    response = {"id": f"resp_{n}", "object": "response", "status": "in_progress", "model": body.get("model")}
    tool = _amid_tool(body) if _wants_tool(body) else None
    if tool is not None:
        namespace, name = tool
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": name,
            "arguments": json.dumps({"include_case_ids": False}),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        deltas = [
            _sse(
                "response.function_call_arguments.delta",
                {"output_index": 0, "item_id": item["id"], "delta": item["arguments"]},
            )
        ]
    else:
        item = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        }
        deltas = [
            _sse(
                "response.output_text.delta",
                {"output_index": 0, "content_index": 0, "item_id": item["id"], "delta": "Done."},
            )
        ]
    started = {**item, "status": "in_progress"}
    return b"".join(
        [
            _sse("response.created", {"response": {**response, "output": []}}),
            _sse("response.output_item.added", {"output_index": 0, "item": started}),
            *deltas,
            _sse("response.output_item.done", {"output_index": 0, "item": item}),
            _sse(
                "response.completed",
                {"response": {**response, "status": "completed", "output": [item], "usage": USAGE}},
            ),
        ]
    )


class ResponsesEndpoint(ScriptedEndpoint):
    url_suffix = "/v1"

    def answer_get(self, path: str) -> Reply:  # the model list Codex refreshes: none beyond the configured one
        return reply("application/json", {"models": [], "data": []})

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if not path.rstrip("/").endswith("/responses"):
            return self.not_found(path)
        self.requests.append(body)
        return reply("text/event-stream", _stream(body, len(self.requests)))
