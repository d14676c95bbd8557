"""Which queued jobs start now, and on which GPUs: pure functions of the inventory and the queue.

A request for N GPUs with M MiB free each gets one of four verdicts:

    placed      N devices not reserved by a running AMID job have ≥ M MiB free; the chosen UUIDs
    wait        it will fit once running AMID jobs end; it always stays queued
    blocked     devices exist but other users' memory (or a missing driver) leaves too little
                free now; the scheduler queues or fails it, as configured
    impossible  the machine does not have N devices with M MiB in total; it fails at once

Devices are ranked by free memory, then load, so a job lands on the emptiest, idlest cards.
Fairness: the queue is served agent by agent, the agent holding fewer GPUs (then fewer running
jobs) first; a GPU job that must `wait` holds the line for later GPU jobs, so a large request is
not starved by a stream of small ones. CPU-only jobs never wait for GPUs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from amid.server.jobs.gpu import GpuInfo

Verdict = Literal["placed", "wait", "blocked", "impossible"]
SLOT_WAIT = "waiting for a free slot: the concurrent job limit is reached"


@dataclass(frozen=True)
class Placement:
    verdict: Verdict
    gpu_uuids: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class Waiting:
    """A queued job as placement sees it."""

    job_id: str
    agent_id: str
    gpus: int
    min_free_mb: int


@dataclass
class AgentLoad:
    gpus: int = 0
    jobs: int = 0


@dataclass
class _Pool:
    """The mutable picture while one dispatch round is planned."""

    inventory: Sequence[GpuInfo]
    reserved: set[str]
    loads: dict[str, AgentLoad]
    slots: int
    unavailable_reason: str | None
    gpu_line_held_by: str | None = None
    decisions: dict[str, Placement] = field(default_factory=dict)


_NO_LOAD = AgentLoad()  # read only: an agent with nothing running
_SLOT_FULL = Placement("wait", reason=SLOT_WAIT)


def agent_loads(running: Iterable[tuple[str, int]]) -> dict[str, AgentLoad]:
    """What each agent holds now, from (agent_id, gpus) of its running jobs."""
    loads: dict[str, AgentLoad] = {}
    for agent_id, gpus in running:
        load = loads.setdefault(agent_id, AgentLoad())
        load.gpus += gpus
        load.jobs += 1
    return loads


def place(
    gpus: int,
    min_free_mb: int,
    inventory: Sequence[GpuInfo],
    reserved: Collection[str],
    unavailable_reason: str | None = None,
) -> Placement:
    """Choose `gpus` device UUIDs for one request, or say why not."""
    if gpus == 0:
        return Placement("placed")
    need = f"{gpus} GPU(s) with ≥ {min_free_mb} MiB free"
    if not inventory:
        return Placement("blocked", reason=f"needs {need}; no GPU is visible: {unavailable_reason}")
    capable = [g for g in inventory if g.memory_total_mb >= min_free_mb]
    if len(capable) < gpus:
        return Placement("impossible", reason=f"needs {need}; this machine has {_describe(inventory)}")
    free = sorted(
        (g for g in capable if g.uuid not in reserved and g.memory_free_mb >= min_free_mb),
        key=lambda g: (-g.memory_free_mb, g.utilization_pct, g.index),
    )
    if len(free) >= gpus:
        return Placement("placed", tuple(g.uuid for g in free[:gpus]))
    held = sum(1 for g in capable if g.uuid in reserved)
    if len(free) + held >= gpus:
        return Placement("wait", reason=f"waiting for {need}: {held} suitable GPU(s) are in use by AMID jobs")
    return Placement("blocked", reason=f"needs {need}; free now: {_describe(inventory, free_only=True)}")


def _describe(inventory: Sequence[GpuInfo], free_only: bool = False) -> str:
    if free_only:
        return ", ".join(f"GPU{g.index} {g.memory_free_mb} MiB" for g in inventory)
    return f"{len(inventory)} GPU(s): " + ", ".join(f"GPU{g.index} {g.memory_total_mb} MiB" for g in inventory)


def plan_dispatch(
    waiting: Sequence[Waiting],
    inventory: Sequence[GpuInfo],
    reserved: Collection[str],
    loads: Mapping[str, AgentLoad],
    slots: int,
    unavailable_reason: str | None = None,
) -> dict[str, Placement]:
    """A decision for every waiting job: start it (placed) or keep/fail it, with the reason."""
    pool = _Pool(
        inventory,
        set(reserved),
        {agent: AgentLoad(load.gpus, load.jobs) for agent, load in loads.items()},
        slots,
        unavailable_reason,
    )
    # Each agent's queue, oldest first: the fairest job is the head of the fairest agent's queue (the
    # key's load part is the agent's), so a pick costs O(agents), not O(queued jobs).
    queues: dict[str, deque[Waiting]] = {}
    for job in sorted(waiting, key=lambda w: w.job_id):
        queues.setdefault(job.agent_id, deque()).append(job)
    while queues and pool.slots > 0:  # fairness is re-ranked after every start, as loads change
        agent = min(queues, key=lambda a: _fairness_key(queues[a][0], pool.loads))
        job = queues[agent].popleft()
        if not queues[agent]:
            del queues[agent]
        pool.decisions[job.job_id] = _decide(job, pool)
    for job in waiting:
        if job.job_id not in pool.decisions:
            pool.decisions[job.job_id] = _decide(job, pool)
    return pool.decisions


def _fairness_key(job: Waiting, loads: Mapping[str, AgentLoad]) -> tuple[int, int, str]:
    load = loads.get(job.agent_id, _NO_LOAD)
    return (load.gpus, load.jobs, job.job_id)


def _decide(job: Waiting, pool: _Pool) -> Placement:
    if pool.slots <= 0:
        return _SLOT_FULL
    if job.gpus and pool.gpu_line_held_by is not None:
        # A stable text: naming the head of the line would rewrite every waiting job's state each time it moves.
        return Placement("wait", reason="waiting in line for GPUs (served fairly across agents)")
    decision = place(job.gpus, job.min_free_mb, pool.inventory, pool.reserved, pool.unavailable_reason)
    if decision.verdict == "placed":
        pool.slots -= 1
        pool.reserved.update(decision.gpu_uuids)
        load = pool.loads.setdefault(job.agent_id, AgentLoad())
        load.gpus += job.gpus
        load.jobs += 1
    elif decision.verdict == "wait":
        pool.gpu_line_held_by = job.job_id
    return decision
