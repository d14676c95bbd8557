"""A scripted Anthropic Messages endpoint (REFERENCE §3): the true edge for a real Claude Code worker.

Each streamed turn of the worker's conversation answers with the step its script takes next
(`attempt_script.next_step` over the tool results in the request): an AMID tool as a `tool_use` of
`mcp__amid__<tool>`, a file as a `tool_use` of Claude Code's own `Write`, a command as one of its own
`Bash`, and the end of the turn as a short text; a turn whose last user message is a heartbeat ends
with a short text. Requests that offer no AMID tool (a title, a quota probe) get a short text. Every
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

PREFIX = "mcp__amid__"


def _user_contents(body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
    return [[{"type": "text", "text": c}] if isinstance(c, str) else list(c) for c in users]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of every tool result in the conversation, in order."""
    return [_result_text(b) for blocks in _user_contents(body) for b in blocks if b.get("type") == "tool_result"]


def _heartbeat_turn(body: dict[str, Any]) -> bool:
    users = _user_contents(body)
    last = users[-1] if users else []
    texts = " ".join(str(b.get("text", "")) for b in last if b.get("type") == "text")
    return "HEARTBEAT" in texts and not any(b.get("type") == "tool_result" for b in last)


def _tool_use(step: Step) -> tuple[str, dict[str, Any]] | None:
    if isinstance(step, Mcp):
        return PREFIX + step.tool, step.arguments
    if isinstance(step, Write):
        return "Write", {"file_path": step.path, "content": step.content}
    if isinstance(step, Shell):
        return "Bash", {"command": step.command, "description": "run a step of the attempt", "timeout": 300000}
    return None


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _stream(step: Step, n: int) -> bytes:
    message: dict[str, Any] = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-scripted",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    call = _tool_use(step)
    if call is not None:
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": call[0], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call[1])}
    else:
        text = step.text if isinstance(step, Finish) else "Done."
        block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": text}
    return b"".join(
        [
            _sse("message_start", {"message": message}),
            _sse("content_block_start", {"index": 0, "content_block": block}),
            _sse("content_block_delta", {"index": 0, "delta": delta}),
            _sse("content_block_stop", {"index": 0}),
            _sse(
                "message_delta",
                {
                    "delta": {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            ),
            _sse("message_stop", {}),
        ]
    )


class MessagesEndpoint(ScriptedEndpoint):
    def is_model_request(self, path: str) -> bool:
        return path.startswith("/v1/messages") and "count_tokens" not in path

    def auth_error_body(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        self.requests.append(body)
        if not path.startswith("/v1/messages") or "count_tokens" in path:
            return reply("application/json", {"input_tokens": 1})
        if not body.get("stream"):
            return reply(
                "application/json",
                {
                    "id": "msg",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-scripted",
                    "content": [{"type": "text", "text": "Done."}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            )
        return reply("text/event-stream", _stream(self._step(body), len(self.requests)))

    def _step(self, body: dict[str, Any]) -> Step:
        if not any(str(t.get("name", "")).startswith(PREFIX) for t in body.get("tools", [])):
            return Finish("Done.")
        if _heartbeat_turn(body):
            return self.log_turn(tool_results(body), Finish("Noted."))
        results = tool_results(body)
        return self.log_turn(results, next_step(self.script, results))
