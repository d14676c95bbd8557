"""The HTTP part every scripted model endpoint shares: a threaded server on a free loopback port that
keeps each request body and sends what the endpoint's `answer` returns (the protocols differ, the
serving does not)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Reply = tuple[int, str, bytes]  # status, content type, body


def reply(kind: str, data: bytes | dict[str, Any], status: int = 200) -> Reply:
    return status, kind, data if isinstance(data, bytes) else json.dumps(data).encode()


class ScriptedEndpoint:
    """Subclasses answer one POST (`answer`) and, where the CLI asks, one GET (`answer_get`)."""

    url_suffix = ""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._send(endpoint.answer_get(self.path))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                self._send(endpoint.answer(self.path, body))

            def _send(self, answer: Reply) -> None:
                status, kind, data = answer
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{self.url_suffix}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def answer_get(self, path: str) -> Reply:
        return reply("text/plain", f"scripted endpoint: no GET {path}".encode(), status=404)

    def not_found(self, path: str) -> Reply:
        return reply("text/plain", f"scripted endpoint: no {path}".encode(), status=404)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
