"""A scripted OpenAI Chat Completions endpoint: the true edge for a real OpenCode worker (offline).

OpenCode's `@ai-sdk/openai-compatible` provider (bundled in the CLI: nothing is downloaded) POSTs
`{baseURL}/chat/completions` with `stream: true`, the MCP tools listed as `<server>_<tool>`. The first
turn of a conversation answers with a `tool_calls` chunk for the AMID `get_task` tool; a turn whose
last message is that tool's result, or whose last user message is a heartbeat, ends with a short text
(so does OpenCode's title request, which offers no tools). The stream carries `chat.completion.chunk`
events, a usage chunk and `[DONE]`. Every request body is kept, so a test can read what the CLI sent.
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.supervisor.workers.scripted_endpoint import Reply, ScriptedEndpoint, reply

TOOL = "get_task"


def content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def _amid_tool(body: dict[str, Any]) -> str | None:
    names = [t.get("function", {}).get("name", "") for t in body.get("tools", [])]
    return next((n for n in names if n.endswith(TOOL) and "amid" in n), None)


def _wants_tool(body: dict[str, Any]) -> str | None:
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") != "user" or "HEARTBEAT" in content_text(last):
        return None
    return _amid_tool(body)


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


def _stream(body: dict[str, Any], n: int) -> bytes:
    model = str(body.get("model", "scripted"))
    tool = _wants_tool(body)
    if tool is not None:
        call = {
            "index": 0,
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps({"include_case_ids": False})},
        }
        first, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    else:
        first, finish = {"role": "assistant", "content": "Done."}, "stop"
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

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        if not path.rstrip("/").endswith("/chat/completions"):
            return self.not_found(path)
        self.requests.append(body)
        return reply("text/event-stream", _stream(body, len(self.requests)))
