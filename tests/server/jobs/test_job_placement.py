"""Placement on an injected inventory of four GPUs (NVML is the one faked edge: no GPU here)."""

from __future__ import annotations

from pathlib import Path

from amid.server.jobs.gpu import StaticInventory
from amid.server.jobs.placement import AgentLoad, Waiting, place, plan_dispatch
from tests.server.jobs.helpers import SchedulerFactory, eventually, gpu, python_job, state_when, wait_status

# Free memory 20, 8, 20, 2 GB; the two emptiest differ in load.
FOUR = [gpu(0, 20_000, load_pct=70), gpu(1, 8_000), gpu(2, 20_000, load_pct=5), gpu(3, 2_000)]
UUID = {g.index: g.uuid for g in FOUR}


def test_the_emptiest_then_idlest_gpus_are_chosen() -> None:
    assert place(1, 0, FOUR, reserved=()).gpu_uuids == (UUID[2],)
    assert place(3, 0, FOUR, reserved=()).gpu_uuids == (UUID[2], UUID[0], UUID[1])


def test_gpus_without_enough_free_memory_are_skipped() -> None:
    assert place(2, 10_000, FOUR, reserved=()).gpu_uuids == (UUID[2], UUID[0])
    assert place(1, 5_000, FOUR, reserved={UUID[0], UUID[2]}).gpu_uuids == (UUID[1],)


def test_gpus_reserved_by_running_jobs_are_not_shared() -> None:
    decision = place(1, 10_000, FOUR, reserved={UUID[0], UUID[2]})
    assert decision.verdict == "wait"
    assert "in use by AMID jobs" in decision.reason


def test_a_request_no_free_gpu_can_serve_now_is_blocked_with_the_free_memory_listed() -> None:
    decision = place(1, 21_000, FOUR, reserved=())
    assert decision.verdict == "blocked"
    assert "GPU0 20000 MiB" in decision.reason and "GPU3 2000 MiB" in decision.reason


def test_a_request_larger_than_the_machine_is_impossible() -> None:
    assert place(5, 0, FOUR, reserved=()).verdict == "impossible"
    assert place(1, 30_000, FOUR, reserved=()).verdict == "impossible"


def test_a_gpu_request_on_a_machine_without_gpus_names_the_cause() -> None:
    decision = place(1, 0, [], reserved=(), unavailable_reason="NVML is unavailable")
    assert decision.verdict == "blocked" and "NVML is unavailable" in decision.reason


def test_an_agent_holding_more_gpus_yields_to_one_holding_fewer() -> None:
    greedy = Waiting("job-1", "greedy", gpus=1, min_free_mb=0)
    modest = Waiting("job-2", "modest", gpus=1, min_free_mb=0)
    loads = {"greedy": AgentLoad(gpus=3, jobs=3)}
    decisions = plan_dispatch([greedy, modest], FOUR, {UUID[0], UUID[1], UUID[2]}, loads, slots=4)
    assert decisions["job-2"].gpu_uuids == (UUID[3],)
    assert decisions["job-1"].verdict == "wait"


def test_a_waiting_gpu_job_holds_the_line_but_cpu_jobs_still_start() -> None:
    big = Waiting("job-1", "a", gpus=4, min_free_mb=0)
    small = Waiting("job-2", "b", gpus=1, min_free_mb=0)
    cpu = Waiting("job-3", "b", gpus=0, min_free_mb=0)
    # b already holds GPU0, so a's big request goes first and must wait for it.
    decisions = plan_dispatch([big, small, cpu], FOUR, {UUID[0]}, {"b": AgentLoad(1, 1)}, slots=4)
    assert decisions["job-1"].verdict == "wait"
    assert decisions["job-2"].verdict == "wait" and "waiting in line" in decisions["job-2"].reason
    assert decisions["job-3"].verdict == "placed"


def test_no_job_starts_beyond_the_concurrency_limit() -> None:
    jobs = [Waiting(f"job-{i}", "a", gpus=0, min_free_mb=0) for i in range(3)]
    decisions = plan_dispatch(jobs, [], set(), {}, slots=2)
    assert [d.verdict for d in decisions.values()] == ["placed", "placed", "wait"]


PRINT_PINS = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['CUDA_DEVICE_ORDER'])"


def test_a_job_is_pinned_by_uuid_in_pci_bus_order(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(StaticInventory(FOUR))
    state = wait_status(scheduler, scheduler.submit("a", python_job(tmp_path, PRINT_PINS, gpus=2)).job_id)
    assert state.status == "succeeded" and state.gpu_uuids == [UUID[2], UUID[0]]
    assert scheduler.log_tail(state.job_id).stdout == f"{UUID[2]},{UUID[0]} PCI_BUS_ID\n"


def test_a_job_that_fits_nowhere_fails_at_once_by_default(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(StaticInventory(FOUR))
    state = scheduler.submit("a", python_job(tmp_path, "pass", gpus=1, min_free_gpu_mb=21_000))
    assert state.status == "failed"
    assert "≥ 21000 MiB free" in (state.reason or "")


def test_a_job_that_fits_nowhere_waits_when_configured(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(StaticInventory(FOUR), queue_when_unplaceable=True)
    job_id = scheduler.submit("a", python_job(tmp_path, "pass", gpus=1, min_free_gpu_mb=21_000)).job_id
    waiting = state_when(scheduler, job_id, lambda s: s.reason != "queued", "a queue reason")
    assert waiting.status == "queued" and "free now" in (waiting.reason or "")
    assert scheduler.wait(job_id, 0.3).status == "queued"


def test_a_job_waits_for_gpus_held_by_other_jobs_then_runs(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(StaticInventory(FOUR))
    release = tmp_path / "release"
    hold = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.02)"
    holder = scheduler.submit("a", python_job(tmp_path, hold, gpus=2, min_free_gpu_mb=10_000))
    eventually(lambda: scheduler.get(holder.job_id).status == "running", what="the holder to run")
    waiter = scheduler.submit("b", python_job(tmp_path, "pass", gpus=1, min_free_gpu_mb=10_000))
    eventually(lambda: "in use by AMID jobs" in (scheduler.get(waiter.job_id).reason or ""), what="wait reason")
    release.touch()
    assert wait_status(scheduler, waiter.job_id).status == "succeeded"
    assert scheduler.get(waiter.job_id).gpu_uuids[0] in (UUID[0], UUID[2])


def test_a_freed_gpu_goes_to_the_agent_holding_fewer(make_scheduler: SchedulerFactory, tmp_path: Path) -> None:
    scheduler = make_scheduler(StaticInventory(FOUR))

    def holder(name: str, agent: str) -> str:
        code = f"import os, time\nwhile not os.path.exists({str(tmp_path / name)!r}): time.sleep(0.02)"
        return scheduler.submit(agent, python_job(tmp_path, code, gpus=1)).job_id

    holders = [holder(f"release-{i}", "greedy") for i in range(4)]
    eventually(lambda: all(scheduler.get(j).status == "running" for j in holders), what="four holders")
    greedy_next, modest = holder("release-g", "greedy"), holder("release-m", "modest")
    (tmp_path / "release-0").touch()
    eventually(lambda: scheduler.get(modest).status == "running", what="the modest agent's job to start")
    assert scheduler.get(greedy_next).status == "queued"
    for name in ("release-1", "release-g", "release-m"):
        (tmp_path / name).touch()
    assert wait_status(scheduler, greedy_next).status == "succeeded"
