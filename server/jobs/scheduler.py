"""The job scheduler: a durable queue in front of one backend (local, Ray or Slurm).

`submit` records the job (spec.json, state.json) and returns at once; a dispatcher thread starts
queued jobs when placement and the concurrency limit allow, polls running ones, and enforces time
limits the backend does not enforce itself. Every change of a job's status or reason is written
to its state.json first, then handed, in order, to `on_change` (the server mirrors it into the
ledger). At start-up the scheduler reconciles: it re-attaches to jobs that still run, collects
the outcome of those that ended while it was away, marks the ones that vanished as `lost`, and
replays every job's current state to `on_change`. No job is ever started twice.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from amid.server.errors import Conflict, NotFound, invalid, shown
from amid.server.jobs import files
from amid.server.jobs.backend import Backend, JobHandle, Observation
from amid.server.jobs.gpu import GpuInventory
from amid.server.jobs.notify import Listener, Notifier
from amid.server.jobs.placement import SLOT_WAIT, Placement, Waiting, agent_loads, place, plan_dispatch
from amid.server.jobs.spec import JobSpec, JobState
from amid.server.jobs.store import JobStore, LogTail
from amid.server.jobs.transitions import ended, observed

log = logging.getLogger(__name__)
KEEP_ENDED = 1000  # ended jobs' states kept in memory (get_job right after the end, retries)


class JobScheduler:
    def __init__(
        self,
        jobs_dir: Path,
        backend: Backend,
        inventory: GpuInventory | None,
        *,
        max_concurrent: int,
        on_change: Listener | None = None,
        queue_when_unplaceable: bool = False,
        poll_interval_s: float = 0.2,
    ) -> None:
        """`inventory` None means the backend's cluster places GPUs itself (Ray, Slurm).

        `queue_when_unplaceable`: a GPU request that no device can serve now (no GPU visible, or
        too little free memory) waits instead of failing at once.
        """
        self._store = JobStore(jobs_dir)
        self._backend = backend
        self._inventory = inventory
        self._max_concurrent = max_concurrent
        self._queue_when_unplaceable = queue_when_unplaceable
        self._poll_interval_s = poll_interval_s
        # Guards _states, _launching and _closing; re-entrant; notified on every committed change.
        self._lock = threading.Condition(threading.RLock())
        # Every unfinished job, and the most recently ended KEEP_ENDED (an ended job's state is read back
        # from its folder when asked for): about 2.7 KB a job, which held for the whole run was the
        # scheduler's memory growing with every job it ever ran (270 MB at 100,000 jobs).
        self._states: dict[str, JobState] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        # The jobs not yet ended, in submission order: what every dispatcher tick looks at, so a
        # tick costs O(live jobs), not O(every job this run ever had).
        self._live: dict[str, None] = {}
        self._by_key: dict[tuple[str, str], str] = {}  # (agent_id, idempotency_key) → job_id
        self._launching: dict[str, tuple[str, ...]] = {}
        self._closing = False
        self._wake = threading.Event()
        self._notifier = Notifier(on_change)
        self.reconcile()
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name="amid-job-dispatcher", daemon=True)
        self._dispatcher.start()

    # ---- the public API -------------------------------------------------------------------

    def submit(self, agent_id: str, spec: JobSpec) -> JobState:
        """Record a job and return its state: queued, or failed at once when it can never run here."""
        return self._submit(agent_id, spec, None, None)[0]

    def submit_keyed(self, agent_id: str, spec: JobSpec, key: str, digest: str) -> tuple[JobState, bool]:
        """`submit` once per (agent, idempotency key): the job is recorded with its key in the same
        write, so a retry after a kill at any moment, even before the ledger heard of the job, gets
        that job back (created: False), and a retry with another request (digest) is a Conflict."""
        return self._submit(agent_id, spec, key, digest)

    def _submit(self, agent_id: str, spec: JobSpec, key: str | None, digest: str | None) -> tuple[JobState, bool]:
        if not Path(spec.cwd).is_dir():
            raise invalid("cwd", spec.cwd, "an existing directory")
        refusal = self._refusal(spec)
        box = self._admit(spec)  # before any record: a job that cannot be boxed is refused, not queued
        with self._lock:
            known = None if key is None else self._by_key.get((agent_id, key))
            if known is None:
                state, created = self._create(agent_id, spec, refusal, key, digest, box), True
                sequence = self._commit(state, save=False)
            else:
                state, created = self._repeated(self._require(known), key, digest), False
                sequence = self._notifier.published
        self._wake.set()
        self._notifier.flush(sequence, timeout_s=5.0)  # the ledger holds the job before it is reported
        return state, created

    def _admit(self, spec: JobSpec) -> str:
        """The sandbox the backend runs this job in; a backend without a say runs it unconfined."""
        admit = getattr(self._backend, "admit", None)
        return "none" if admit is None else str(admit(spec))

    def _create(
        self, agent_id: str, spec: JobSpec, refusal: str | None, key: str | None, digest: str | None, box: str
    ) -> JobState:
        """The job's folder and first state; the caller holds the lock."""
        if self._closing:
            raise Conflict("the job scheduler is shutting down; submit again after the restart")
        now = files.utc_now()
        first: dict[str, Any] = {"status": "queued", "reason": "queued"}
        if refusal is not None:
            first = {"status": "failed", "ended_at": now, "reason": refusal}
        return self._store.create(
            lambda job_id: JobState(
                job_id=job_id,
                agent_id=agent_id,
                spec=spec,
                backend=self._backend.name,
                created_at=now,
                idempotency_key=key,
                request_digest=digest,
                sandbox=box,
                **first,
            )
        )

    @staticmethod
    def _repeated(state: JobState, key: str | None, digest: str | None) -> JobState:
        if state.request_digest != digest:
            raise Conflict(
                f"idempotency_key: {shown(key)} was used for job {state.job_id} with other arguments; resend "
                "the same arguments to get that job, or use a new key",
                field="idempotency_key",
            )
        return state

    def get(self, job_id: str) -> JobState:
        with self._lock:
            return self._require(job_id)

    def settled(self, job_id: str, timeout_s: float = 5.0) -> JobState:
        """The job's state once the ledger mirrors it: every change published so far was delivered
        (an agent told "succeeded" finds the same in the ledger)."""
        with self._lock:
            state, sequence = self._require(job_id), self._notifier.published
        self._notifier.flush(sequence, timeout_s=timeout_s)
        return state

    def wait(self, job_id: str, timeout_s: float) -> JobState:
        """The job's state once it has ended, or after `timeout_s`, whichever comes first."""
        if timeout_s < 0:
            raise invalid("timeout_s", timeout_s, "a number of seconds ≥ 0")
        with self._lock:
            self._lock.wait_for(lambda: self._require(job_id).is_terminal or self._closing, timeout=timeout_s)
            return self._require(job_id)

    def cancel(self, job_id: str) -> JobState:
        """Stop a job: at once if it never started, else through the backend (observed later)."""
        with self._lock:
            state = self._require(job_id)
            if state.is_terminal:
                raise Conflict(f"job_id: {job_id} has already ended ({state.status})", field="job_id")
            self._store.request_stop(job_id, "cancelled")
            if job_id in self._launching:
                return state  # the dispatcher honours stop.json right after the launch
            if state.backend_job_id is None:
                cancelled = ended(state, "cancelled", "cancelled before it started")
                self._commit(cancelled)
                return cancelled
        self._backend.cancel(self._handle(state))
        self._wake.set()
        return self.get(job_id)

    def list(self, agent_id: str | None = None) -> builtins.list[JobState]:
        """The jobs held in memory: every unfinished one and the KEEP_ENDED most recently ended (the
        ledger's jobs table, which list_jobs reads, has them all)."""
        with self._lock:
            states = [s for s in self._states.values() if agent_id is None or s.agent_id == agent_id]
        return sorted(states, key=lambda s: s.job_id)

    def gpus_here(self) -> int | None:
        """GPUs this scheduler can place jobs on; None where the backend's cluster places them (Ray, Slurm)."""
        return None if self._inventory is None else len(self._inventory.gpus())

    def log_tail(self, job_id: str, n_bytes: int = 8192) -> LogTail:
        if n_bytes < 1:
            raise invalid("n_bytes", n_bytes, "a positive number of bytes")
        state = self.get(job_id)
        if state.backend_job_id is not None and not state.is_terminal:
            self._backend.sync_logs(self._handle(state))
        return self._store.log_tail(job_id, n_bytes)

    def reconcile(self) -> None:
        """Load every job from disk, settle the unfinished ones with the backend, replay all."""
        for state in self._store.load_all():
            settled = state if state.is_terminal else self._reattached(state)
            with self._lock:
                self._commit(settled, save=settled != state)

    def close(self) -> None:
        """Stop the dispatcher and deliver pending notifications; running jobs keep running."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        self._wake.set()
        self._dispatcher.join(timeout=30)
        self._notifier.close()

    # ---- state bookkeeping ----------------------------------------------------------------

    def _require(self, job_id: str) -> JobState:
        state = self._states.get(job_id) or self._store.load(job_id)
        if state is None:
            raise NotFound(f"job_id: got {job_id!r}; expected the id of an existing job", field="job_id")
        return state

    def _commit(self, state: JobState, save: bool = True) -> int:
        """Persist and publish a change; the caller holds the lock, which orders changes."""
        if save:
            self._store.save(state)
        self._states[state.job_id] = state
        if state.is_terminal:
            self._live.pop(state.job_id, None)
            self._ended[state.job_id] = None
            while len(self._ended) > KEEP_ENDED:
                self._states.pop(self._ended.popitem(last=False)[0], None)
        else:
            self._live[state.job_id] = None
        if state.idempotency_key is not None:
            self._by_key[(state.agent_id, state.idempotency_key)] = state.job_id
        self._lock.notify_all()
        return self._notifier.publish(state)

    def _reserved(self) -> set[str]:
        """GPUs held by started or starting jobs; the caller holds the lock."""
        started = {u for s in self._live_states() for u in s.gpu_uuids}
        return started | {u for uuids in self._launching.values() for u in uuids}

    def _live_states(self) -> builtins.list[JobState]:
        """The states of the jobs not yet ended; the caller holds the lock."""
        return [self._states[job_id] for job_id in self._live]

    def _fails(self, decision: Placement) -> bool:
        blocked_fails = decision.verdict == "blocked" and not self._queue_when_unplaceable
        return decision.verdict == "impossible" or blocked_fails

    def _refusal(self, spec: JobSpec) -> str | None:
        """Why a GPU request cannot be served here (now, when such jobs do not queue), or None."""
        if self._inventory is None or spec.gpus == 0:
            return None
        with self._lock:
            reserved = self._reserved()
        inventory = self._inventory
        decision = place(spec.gpus, spec.min_free_gpu_mb, inventory.gpus(), reserved, inventory.unavailable_reason)
        return decision.reason if self._fails(decision) else None

    def _handle(self, state: JobState) -> JobHandle:
        job_dir = self._store.job_dir(state.job_id)
        return JobHandle(
            state.job_id, job_dir, state.spec, tuple(state.gpu_uuids), state.backend_job_id, state.agent_id
        )

    def _reattached(self, state: JobState) -> JobState:
        if state.backend != self._backend.name:  # the server was restarted with another backend
            return ended(
                state, "lost", f"submitted to the {state.backend} backend; this server uses {self._backend.name}"
            )
        observation = self._backend.reattach(self._handle(state))
        if observation is not None:
            return observed(state, observation, self._store.stop_cause(state.job_id))
        if state.backend_job_id is None:
            return state  # never started: it stays in the queue
        return ended(state, "lost", f"the {state.backend} backend has no record of {state.backend_job_id}")

    def _apply(self, job_id: str, seen: Observation, extra: dict[str, object] | None = None) -> JobState:
        with self._lock:
            current = self._states[job_id]
            if current.is_terminal:
                return current
            updated = observed(current.model_copy(update=extra or {}), seen, self._store.stop_cause(job_id))
            if updated != current:
                self._commit(updated)
            return updated

    # ---- the dispatcher -------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while not self._closing:
            self._wake.wait(self._poll_interval_s)
            self._wake.clear()
            if self._closing:
                return
            try:
                self._poll_active()
                self._dispatch_queued()
            except Exception:  # one bad tick must not stop the queue for good
                log.exception("job dispatcher tick failed")

    def _poll_active(self) -> None:
        with self._lock:
            active = [s for s in self._live_states() if s.backend_job_id is not None]
        for state in active:
            try:
                seen = self._backend.poll(self._handle(state))
                if seen.status not in ("queued", "running"):
                    self._backend.sync_logs(self._handle(state))
                self._enforce_time_limit(self._apply(state.job_id, seen))
            except Exception:  # an engine hiccup on one job must not starve the others
                log.exception("polling job %s failed", state.job_id)

    def _enforce_time_limit(self, state: JobState) -> None:
        if self._backend.enforces_time_limit or state.status != "running" or state.started_at is None:
            return
        elapsed = files.seconds_between(state.started_at, files.utc_now())
        if elapsed >= state.spec.time_limit_s and self._store.stop_cause(state.job_id) is None:
            self._store.request_stop(state.job_id, "timed_out")
            self._backend.cancel(self._handle(state))

    def _dispatch_queued(self) -> None:
        with self._lock:
            live = self._live_states()
            waiting = [
                s for s in live if s.status == "queued" and s.backend_job_id is None and s.job_id not in self._launching
            ]
            active = [s for s in live if s.backend_job_id is not None]
            reserved = self._reserved()
            slots = self._max_concurrent - len(active) - len(self._launching)
        if slots <= 0:  # nothing starts this tick: only the jobs not yet told why they wait need a decision
            waiting = [s for s in waiting if s.reason != SLOT_WAIT]
        if not waiting:
            return
        places = self._inventory is not None
        requests = [
            Waiting(s.job_id, s.agent_id, s.spec.gpus if places else 0, s.spec.min_free_gpu_mb) for s in waiting
        ]
        inventory = self._inventory.gpus() if self._inventory and any(r.gpus for r in requests) else []
        reason = self._inventory.unavailable_reason if self._inventory else None
        loads = agent_loads((s.agent_id, len(s.gpu_uuids) or s.spec.gpus) for s in active)
        decisions = plan_dispatch(requests, inventory, reserved, loads, slots, reason)
        told = {s.job_id: s.reason for s in waiting}
        for job_id, decision in decisions.items():
            if decision.verdict != "placed" and not self._fails(decision) and decision.reason == told[job_id]:
                continue  # it waits for the reason it already shows: nothing to write
            self._act_on(job_id, decision)

    def _act_on(self, job_id: str, decision: Placement) -> None:
        if decision.verdict == "placed":
            self._launch(job_id, decision.gpu_uuids)
            return
        fails = self._fails(decision)
        with self._lock:
            current = self._states[job_id]
            if current.status != "queued" or current.backend_job_id is not None:
                return
            if fails:
                self._commit(ended(current, "failed", decision.reason))
            elif current.reason != decision.reason:
                self._commit(current.model_copy(update={"reason": decision.reason}))

    def _launch(self, job_id: str, gpu_uuids: tuple[str, ...]) -> None:
        with self._lock:
            current = self._states[job_id]
            if current.status != "queued" or current.backend_job_id is not None:
                return  # cancelled since the plan was made
            self._launching[job_id] = gpu_uuids
        handle = JobHandle(job_id, self._store.job_dir(job_id), current.spec, gpu_uuids, agent_id=current.agent_id)
        try:
            seen = self._backend.start(handle)
        except Exception as exc:
            seen = Observation("failed", reason=f"could not start on the {self._backend.name} backend: {exc}")
        with self._lock:  # one step, so a cancel cannot slip between "launching" and "started"
            del self._launching[job_id]
            updated = self._apply(job_id, seen, extra={"gpu_uuids": list(gpu_uuids)})
        if not updated.is_terminal and self._store.stop_cause(job_id) is not None:
            self._backend.cancel(self._handle(updated))
