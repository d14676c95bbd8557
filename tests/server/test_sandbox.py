"""The replay sandbox with the real bubblewrap: what a replay sees, what it cannot reach, and the
unconfined fallback. Each replay is a real subprocess of the server's interpreter."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from amid.server.reviewer.bounded import Outcome, run_bounded
from amid.server.reviewer.replay import fill
from amid.server.sandbox import Mounts, SandboxKind, bwrap_problem, placeholders, replay_env, resolve_kind, wrap

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap cannot run: {bwrap_problem()}")


def _mounts(tmp_path: Path, script: str) -> Mounts:
    code, inputs, outputs = tmp_path / "tree", tmp_path / "replay/inputs", tmp_path / "replay/outputs"
    for folder in (code, inputs, outputs, tmp_path / "replay/home"):
        folder.mkdir(parents=True)
    (code / "run.py").write_text(script, encoding="utf-8")
    (inputs / "c1_0000.txt").write_text("image", encoding="utf-8")
    checkpoint = tmp_path / "frozen-checkpoint"
    checkpoint.write_text('{"weights": 3}', encoding="utf-8")
    workspace = tmp_path / "ws"
    (workspace / "private").mkdir(parents=True)
    (workspace / "private/answers.csv").write_text("secret", encoding="utf-8")
    return Mounts(code, inputs, outputs, "model.json", {"": checkpoint}, hidden=(workspace,))


def _replay(kind: SandboxKind, mounts: Mounts, *args: str) -> Outcome:
    argv = fill(["{python}", "run.py", *args], placeholders(kind, mounts, sys.executable))
    command, cwd = wrap(kind, argv, mounts)
    return run_bounded(command, cwd, 60, replay_env(mounts.inputs.parent / "home", kind))


HONEST = """\
import json, sys
from pathlib import Path
import numpy
source, target, checkpoint = map(Path, sys.argv[1:4])
weights = json.loads(checkpoint.read_text())["weights"]
for path in source.iterdir():
    (target / path.name.replace("_0000", "")).write_text(path.read_text() * weights)
print(Path.cwd())
"""


@needs_bwrap
def test_an_honest_replay_reads_its_inputs_and_checkpoint_and_writes_its_outputs(tmp_path: Path) -> None:
    mounts = _mounts(tmp_path, HONEST)
    outcome = _replay("bwrap", mounts, "{input_dir}", "{output_dir}", "{checkpoint}")
    assert outcome.returncode == 0, outcome.stderr_tail
    assert (mounts.outputs / "c1.txt").read_text(encoding="utf-8") == "imageimageimage"
    assert outcome.stdout.strip() == "/replay/code"  # the checkout is the working directory


@needs_bwrap
def test_the_checkout_inputs_and_checkpoint_are_read_only(tmp_path: Path) -> None:
    script = "import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'a').write('x')\n"
    script += "        print('wrote', p)\n    except OSError as e:\n        print('refused', p, e.errno)\n"
    mounts = _mounts(tmp_path, script)
    outcome = _replay("bwrap", mounts, "run.py", "{input_dir}/c1_0000.txt", "{checkpoint}", "{output_dir}/ok")
    lines = outcome.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["refused", "refused", "refused", "wrote"], lines


@needs_bwrap
def test_the_workspace_is_invisible_even_by_an_obfuscated_absolute_path(tmp_path: Path) -> None:
    secret = base64.b64encode(str(tmp_path / "ws/private/answers.csv").encode()).decode()
    script = f"import base64\nprint(open(base64.b64decode('{secret}').decode()).read())\n"
    mounts = _mounts(tmp_path, script)
    assert _replay("none", mounts).stdout.strip() == "secret"  # unconfined, the trick works
    outcome = _replay("bwrap", mounts)
    assert outcome.returncode == 1 and "No such file or directory" in outcome.stderr_tail
    assert str(tmp_path / "ws/private/answers.csv") in outcome.stderr_tail  # the path it reached for is named


@needs_bwrap
def test_a_workspace_under_a_mounted_folder_is_covered(tmp_path: Path) -> None:
    mounts = _mounts(tmp_path, "import os, sys\nprint(sorted(os.listdir(sys.argv[1])))\n")
    inside = Mounts(mounts.code, mounts.inputs, mounts.outputs, hidden=(mounts.code / "ws",))
    (mounts.code / "ws/private").mkdir(parents=True)
    outcome = _replay("bwrap", inside, "/replay/code/ws")
    assert outcome.returncode == 0 and outcome.stdout.strip() == "[]", outcome.stderr_tail


@needs_bwrap
def test_the_network_is_unreachable(tmp_path: Path) -> None:
    script = "import socket\nsocket.create_connection(('127.0.0.1', 8765), timeout=5)\n"
    outcome = _replay("bwrap", _mounts(tmp_path, script))
    assert outcome.returncode == 1 and "Connection refused" in outcome.stderr_tail


@needs_bwrap
def test_the_replay_gets_no_server_secrets_in_its_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMID_ADMIN_SECRET", "s3cret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k3y")
    outcome = _replay("bwrap", _mounts(tmp_path, "import os\nprint(sorted(os.environ))\n"))
    assert "AMID_ADMIN_SECRET" not in outcome.stdout and "ANTHROPIC_API_KEY" not in outcome.stdout
    assert "'HOME'" in outcome.stdout


def test_the_unconfined_fallback_runs_the_same_command_with_host_paths(tmp_path: Path) -> None:
    mounts = _mounts(tmp_path, HONEST)
    outcome = _replay("none", mounts, "{input_dir}", "{output_dir}", "{checkpoint}")
    assert outcome.returncode == 0, outcome.stderr_tail
    assert (mounts.outputs / "c1.txt").read_text(encoding="utf-8") == "imageimageimage"
    assert resolve_kind("none") == "none"


def test_a_boxed_job_runs_a_console_script_of_a_venv_reached_through_a_link(tmp_path: Path) -> None:
    """./.venv is a link to the cached venv; its scripts' #! lines name the real path, which the box must show."""
    import json
    import os
    import subprocess

    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap cannot run here: {bwrap_problem()}")
    link = tmp_path / "venv"
    link.symlink_to(os.path.realpath(sys.prefix))
    worktree, scratch = tmp_path / "wt", tmp_path / "scratch"
    worktree.mkdir()
    scratch.mkdir()
    build = (
        "import json, sys; from pathlib import Path; from amid.server.sandbox import JobBox, wrap_job; "
        f"box = JobBox(worktree=Path({str(worktree)!r}), scratch=Path({str(scratch)!r}), cwd=Path({str(worktree)!r})); "
        "print(json.dumps(wrap_job([sys.prefix + '/bin/pip', '--version'], box)))"
    )
    made = subprocess.run([str(link / "bin" / "python"), "-c", build], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    argv = json.loads(made.stdout)
    assert str(link / "bin" / "pip") in argv  # the script is named through the link, as a lane step names it
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.startswith("pip "), ran.stderr
