"""The HTTP part every scripted model endpoint shares: a threaded server on a free loopback port that
keeps each request body and sends what the endpoint's `answer` returns (the protocols differ, the
serving does not), and the log of scripted turns: what the model received, what it answered.

Two faults a real model service shows, for the watchdog and breaker tests: `hold` (a predicate over a
request body) keeps a request unanswered until the endpoint closes, like a model that never answers;
`auth_error` answers every model request 401 in the protocol's own error shape, like a revoked key."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from tests.server.supervisor.workers.attempt_script import Script, Step, get_task_only

Reply = tuple[int, str, bytes]  # status, content type, body


def reply(kind: str, data: bytes | dict[str, Any], status: int = 200) -> Reply:
    return status, kind, data if isinstance(data, bytes) else json.dumps(data).encode()


class ScriptedEndpoint:
    """Subclasses answer one POST (`answer`) and, where the CLI asks, one GET (`answer_get`)."""

    url_suffix = ""

    def __init__(self, script: Script = get_task_only) -> None:
        self.script = script  # what the model does: attempt_script's steps, spelled by the subclass
        self.requests: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []
        self.started = time.monotonic()
        self.hold: Callable[[dict[str, Any]], bool] | None = None
        self.held: list[dict[str, Any]] = []  # the requests kept unanswered
        self.auth_error = False
        self.refused = 0  # model requests answered 401
        self._closing = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._send(endpoint.answer_get(self.path))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if endpoint.auth_error and endpoint.is_model_request(self.path):
                    endpoint.refused += 1
                    self._send(reply("application/json", endpoint.auth_error_body(), status=401))
                elif endpoint.hold is not None and endpoint.is_model_request(self.path) and endpoint.hold(body):
                    endpoint.held.append(body)
                    endpoint._closing.wait()  # silent: no byte until the endpoint closes, then the line drops
                    self.close_connection = True
                else:
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

    def is_model_request(self, path: str) -> bool:
        """A request that asks the model for a turn (not a model list or a token count)."""
        raise NotImplementedError

    def auth_error_body(self) -> dict[str, Any]:
        """The protocol's answer to a bad API key (401)."""
        raise NotImplementedError

    def log_turn(self, results: list[str], step: Step) -> Step:
        """Keep one scripted turn, abridged: the last tool result received and the step answered."""
        received = abridge(results[-1]) if results else "(the prompt)"
        answered = {"step": type(step).__name__, **{k: abridge(str(v)) for k, v in asdict(step).items()}}
        at_s = round(time.monotonic() - self.started, 1)
        self.turns.append({"turn": len(self.turns) + 1, "at_s": at_s, "received": received, "answered": answered})
        return step

    def save_turns(self, path: Path) -> None:
        path.write_text(json.dumps(self.turns, indent=1), encoding="utf-8")

    def answer_get(self, path: str) -> Reply:
        return reply("text/plain", f"scripted endpoint: no GET {path}".encode(), status=404)

    def not_found(self, path: str) -> Reply:
        return reply("text/plain", f"scripted endpoint: no {path}".encode(), status=404)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()


def abridge(text: str, limit: int = 240) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else f"{flat[: limit - 40]} … {flat[-35:]}"
