"""A managed worker's network: an allowlist of host:port pairs, and the host side of the only way out.

A sandboxed worker has its own network namespace (a loopback, nothing behind it). Inside, a small
forwarder (`worker_network_box.py`) listens on loopback ports; each forwards over a unix socket, in a
folder bound read-only into the box, to this module's asyncio servers on the host:

    127.0.0.1:<port> inside   →  socket "<n>"    →  the allowlisted loopback target (the AMID server, a
                                                    local model server) — one socket per target, fixed
    127.0.0.1:<proxy> inside  →  socket "proxy"  →  an HTTP proxy (CONNECT, or an absolute-form request)
                                                    that connects only to an allowlisted host:port

The CLI gets HTTPS_PROXY/HTTP_PROXY pointing at the proxy and NO_PROXY for the loopback targets. Every
other address, port and host unix socket (abstract ones live in the host's namespace) is unreachable:
fail closed. The allowlist is data: the server's URL, the backend's model endpoint (a custom base URL,
else its provider's API), and the `network_allow` setting (`amid supervise --allow-host HOST:PORT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from amid.server.errors import InvalidInput
from amid.server.processes import pid_alive

PREFIX = "amid-net-"  # the host's socket folders: PREFIX<supervisor pid>-<random>
INSIDE = Path("/amid-net")  # where a worker sees its socket folder
PROXY_PORTS = range(3128, 3228)  # the in-box proxy's port: the first one no loopback target uses
HEAD_LIMIT = 16384  # bytes of a proxy request's head
DEFAULT_PORTS = {"http": 80, "https": 443}
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
FIX = "add it with --allow-host HOST:PORT (the network_allow setting), or run with --sandbox none"


@dataclass(frozen=True, order=True)
class Target:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(self.host).is_loopback
        return False


def parse_target(entry: str, name: str = "network_allow") -> Target:
    """`host:port` (`[::1]:port` for IPv6) → Target; anything else raises naming the setting."""
    host, sep, port = entry.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in "/@ "):
        raise InvalidInput(f"{name}: got {entry[:80]!r}; expected HOST:PORT like api.example.com:443", field=name)
    return Target(_normal(host), int(port))


def target_of_url(url: str, name: str) -> Target:
    """The host:port an http(s) URL connects to."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port == -1 or "{" in url:
        raise InvalidInput(f"{name}: got {url[:80]!r}; expected an http:// or https:// URL", field=name)
    return Target(_normal(parts.hostname), port or DEFAULT_PORTS[parts.scheme])


def allowlist(server_url: str, model: tuple[Target, ...], extra: tuple[str, ...]) -> tuple[Target, ...]:
    """What a worker may reach: the server's host:port, its model endpoint's, and `extra` (HOST:PORT)."""
    found = [target_of_url(server_url, "server_url"), *model, *(parse_target(entry) for entry in extra)]
    return tuple(dict.fromkeys(found))


def _normal(host: str) -> str:
    return host.lower().rstrip(".")


@dataclass(frozen=True)
class BoxNetwork:
    """One worker's way out: its socket folder on the host, the loopback ports inside and their sockets."""

    folder: Path
    allowed: tuple[Target, ...]
    ports: dict[int, str] = field(default_factory=dict)
    proxy_port: int | None = None

    def describe(self) -> str:
        return f"allowlist [{', '.join(str(t) for t in self.allowed)}]"

    def box_spec(self) -> str:
        return json.dumps({"folder": str(INSIDE), "ports": {str(p): name for p, name in self.ports.items()}})

    def env(self) -> dict[str, str]:
        """The CLI's proxy variables: remote targets through the proxy, loopback ones straight."""
        if self.proxy_port is None:
            return {}
        proxy = f"http://127.0.0.1:{self.proxy_port}"
        direct = ",".join(["localhost", "127.0.0.1", "::1"])
        names = ("HTTPS_PROXY", "HTTP_PROXY")
        return {k: proxy for n in names for k in (n, n.lower())} | {"NO_PROXY": direct, "no_proxy": direct}


class NetworkBridge:
    """The host side for every worker of a pool: one asyncio loop in a daemon thread."""

    def __init__(self) -> None:
        sweep_stale()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="amid-worker-network", daemon=True)
        self._thread.start()
        self._servers: dict[Path, list[asyncio.Server]] = {}
        # Each box's open connections, held: asyncio keeps a server connection's stream reader only by a weak
        # reference, so a pipe waiting on a model that never answers was collected mid-await ("Task was
        # destroyed but it is pending!" on the supervisor's stderr); closing the box cancels them.
        self._connections: dict[Path, set[asyncio.Task[None]]] = {}

    def open(self, allowed: tuple[Target, ...]) -> BoxNetwork:
        """A socket folder serving `allowed` (loopback targets one socket each, the rest through the proxy)."""
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))  # short: a socket path has ≤ 107 bytes
        local = list({t.port: t for t in allowed if t.loopback}.values())  # localhost:P and 127.0.0.1:P: one
        ports = {t.port: str(i) for i, t in enumerate(local)}
        remote = [t for t in allowed if not t.loopback]
        proxy_port = next(p for p in PROXY_PORTS if p not in ports) if remote else None
        if proxy_port is not None:
            ports[proxy_port] = "proxy"
        box = BoxNetwork(folder, allowed, ports, proxy_port)
        self._servers[folder] = self._run(self._start(box, local))
        return box

    def close(self, box: BoxNetwork) -> None:
        for server in self._servers.pop(box.folder, []):
            self._loop.call_soon_threadsafe(server.close)
        for task in self._connections.pop(box.folder, set()):
            self._loop.call_soon_threadsafe(task.cancel)
        shutil.rmtree(box.folder, ignore_errors=True)

    def stop(self) -> None:
        """Close every socket folder and every connection still open, then the loop."""
        for folder in list(self._servers):
            self.close(BoxNetwork(folder, ()))
        with contextlib.suppress(TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(_cancel_connections(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, list[asyncio.Server]]) -> list[asyncio.Server]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _start(self, box: BoxNetwork, local: list[Target]) -> list[asyncio.Server]:
        servers = []
        held = self._connections.setdefault(box.folder, set())
        for target in local:
            path = box.folder / box.ports[target.port]
            servers.append(await asyncio.start_unix_server(_held(_direct(target), held), path=str(path)))
        if box.proxy_port is not None:
            proxy = _held(_proxy(box.allowed), held)
            servers.append(await asyncio.start_unix_server(proxy, path=str(box.folder / "proxy"), limit=HEAD_LIMIT))
        return servers


def _held(handler: Handler, connections: set[asyncio.Task[None]]) -> Handler:
    """`handler`, its task kept in `connections` while it runs."""

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            connections.add(task)
        try:
            await handler(reader, writer)
        finally:
            connections.discard(task)

    return run


def sweep_stale() -> None:
    """Remove the socket folders of supervisors that were killed (their clean-up never ran): the pid in a
    folder's name is gone, and so are its workers (they die with their parent)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = folder.name[len(PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


async def _cancel_connections() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _direct(target: Target) -> Handler:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _connect_and_pipe(target, reader, writer, b"", None)

    return forward


def _proxy(allowed: tuple[Target, ...]) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            writer.close()
            return
        method, target = _request_target(head)
        if target is None or target not in allowed:
            await _refuse(writer, target, head, allowed)
            return
        reply = b"HTTP/1.1 200 Connection established\r\n\r\n" if method == "CONNECT" else None
        await _connect_and_pipe(target, reader, writer, head if reply is None else b"", reply)

    return handle


def _request_target(head: bytes) -> tuple[str, Target | None]:
    """(method, host:port) of a proxy request: `CONNECT host:port` or `GET http://host:port/…`."""
    words = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(words) != 3:
        return "", None
    method, where = words[0].upper(), words[1]
    with contextlib.suppress(InvalidInput, ValueError):
        return method, parse_target(where) if method == "CONNECT" else target_of_url(where, "request")
    return method, None


async def _refuse(
    writer: asyncio.StreamWriter, target: Target | None, head: bytes, allowed: tuple[Target, ...]
) -> None:
    asked = str(target) if target else head.split(b"\r\n", 1)[0][:120].decode("latin-1")
    listed = ", ".join(str(t) for t in allowed)
    body = f"amid: {asked} is not on this worker's network allowlist [{listed}]; {FIX}\n".encode()
    status = b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    writer.write(status + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    with contextlib.suppress(OSError):
        await writer.drain()
    writer.close()


async def _connect_and_pipe(
    target: Target, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes, reply: bytes | None
) -> None:
    """Connect to `target` and pipe both ways; `reply` (a proxy's answer) tells the client it worked,
    `first` (an absolute-form request's head) goes upstream first."""
    try:
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(target.host, target.port), 30)
    except (TimeoutError, OSError):
        if reply is not None or first:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        writer.close()
        return
    if reply is not None:
        writer.write(reply)
    up_writer.write(first)
    await pipe_both(reader, writer, up_reader, up_writer)


async def pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy each way until its end (passed on as a half-close), then close both connections."""
    try:
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    finally:
        for end in (writer, up_writer):
            end.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()
