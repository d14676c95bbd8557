"""A package's code/ carries the AMID scaffold its inference command runs, pinned, and runs it from there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.errors import Conflict
from amid.tools.scaffolds.nnunet_steps import commands
from amid.tools.scaffolds.pinning import PIN_CODE, PIN_FLAG
from amid.tools.scaffolds.vendoring import scaffold_in, vendor

REPLAY = commands(sys.executable, "demo-liver-lesion-ct", "3d_fullres", 1, gpus_here=0)[-1].argv
AMID_MODULES = (
    "import json, sys, amid.tools.scaffolds.nnunet\n"
    "print(json.dumps({m: getattr(sys.modules[m], '__file__', None) for m in sorted(sys.modules)"
    " if m.split('.')[0] in ('amid', 'tools', 'server', 'registry')}))"
)


def test_the_replay_step_names_its_scaffold_and_pin() -> None:
    assert scaffold_in(REPLAY) == ("nnunet", REPLAY[REPLAY.index(PIN_FLAG) + 1])
    assert scaffold_in(["{python}", "predict.py", "{input_dir}"]) is None  # an agent's own code: nothing to add


def test_from_code_the_vendored_scaffold_runs_and_no_amid_module_comes_from_elsewhere(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    written = vendor(REPLAY, code)
    assert "amid/tools/scaffolds/nnunet.py" in written and "amid/server/errors.py" in written
    assert not [f for f in written if "planning" in f]  # the replay imports no planning code
    done = subprocess.run([sys.executable, "-c", AMID_MODULES], cwd=code, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)
    assert files and all(Path(f).resolve().is_relative_to(code.resolve()) for f in files.values() if f), files
    usage = subprocess.run(
        [sys.executable, "-m", "amid.tools.scaffolds.nnunet", "replay", "--help"],
        cwd=code,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert usage.returncode == 0 and PIN_FLAG in usage.stdout


def test_a_command_pinned_to_other_scaffold_code_is_not_vendored(tmp_path: Path) -> None:
    forged = [*REPLAY[: REPLAY.index(PIN_FLAG) + 1], "0" * 64]
    with pytest.raises(Conflict, match=PIN_CODE):
        vendor(forged, tmp_path)
    assert not list(tmp_path.iterdir())


def test_a_scaffold_file_the_commit_holds_is_kept_as_the_replay_ran_it(tmp_path: Path) -> None:
    own = tmp_path / "amid/tools/scaffolds/nnunet_model.py"
    own.parent.mkdir(parents=True)
    own.write_text("# the agent's own model code\n", encoding="utf-8")
    written = vendor(REPLAY, tmp_path)
    assert "amid/tools/scaffolds/nnunet_model.py" not in written
    assert own.read_text(encoding="utf-8") == "# the agent's own model code\n"


def test_the_monai_replay_vendors_the_monai_scaffold(tmp_path: Path) -> None:
    """The MONAI scaffold runs as `monai_seg`, its pin is named `monai`: both must be recognised."""
    from amid.tools.scaffolds import monai_steps

    replay = [s for s in monai_steps.commands("monai-unet", sys.executable, 1) if "replay" in s.argv][-1].argv
    assert scaffold_in(replay) == ("monai", replay[replay.index(PIN_FLAG) + 1])
    written = vendor(replay, tmp_path)
    assert {"amid/tools/scaffolds/monai_seg.py", "amid/tools/scaffolds/pinning.py"} <= set(written)
