"""A scaffold's code copied beside an attempt's code, so a package's `code/` re-runs the inference command
without AMID installed.

An inference command such as `{python} -m amid.tools.scaffolds.nnunet replay … --scaffold-sha256 D` runs AMID's
scaffold, which the commit does not hold. `vendor` copies the scaffold module and every AMID module it
imports at module level (package `__init__` files included) into the code folder, after checking the
installed copy is the one the attempt pinned (SCAFFOLD_CHANGED otherwise). `python -m` puts the working
directory first on sys.path, so from `code/` the copies are what runs. A file the commit holds itself is
kept: the replay ran the commit's copy.
"""

from __future__ import annotations

import ast
import itertools
import shutil
from collections.abc import Sequence
from pathlib import Path

from amid import PACKAGE_ROOT
from amid.tools.scaffolds.pinning import PIN_FLAG, SCAFFOLD_MODULES, check_pin

AMID_ROOT = PACKAGE_ROOT
AMID_PACKAGES = ("amid",)
SCAFFOLD_PACKAGE = "amid.tools.scaffolds."


def scaffold_in(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """The scaffold an inference command runs (`-m amid.tools.scaffolds.<module>`) and the digest it pins, if
    any. The MONAI scaffold's module is `monai_seg`: it was missed when names were compared, and a MONAI
    winner's package went out without the scaffold its inference command runs."""
    by_module = {module: scaffold for scaffold, module in SCAFFOLD_MODULES.items()}
    for flag, module in itertools.pairwise(argv):
        scaffold = by_module.get(module.removeprefix(SCAFFOLD_PACKAGE))
        if flag == "-m" and module.startswith(SCAFFOLD_PACKAGE) and scaffold is not None:
            pins = [value for key, value in itertools.pairwise(argv) if key == PIN_FLAG]
            return scaffold, pins[0] if pins else None
    return None


def module_file(module: str, root: Path = AMID_ROOT) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def source_closure(module: str, root: Path = AMID_ROOT) -> list[Path]:
    """The AMID source files `module` needs at import: its own, its packages' `__init__`, and those of every
    AMID module imported at module level, transitively (imports inside functions are lazy: not followed)."""
    found: dict[str, Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        path = module_file(name, root)
        if name in found or path is None:
            continue
        found[name] = path
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]
        pending += _imported(ast.parse(path.read_text(encoding="utf-8")))
    return sorted(found.values())


def _imported(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [n for n in names if n.split(".")[0] in AMID_PACKAGES]


def vendor(argv: Sequence[str], into: Path, root: Path = AMID_ROOT) -> list[str]:
    """Copy the scaffold `argv` runs, with its imports, into `into`; returns the files written (none when the
    command runs no AMID scaffold). Raises Conflict (SCAFFOLD_CHANGED) when the installed scaffold is not
    the pinned one: the package would carry other code than the replay ran."""
    found = scaffold_in(argv)
    if found is None:
        return []
    scaffold, pinned = found
    check_pin(scaffold, pinned, root / "amid" / "tools" / "scaffolds")
    written = []
    for source in source_closure(SCAFFOLD_PACKAGE + SCAFFOLD_MODULES[scaffold], root):
        rel = source.relative_to(root)
        target = into / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(rel.as_posix())
    return written
