"""A scripted OpenAI Responses endpoint: the true edge for a real Codex CLI worker (offline).

Codex POSTs `{base_url}/responses` with `stream: true`, its conversation as `input` items, the MCP
tools in the `mcp__amid` namespace and its own shell, `exec_command`, among `tools`. Each turn answers
with the step its script takes next (`attempt_script.next_step` over the call outputs in the input):
an AMID tool as a namespaced `function_call`, a command as an `exec_command` call, a file as Codex's
own edit tool, `apply_patch`, which Codex tells its model to call through the shell and applies
itself; the end of the turn is a short message, and so is a turn whose last user message is a
heartbeat. The stream carries the SSE events the Responses API sends (`response.created`,
`response.output_item.added`, deltas, `response.output_item.done`, `response.completed`). Every
request body is kept, and every scripted turn is logged in `turns`.
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.supervisor.workers.attempt_script import (
    Finish,
    Mcp,
    Shell,
    Step,
    Write,
    next_step,
)
from tests.server.supervisor.workers.scripted_endpoint import Reply, ScriptedEndpoint, reply

SHELL = "exec_command"
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


def _amid_tool(body: dict[str, Any], tool: str) -> tuple[str, str] | None:
    names = tool_names(body.get("tools", []))
    return next(((ns, n) for ns, n in names if n.endswith(tool) and "amid" in ns + n), None)


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    return output if isinstance(output, str) else json.dumps(output)


def tool_results(body: dict[str, Any]) -> list[str]:
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    return [_output_text(i) for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")]


def _heartbeat_turn(body: dict[str, Any]) -> bool:
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    users = [n for n, i in enumerate(items) if i.get("type", "message") == "message" and i.get("role") == "user"]
    if not users:
        return False
    answered = any(i.get("type") == "function_call_output" for i in items[users[-1] :])
    return not answered and "HEARTBEAT" in text_of(items[users[-1]])


def add_file_patch(path: str, content: str) -> str:
    """Codex's apply_patch format for a new file, as a shell here-document."""
    added = "".join(f"+{line}\n" for line in content.splitlines())
    return f"apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: {path}\n{added}*** End Patch\nPATCH"


def _call(body: dict[str, Any], step: Step) -> tuple[str, str, dict[str, Any]] | None:
    """(namespace, name, arguments) of the function call that takes `step`."""
    if isinstance(step, Mcp):
        namespace, name = _amid_tool(body, step.tool) or ("mcp__amid", step.tool)
        return namespace, name, step.arguments
    if isinstance(step, Write):
        return "", SHELL, {"cmd": add_file_patch(step.path, step.content), "yield_time_ms": 30000}
    if isinstance(step, Shell):
        return "", SHELL, {"cmd": step.command, "yield_time_ms": 30000, "max_output_tokens": 4000}
    return None


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _stream(body: dict[str, Any], step: Step, n: int) -> bytes:
    response = {"id": f"resp_{n}", "object": "response", "status": "in_progress", "model": body.get("model")}
    call = _call(body, step)
    if call is not None:
        namespace, name, arguments = call
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": name,
            "arguments": json.dumps(arguments),
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
        text = step.text if isinstance(step, Finish) else "Done."
        item = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        deltas = [
            _sse(
                "response.output_text.delta",
                {"output_index": 0, "content_index": 0, "item_id": item["id"], "delta": text},
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

    def is_model_request(self, path: str) -> bool:
        return path.rstrip("/").endswith("/responses")

    def auth_error_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": "Incorrect API key provided: sk-revoked.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }

    def answer_get(self, path: str) -> Reply:  # the model list Codex refreshes: none beyond the configured one
        return reply("application/json", {"models": [], "data": []})

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if not path.rstrip("/").endswith("/responses"):
            return self.not_found(path)
        self.requests.append(body)
        return reply("text/event-stream", _stream(body, self._step(body), len(self.requests)))

    def _step(self, body: dict[str, Any]) -> Step:
        if _amid_tool(body, "get_task") is None:
            return Finish("Done.")
        results = tool_results(body)
        if _heartbeat_turn(body):
            return self.log_turn(results, Finish("Noted."))
        return self.log_turn(results, next_step(self.script, results))
