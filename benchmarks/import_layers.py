"""The import structure of a checkout, against the layer contract in this repository's pyproject.toml:
circles, imports that run up the layers, imports between the packages, and imports of the project's own
modules made inside functions. Reads a checkout from before the one namespace (top-level `server`,
`tools`, `registry`) as well, by naming its modules as they are named now (`server.x` -> `amid.server.x`).

    python -m benchmarks.import_layers                      # this checkout
    python -m benchmarks.import_layers --checkout OLD_TREE --name before
    python -m benchmarks.import_layers --name after && python -m benchmarks.import_layers --doc

Read by grimp (the graph import-linter checks), imports made only for type checkers left out.
Writes benchmarks/results/import_layers_<name>.json and prints a Mermaid diagram of the layers.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[1]
OLD_PACKAGES = ("server", "tools", "registry")
LAYER_NAMES = ("programs", "tool faces", "run state", "domain libraries", "base")


def contract_layers(pyproject: Path = ROOT / "pyproject.toml") -> list[list[str]]:
    """The modules of each layer of the layers contract, top layer first."""
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [[name.strip() for name in layer.replace("|", ":").split(":")] for layer in layers]


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _graph(checkout: Path) -> tuple[grimp.ImportGraph, str]:
    """The graph of `checkout`, and the prefix that turns its module names into today's."""
    sys.path.insert(0, str(checkout))
    if (checkout / "amid" / "__init__.py").is_file():
        return grimp.build_graph("amid", exclude_type_checking_imports=True), ""
    return grimp.build_graph(*OLD_PACKAGES, exclude_type_checking_imports=True), "amid."


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    for depth, members in enumerate(layers):
        if any(module == m or module.startswith(f"{m}.") for m in members):
            return depth
    return None


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "amid" and len(parts) > 1 else parts[0]


def _imports_in_functions(checkout: Path, own: tuple[str, ...]) -> int:
    """Imports of the project's own modules made inside a function body (not at module level)."""
    count = 0
    for top in OLD_PACKAGES:
        for path in (checkout / top).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(own):
                        count += 1
                    elif isinstance(node, ast.Import):
                        count += sum(alias.name.startswith(own) for alias in node.names)
    return count


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def measure(checkout: Path) -> dict[str, Any]:
    layers = contract_layers()
    graph, prefix = _graph(checkout)
    edges = [(prefix + a, prefix + b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)]
    between: Counter[str] = Counter()
    upward: list[tuple[str, str]] = []
    unplaced: set[str] = set()
    for importer, imported in edges:
        high, low = layer_of(importer, layers), layer_of(imported, layers)
        unplaced |= {m for m, depth in ((importer, high), (imported, low)) if depth is None}
        if high is not None and low is not None and high != low:
            between[f"{LAYER_NAMES[high]} -> {LAYER_NAMES[low]}"] += 1
            if low < high:
                upward.append((importer, imported))
    crossing = [(_package(a), _package(b)) for a, b in edges]
    packages = Counter(f"{a} -> {b}" for a, b in crossing if a != b and {a, b} <= set(OLD_PACKAGES))
    found = circles(graph)
    own = ("amid.",) if not prefix else tuple(f"{p}." for p in OLD_PACKAGES) + OLD_PACKAGES
    return {
        "commit": _commit(checkout),
        "modules": len(graph.modules),
        "imports": len(edges),
        "circles": [len(c) for c in found],
        "circle_members": found,
        "upward_imports": len(upward),
        "upward": sorted(upward),
        "between_layers": dict(sorted(between.items())),
        "between_packages": dict(sorted(packages.items())),
        "unplaced_modules": sorted(unplaced - {"amid", "amid.server", "amid.tools", "amid.registry"}),
        "imports_in_functions": _imports_in_functions(checkout, own),
    }


def mermaid(result: dict[str, Any]) -> str:
    lines = ["flowchart TD"]
    ids = {name: f"L{i}" for i, name in enumerate(LAYER_NAMES)}
    lines += [f'  {ids[name]}["{name}"]' for name in LAYER_NAMES]
    for pair, count in result["between_layers"].items():
        high, low = pair.split(" -> ")
        arrow = "-->" if LAYER_NAMES.index(low) > LAYER_NAMES.index(high) else "-.->"
        lines.append(f"  {ids[high]} {arrow}|{count}| {ids[low]}")
    return "\n".join(lines)


def layers_doc(before: dict[str, Any], after: dict[str, Any]) -> str:
    """docs/LAYERS.md: the two measurements side by side, with a diagram of each."""

    def packages(result: dict[str, Any]) -> str:
        return ", ".join(f"{pair} {n}" for pair, n in result["between_packages"].items())

    upward = "\n".join(f"| `{importer}` | `{imported}` |" for importer, imported in before["upward"])
    circles_before = f"{len(before['circles'])} ({', '.join(map(str, before['circles']))})"
    return f"""# Layers: before and after the one namespace

Written by `python -m benchmarks.import_layers --doc` from `benchmarks/results/import_layers_before.json`
and `benchmarks/results/import_layers_after.json`, each measured by `python -m benchmarks.import_layers`
(grimp, the graph import-linter checks; imports made only for type checkers left out) against the layer
contract in `pyproject.toml` (docs/ARCHITECTURE.md §3). **Before** is {before["commit"]}, the last landed
tree before issue 26, its modules named as they are now (`server.x` read as `amid.server.x`); **after**
is {after["commit"]}.

| | before ({before["commit"]}) | after ({after["commit"]}) |
|---|---|---|
| top-level import names installed | `server`, `tools`, `registry` | `amid` |
| modules / imports between them | {before["modules"]} / {before["imports"]} | {after["modules"]} / {after["imports"]} |
| import circles (modules in each) | {circles_before} | {len(after["circles"])} |
| imports up the layers | {before["upward_imports"]} | {after["upward_imports"]} |
| imports of the project's own modules inside functions | {before["imports_in_functions"]} | \
{after["imports_in_functions"]} (none closes a circle: the graph counts them, and it has none) |
| layer contract checked in CI | no | yes (`lint-imports`, `tests/test_layers.py`) |

The imports that ran up the layers before:

| importer | imported (a layer above) |
|---|---|
{upward}

Imports between the three packages, by folder (the folders are not the layers: ARCHITECTURE §3):
before {packages(before)}; after {packages(after)}.

## Before

Edges count module imports between layers; dotted edges run upwards.

```mermaid
{mermaid(before)}
```

## After

```mermaid
{mermaid(after)}
```
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--name", default="now")
    parser.add_argument("--doc", action="store_true", help="write docs/LAYERS.md from the before/after results")
    args = parser.parse_args()
    from benchmarks._common import RESULTS, write_result

    if args.doc:
        before, after = (json.loads((RESULTS / f"import_layers_{n}.json").read_text()) for n in ("before", "after"))
        (ROOT / "docs" / "LAYERS.md").write_text(layers_doc(before, after), encoding="utf-8")
        return

    result = measure(args.checkout.resolve())
    path = write_result(f"import_layers_{args.name}", result)
    summary = {k: result[k] for k in ("modules", "imports", "circles", "upward_imports", "imports_in_functions")}
    print(json.dumps(summary), f"\nwritten {path}\n\n{mermaid(result)}")


if __name__ == "__main__":
    main()
