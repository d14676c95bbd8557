"""Attempts pin the scaffold code their replay runs: the lane's replay step carries the sha256 of the
scaffold's source files, and the scaffold refuses to replay when the installed copy differs.

The replay runs `python -m amid.tools.scaffolds.<scaffold>` from AMID's installed package, not from the
attempt's commit, so an AMID upgrade could change what an old attempt's replay computes. The digest in
the inference command (frozen with the attempt) turns that silent change into a named refusal
(SCAFFOLD_CHANGED), which the reviewer reports as a failed replay with this message.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from hashlib import sha256
from pathlib import Path

from amid.server.errors import Conflict

PIN_FLAG = "--scaffold-sha256"
PIN_CODE = "SCAFFOLD_CHANGED"
# The files whose code shapes a replay's outputs (planning and step listing do not).
SCAFFOLD_FILES: dict[str, tuple[str, ...]] = {
    "nnunet": ("nnunet.py", "nnunet_back.py", "nnunet_dataset.py", "nnunet_model.py", "packaging.py"),
    "monai": ("monai_seg.py", "monai_data.py", "monai_model.py", "monai_config.py", "packaging.py"),
}
# The module each pinned scaffold's commands run (`-m amid.tools.scaffolds.<module>`).
SCAFFOLD_MODULES: dict[str, str] = {"nnunet": "nnunet", "monai": "monai_seg"}
_FOLDER = Path(__file__).parent


def before_namespace(argv: Sequence[str], tree: Path) -> str | None:
    """Why a command made before AMID's one namespace cannot replay, or None. It runs
    `-m tools.scaffolds.<module>`, a name this AMID no longer has; unless the commit holds that file itself
    (then it runs the commit's own code, as it did), the replay would only fail to import it."""
    for flag, module in itertools.pairwise(argv):
        name = module.removeprefix("tools.scaffolds.")
        old = flag == "-m" and module != name and name in SCAFFOLD_MODULES.values()
        if old and not (tree / "tools" / "scaffolds" / f"{name}.py").is_file():
            return (
                f"{PIN_CODE}: the inference command runs {module}, the scaffold's name before AMID's one "
                f"namespace (now amid.tools.scaffolds.{name}); replay it with the AMID version that made it, "
                "or make a new attempt with this one"
            )
    return None


def scaffold_digest(scaffold: str, folder: Path = _FOLDER) -> str:
    """sha256 over the scaffold's source files, each with its name (a renamed file changes it too)."""
    digest = sha256()
    for name in sorted(SCAFFOLD_FILES[scaffold]):
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return digest.hexdigest()


def check_pin(scaffold: str, pinned: str | None, folder: Path = _FOLDER) -> None:
    """Refuse, naming both digests, when `pinned` (None: the command pinned nothing) is not this copy's."""
    if pinned is None:
        return
    installed = scaffold_digest(scaffold, folder)
    if pinned != installed:
        raise Conflict(
            f"{PIN_FLAG}: {PIN_CODE}: the installed {scaffold} scaffold ({installed[:12]}, {folder}) is not the "
            f"code this attempt was made with ({pinned[:12]}); replay it with the AMID version that made it, "
            "or make a new attempt with this one",
            field="scaffold_sha256",
        )
