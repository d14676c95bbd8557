"""A sandboxed worker's network is an allowlist: it reaches the server's port and its model endpoint's,
and no other local port, no outside address, no unix socket of the host; the in-box proxy refuses a
CONNECT (or a plain proxied request) to a host not listed. The allowlist is derived from the server's
URL and the backend's endpoint, extended by `network_allow` / `--allow-host`, and recorded."""

from __future__ import annotations

import contextlib
import gc
import http.server
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from amid.registry.loader import worker_backend
from amid.registry.schemas import WorkerBackend
from amid.server import sandbox
from amid.server.cli import main
from amid.server.errors import InvalidInput
from amid.server.local_client import call as admin_call
from amid.server.supervisor.workers.endpoint import model_targets
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from amid.server.worker_network import PREFIX, NetworkBridge, Target, allowlist, parse_target, sweep_stale
from tests.server.conftest import Running
from tests.server.supervisor.workers.conftest import named, wait_for

needs_bwrap = pytest.mark.skipif(
    sandbox.bwrap_problem() is not None, reason=f"no bubblewrap: {sandbox.bwrap_problem()}"
)

# Run inside the box: every probe is tried and its outcome printed as one JSON object.
PROBE = r"""
import json, os, socket, sys, urllib.request
spec, seen = json.loads(sys.argv[1]), {}
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return 'open'
    except OSError as exc:
        return f'errno {exc.errno}'
for name, url in spec.get('http', {}).items():
    try:
        seen[name] = urllib.request.urlopen(url, timeout=10).read().decode()
    except Exception as exc:
        seen[name] = f'failed {exc!r}'[:200]
for name, (host, port) in spec.get('tcp', {}).items():
    seen[name] = tcp(host, port)
for name, path in spec.get('unix', {}).items():
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path.replace('\\0', '\0'))
        seen[name] = 'open'
    except OSError as exc:
        seen[name] = f'errno {exc.errno}'
for name, head in spec.get('proxy', {}).items():
    try:
        sock = socket.create_connection(('127.0.0.1', int(spec['proxy_port'])), timeout=10)
        sock.sendall(head.encode())
        answer = sock.recv(4096).decode('latin-1')
        if answer.startswith('HTTP/1.1 200') and 'tunnel' in spec:
            sock.sendall(spec['tunnel'].encode())
            while chunk := sock.recv(4096):
                answer += chunk.decode('latin-1')
        seen[name] = answer
    except OSError as exc:
        seen[name] = f'errno {exc.errno}'
for name, path in spec.get('unlink', {}).items():
    try:
        os.unlink(path)
        seen[name] = 'removed'
    except OSError as exc:
        seen[name] = f'errno {exc.errno}'
seen['env'] = {k: v for k, v in os.environ.items() if k.lower().endswith('proxy')}
print(json.dumps(seen), flush=True)
"""


class _Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.name.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Listener:
    """A throwaway listener on the host that counts the connections it accepted."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.accepted = sock, 0
        sock.listen(8)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(): close() alone does not
        self.thread.join(timeout=10)
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An 'AMID server' and a 'model endpoint' answering their names, another TCP port, an abstract and a
    filesystem unix socket, all on this host."""
    servers = {}
    for name in ("server", "endpoint"):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Named)
        server.name = name  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"\0amid-network-test-{uuid.uuid4().hex}"
    abstract.bind(abstract_name)
    on_disk = socket.socket(socket.AF_UNIX)
    disk_path = f"/tmp/amid-net-test-{uuid.uuid4().hex[:12]}.sock"  # the host's /tmp; the box has its own
    on_disk.bind(disk_path)
    listeners = [_Listener(other), _Listener(abstract), _Listener(on_disk)]
    try:
        yield {
            "server": servers["server"].server_address[1],
            "endpoint": servers["endpoint"].server_address[1],
            "other": other.getsockname()[1],
            "abstract": abstract_name.replace("\0", "\\0"),
            "disk": disk_path,
            "listeners": listeners,
        }
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
        for listener in listeners:
            listener.close()
        os.unlink(disk_path)


def _in_box(tmp_path: Path, allowed: tuple[Target, ...] | None, spec: dict[str, Any]) -> dict[str, Any]:
    bridge = NetworkBridge()
    try:
        box = bridge.open(allowed) if allowed is not None else None
        spec = {**spec, "proxy_port": box.proxy_port if box else None}
        for name in ("wt", "home"):
            (tmp_path / name).mkdir(exist_ok=True)
        view = sandbox.WorkerView(tmp_path / "wt", tmp_path / "home", network=box)
        argv = sandbox.wrap_worker([sys.executable, "-c", PROBE, json.dumps(spec)], view)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    finally:
        bridge.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _allowed(ports: dict[str, Any], *extra: str) -> tuple[Target, ...]:
    model = (Target("127.0.0.1", ports["endpoint"]),)
    return allowlist(f"http://127.0.0.1:{ports['server']}/mcp", model, extra)


@needs_bwrap
def test_a_sandboxed_process_reaches_the_server_and_its_endpoint_and_no_other_port_address_or_host_socket(
    tmp_path: Path, hosts: dict[str, Any]
) -> None:
    spec = {
        "http": {
            "server": f"http://127.0.0.1:{hosts['server']}/",
            "endpoint": f"http://localhost:{hosts['endpoint']}/",
        },
        "tcp": {"other_port": ["127.0.0.1", hosts["other"]], "outside": ["192.0.2.1", 80], "dns": ["1.1.1.1", 53]},
        "unix": {"abstract": hosts["abstract"], "host_tmp_socket": hosts["disk"]},
        "unlink": {"replace_bridge_socket": "/amid-net/0"},  # to plant a socket of its own there
    }
    seen = _in_box(tmp_path, _allowed(hosts), spec)
    assert (seen["server"], seen["endpoint"]) == ("server", "endpoint")
    assert seen["other_port"] == "errno 111"  # refused: nothing listens on that port inside
    assert seen["outside"] == seen["dns"] == "errno 101"  # network unreachable: no route out of the namespace
    assert seen["abstract"] == "errno 111" and seen["host_tmp_socket"] == "errno 2"
    assert seen["replace_bridge_socket"] == "errno 30"  # read-only: the bridge's sockets stay the host's
    assert [listener.accepted for listener in hosts["listeners"]] == [0, 0, 0]
    assert seen["env"] == {}  # only loopback targets: no proxy


@needs_bwrap
def test_the_same_probes_reach_the_other_port_and_the_host_socket_with_the_host_network(
    tmp_path: Path, hosts: dict[str, Any]
) -> None:
    """The probe can tell: outside the box (what `--sandbox none` keeps) the forbidden targets answer."""
    spec = {"tcp": {"other_port": ["127.0.0.1", hosts["other"]]}, "unix": {"abstract": hosts["abstract"]}}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(spec)], capture_output=True, text=True, timeout=60)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (seen["other_port"], seen["abstract"]) == ("open", "open")


@needs_bwrap
def test_without_a_network_a_sandboxed_process_reaches_not_even_the_server(
    tmp_path: Path, hosts: dict[str, Any]
) -> None:
    seen = _in_box(tmp_path, None, {"tcp": {"server": ["127.0.0.1", hosts["server"]]}})
    assert seen["server"] == "errno 111"


@needs_bwrap
def test_the_proxy_refuses_a_connect_to_a_host_not_listed_and_tunnels_to_one_that_is(
    tmp_path: Path, hosts: dict[str, Any]
) -> None:
    """A remote allowlisted host (here one that does not resolve) puts a proxy in the box; crafted
    requests for other hosts and ports are refused with the fix named, listed ones pass."""
    other, endpoint = hosts["other"], hosts["endpoint"]
    proxy = {
        "listed_endpoint": f"CONNECT 127.0.0.1:{endpoint} HTTP/1.1\r\nHost: x\r\n\r\n",
        "other_port": f"CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n",
        "unlisted_host": "CONNECT example.com:443 HTTP/1.1\r\n\r\n",
        "listed_host_other_port": "CONNECT models.invalid:80 HTTP/1.1\r\n\r\n",
        "integer_ip": f"CONNECT 2130706433:{other} HTTP/1.1\r\n\r\n",
        "userinfo_trick": f"CONNECT 127.0.0.1:{endpoint}@127.0.0.1:{other} HTTP/1.1\r\n\r\n",
        "absolute_form": f"GET http://127.0.0.1:{other}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "listed_but_unresolvable": "CONNECT models.invalid:443 HTTP/1.1\r\n\r\n",
    }
    tunnel = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    seen = _in_box(tmp_path, _allowed(hosts, "models.invalid:443"), {"proxy": proxy, "tunnel": tunnel})
    assert seen["listed_endpoint"].startswith("HTTP/1.1 200") and seen["listed_endpoint"].endswith("endpoint")
    refused = [name for name in proxy if seen[name].startswith("HTTP/1.1 403")]
    assert refused == [
        "other_port",
        "unlisted_host",
        "listed_host_other_port",
        "integer_ip",
        "userinfo_trick",
        "absolute_form",
    ], seen
    assert (
        "is not on this worker's network allowlist" in seen["unlisted_host"] and "--allow-host" in seen["unlisted_host"]
    )
    assert seen["listed_but_unresolvable"].startswith("HTTP/1.1 502")  # allowed, tried, and failed upstream
    assert hosts["listeners"][0].accepted == 0
    assert seen["env"]["HTTPS_PROXY"] == f"http://127.0.0.1:{3128}" and "127.0.0.1" in seen["env"]["NO_PROXY"]


def _backend(backend_id: str, **changes: Any) -> WorkerBackend:
    return worker_backend(backend_id).model_copy(update=changes)


def test_the_model_half_of_the_allowlist_is_the_endpoint_the_worker_is_set_up_for() -> None:
    claude, codex = _backend("claude-code"), _backend("codex")
    assert model_targets(claude, None, {}) == (Target("api.anthropic.com", 443),)
    assert model_targets(codex, None, {}) == (Target("api.openai.com", 443), Target("chatgpt.com", 443))
    assert model_targets(claude, "http://127.0.0.1:8123/v1", {}) == (Target("127.0.0.1", 8123),)
    assert model_targets(claude, None, {"ANTHROPIC_BASE_URL": "https://LLM.lab.example./x"}) == (
        Target("llm.lab.example", 443),
    )
    opencode_config = json.dumps({"provider": {"p": {"options": {"baseURL": "http://10.0.0.7:8000/v1"}}}})
    assert model_targets(_backend("opencode"), None, {"OPENCODE_CONFIG_CONTENT": opencode_config}) == (
        Target("10.0.0.7", 8000),
    )
    provider = ["-c", 'model_providers.x.base_url="http://127.0.0.1:9001/v1"']
    assert model_targets(_backend("codex", start=[*codex.start, *provider]), None, {}) == (Target("127.0.0.1", 9001),)
    assert model_targets(_backend("scripted"), None, {}) == ()


def test_the_allowlist_adds_the_server_and_the_extra_hosts_once_each() -> None:
    model = (Target("api.anthropic.com", 443),)
    found = allowlist("http://127.0.0.1:8731/mcp", model, ("pypi.org:443", "API.anthropic.com:443", "[::1]:9"))
    assert [str(t) for t in found] == ["127.0.0.1:8731", "api.anthropic.com:443", "pypi.org:443", "[::1]:9"]
    assert [t.loopback for t in found] == [True, False, False, True]


@pytest.mark.parametrize("entry", ["pypi.org", "pypi.org:0", "pypi.org:70000", "user@host:22", "http://x:1", ":443"])
def test_a_malformed_allowlist_entry_is_refused_naming_the_setting(entry: str) -> None:
    with pytest.raises(InvalidInput, match=r"network_allow: got .*expected HOST:PORT"):
        parse_target(entry)


def test_a_malformed_allow_host_flag_is_refused_naming_the_flag() -> None:
    with pytest.raises(ValidationError):
        WorkerSettings(network_allow=("pypi.org",))
    result = CliRunner().invoke(
        main,
        [
            "supervise",
            "--server",
            "http://127.0.0.1:9/mcp",
            "--token",
            "t",
            "--workers",
            "1",
            "-w",
            "/nonexistent",
            "--allow-host",
            "pypi.org:443",
            "--allow-host",
            "no-port-here",
        ],
    )
    assert result.exit_code == 2 and "--allow-host: String should match pattern" in result.output
    assert "no-port-here" in result.output and "Traceback" not in result.output


# The pool's probe "CLI": the server through AMID_URL, then a port it was not given.
POOL_PROBE = """
import json, os, socket, sys, urllib.request
url = os.environ['AMID_URL'].rsplit('/mcp', 1)[0] + '/healthz'
seen = {'healthz': json.loads(urllib.request.urlopen(url, timeout=10).read())['ok']}
try:
    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5).close()
    seen['other_port'] = 'open'
except OSError as exc:
    seen['other_port'] = f'errno {exc.errno}'
print(json.dumps({'type': 'probe', **seen}), flush=True)
print(json.dumps({'type': 'result'}), flush=True)
"""


def _probe_backend() -> WorkerBackend:
    data = worker_backend("scripted").model_dump()
    start = ["{python}", "-c", POOL_PROBE, "{prompt}"]
    data.update(id="netprobe", start=start, resume=[*start[:3], "{session_id}", "{prompt}"])
    return WorkerBackend.model_validate(data)


def _run_pool(running: Running, settings: WorkerSettings, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pool = WorkerPool(running.workspace, running.url, _probe_backend(), 1, settings=settings)
    pool.start()
    try:
        wait_for(pool, lambda ev: bool(named(ev, "exited")), timeout_s=60)
        lines = pool.worker(agent).log_path.read_text().splitlines()
    finally:
        pool.stop()
    probe = next(json.loads(line) for line in lines if '"probe"' in line)
    query = f"SELECT detail FROM worker_transitions WHERE agent_id = '{agent}' AND event = 'started'"
    [[detail]] = admin_call(running.workspace, "sql", {"query": query})["rows"]
    return probe, json.loads(str(detail))


@needs_bwrap
def test_a_pool_worker_reaches_the_server_not_another_port_and_its_evidence_names_the_allowlist(
    running: Running, hosts: dict[str, Any]
) -> None:
    other = hosts["other"]
    settings = WorkerSettings(restart_on_clean=False, agent_prefix="netbox", task_prompt=str(other))
    settings = settings.model_copy(update={"network_allow": ("pypi.org:443",)})
    probe, detail = _run_pool(running, settings, "netbox-1")
    assert probe["healthz"] is True and probe["other_port"] == "errno 111"
    server = running.url.split("//", 1)[1].split("/", 1)[0]
    assert detail["sandbox"] == "bwrap" and detail["network"] == f"allowlist [{server}, pypi.org:443]"
    assert hosts["listeners"][0].accepted == 0


def test_a_worker_with_sandbox_none_keeps_the_host_network_and_says_so(running: Running, hosts: dict[str, Any]) -> None:
    settings = WorkerSettings(restart_on_clean=False, agent_prefix="netopen", task_prompt=str(hosts["other"]))
    probe, detail = _run_pool(running, settings.model_copy(update={"sandbox": "none"}), "netopen-1")
    assert probe["healthz"] is True and probe["other_port"] == "open"
    assert detail["sandbox"] == "none" and detail["network"].startswith("host (sandbox none")


# A real CLI's own shell probes the network: the server's port and the endpoint's answer, nothing else does.
SHELL_PROBE = """
import json, socket, sys
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "open"
    except OSError as exc:
        return "errno %d" % exc.errno
def unix(name):
    try:
        socket.socket(socket.AF_UNIX).connect(name)
        return "open"
    except OSError as exc:
        return "errno %d" % exc.errno
ports = json.loads(sys.argv[1])
seen = {name: tcp("127.0.0.1", port) for name, port in ports["tcp"].items()}
seen["outside"] = tcp("192.0.2.1", 80)
seen["abstract"] = unix(ports["abstract"].replace("@", chr(0), 1))
print("NETPROBE " + json.dumps(seen))
"""


@needs_bwrap
@pytest.mark.slow
@pytest.mark.external
def test_a_real_codex_worker_shell_reaches_the_server_and_its_endpoint_and_nothing_else(
    running: Running, hosts: dict[str, Any]
) -> None:
    from tests.server.supervisor.workers import cheat_probe
    from tests.server.supervisor.workers.responses_endpoint import ResponsesEndpoint
    from tests.server.supervisor.workers.test_real_codex_worker import _backend as codex_backend
    from tests.server.supervisor.workers.whole_attempt import run_attempt
    from tests.server.test_real_clients import _binary

    codex = Path(_binary("codex"))
    with ResponsesEndpoint() as endpoint:
        server_port = int(running.url.rsplit(":", 1)[1].split("/", 1)[0])
        endpoint_port = int(endpoint.url.rsplit(":", 1)[1].split("/", 1)[0])
        ports = {
            "tcp": {"server": server_port, "endpoint": endpoint_port, "other_port": hosts["other"]},
            "abstract": hosts["abstract"].replace("\\0", "@"),
        }
        probe = f"python3 -c {shlex.quote(SHELL_PROBE)} {shlex.quote(json.dumps(ports))}"
        endpoint.script = cheat_probe.cheat_script(f"{probe} > netprobe.txt 2>&1; cat netprobe.txt")
        outcome = run_attempt(running, codex_backend(endpoint.url), endpoint, prefix="codexnet", binary=codex)
    written = (outcome.worker.worktree / "netprobe.txt").read_text(encoding="utf-8")
    match = re.search(r"^NETPROBE (\{.*\})$", written, re.MULTILINE)
    assert match is not None, written[-2000:]
    seen = json.loads(match.group(1))
    assert (seen["server"], seen["endpoint"]) == ("open", "open")
    assert (seen["other_port"], seen["outside"], seen["abstract"]) == ("errno 111", "errno 101", "errno 111"), seen
    assert [listener.accepted for listener in hosts["listeners"][:2]] == [0, 0]
    assert named(outcome.events, "exited")[0]["exit_class"] == "clean"


def test_socket_folders_of_a_killed_supervisor_are_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    stale = Path(f"/tmp/{PREFIX}{gone}-test{uuid.uuid4().hex[:6]}")
    live = Path(f"/tmp/{PREFIX}{os.getpid()}-test{uuid.uuid4().hex[:6]}")
    for folder in (stale, live):
        folder.mkdir()
        (folder / "0").write_text("", encoding="utf-8")
    try:
        sweep_stale()
        assert not stale.exists() and live.is_dir()
        bridge = NetworkBridge()
        box = bridge.open((Target("127.0.0.1", 9),))
        assert box.folder.name.startswith(f"{PREFIX}{os.getpid()}-")
        bridge.stop()
        assert not box.folder.exists()
    finally:
        for folder in (stale, live):
            subprocess.run(["rm", "-rf", str(folder)], check=True)


def test_a_connection_to_a_model_that_never_answers_is_held_until_its_box_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A CLI interrupted while its model thinks leaves the pipe waiting on the endpoint: asyncio keeps such a
    connection only weakly, and a collection destroyed it mid-await on the supervisor's stderr. Held, it ends
    when the worker's box closes: the endpoint sees the connection close."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    port = silent.getsockname()[1]
    bridge, ends = NetworkBridge(), [silent]
    try:
        box = bridge.open((Target("127.0.0.1", port),))
        client = socket.socket(socket.AF_UNIX)
        ends.append(client)
        client.connect(str(box.folder / box.ports[port]))
        client.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        upstream, _ = silent.accept()
        ends.append(upstream)
        upstream.settimeout(10)
        assert upstream.recv(100).startswith(b"POST")
        client.close()  # the CLI killed mid-turn; the model never answers
        for _ in range(5):
            gc.collect()
            time.sleep(0.1)
        assert "Task was destroyed but it is pending" not in caplog.text
        bridge.close(box)
        assert upstream.recv(100) == b""  # the pipe was cancelled and closed its upstream end
    finally:
        bridge.stop()
        for end in ends:
            end.close()


def _forwarders(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (the box's spec)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                status = (entry / "status").read_text()
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace") and "State:\tZ" not in status:
                    found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_in_box_forwarder_ends_when_its_cli_does(tmp_path: Path) -> None:
    """Whatever ends the CLI, the forwarder it forked ends with it: a demo's forwarder lived on with its
    bubblewrap init after the CLI and the supervisor were gone (run here without a namespace, where only
    the forwarder's own bound ends it)."""
    folder = tmp_path / f"box-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    spec = json.dumps({"folder": str(folder), "ports": {"0": "0"}})
    box = Path(sandbox.__file__).with_name("worker_network_box.py")
    cli = subprocess.run([sys.executable, "-I", "-S", str(box), spec, "--", sys.executable, "-c", "pass"], timeout=30)
    assert cli.returncode == 0
    deadline = time.monotonic() + 10
    while _forwarders(folder.name) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _forwarders(folder.name)
    for pid in left:
        os.kill(pid, 9)
    assert left == [], "the forwarder outlived its CLI"
