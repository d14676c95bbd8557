"""A scripted Anthropic Messages endpoint (REFERENCE §3): the true edge for a real Claude Code worker.

The first turn of a conversation answers with a `tool_use` of `mcp__amid__get_task`; a turn whose last
user message carries a tool result, or the text of a heartbeat, ends with a short text. Every request
body is kept, so a test can read what the CLI sent on resume.
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.supervisor.workers.scripted_endpoint import Reply, ScriptedEndpoint, reply

TOOL = "mcp__amid__get_task"


def _last_user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else []
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _wants_tool(body: dict[str, Any]) -> bool:
    tools = {t.get("name") for t in body.get("tools", [])}
    last = _last_user_content(body)
    texts = " ".join(b.get("text", "") for b in last if b.get("type") == "text")
    return TOOL in tools and not any(b.get("type") == "tool_result" for b in last) and "HEARTBEAT" not in texts


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _stream(tool: bool, n: int) -> bytes:
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
    if tool:
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": TOOL, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps({"include_case_ids": False})}
    else:
        block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": "Done."}
    return b"".join(
        [
            _sse("message_start", {"message": message}),
            _sse("content_block_start", {"index": 0, "content_block": block}),
            _sse("content_block_delta", {"index": 0, "delta": delta}),
            _sse("content_block_stop", {"index": 0}),
            _sse(
                "message_delta",
                {
                    "delta": {"stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            ),
            _sse("message_stop", {}),
        ]
    )


class MessagesEndpoint(ScriptedEndpoint):
    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        self.requests.append(body)
        if not path.startswith("/v1/messages") or "count_tokens" in path:
            return reply("application/json", {"input_tokens": 1})
        if not body.get("stream"):
            return reply("application/json", {
                "id": "msg", "type": "message", "role": "assistant", "model": "claude-scripted",
                "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            })  # fmt: skip
        return reply("text/event-stream", _stream(_wants_tool(body), len(self.requests)))
