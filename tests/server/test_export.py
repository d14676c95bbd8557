"""`amid export`: Parquet read back with duckdb and pandas while a real server runs; MLflow read back
with MLflow's own client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from amid.server import queries
from amid.server.errors import InvalidInput
from amid.server.ledger import Ledger
from amid.server.ledger.attempts import ArtifactRow
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace
from tests.server.conftest import Running
from tests.server.test_human_views import seed_attempt


def _export_cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "amid", "export", "-w", str(ws.root), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_parquet_export_while_the_server_runs_reads_back_with_duckdb_and_pandas(
    running: Running, tmp_path: Path
) -> None:
    out = tmp_path / "snapshot"
    done = _export_cli(running.workspace, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert json.loads(done.stdout)["folder"] == str(out.resolve())
    exported = {r["name"]: r for r in manifest["relations"]}
    assert {"attempts", "metrics", "events", "v_score_over_time", "v_lineage", "v_agent_timeline"} <= set(exported)
    reader = duckdb.connect()
    for name, relation in exported.items():
        path = str(out / relation["file"])
        assert reader.execute("SELECT count(*) FROM read_parquet(?)", [path]).fetchone() == (relation["rows"],), name
        assert len(pd.read_parquet(path)) == relation["rows"], name
    live = queries.query(running.workspace, "SELECT (SELECT count(*) FROM agents), (SELECT count(*) FROM tokens)")
    assert [exported["agents"]["rows"], exported["tokens"]["rows"]] == live[1][0]
    assert exported["agents"]["rows"] >= 4  # the fixture's tokens, served by the running server


def test_token_hashes_never_leave_in_an_export(running: Running, tmp_path: Path) -> None:
    out = tmp_path / "noleak"
    assert _export_cli(running.workspace, "--out", str(out)).returncode == 0
    hashes = {row[0] for row in queries.query(running.workspace, "SELECT token_hash FROM tokens")[1]}
    tokens = pd.read_parquet(out / "tokens.parquet")
    assert "token_hash" not in tokens.columns and len(tokens) == len(hashes) > 0
    reader = duckdb.connect()
    for file in out.glob("*.parquet"):
        cells = {str(v) for row in reader.execute("SELECT * FROM read_parquet(?)", [str(file)]).fetchall() for v in row}
        assert not cells & hashes, file.name


def test_export_without_a_server_goes_to_a_new_timestamped_folder(workspace: Workspace) -> None:
    first = admin_call(workspace, "export", {"out": None})
    folder = Path(first["folder"])
    assert folder.parent == (workspace.root / "exports").resolve() and (folder / "run_state.parquet").is_file()
    assert not list(folder.parent.glob("*.partial"))
    with pytest.raises(InvalidInput, match="not empty; pick a new folder"):
        admin_call(workspace, "export", {"out": str(folder)})
    with pytest.raises(InvalidInput, match="out: got 'relative/dir'; expected an absolute folder"):
        admin_call(workspace, "export", {"out": "relative/dir"})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # MLflow's own imports (pydantic, alembic)
def test_mlflow_export_reads_back_with_mlflows_own_client(workspace: Workspace, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from amid.server.mlflow_export import export_mlflow

    ledger = Ledger(workspace.ledger_path)
    evidence = ArtifactRow("predictions", "preds/case_0.nii.gz", "ab" * 32, 128, f"artifacts/{'ab' * 32}", fold=0)
    parent = seed_attempt(ledger, "alice", "lane-x", [0.5, 0.7], declared={0: {"dice": 0.55}}, artifacts=[evidence])
    child = seed_attempt(ledger, "bob", "lane-x", [0.8, 0.9], accepted=False, parent=parent)
    commit = str(ledger.attempts.get(parent)["commit_sha"])
    ledger.close()  # no server: the export opens the file itself

    folder = tmp_path / "mlflow"
    result = export_mlflow(workspace, folder)
    assert result["runs_created"] == [parent, child]
    client = MlflowClient(tracking_uri=result["tracking_uri"])
    experiment = client.get_experiment_by_name("amid/" + workspace.contract().id)
    runs = {r.data.tags["amid.attempt_id"]: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {parent, child}
    first, second = runs[parent], runs[child]
    assert first.data.tags["mlflow.source.git.commit"] == commit
    assert second.data.tags["mlflow.parentRunId"] == first.info.run_id and "mlflow.parentRunId" not in first.data.tags
    assert (first.data.tags["agent"], first.data.tags["lane"], first.data.tags["status"]) == (
        "alice",
        "lane-x",
        "accepted",
    )
    assert (second.data.tags["verdict"], second.data.tags["budget_class"]) == ("rejected", "real")
    assert first.data.params["folds"] == "[0, 1]" and second.data.params["parent_attempt_id"] == parent
    verified = client.get_metric_history(first.info.run_id, "verified.dice")
    declared = client.get_metric_history(first.info.run_id, "declared.dice")
    assert sorted((m.step, m.value) for m in verified) == [(0, 0.5), (1, 0.7)]
    assert [(m.step, m.value) for m in declared] == [(0, 0.55)]
    listing = client.download_artifacts(first.info.run_id, "evidence.json", str(tmp_path))
    refs = json.loads(Path(listing).read_text(encoding="utf-8"))["artifacts"]
    assert [(r["sha256"], r["frozen_path"]) for r in refs] == [(evidence.sha256, evidence.frozen_path)]
    again = export_mlflow(workspace, folder)
    assert again["runs_created"] == [] and again["runs"] == 2
