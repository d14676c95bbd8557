"""The lane tools and query_fm_registry through the SDK's in-memory MCP client, on the demo task."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.context import Services, ToolContext
from amid.server.ledger import Identity, Ledger
from amid.server.ledger.idempotency import IdempotencyKeys
from amid.server.settings import Settings
from amid.server.workspace import Workspace
from amid.tools.lane_plan import ensure_portfolio
from tests.clients import error, local_client, ok


@pytest.fixture(scope="module")
def planned_root(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workspace with its portfolio planned once (a real profile of the demo data)."""
    root = tmp_path_factory.mktemp("planned") / "ws"
    shutil.copytree(_pristine_workspace, root, symlinks=True)
    workspace = Workspace.open(root)
    ledger = Ledger(workspace.ledger_path)
    try:
        services = Services(settings=Settings(workspace=root, port=0), workspace=workspace, ledger=ledger)
        ensure_portfolio(ToolContext(services=services, caller=Identity(agent_id="planner", role="supervisor")))
    finally:
        ledger.close()
    return root


@pytest.fixture
def planned(planned_root: Path, tmp_path: Path) -> Iterator[Services]:
    root = tmp_path / "ws"
    shutil.copytree(planned_root, root, symlinks=True)
    workspace = Workspace.open(root)
    ledger = Ledger(workspace.ledger_path)
    yield Services(settings=Settings(workspace=root, port=0), workspace=workspace, ledger=ledger)
    ledger.close()


@pytest.mark.anyio
async def test_list_lanes_shows_the_planned_portfolio_and_the_ideas_left_out(planned: Services) -> None:
    async with local_client(planned, "w1") as client:
        listed = await ok(client, "list_lanes", {"include_excluded": True})
    lanes = {lane["lane_id"]: lane for lane in listed["lanes"]}
    assert listed["lanes"][0]["lane_id"] == "calibration-trivial"
    assert lanes["nnunet-3d-fullres"]["tier"] == "primary" and lanes["nnunet-3d-fullres"]["status"] == "open"
    assert "pathology-encoder-head" not in lanes
    assert listed["n_excluded"] == len(listed["excluded"]) > 0
    assert any(line.startswith("pathology-encoder-head: needs rgb_stain=false") for line in listed["excluded"])
    lanes_dir = planned.workspace.memory_dir / "lanes"
    assert {p.stem for p in lanes_dir.glob("*.md")} >= {*lanes, "PORTFOLIO"}
    assert (lanes_dir / "monai-3d-segresnet-swinunetr.monai_config.json").is_file()
    assert "## Not instantiated (kept with the reason)" in (lanes_dir / "PORTFOLIO.md").read_text(encoding="utf-8")


@pytest.mark.anyio
async def test_claim_returns_the_lane_file_and_a_second_agent_is_refused(planned: Services) -> None:
    async with local_client(planned, "w1") as first, local_client(planned, "w2") as second:
        claimed = await ok(first, "claim_lane", {"lane_id": "nnunet-3d-fullres"})
        refused = await error(second, "claim_lane", {"lane_id": "nnunet-3d-fullres"})
        listed = await ok(second, "list_lanes", {})
    assert claimed["lane_id"] == "nnunet-3d-fullres" and claimed["released"] == []
    assert "nnUNetv2_plan_and_preprocess -d 501 -c 3d_fullres" in claimed["lane_file"]
    assert "## Validation obligations" in claimed["lane_file"]
    assert claimed["tried"] == ["nothing yet: you are the first in this lane"]
    assert "CONFLICT: lane_id: got 'nnunet-3d-fullres', held by w1" in refused
    nnunet = next(lane for lane in listed["lanes"] if lane["lane_id"] == "nnunet-3d-fullres")
    assert nnunet["status"] == "claimed" and nnunet["claimants"] == ["w1"]


@pytest.mark.anyio
async def test_claiming_shows_what_others_tried_and_release_hands_the_lane_on(planned: Services) -> None:
    planned.ledger.db.execute(
        "INSERT INTO notes (agent_id, kind, lane_id, title, body, created_at) "
        "VALUES ('w1', 'reflection', 'nnunet-3d-fullres', 'patch too small for lesions', 'b', now())"
    )
    async with local_client(planned, "w1") as first, local_client(planned, "w2") as second:
        await ok(first, "claim_lane", {"lane_id": "nnunet-3d-fullres"})
        released = await ok(first, "release_lane", {"lane_id": "nnunet-3d-fullres"})
        not_held = await error(first, "release_lane", {"lane_id": "nnunet-3d-fullres"})
        claimed = await ok(second, "claim_lane", {"lane_id": "nnunet-3d-fullres"})
    assert released["status"] == "open"
    assert not_held.endswith(
        "CONFLICT: lane_id: got 'nnunet-3d-fullres'; expected a lane you hold a claim on (claim_lane first)"
    )
    assert any("note" in line and "patch too small for lesions" in line for line in claimed["tried"])
    assert any(line.startswith("claimed by w1 ") for line in claimed["tried"])


@pytest.mark.anyio
async def test_propose_lane_adds_a_downranked_lane_with_a_complete_file(planned: Services) -> None:
    proposal = {
        "title": "Lesion cascade on the liver crop",
        "family": "task_specific",
        "hypothesis": "A second model on the liver bounding box segments small lesions better.",
        "predicates": ["dims_3d", "small_structures"],
        "base_template": "nnunet-3d-fullres",
    }
    async with local_client(planned, "w3") as client:
        proposed = await ok(client, "propose_lane", proposal)
        listed = await ok(client, "list_lanes", {})
        bad = await error(client, "propose_lane", {**proposal, "predicates": ["shiny"]})
    assert proposed["lane_id"] == "agent-lesion-cascade-on-the-liver-crop" and proposed["tier"] == "fallback"
    assert any("small_structures=false" in note for note in proposed["notes"])
    text = (planned.workspace.root / proposed["lane_file"]).read_text(encoding="utf-8")
    assert "proposed by w3" in text and "## Validation obligations" in text and "nnUNetv2_train" in text
    assert listed["lanes"][-1]["lane_id"] == proposed["lane_id"]
    assert "predicates" in bad
    overview = (planned.workspace.memory_dir / "lanes" / "PORTFOLIO.md").read_text(encoding="utf-8")
    assert proposed["lane_id"] in overview


@pytest.mark.anyio
async def test_unknown_lane_and_human_claims_are_refused(planned: Services) -> None:
    async with local_client(planned, "w1") as agent, local_client(planned, "hugo", "human") as human:
        missing = await error(agent, "claim_lane", {"lane_id": "nope"})
        forbidden = await error(human, "claim_lane", {"lane_id": "calibration-trivial"})
        listed = await ok(human, "list_lanes", {})
    assert missing.endswith("NOT_FOUND: lane_id: got 'nope'; expected a lane of the run (see list_lanes)")
    assert "FORBIDDEN: role: got 'human' (agent 'hugo'); expected agent, supervisor for claim_lane" in forbidden
    assert listed["lanes"]


@pytest.mark.anyio
async def test_query_fm_registry_ranks_models_and_reports_availability(planned: Services) -> None:
    async with local_client(planned, "w1") as client:
        hits = (await ok(client, "query_fm_registry", {"keywords": "chest x-ray encoder", "limit": 3}))["hits"]
        filtered = (await ok(client, "query_fm_registry", {"modality": "pathology", "access": "gated"}))["hits"]
        bad = await error(client, "query_fm_registry", {"modality": "Xray"})
    assert hits[0]["id"] == "rad-dino" and hits[0]["why"][-1].startswith("keywords: ")
    assert hits[0]["availability"] in {"obtainable", "cached"} and "source: https://" in hits[0]["card"]
    assert filtered and all(h["availability"] in {"gated", "cached"} for h in filtered)
    assert "modality" in bad


@pytest.mark.anyio
async def test_a_keyed_release_whose_answer_was_lost_after_the_work_is_answered_again(
    planned: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server dies after the release committed and before the toolkit recorded the key (a
    fault raised there stands in for the kill): the retry must get the release, not a Conflict."""
    arguments = {"lane_id": "nnunet-3d-fullres", "idempotency_key": "release-1"}
    planned.ledger.identities.create_token("w1", "agent")
    async with local_client(planned, "w1") as client:
        await ok(client, "claim_lane", {"lane_id": "nnunet-3d-fullres"})

        def killed(*_: object) -> None:
            raise RuntimeError("the server died here")

        with monkeypatch.context() as patch:
            patch.setattr(IdempotencyKeys, "record", killed)
            died = await error(client, "release_lane", arguments)
            assert died.startswith("INTERNAL: release_lane: got a server failure (RuntimeError, ref ")
        retried = await ok(client, "release_lane", arguments)
    assert (retried["status"], retried["created"]) == ("open", False)
    assert planned.ledger.db.scalar("SELECT count(*) FROM claims WHERE released_at IS NULL") == 0
