"""One JSON body per answer, and a stream only where a call asks for progress.

The SDK's stateless Streamable HTTP transport answers every POST either as one `application/json`
body or as a `text/event-stream`, fixed per session manager. A stream costs the server a task
group, an event encoder and a streamed response per call: under many agents it was a third of the
CPU a ledger call took. Both answers are the protocol's own (a client must accept either), but only
the stream carries progress notifications while a call runs, and four tools report progress
(get_job and get_review while they wait, submit_attempt while it hashes, profile_data).

So two session managers serve the one MCP path, and each POST goes to one of them: a `tools/call`
of a progress-reporting tool whose `_meta` carries a `progressToken` gets the stream; everything
else gets one JSON body. The decision reads the body the transport would read anyway, bounded by
the same limit (a larger body goes on unread; the transport answers 413).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send


def wants_stream(body: bytes, streaming_tools: frozenset[str]) -> bool:
    """Whether this POST body is a call that can report progress and asks for it."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack (50,000 `[`)
        return False  # the transport answers the parse error, in one body
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    if not isinstance(params, dict) or params.get("name") not in streaming_tools:
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and meta.get("progressToken") is not None


class ResponseModeRouter:
    """ASGI app in front of the two transports (see the module docstring)."""

    def __init__(self, stream: Any, single: Any, streaming_tools: frozenset[str], max_body: int) -> None:
        self.stream = stream
        self.single = single
        self.streaming_tools = streaming_tools
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stream(scope, receive, send)  # GET and DELETE: the transport's own answers
            return
        read: list[Message] = []
        size, complete = 0, False
        while not complete and size <= self.max_body:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break  # the client left; the transport sees the disconnect
            size += len(message.get("body", b""))
            complete = not message.get("more_body", False)
        body = b"".join(m.get("body", b"") for m in read if m["type"] == "http.request")
        target = self.stream if complete and wants_stream(body, self.streaming_tools) else self.single

        async def replay() -> Message:
            return read.pop(0) if read else await receive()

        await target(scope, replay, send)


def route_by_progress(app: Starlette, path: str, streaming_tools: Iterable[str]) -> Starlette:
    """Give `app` (the SDK's stateless, streaming app) a second, single-body transport on `path`
    and the router choosing between them; both run in the app's lifespan."""
    route = next(r for r in app.router.routes if isinstance(r, Route) and r.path == path)
    holder: Any = route.app  # the SDK's auth wrapper around its transport app (or the app itself)
    inner = getattr(holder, "app", holder)
    if not isinstance(inner, StreamableHTTPASGIApp):
        raise TypeError(f"{path}: expected the SDK's Streamable HTTP app, found {type(inner).__name__}")
    streaming = inner.session_manager
    if not streaming.stateless or streaming.json_response:
        raise ValueError("route_by_progress needs the stateless, streaming session manager")
    single = StreamableHTTPSessionManager(
        app=streaming.app,
        json_response=True,
        stateless=True,
        security_settings=streaming.security_settings,
        max_request_body_size=streaming.max_request_body_size,
    )
    router = ResponseModeRouter(
        inner, StreamableHTTPASGIApp(single), frozenset(streaming_tools), single.max_request_body_size
    )
    if holder is inner:
        route.app = router
    else:
        holder.app = router

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with streaming.run(), single.run():
            yield

    app.router.lifespan_context = lifespan
    return app
