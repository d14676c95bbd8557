"""The replay sandbox: one bubblewrap (bwrap) command line around every replay of an attempt's code.

Inside, a replay sees only what it needs, each at a fixed path:

    /replay/code        the frozen commit, checked out (read-only; the working directory)
    /replay/checkpoint  the frozen checkpoint, under its declared name (read-only)
    /replay/inputs      the input images of the replay's cases, no labels (read-only)
    /replay/outputs     where it writes its predictions (the only writable bind)

plus the Python environment read-only (/usr, the interpreter's virtual environment and base
installation, the AMID packages the scaffolds' replay commands import), a fresh /proc, a minimal
/dev, a private /tmp, no network (own network namespace: only a loopback with nothing behind it),
its own PID/IPC/UTS namespaces, a new session, and death with its parent. The workspace (task/
labels, private/, repo/, worktrees/, artifacts/) is not mounted; where it lies under a mounted
folder it is covered by an empty tmpfs.

Fail closed: where bubblewrap cannot run, a replay (and a managed worker) does not start: the
refusal names the fix. Only an explicit `none` runs the command unconfined, and the evidence says
`sandbox: "none"`. `auto` is an old spelling of `bwrap` (required), never a fallback. The reviewer's
recomputation is the guarantee; this makes a replay that reaches for data it was not given fail
instead of score.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from amid.server import worker_network
from amid.server.errors import Conflict
from amid.server.worker_network import BoxNetwork

SandboxSetting = Literal["auto", "bwrap", "none"]
SandboxKind = Literal["bwrap", "none"]

ROOT = Path("/replay")
CODE, CHECKPOINT, INPUTS, OUTPUTS = ROOT / "code", ROOT / "checkpoint", ROOT / "inputs", ROOT / "outputs"
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # merged-/usr symlinks, or folders
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/hosts")
# The `amid` package and its three packages: in a checkout amid/ holds links to ../server etc., so each
# package's real folder is shown too (the scaffolds import all three).
AMID_PACKAGES = ("amid", "amid.server", "amid.tools", "amid.registry")
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS")
log = logging.getLogger(__name__)


class SandboxUnavailable(Conflict):
    """A sandbox is required (`bwrap`, or `auto`, which means the same) and bubblewrap cannot run here."""


FIX = "install bubblewrap: apt-get install bubblewrap, or pass {flag} none to run unconfined"


@dataclass(frozen=True)
class Setting:
    """Which setting asked for the sandbox, and the flag that switches it off (named in the refusal)."""

    name: str = "replay_sandbox"
    flag: str = "--replay-sandbox"


REPLAY = Setting()
WORKER = Setting("sandbox", "--sandbox")
JOB = Setting("job_sandbox", "--job-sandbox")


@dataclass(frozen=True)
class Mounts:
    """The host side of what a replay sees: the checkout, its inputs and outputs, the checkpoint's
    files (path inside the checkpoint → frozen file), and folders that must stay invisible."""

    code: Path
    inputs: Path
    outputs: Path
    checkpoint_name: str | None = None
    checkpoint_files: dict[str, Path] = field(default_factory=dict)
    hidden: tuple[Path, ...] = ()
    gpu: bool = False


@functools.cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot run here (not installed, no namespaces), or None when it can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bwrap is not installed (Debian package bubblewrap)"
    probe = [binary, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot start: {exc}"
    return None if done.returncode == 0 else f"bwrap cannot create namespaces: {done.stderr.decode()[-300:].strip()}"


def resolve_kind(setting: SandboxSetting, asked_by: Setting = REPLAY) -> SandboxKind:
    """The sandbox under `setting`: bwrap, required unless the setting is `none`; a missing or broken
    bubblewrap raises SandboxUnavailable naming the setting and the fix (never a silent fallback)."""
    if setting == "none":
        _warn_unconfined(asked_by.name)
        return "none"
    problem = bwrap_problem()
    if problem is None:
        return "bwrap"
    fix = FIX.format(flag=asked_by.flag)
    message = f"{asked_by.name}={setting} needs a working sandbox, but {problem}; {fix}"
    raise SandboxUnavailable(message, field=asked_by.name)


@functools.cache
def _warn_unconfined(name: str) -> None:
    """Once per process and setting: a review replays many times."""
    log.warning("%s=none: runs unconfined (no bubblewrap), by explicit setting", name)


def placeholders(kind: SandboxKind, mounts: Mounts, python: str) -> dict[str, str]:
    """The values of an inference command's placeholders, as the replay sees them."""
    inside = kind == "bwrap"
    checkpoint = (CHECKPOINT if inside else mounts.inputs.parent / "checkpoint") / (mounts.checkpoint_name or "")
    return {
        "{python}": python,
        "{input_dir}": str(INPUTS if inside else mounts.inputs),
        "{output_dir}": str(OUTPUTS if inside else mounts.outputs),
        "{code_dir}": str(CODE if inside else mounts.code),
        "{checkpoint}": str(checkpoint) if mounts.checkpoint_name else "",
    }


def wrap(kind: SandboxKind, argv: list[str], mounts: Mounts) -> tuple[list[str], Path]:
    """(argv to run, cwd) for a replay of `argv` in the sandbox `kind`."""
    if kind == "none":
        _link_checkpoint(mounts)
        return argv, mounts.code
    binds = [*_environment(), *_system(), *_replay_binds(mounts), *_gpu(mounts.gpu)]
    covered = [arg for path in mounts.hidden for dest in _seen_at(path, binds) for arg in ("--tmpfs", dest)]
    isolation = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent"]
    command = [str(shutil.which("bwrap")), *isolation, "--new-session", *binds, *covered]
    return [*command, "--chdir", str(CODE), "--", *argv], mounts.code


def replay_env(home: Path, kind: SandboxKind) -> dict[str, str]:
    """A small environment for the replay: no AMID_* settings, no tokens, no server secrets."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    inside_home = "/tmp" if kind == "bwrap" else str(home)
    env.update(HOME=inside_home, TMPDIR=inside_home, PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    env.update(MPLCONFIGDIR=inside_home)
    return env


def _replay_binds(mounts: Mounts) -> list[str]:
    binds = ["--ro-bind", str(mounts.code), str(CODE), "--ro-bind", str(mounts.inputs), str(INPUTS)]
    binds += ["--bind", str(mounts.outputs), str(OUTPUTS)]
    base = CHECKPOINT / (mounts.checkpoint_name or "")
    for rel, source in mounts.checkpoint_files.items():
        binds += ["--ro-bind", str(source), str(base / rel) if rel else str(base)]
    return binds


def _link_checkpoint(mounts: Mounts) -> None:
    """Unconfined: the checkpoint's files, under their declared names, as symlinks to the frozen ones."""
    base = mounts.inputs.parent / "checkpoint" / (mounts.checkpoint_name or "")
    for rel, source in mounts.checkpoint_files.items():
        target = base / rel if rel else base
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source)


def _environment() -> list[str]:
    """The interpreter and its packages, read-only, at the paths the interpreter expects."""
    found: dict[str, str] = {"/usr": "/usr"}
    for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
        found.setdefault(prefix, os.path.realpath(prefix))
        # a venv reached through a link (./.venv) also at its real path: its scripts' #! lines name that
        found.setdefault(os.path.realpath(prefix), os.path.realpath(prefix))
    for name in AMID_PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.setdefault(location, os.path.realpath(location))
            # amid/server is a link in a checkout: its target, where the link leads inside the box too
            found.setdefault(os.path.realpath(location), os.path.realpath(location))
    inner = {dest: src for dest, src in found.items() if not any(_inside(dest, o) for o in found if o != dest)}
    return [arg for dest, src in sorted(inner.items()) for arg in ("--ro-bind", src, dest)]


def _system() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in SYSTEM_FILES:
        args += ["--ro-bind-try", name, name]
    return args


def _gpu(wanted: bool) -> list[str]:
    """NVIDIA device nodes and /sys for a replay that was given GPUs."""
    if not wanted:
        return []
    nodes = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
    return [*(a for n in nodes for a in ("--dev-bind", n, n)), "--ro-bind-try", "/sys", "/sys"]


def _inside(path: str, folder: str) -> bool:
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def _seen_at(path: Path, binds: list[str]) -> list[str]:
    """Where a folder that must stay hidden would appear inside, through a bind of a folder above it."""
    resolved, seen = os.path.realpath(path), []
    for i, arg in enumerate(binds):
        source, dest = binds[i + 1 : i + 3] if arg in ("--ro-bind", "--bind") else ("", "")
        if source and (resolved == source or _inside(resolved, source)):
            seen.append(dest + resolved[len(source) :])
    return seen


# --- managed workers ---

BOX_FORWARDER = Path(__file__).with_name("worker_network_box.py")  # under the AMID packages the box shows
NETWORK_FILES = ("/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf")
NETWORK_FOLDERS = ("/etc/ssl", "/etc/ca-certificates", "/etc/pki")


@dataclass(frozen=True)
class WorkerView:
    """What one managed worker sees, each at its host path (so config files and a CLI's per-folder
    session store stay valid): its worktree (its own git repository, `.git` inside it) and its own
    home, writable; the public task view, the shared memory and the CLI's installation, read-only;
    `links` (target, path) recreate the symlinks the CLI is reached through (npm's `.bin` links, a
    prefix's `bin/`). `hidden` folders (private/, other worktrees, the run's repository, the server's
    files) are covered wherever a bind would show them. The network is its own namespace: only the
    allowlisted host:port pairs of `network` (the server's port, its model's API) are reachable, through
    the bridge of server/worker_network.py; without `network`, nothing is. The admin routes need the
    secret under the hidden .amid/."""

    worktree: Path
    home: Path
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    network: BoxNetwork | None = None


def wrap_worker(argv: list[str], view: WorkerView) -> list[str]:
    """argv of a managed worker's CLI inside bubblewrap (call `resolve_kind` first)."""
    binds = [*_environment(), *_system(), *_network(), *_own_view(view.readable, (view.home, view.worktree))]
    binds = [*_links(view.links, binds), *binds]
    covered = _covered(view.hidden, binds)
    # No --new-session: the supervisor signals the worker's process group, which must include the CLI.
    isolation = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all"]
    command = [str(shutil.which("bwrap")), *isolation, "--die-with-parent", *binds, *covered, *_bridge(view.network)]
    return [*command, "--chdir", os.path.realpath(view.worktree), "--", *_through_bridge(argv, view.network)]


def _own_view(readable: tuple[Path, ...], writable: tuple[Path, ...]) -> list[str]:
    """The agent's own view, each at its host path: `readable` read-only, `writable` read-write."""
    binds = _readable(readable)
    for path in writable:
        binds += ["--bind", os.path.realpath(path), os.path.realpath(path)]
    return binds


def _covered(hidden: tuple[Path, ...], binds: list[str]) -> list[str]:
    """An empty tmpfs over every place where a bind would show a hidden folder."""
    return [arg for path in hidden for dest in _seen_at(path, binds) for arg in ("--tmpfs", dest)]


def _bridge(network: BoxNetwork | None) -> list[str]:
    """The worker's socket folder, read-only (it can connect to the sockets, not replace them), and its
    proxy variables; bound last, so no tmpfs of a hidden folder covers it."""
    if network is None:
        return []
    env = [arg for key, value in network.env().items() for arg in ("--setenv", key, value)]
    return ["--ro-bind", str(network.folder), str(worker_network.INSIDE), *env]


def _through_bridge(argv: list[str], network: BoxNetwork | None) -> list[str]:
    """The CLI started by the in-box forwarder, which listens on the allowed loopback ports first."""
    if network is None or not network.ports:
        return argv
    return [sys.executable, "-I", "-S", str(BOX_FORWARDER), network.box_spec(), "--", *argv]


def _links(links: tuple[tuple[str, str], ...], binds: list[str]) -> list[str]:
    """`--symlink` arguments for the links no bind already shows: one on, in or above a bind's
    destination is left out (the bind shows the real folder or link there; a link above it would
    send the bind through a path that does not exist yet)."""
    placing = ("--ro-bind", "--bind", "--ro-bind-try", "--symlink")
    shown = [binds[i + 2] for i, arg in enumerate(binds) if arg in placing]
    kept = [(t, p) for t, p in links if not any(p == d or _inside(p, d) or _inside(d, p) for d in shown)]
    return [arg for target, path in kept for arg in ("--symlink", target, path)]


def git_reader_box(git_dir: Path) -> list[str]:
    """argv prefix that runs git on an agent's repository with nothing else of the host mounted: the
    system read-only and `git_dir` read-only, so a link or alternate in it that points at another
    agent's objects or the server's files finds nothing (call after `resolve_kind("bwrap")`)."""
    real = os.path.realpath(git_dir)
    isolation = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent"]
    binds = ["--ro-bind", "/usr", "/usr", *_system(), "--ro-bind", real, real, "--setenv", "HOME", "/tmp"]
    return [str(shutil.which("bwrap")), *isolation, "--new-session", *binds, "--"]


def _network() -> list[str]:
    args = [arg for name in NETWORK_FILES for arg in ("--ro-bind-try", name, name)]
    return args + [arg for name in NETWORK_FOLDERS for arg in ("--ro-bind-try", name, name)]


def _readable(paths: tuple[Path, ...]) -> list[str]:
    real = {os.path.realpath(p) for p in paths if p.exists()}
    outer = sorted(p for p in real if not any(_inside(p, other) for other in real))
    return [arg for path in outer for arg in ("--ro-bind", path, path)]


# --- jobs (run_gpu_job) ---

JobNetwork = Literal["none", "host"]


@dataclass(frozen=True)
class JobBox:
    """What one job sees: the same boundary as its agent's worker view. Its worktree (the agent's own
    git repository) and its scratch folder (HOME; TMPDIR is the box's own /tmp) read-write; the public
    task view, the shared memory and the interpreter read-only; the NVIDIA device nodes when it was given GPUs; `hidden`
    folders (private/, .amid/, other worktrees, the run's repository and commit store, the server's
    files) covered wherever a bind would show them. No network (own namespace) unless `network` is
    `host`, set explicitly by the `job_network` setting."""

    worktree: Path
    scratch: Path
    cwd: Path
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    gpu: bool = False
    network: JobNetwork = "none"


def wrap_job(argv: list[str], box: JobBox) -> list[str]:
    """argv of a job's command inside bubblewrap (call `resolve_kind(..., JOB)` first). No
    --new-session: the job runner stops the job's process group, which must include the command."""
    share = box.network == "host"
    binds = [*_environment(), *_system(), *(_network() if share else []), *_gpu(box.gpu)]
    binds += _own_view(box.readable, (box.scratch, box.worktree))
    isolation = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all"]
    isolation += [*(["--share-net"] if share else []), "--die-with-parent"]
    command = [str(shutil.which("bwrap")), *isolation, *binds, *_covered(box.hidden, binds)]
    return [*command, "--chdir", os.path.realpath(box.cwd), "--", *argv]


def job_env(scratch: Path) -> dict[str, str]:
    """The environment a boxed job starts from: the passed variables only (no AMID_* settings, no
    tokens, no server secrets), its scratch folder as HOME and TMPDIR."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PATH"] = job_path()
    home = os.path.realpath(scratch)
    # TMPDIR is the box's own /tmp (a tmpfs per job): under the scratch folder a multiprocessing socket path
    # outgrew AF_UNIX's 108 bytes (nnU-Net's data loaders)
    env.update(HOME=home, TMPDIR="/tmp", MPLCONFIGDIR=home, PYTHONNOUSERSITE="1")
    return env


def job_path() -> str:
    """A boxed job's PATH: the job interpreter's own bin folder first (a bare `python` is AMID's,
    with its packages: a shim or other interpreter on the server's PATH may not be in the box)."""
    return os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")])
