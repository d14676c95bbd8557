"""The layers of docs/ARCHITECTURE.md §3 hold: `lint-imports` (import-linter, the real tool) keeps the
contract written in pyproject.toml, every module of the package sits in one of its layers, and the
distribution claims one top-level import name, `amid`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
CONTAINERS = {"amid", "amid.server", "amid.tools", "amid.registry"}  # packages whose children are placed


def _layer_modules() -> list[set[str]]:
    (layers,) = [c["layers"] for c in CONTRACT["contracts"] if c["type"] == "layers"]
    return [{name.strip() for name in layer.replace("|", ":").split(":")} for layer in layers]


def test_lint_imports_keeps_the_layer_contract() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_every_module_is_in_exactly_one_layer() -> None:
    layers = _layer_modules()
    placed = [name for layer in layers for name in layer]
    assert len(placed) == len(set(placed))
    graph = grimp.build_graph("amid", exclude_type_checking_imports=True)
    unplaced = sorted(m for m in graph.modules - CONTAINERS if not any(m == p or m.startswith(f"{p}.") for p in placed))
    assert unplaced == [], f"modules in no layer of pyproject.toml's [tool.importlinter] contract: {unplaced}"
    assert set(placed) <= graph.modules, sorted(set(placed) - graph.modules)


def test_a_module_importing_upwards_breaks_the_contract(tmp_path: Path) -> None:
    """The check can fail: a domain library (tools.task) reaching up into the ledger is reported."""
    graph = grimp.build_graph("amid", exclude_type_checking_imports=True)
    graph.add_import(importer="amid.tools.task.contract", imported="amid.server.ledger")
    layers = [grimp.Layer(*layer, independent=False) for layer in _layer_modules()]
    found = graph.find_illegal_dependencies_for_layers(layers=layers)
    assert {(d.importer, d.imported) for d in found} == {("amid.tools.task", "amid.server.ledger")}


def test_importing_every_module_loads_nothing_under_the_old_top_level_names() -> None:
    """`server`, `tools` and `registry` were the distribution's top-level names; nothing may import them
    now (a module loaded under both names would exist twice, with two sets of globals)."""
    probe = (
        "import importlib, json, pkgutil, sys, amid\n"
        "skip = ('amid.__main__', 'amid.server.worker_network_box')\n"
        "for m in pkgutil.walk_packages(amid.__path__, 'amid.'):\n"
        "    if m.name not in skip:\n"
        "        importlib.import_module(m.name)\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in ('server', 'tools', 'registry'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_the_wheel_installs_one_top_level_package_with_its_data(tmp_path: Path) -> None:
    """What `pip install amid` puts at the top of site-packages: `amid` and its dist-info, nothing with a
    generic name; and the data files the code reads (migrations, the tool manifest, the registry)."""
    import zipfile

    source = tmp_path / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(".venv", "build", "*.egg-info", ".git"))
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source)]
    done = subprocess.run([*command, "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("amid-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"amid", wheel.name.split("-py")[0] + ".dist-info"}
    assert "amid/server/ledger/migrations/0001_initial.sql" in names and "amid/server/tool_manifest.json" in names
    assert any(n.startswith("amid/registry/lane_templates/") and n.endswith(".yaml") for n in names)
    assert "amid/tools/scaffolds/nnunet.py" in names and "amid/__main__.py" in names
    assert "amid/skills/method-lanes/SKILL.md" in names
