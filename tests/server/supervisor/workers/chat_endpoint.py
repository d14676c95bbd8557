"""A scripted OpenAI Chat Completions endpoint: the true edge for a real OpenCode worker (offline).

OpenCode's `@ai-sdk/openai-compatible` provider (bundled in the CLI: nothing is downloaded) POSTs
`{baseURL}/chat/completions` with `stream: true`, the MCP tools listed as `<server>_<tool>` beside its
own `write` and `bash`. Each turn answers with the step its script takes next (`attempt_script.next_step`
over the `tool` messages of the request) as a `tool_calls` chunk, or ends with a short text; so does a
turn whose last user message is a heartbeat, and OpenCode's title request, which offers no tools. The
stream carries `chat.completion.chunk` events, a usage chunk and `[DONE]`. Every request body is kept,
and every scripted turn is logged in `turns`.
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


def content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def _amid_tools(body: dict[str, Any]) -> dict[str, str]:
    """AMID tool name → the name OpenCode offers it under (`amid_<tool>`)."""
    names = [str(t.get("function", {}).get("name", "")) for t in body.get("tools", [])]
    return {n.split("amid_", 1)[1]: n for n in names if n.startswith("amid_")}


def tool_results(body: dict[str, Any]) -> list[str]:
    return [content_text(m) for m in body.get("messages", []) if m.get("role") == "tool"]


def _heartbeat_turn(body: dict[str, Any]) -> bool:
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    return last.get("role") == "user" and "HEARTBEAT" in content_text(last)


def _call(step: Step, amid: dict[str, str]) -> tuple[str, dict[str, Any]] | None:
    if isinstance(step, Mcp):
        return amid.get(step.tool, f"amid_{step.tool}"), step.arguments
    if isinstance(step, Write):
        return "write", {"filePath": step.path, "content": step.content}
    if isinstance(step, Shell):
        return "bash", {"command": step.command, "description": "run a step of the attempt", "timeout": 300000}
    return None


def _chunk(n: int, model: str, delta: dict[str, Any], finish: str | None, **extra: Any) -> bytes:
    event = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta or finish else [],
        **extra,
    }
    return f"data: {json.dumps(event)}\n\n".encode()


def _stream(body: dict[str, Any], step: Step, n: int) -> bytes:
    model = str(body.get("model", "scripted"))
    call = _call(step, _amid_tools(body))
    if call is not None:
        function = {"name": call[0], "arguments": json.dumps(call[1])}
        tool_call = {"index": 0, "id": f"call_{n}", "type": "function", "function": function}
        first, finish = {"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"
    else:
        first, finish = {"role": "assistant", "content": step.text if isinstance(step, Finish) else "Done."}, "stop"
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    return b"".join(
        [
            _chunk(n, model, first, None),
            _chunk(n, model, {}, finish),
            _chunk(n, model, {}, None, usage=usage),
            b"data: [DONE]\n\n",
        ]
    )


class ChatEndpoint(ScriptedEndpoint):
    url_suffix = "/v1"

    def is_model_request(self, path: str) -> bool:
        return path.rstrip("/").endswith("/chat/completions")

    def auth_error_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": "Incorrect API key provided: sk-revoked.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if not path.rstrip("/").endswith("/chat/completions"):
            return self.not_found(path)
        self.requests.append(body)
        return reply("text/event-stream", _stream(body, self._step(body), len(self.requests)))

    def _step(self, body: dict[str, Any]) -> Step:
        if not _amid_tools(body):
            return Finish("Done.")
        results = tool_results(body)
        if _heartbeat_turn(body):
            return self.log_turn(results, Finish("Noted."))
        return self.log_turn(results, next_step(self.script, results))
