"""The run's workspace (docs/ARCHITECTURE.md §4): layout, creation by `amid init`, and the server marker.

Creation is all-or-nothing: everything is built in a sibling temporary folder and renamed into
place at the end, so a failed import leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amid import PACKAGE_ROOT
from amid.server.errors import Conflict, InvalidInput, NotFound
from amid.server.holdout_split import split_holdout
from amid.server.ledger import Ledger, utcnow
from amid.server.processes import pid_alive
from amid.server.repo import init_commit_store
from amid.tools.task.cases import discover_cases
from amid.tools.task.contract import TaskContract, load_contract, write_contract
from amid.tools.task.folds import LockedFolds, make_folds
from amid.tools.task.importers import ImportedTask

SKILLS_SOURCE = PACKAGE_ROOT / "amid" / "skills"  # a link to the top-level skills/ in a checkout


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def ledger_path(self) -> Path:
        return self.root / "amid.duckdb"

    @property
    def task_dir(self) -> Path:
        return self.root / "task"

    @property
    def private_dir(self) -> Path:
        return self.root / "private"

    @property
    def repo_dir(self) -> Path:
        return self.root / "repo"

    @property
    def worktrees_dir(self) -> Path:
        return self.root / "worktrees"

    @property
    def memory_dir(self) -> Path:
        return self.root / "memory"

    @property
    def control_dir(self) -> Path:
        return self.root / ".amid"

    @property
    def server_file(self) -> Path:
        return self.control_dir / "server.json"

    @property
    def commit_store(self) -> Path:
        """The server's bare repository of submitted commits: no worktree references it."""
        return self.control_dir / "commits.git"

    def sub(self, name: str) -> Path:
        return self.root / name

    @property
    def source_file(self) -> Path:
        """Where the task was imported from: server-only, since those folders hold what task/ leaves out."""
        return self.control_dir / "source.json"

    def origin(self) -> dict[str, str]:
        """The import's folders by role ("task", "data"); a workspace made before they left the
        contract reads its contract's `source.origin`."""
        if self.source_file.is_file():
            return dict(json.loads(self.source_file.read_text(encoding="utf-8")).get("origin") or {})
        legacy = self.contract().source.origin
        return {"task": legacy} if legacy else {}

    @property
    def grader_env_file(self) -> Path:
        return self.control_dir / "grader.json"

    def grader_python(self) -> str | None:
        """The interpreter named at init for the task's grader (None: the server's own)."""
        if not self.grader_env_file.is_file():
            return None
        return str(json.loads(self.grader_env_file.read_text(encoding="utf-8")).get("python") or "") or None

    def contract(self) -> TaskContract:
        return load_contract(self.task_dir / "contract.yaml")

    def folds(self) -> LockedFolds:
        return LockedFolds.model_validate_json((self.task_dir / "folds.json").read_text(encoding="utf-8"))

    def relative(self, path: Path) -> str:
        """Workspace-relative form for the ledger (no host-specific absolute paths)."""
        return str(path.resolve().relative_to(self.root.resolve()))

    @classmethod
    def open(cls, root: Path) -> Workspace:
        root = root.expanduser().resolve()
        if not (root / "task" / "contract.yaml").is_file() or not (root / "amid.duckdb").is_file():
            raise NotFound(f"workspace: {root} is not an AMID workspace; create one with `amid init TASK -w DIR`")
        return cls(root)


WORKSPACE_FOLDERS = (
    "task",
    "private",
    "repo",
    "worktrees",
    "memory/notes",
    "memory/skills",
    "memory/lanes",
    "artifacts/frozen",
    "jobs",
    "reviews",
    "exports",
    "package",
    ".amid",
)


def check_target(target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidInput(
            f"workspace: {target} exists and is not empty; pick a new folder (a change is a new run)",
            field="workspace",
        )


def init_workspace(
    imported: ImportedTask, target: Path, *, link_data: bool = False, grader_python: Path | None = None
) -> Workspace:
    """Create a complete workspace at `target` from an imported task, or nothing at all."""
    target = target.expanduser().resolve()
    check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.init-", dir=target.parent))
    try:
        _populate(Workspace(staging), imported, link_data)
        _record_grader_env(Workspace(staging), grader_python)
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Workspace(target)


def _populate(ws: Workspace, imported: ImportedTask, link_data: bool) -> None:
    for folder in WORKSPACE_FOLDERS:
        (ws.root / folder).mkdir(parents=True, exist_ok=True)
    _copy_all(imported.public_copies, ws.task_dir, link_data)
    _copy_all(imported.private_copies, ws.private_dir, link_data=False)
    _record_origin(ws, imported)
    contract = imported.contract
    cases = discover_cases(ws.task_dir, contract.layout, "train")
    if not cases:
        raise InvalidInput(f"layout.train_images: no cases found in {contract.layout.train_images}")
    cases = split_holdout(ws.task_dir, ws.private_dir, contract, cases)
    folds = make_folds(
        {c.case_id: c.group or c.case_id for c in cases},
        contract.validation.k_folds,
        contract.validation.seed,
        contract.layout.group_key,
    )
    (ws.task_dir / "folds.json").write_text(folds.model_dump_json(indent=1), encoding="utf-8")
    (ws.task_dir / "description.md").write_text(imported.description or contract.description, encoding="utf-8")
    digest = write_contract(contract, ws.task_dir / "contract.yaml")
    check_public_view(ws, imported.origin)
    _seed_skills(ws)
    _init_repo(ws, contract)
    ledger = Ledger(ws.ledger_path)
    try:
        _record_run(ledger, contract, digest, len(cases), imported.origin)
    finally:
        ledger.close()


def _record_grader_env(ws: Workspace, python: Path | None) -> None:
    """The grader's interpreter is this host's fact, not the task's: it lives beside the server's files."""
    if python is None:
        return
    resolved = python.expanduser().absolute()
    if not resolved.is_file():
        raise InvalidInput(f"--grader-python: {python} is not a file", field="--grader-python")
    grader = ws.contract().grader
    if grader is not None:  # refused now, not in every review: it cannot import what the grader imports
        from amid.server.reviewer.grader_imports import check_grader_imports

        check_grader_imports(resolved, ws.private_dir / grader.file)
    ws.grader_env_file.write_text(json.dumps({"python": str(resolved)}), encoding="utf-8")


def _record_origin(ws: Workspace, imported: ImportedTask) -> None:
    fields = {"format": imported.contract.source.format, "origin": imported.origin}
    ws.source_file.write_text(json.dumps(fields, indent=1), encoding="utf-8")


def _copy_all(copies: list[tuple[Path, str]], into: Path, link_data: bool) -> None:
    """Copy each source under `into`; `link_data`: hard links instead, where the file system allows.

    Never symbolic links: a link's target is the import folder's path, readable by every agent
    (and that folder holds what task/ leaves out: holdout labels, answers)."""
    copy = _link_or_copy if link_data else shutil.copy2
    for source, rel in copies:
        if not source.exists():
            raise InvalidInput(f"layout: {source.name} is declared but missing at {source}")
        dest = (into / rel).resolve()
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, dirs_exist_ok=True, copy_function=copy)
        else:
            copy(source, dest)


def _link_or_copy(source: str | Path, dest: str | Path) -> None:
    try:
        os.link(source, dest)  # follows a symlinked source: the link is to the data, not to a name
    except OSError:  # another file system, or one without hard links
        shutil.copy2(source, dest)


def check_public_view(ws: Workspace, origin: dict[str, str]) -> None:
    """Refuse a public view that leads outside itself: a symlink, or a text file of task/ naming an
    import folder or private/ (what an agent reads must not say where the labels are)."""
    secrets = [*origin.values(), str(ws.private_dir)]
    for path in sorted(ws.task_dir.rglob("*")):
        if path.is_symlink():
            raise InvalidInput(f"task: {path.relative_to(ws.root)} is a link; the public view holds files only")
        if path.suffix in PUBLIC_TEXT and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            named = next((s for s in secrets if s and s in text), None)
            if named is not None:
                raise InvalidInput(
                    f"task: {path.relative_to(ws.root)} names {named}, a folder agents must not be shown; "
                    "remove the path from the task's files (description, tables) and import again",
                    field="TASK",
                )


PUBLIC_TEXT = frozenset({".yaml", ".yml", ".md", ".txt", ".json", ".csv", ".tsv"})


def _seed_skills(ws: Workspace) -> None:
    if not SKILLS_SOURCE.is_dir():  # a run without its skills would leave the agents without the conventions
        raise NotFound(f"skills: {SKILLS_SOURCE} is missing from this installation of amid; reinstall it")
    shutil.copytree(SKILLS_SOURCE, ws.memory_dir / "skills", dirs_exist_ok=True)


REPO_README = """# Attempts repository of run {task_id}

Every attempt is a commit. Agents work in their own worktree (`../worktrees/<agent>/`),
commit there, and submit the commit with `submit_attempt`.
"""


# What `amid connect` writes into a worktree stays out of attempts' commits.
REPO_GITIGNORE = "__pycache__/\n*.pyc\n.amid-local/\n.mcp.json\n.cursor/\nopencode.json\nAGENTS.md\nCLAUDE.md\n"


def _init_repo(ws: Workspace, contract: TaskContract) -> None:
    import git

    with git.Repo.init(ws.repo_dir, initial_branch="main") as repo:  # closing ends git's helper processes
        with repo.config_writer() as config:
            config.set_value("user", "name", "amid")
            config.set_value("user", "email", "amid@localhost")
        (ws.repo_dir / "README.md").write_text(REPO_README.format(task_id=contract.id), encoding="utf-8")
        (ws.repo_dir / ".gitignore").write_text(REPO_GITIGNORE, encoding="utf-8")
        repo.index.add(["README.md", ".gitignore"])
        repo.index.commit(f"Start run {contract.id}")
    init_commit_store(ws.commit_store, ws.repo_dir)


def _record_run(ledger: Ledger, contract: TaskContract, digest: str, n_cases: int, origin: dict[str, str]) -> None:
    state = {
        "contract_hash": digest,
        "task_id": contract.id,
        "primary_metric": contract.primary_metric,
        "primary_direction": contract.primary.direction,
        "stage": "exploration",
        "started_at": utcnow().isoformat(),
        "n_train_cases": n_cases,
        "task_origin": origin,  # for `amid status`: the ledger is the server's, not the agents'
    }
    for key, value in state.items():
        ledger.activity.set_state(key, value)
    ledger.activity.log("run_initialised", agent_id=None, payload={"contract_hash": digest})


# The server marker: which process serves this workspace, for the CLI and for a second server.
def read_server_marker(ws: Workspace) -> dict[str, Any] | None:
    try:
        marker = json.loads(ws.server_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    same_host = marker.get("host") == socket.gethostname()
    if same_host and not pid_alive(int(marker.get("pid", 0))):
        return None
    return dict(marker)


def write_server_marker(ws: Workspace, url: str, admin_secret: str) -> None:
    running = read_server_marker(ws)
    if running:
        raise Conflict(
            f"workspace {ws.root} is already served by pid {running['pid']} at {running['url']} "
            f"(started {running['started_at']}); stop it first or use another workspace"
        )
    marker = {"pid": os.getpid(), "host": socket.gethostname(), "url": url, "started_at": utcnow().isoformat() + "Z"}
    secret_file = ws.control_dir / "admin.secret"
    secret_file.write_text(admin_secret, encoding="utf-8")
    secret_file.chmod(0o600)
    tmp = ws.server_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(marker), encoding="utf-8")
    os.replace(tmp, ws.server_file)


def clear_server_marker(ws: Workspace) -> None:
    marker = read_server_marker(ws)
    if marker and marker.get("pid") == os.getpid():
        ws.server_file.unlink(missing_ok=True)
