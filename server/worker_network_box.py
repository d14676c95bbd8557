"""Inside a managed worker's sandbox (its own network namespace, a loopback and nothing else): listen on
the loopback ports the worker may use, each forwarding to a unix socket that the host side serves, then
become the worker's CLI.

    python -I worker_network_box.py '{"folder": "/amid-net", "ports": {"8731": "0", "3128": "proxy"}}' -- CLI ARGS…

The listening sockets are bound before the fork, so the CLI never races them. The forwarder ignores
SIGTERM and SIGINT (the supervisor signals the whole process group to interrupt the CLI) and ends when
the CLI does, its parent (Linux's parent-death signal): the namespace's end did not bound it, since
bubblewrap keeps its own init as the namespace's first process (a demo's forwarder lived on, with its
box, after its CLI and supervisor were gone). Standard library only: it runs on the interpreter the
sandbox shows, with nothing of the host's Python path.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable

CHUNK = 65536
PR_SET_PDEATHSIG = 1


def _listen(port: int) -> list[socket.socket]:
    """127.0.0.1:port, and [::1]:port where the namespace has IPv6 (`localhost` may resolve to either)."""
    sockets = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError:
            if family == socket.AF_INET:
                raise
            continue
        sockets.append(sock)
    return sockets


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one way until its end, passed on as a half-close (a client may shut down its sending side)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def _serve(listening: list[tuple[socket.socket, str]]) -> None:
    def handler(path: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(path)
            except OSError:
                writer.close()
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                writer.close()
                up_writer.close()

        return forward

    servers = [await asyncio.start_server(handler(path), sock=sock) for sock, path in listening]
    await asyncio.gather(*(server.serve_forever() for server in servers))


def _die_with(parent: int) -> None:
    """SIGKILL when `parent` ends (PR_SET_PDEATHSIG), and an end now if it already has."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: nothing but the sandbox's end bounds the forwarder
        pass
    if os.getppid() != parent:
        os._exit(0)


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        raise SystemExit("usage: worker_network_box.py SPEC -- COMMAND [ARGS...]")
    spec, command = json.loads(args[0]), args[2:]
    listening = [
        (sock, os.path.join(spec["folder"], name))
        for port, name in spec["ports"].items()
        for sock in _listen(int(port))
    ]
    cli = os.getpid()  # after the exec below, this process is the CLI
    if os.fork() == 0:
        _die_with(cli)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        asyncio.run(_serve(listening))
        os._exit(0)
    for sock, _ in listening:
        sock.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
