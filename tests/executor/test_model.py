"""Executor against a pure-Python model, on random programs (hypothesis).

A program runs on ``Executor(max_workers=W, max_queued=Q)`` with ``W`` in
1..3 or ``None`` and ``Q`` ``None`` or 1..3 (the constructor refuses 0: a
``submit`` waits while ``Q`` live jobs are queued).  Each job is made by one
step and has a kind: it blocks on an ``anyio.Event`` of its own until the
program releases it, or not; it then returns ``("value", i)`` or raises
``ValueError("job i")``; a blocking job may catch the cancellation of
``handle.cancel()`` and return ``("caught", i)``.  Steps refer to jobs,
submitters and joins by an index taken modulo the candidates:

* ``spawn(kind)``: ``ex.spawn`` from the test task (never waits, ignores
  ``max_queued``);
* ``submit(kind)``: a helper task runs ``await ex.submit(...)``, which waits
  while ``Q`` live jobs are queued or other submitters wait, then passes a
  checkpoint inside its own cancel scope;
* ``spawn_many(kinds)``: two or three jobs in one ``ex.spawn_many``;
* ``spawn_cancel(kind)``: ``ex.spawn`` and ``handle.cancel()`` in one
  synchronous step: the job never runs.  Handed to an idle worker, it is
  settled there and the worker stays idle; queued, it leaves the queue
  (room for a waiting submitter), and a worker started for it stays, idle;
* ``release(k)``: a blocking job's event is set (before it started, too);
* ``cancel(k)``: ``handle.cancel()`` on any job with a handle (queued,
  running or settled: its return value is checked);
* ``cancel_submit(k)``: a waiting submitter's cancel scope is cancelled;
* ``join(k)``: a helper task awaits a handle in a cancel scope of its own;
  ``cancel_join(k)`` cancels a waiting one;
* ``retrieve(k, result)``: the test task calls ``result()`` or
  ``exception()`` (``RuntimeError`` before the job settled);
* ``release_cancel(k, cancel_first)``: a running job is released and
  cancelled in one synchronous step: the first of the two wins;
* ``room_cancel_submit(k, room_first)``: a queued job is cancelled (room for
  the head submitter) and the head submitter's scope is cancelled, in
  either order: room first, the submit returns its handle and the
  cancellation is raised at its next checkpoint; cancel first, it spawned
  nothing and the room goes to the next submitter (with the generic
  waiter, which learns of a cancellation only when the task runs, the
  cancelled submit is granted as in the first order);
* ``cancel_queued_join(k, join_first)``: a queued job with a waiting join is
  cancelled and the join's scope cancelled, in either order: the join gets
  ``JobCancelled`` if the job settled first, else it is cancelled.

After every step all tasks run until blocked (``settle()``), and the model
replays the step: workers take queued jobs in spawn order, a worker is
started when a job is queued with none idle (up to ``W``), submitters are
admitted in arrival order when a worker takes a queued job or a queued job
is cancelled.  Checked against it: which jobs ran (each at most once, in
spawn order except for the jobs of a ``spawn_many``, handed to several
workers at once, which start in any order), never more than ``W`` at once,
never a job cancelled before it started; ``statistics()``; each handle's
``done()``, ``cancelled()`` and outcome; what each job saw (returned,
raised, cancelled, caught); each submitter's and join's outcome; submitted
jobs queued never more than ``Q``.  At the end every event is set and the
block is left: it must exit (no deadlock), every job settled, every
submitter served, and the exit must raise exactly the errors nobody
retrieved (on Trio, a join woken by the last jobs may retrieve its error
after the exit collected it: those errors may or may not be in the group).

Hypothesis cannot run inside a running event loop, so each test is a plain
function that calls ``anyio.run`` once per example, on each backend of
``tests/conftest.py``'s list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from anyio_prims import Executor, JobCancelled, JoinHandle
from anyio_prims._core._backend import FORCE_GENERIC

from .._tasks import settle
from ..conftest import _selected
from ._models import PHASES, run_block, run_with_helpers

MAX_JOBS = 12
MAX_JOINS = 12

Step = tuple[Any, ...]
#: (blocks, raises, catches the cancellation)
Kind = tuple[bool, bool, bool]
Result = tuple[str, int]

kinds: st.SearchStrategy[Kind] = st.tuples(
    st.sampled_from([True, True, True, False]), st.booleans(), st.booleans()
)
picks = st.integers(0, 15)
#: Steps that make a job: half of all steps, so that most programs keep the
#: workers busy and the queue full (spawns past MAX_JOBS are skipped).
making: st.SearchStrategy[Step] = st.one_of(
    st.tuples(st.just("spawn"), kinds),
    st.tuples(st.just("submit"), kinds),
    st.tuples(st.just("submit"), kinds),
    st.tuples(st.just("spawn_many"), st.lists(kinds, min_size=2, max_size=3)),
    st.tuples(st.just("spawn_cancel"), kinds),
)
acting: st.SearchStrategy[Step] = st.one_of(
    st.tuples(st.just("release"), picks),
    st.tuples(st.just("release"), picks),
    st.tuples(st.just("cancel"), picks),
    st.tuples(st.just("cancel_submit"), picks),
    st.tuples(st.just("join"), picks),
    st.tuples(st.just("join"), picks),
    st.tuples(st.just("cancel_join"), picks),
    st.tuples(st.just("retrieve"), picks, st.booleans()),
    st.tuples(st.just("release_cancel"), picks, st.booleans()),
    # The races: skipped unless a submitter waits (a join waits) on a
    # queued job, so weighted up.
    st.tuples(st.just("room_cancel_submit"), picks, st.booleans()),
    st.tuples(st.just("room_cancel_submit"), picks, st.booleans()),
    st.tuples(st.just("cancel_queued_join"), picks, st.booleans()),
    st.tuples(st.just("cancel_queued_join"), picks, st.booleans()),
)
steps: st.SearchStrategy[Step] = st.one_of(making, acting)
programs = st.lists(steps, min_size=10, max_size=40)
max_workers_values = st.sampled_from([1, 1, 2, 2, 3, None])
max_queued_values = st.sampled_from([None, 1, 1, 2, 3])

UNSETTLED = ("submitting", "queued", "running")
SETTLED = ("succeeded", "failed", "cancelled")


# -- the model -----------------------------------------------------------------


@dataclass
class MJob:
    blocks: bool
    raises: bool
    catches: bool
    #: submitting (a submitter waits with it), queued, running, succeeded,
    #: failed, cancelled, or dropped (its submit was cancelled)
    state: str
    released: bool = False
    #: how a running job will end: "release" or "cancel", whichever came first
    finish_as: str | None = None
    started: bool = False
    retrieved: bool = False
    value: Any = None
    #: failed in the final phase with a join waiting for it (see the docstring)
    late_join_failure: bool = False

    def has_handle(self) -> bool:
        return self.state not in ("submitting", "dropped")

    def ended(self) -> str | None:
        """What the job itself saw, as ``Jobs.job`` records it."""
        if self.state == "succeeded":
            return "caught" if self.value[0] == "caught" else "returned"
        if self.state == "failed":
            return "raised"
        if self.state == "cancelled" and self.started:
            return "cancelled"
        return None


@dataclass
class MSubmitter:
    #: waiting, spawned, spawned_then_cancelled or cancelled
    outcome: str = "waiting"
    #: generic waiter: cancelled, and its task has not run yet
    cancel_pending: bool = False


@dataclass
class MJoin:
    job: int
    outcome: tuple[Any, ...] | None = None


@dataclass
class Model:
    max_workers: int | None
    max_queued: int | None
    native: bool
    jobs: list[MJob] = field(default_factory=list)
    queue: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    workers: int = 0
    #: jobs whose submitter waits, in arrival order
    submitters: list[int] = field(default_factory=list)
    subs: dict[int, MSubmitter] = field(default_factory=dict)
    joins: list[MJoin] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    #: submit helpers started in this step, not yet run
    arrivals: list[int] = field(default_factory=list)
    final: bool = False

    def new_job(self, kind: Kind, state: str) -> int:
        self.jobs.append(MJob(*kind, state=state))
        return len(self.jobs) - 1

    def free(self) -> int:
        return self.workers - len(self.running)

    def enqueue(self, i: int) -> None:
        # spawn(): straight to an idle worker, else the tail of the queue.
        self.jobs[i].state = "queued"
        if self.free() > 0 and not self.queue:
            self.start(i)
        else:
            self.queue.append(i)

    def start(self, i: int) -> None:
        job = self.jobs[i]
        job.state = "running"
        job.started = True
        self.running.append(i)
        self.started.append(i)
        if not job.blocks or job.released:
            job.finish_as = "release"

    def admit(self) -> None:
        # Room in the queue (a worker took a job, a queued job was cancelled):
        # the head submitter spawns its job.
        if (
            self.max_queued is None
            or not self.submitters
            or len(self.queue) >= self.max_queued
        ):
            return
        i = self.submitters.pop(0)
        sub = self.subs[i]
        if sub.cancel_pending:
            event("a cancelled submit was granted before its task ran (generic)")
            sub.outcome = "spawned_then_cancelled"
        else:
            sub.outcome = "spawned"
        event("a waiting submitter was admitted")
        self.enqueue(i)

    def arrive(self, i: int) -> None:
        # The submit helper runs submit().
        q = self.max_queued
        if q is None or (len(self.queue) < q and not self.submitters):
            self.subs[i].outcome = "spawned"
            self.enqueue(i)
        else:
            event("a submit waited for room")
            self.jobs[i].state = "submitting"
            self.submitters.append(i)

    def settle(self, i: int, state: str, value: Any = None) -> None:
        job = self.jobs[i]
        job.state = state
        job.value = value
        for join in self.joins:
            if join.job == i and join.outcome is None:
                join.outcome = self.join_outcome(i)
                if state == "failed" and self.final:
                    job.late_join_failure = True

    def join_outcome(self, i: int) -> tuple[Any, ...]:
        job = self.jobs[i]
        if job.state == "succeeded":
            return ("returned", job.value)
        if job.state == "failed":
            job.retrieved = True
            return ("raised", job.value)
        return ("job_cancelled",)  # cancelled

    def finish(self, i: int) -> None:
        job = self.jobs[i]
        self.running.remove(i)
        if job.finish_as == "cancel":
            if job.catches:
                self.settle(i, "succeeded", ("caught", i))
            else:
                self.settle(i, "cancelled")
        elif job.raises:
            self.settle(i, "failed", f"job {i}")
        else:
            self.settle(i, "succeeded", ("value", i))

    def drain(self) -> None:
        """Let every task run until all are blocked."""
        for i in [s for s in self.submitters if self.subs[s].cancel_pending]:
            self.submitters.remove(i)
            self.drop(i)
        while True:
            if self.arrivals:
                self.arrive(self.arrivals.pop(0))
                continue
            ready = [i for i in self.running if self.jobs[i].finish_as is not None]
            if ready:
                # Its worker takes the next queued job at once, before any
                # other worker runs.
                self.finish(ready[0])
                if self.queue:
                    self.take()
                continue
            if self.queue and self.free() > 0:
                self.take()
                continue
            if self.queue and (
                self.max_workers is None or self.workers < self.max_workers
            ):
                self.workers += 1
                continue
            return

    def take(self) -> None:
        # A worker takes the head of the queue; it holds the job before it
        # admits a submitter, so the submitter's job is queued behind.
        self.start(self.queue.pop(0))
        self.admit()

    def drop(self, i: int) -> None:
        self.subs[i].outcome = "cancelled"
        self.jobs[i].state = "dropped"

    # The steps' synchronous parts.

    def cancel(self, i: int) -> bool:
        job = self.jobs[i]
        if job.state == "queued":
            event("cancelled a queued job")
            self.queue.remove(i)
            self.admit()
            self.settle(i, "cancelled")
            return True
        if job.state == "running":
            event("cancelled a running job")
            if job.finish_as is None:
                job.finish_as = "cancel"
            return True
        event("cancelled a settled job")
        return False

    def spawn_cancel(self, i: int) -> None:
        if self.free() > 0 and not self.queue:
            event("cancelled a job handed to an idle worker")
            self.settle(i, "cancelled")
            return
        event("cancelled a job just queued")
        # spawn() starts a worker for a queued job, up to max_workers (after
        # settle() none is starting); the worker stays, idle.
        if self.max_workers is None or self.workers < self.max_workers:
            self.workers += 1
        self.jobs[i].state = "queued"
        self.queue.append(i)
        assert self.cancel(i)

    def release(self, i: int) -> None:
        job = self.jobs[i]
        job.released = True
        if job.state == "running" and job.finish_as is None:
            job.finish_as = "release"

    def cancel_submitter(self, i: int) -> None:
        sub = self.subs[i]
        if sub.outcome == "spawned":  # admitted in this step, not run yet
            event("a submit returned its handle as it was cancelled")
            sub.outcome = "spawned_then_cancelled"
        elif self.native:
            self.submitters.remove(i)
            self.drop(i)
        else:
            sub.cancel_pending = True

    def cancel_join(self, n: int) -> None:
        join = self.joins[n]
        if join.outcome is None:
            event("a join was cancelled")
            join.outcome = ("cancelled",)

    def retrieve(self, i: int, use_result: bool) -> tuple[Any, ...]:
        job = self.jobs[i]
        if job.state in UNSETTLED:
            return ("RuntimeError",)
        if job.state == "cancelled":
            return ("JobCancelled",)
        if job.state == "succeeded":
            return ("returned", job.value if use_result else None)
        job.retrieved = True
        return ("raised", job.value) if use_result else ("exception", job.value)

    def release_all(self) -> None:
        self.final = True
        for i in range(len(self.jobs)):
            if self.jobs[i].state in UNSETTLED:
                self.release(i)

    def live_submitters(self) -> list[int]:
        return [i for i in self.submitters if not self.subs[i].cancel_pending]


# -- the real thing --------------------------------------------------------------


@dataclass
class JobRecord:
    blocks: bool
    raises: bool
    catches: bool
    event: anyio.Event = field(default_factory=anyio.Event)
    runs: int = 0
    ended: str | None = None


@dataclass
class SubmitterRecord:
    scope: anyio.CancelScope | None = None
    outcome: str = "waiting"


@dataclass
class JoinRecord:
    job: int
    scope: anyio.CancelScope | None = None
    outcome: tuple[Any, ...] | None = None


class Jobs:
    """The jobs, the helper tasks and what they saw."""

    def __init__(self, ex: Executor, helpers: anyio.abc.TaskGroup) -> None:
        self.ex = ex
        self.helpers = helpers
        self.jobs: list[JobRecord] = []
        self.handles: dict[int, JoinHandle[Result]] = {}
        self.subs: dict[int, SubmitterRecord] = {}
        self.joins: list[JoinRecord] = []
        self.starts: list[int] = []
        self.running = 0
        self.peak = 0

    def new_job(self, kind: Kind) -> int:
        self.jobs.append(JobRecord(*kind))
        return len(self.jobs) - 1

    async def job(self, i: int) -> Result:
        rec = self.jobs[i]
        rec.runs += 1
        self.starts.append(i)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if rec.blocks:
                try:
                    await rec.event.wait()
                except anyio.get_cancelled_exc_class():
                    if rec.catches:
                        rec.ended = "caught"
                        return ("caught", i)
                    rec.ended = "cancelled"
                    raise
            if rec.raises:
                rec.ended = "raised"
                raise ValueError(f"job {i}")
            rec.ended = "returned"
            return ("value", i)
        finally:
            self.running -= 1

    async def submit(self, i: int) -> None:
        rec = self.subs[i] = SubmitterRecord()
        handle = None
        with anyio.CancelScope() as scope:
            rec.scope = scope
            try:
                handle = await self.ex.submit(self.job, i)
            except Exception as exc:  # a mismatch for check(), not a crash
                rec.outcome = f"raised {exc!r}"
                return
            self.handles[i] = handle
            rec.outcome = "spawned"
            await anyio.lowlevel.checkpoint()
        if scope.cancelled_caught:
            rec.outcome = "cancelled" if handle is None else "spawned_then_cancelled"

    async def join(self, n: int) -> None:
        rec = self.joins[n]
        with anyio.CancelScope() as scope:
            rec.scope = scope
            try:
                value = await self.handles[rec.job]
            except JobCancelled:
                rec.outcome = ("job_cancelled",)
            except ValueError as exc:
                rec.outcome = ("raised", str(exc))
            except Exception as exc:  # a mismatch for check(), not a crash
                rec.outcome = ("unexpected", repr(exc))
            else:
                rec.outcome = ("returned", value)
        if scope.cancelled_caught:
            assert rec.outcome is None
            rec.outcome = ("cancelled",)

    def retrieve(self, i: int, use_result: bool) -> tuple[Any, ...]:
        handle = self.handles[i]
        try:
            if use_result:
                return ("returned", handle.result())
            exc = handle.exception()
        except RuntimeError:
            return ("RuntimeError",)
        except JobCancelled:
            return ("JobCancelled",)
        except ValueError as exc:
            return ("raised", str(exc))
        if exc is None:
            return ("returned", None)
        assert type(exc) is ValueError
        return ("exception", str(exc))


def check_handles(jobs: Jobs, model: Model) -> None:
    """Each handle's state and outcome, without retrieving any error."""
    assert set(jobs.handles) == {
        i for i, job in enumerate(model.jobs) if job.has_handle()
    }
    for i, handle in jobs.handles.items():
        job = model.jobs[i]
        assert handle.done() == (job.state in SETTLED), (i, job)
        assert handle.cancelled() == (job.state == "cancelled"), (i, job)
        if job.state != "failed":  # result() would retrieve the error
            assert jobs.retrieve(i, True) == model.retrieve(i, True), (i, job)


def check(
    jobs: Jobs,
    model: Model,
    loose_from: int | None,
    workers_before: int | None,
    spawned: int = 0,
) -> None:
    """The executor and the tasks against the model, after a step."""
    # Starts: each job once, in spawn order (``loose_from``: the jobs
    # started in this step may start in any order).
    assert len(jobs.starts) == len(set(jobs.starts)), jobs.starts
    if loose_from is None:
        assert jobs.starts == model.started
    else:
        assert jobs.starts[:loose_from] == model.started[:loose_from]
        assert sorted(jobs.starts[loose_from:]) == sorted(model.started[loose_from:])
        model.started[loose_from:] = jobs.starts[loose_from:]
    assert jobs.running == len(model.running)
    limit = model.max_workers
    assert limit is None or jobs.peak <= limit, (jobs.peak, limit)

    stats = jobs.ex.statistics()
    assert stats.max_workers == model.max_workers
    if workers_before is not None:
        # spawn_many hands jobs to several workers at once, and how many
        # workers the growth rule starts then depends on which runs first:
        # check the bounds it must keep and go on with what it did.
        assert stats.workers >= max(workers_before, len(model.running))
        assert stats.workers <= workers_before + spawned  # one per job at most
        assert limit is None or stats.workers <= limit
        if model.queue:
            assert stats.workers == limit
        model.workers = stats.workers
    assert stats.workers == model.workers
    assert stats.idle_workers == model.free()
    assert stats.jobs_queued == len(model.queue)
    assert stats.jobs_pending == len(model.queue) + len(model.running)

    for i, rec in enumerate(jobs.jobs):
        job = model.jobs[i]
        assert rec.runs == int(job.started), (i, job)
        assert rec.ended == job.ended(), (i, job)
    check_handles(jobs, model)

    real_subs = {i: rec.outcome for i, rec in jobs.subs.items()}
    assert real_subs == {i: sub.outcome for i, sub in model.subs.items()}
    assert [j.outcome for j in jobs.joins] == [j.outcome for j in model.joins]
    if model.max_queued is not None:
        # Submitted jobs never fill the queue past max_queued (spawn may).
        queued = [
            i
            for i, handle in jobs.handles.items()
            if i in jobs.subs and not handle.done() and i not in jobs.starts
        ]
        assert len(queued) <= model.max_queued, queued


def scope_of(record: SubmitterRecord | JoinRecord) -> anyio.CancelScope:
    """The cancel scope a waiting submitter or join entered."""
    assert record.scope is not None
    return record.scope


def pick(candidates: list[int], k: int) -> int | None:
    return candidates[k % len(candidates)] if candidates else None


async def run_steps(jobs: Jobs, model: Model, program: list[Step]) -> None:
    ex = jobs.ex
    i: int | None
    n: int | None
    for step in program:
        kind = step[0]
        loose_from: int | None = None
        workers_before: int | None = None
        spawned = 0
        with_handle = [i for i, job in enumerate(model.jobs) if job.has_handle()]
        if kind in ("spawn", "submit"):
            if len(model.jobs) >= MAX_JOBS:
                continue
            i = jobs.new_job(step[1])
            model.new_job(step[1], "submitting")
            if kind == "spawn":
                jobs.handles[i] = ex.spawn(jobs.job, i)
                model.enqueue(i)
            else:
                model.subs[i] = MSubmitter()
                model.arrivals.append(i)
                jobs.helpers.start_soon(jobs.submit, i)
        elif kind == "spawn_cancel":
            if len(model.jobs) >= MAX_JOBS:
                continue
            i = jobs.new_job(step[1])
            model.new_job(step[1], "submitting")
            jobs.handles[i] = ex.spawn(jobs.job, i)
            assert jobs.handles[i].cancel()
            model.spawn_cancel(i)
        elif kind == "spawn_many":
            if len(model.jobs) + len(step[1]) > MAX_JOBS:
                continue
            ids = [jobs.new_job(k) for k in step[1]]
            for k in step[1]:
                model.new_job(k, "submitting")
            handles = ex.spawn_many(jobs.job, [(i,) for i in ids])
            assert len(handles) == len(ids)
            jobs.handles.update(zip(ids, handles, strict=True))
            if model.max_workers != 1:
                loose_from = len(model.started)
                workers_before = model.workers
                spawned = len(ids)
            for i in ids:
                model.enqueue(i)
        elif kind == "release":
            i = pick(
                [
                    i
                    for i, job in enumerate(model.jobs)
                    if job.blocks
                    and not job.released
                    and job.state in UNSETTLED
                    and job.finish_as is None
                ],
                step[1],
            )
            if i is None:
                continue
            if model.jobs[i].state != "running":
                event("released a job before it started")
            jobs.jobs[i].event.set()
            model.release(i)
        elif kind == "cancel":
            i = pick(with_handle, step[1])
            if i is None:
                continue
            expected = model.cancel(i)
            assert jobs.handles[i].cancel() == expected
        elif kind == "cancel_submit":
            i = pick(model.live_submitters(), step[1])
            if i is None:
                continue
            scope_of(jobs.subs[i]).cancel()
            model.cancel_submitter(i)
        elif kind == "join":
            i = pick(with_handle, step[1])
            if i is None or len(model.joins) >= MAX_JOINS:
                continue
            jobs.joins.append(JoinRecord(i))
            model.joins.append(MJoin(i))
            if model.jobs[i].state in SETTLED:
                model.joins[-1].outcome = model.join_outcome(i)
            else:
                event("a join waited")
            jobs.helpers.start_soon(jobs.join, len(jobs.joins) - 1)
        elif kind == "cancel_join":
            n = pick(
                [n for n, j in enumerate(model.joins) if j.outcome is None], step[1]
            )
            if n is None:
                continue
            scope_of(jobs.joins[n]).cancel()
            model.cancel_join(n)
        elif kind == "retrieve":
            i = pick(with_handle, step[1])
            if i is None:
                continue
            _, _, use_result = step
            assert jobs.retrieve(i, use_result) == model.retrieve(i, use_result)
        elif kind == "release_cancel":
            _, k, cancel_first = step
            i = pick(
                [
                    i
                    for i in model.running
                    if model.jobs[i].blocks and model.jobs[i].finish_as is None
                ],
                k,
            )
            if i is None:
                continue
            event(f"released and cancelled a running job, cancel first: {cancel_first}")
            if cancel_first:
                assert jobs.handles[i].cancel()
                jobs.jobs[i].event.set()
                model.cancel(i)
                model.release(i)
            else:
                jobs.jobs[i].event.set()
                assert jobs.handles[i].cancel()
                model.release(i)
                model.cancel(i)
        elif kind == "room_cancel_submit":
            _, k, room_first = step
            i = pick(list(model.queue), k)
            waiting = model.live_submitters()
            if i is None or not waiting:
                continue
            s = waiting[0]
            scope = scope_of(jobs.subs[s])
            event(
                f"made room and cancelled the head submitter, room first: {room_first}"
            )
            if room_first:
                assert jobs.handles[i].cancel()
                scope.cancel()
                model.cancel(i)
                model.cancel_submitter(s)
            else:
                scope.cancel()
                assert jobs.handles[i].cancel()
                model.cancel_submitter(s)
                model.cancel(i)
        else:  # cancel_queued_join
            _, k, join_first = step
            pairs = [
                (j.job, n)
                for n, j in enumerate(model.joins)
                if j.outcome is None and model.jobs[j.job].state == "queued"
            ]
            if not pairs:
                continue
            i, n = pairs[k % len(pairs)]
            scope = scope_of(jobs.joins[n])
            event(f"cancelled a queued job and a join of it, join first: {join_first}")
            if join_first:
                scope.cancel()
                assert jobs.handles[i].cancel()
                model.cancel_join(n)
                model.cancel(i)
            else:
                assert jobs.handles[i].cancel()
                scope.cancel()
                model.cancel(i)
                model.cancel_join(n)
        await settle()
        model.drain()
        check(jobs, model, loose_from, workers_before, spawned)


async def run_checked(
    backend: str,
    model: Model,
    program: list[Step],
    helpers: anyio.abc.TaskGroup,
) -> None:
    max_workers, max_queued = model.max_workers, model.max_queued

    async def body(ex: Executor) -> Jobs:
        jobs = Jobs(ex, helpers)
        await run_steps(jobs, model, program)
        # The end: every event set; the block must wait for every job (and
        # the submitters still waiting) and exit.
        for rec in jobs.jobs:
            rec.event.set()
        model.release_all()
        return jobs

    ex = Executor(max_workers, max_queued=max_queued)
    jobs, exit_errors = await run_block(ex, body, helpers)
    await settle()
    model.drain()

    # Every job accounted for: settled, or never spawned (its submit was
    # cancelled); every submitter and join done.
    dropped = {i for i, rec in jobs.subs.items() if rec.outcome == "cancelled"}
    assert set(jobs.handles) | dropped == set(range(len(jobs.jobs)))
    assert all(handle.done() for handle in jobs.handles.values())
    assert all(rec.outcome != "waiting" for rec in jobs.subs.values())
    assert all(rec.outcome is not None for rec in jobs.joins)
    stats = ex.statistics()
    assert (stats.workers, stats.idle_workers) == (0, 0)
    assert (stats.jobs_queued, stats.jobs_pending) == (0, 0)
    assert jobs.running == 0
    assert len(jobs.starts) == len(set(jobs.starts)), jobs.starts
    if max_workers == 1:
        assert jobs.starts == model.started
    else:  # the final phase releases several workers at once
        assert sorted(jobs.starts) == sorted(model.started)
    assert max_workers is None or jobs.peak <= max_workers
    for i, rec in enumerate(jobs.jobs):
        job = model.jobs[i]
        assert rec.runs == int(job.started), (i, job)
        assert rec.ended == job.ended(), (i, job)
        if job.state == "cancelled" and not job.started:
            event("a job cancelled before it started never ran")
    real_subs = {i: rec.outcome for i, rec in jobs.subs.items()}
    assert real_subs == {i: sub.outcome for i, sub in model.subs.items()}
    assert [j.outcome for j in jobs.joins] == [j.outcome for j in model.joins]

    # The errors nobody retrieved, each once.  On Trio the tasks woken with
    # the block's exit run in any order: a join woken by the last jobs may
    # run after the exit collected the errors.
    assert len(exit_errors) == len(set(exit_errors)), exit_errors
    unretrieved = {
        job.value for job in model.jobs if job.state == "failed" and not job.retrieved
    }
    either = {
        job.value for job in model.jobs if job.late_join_failure and backend == "trio"
    }
    assert set(exit_errors) - either == unretrieved - either
    event(f"the block raised {len(exit_errors)} unretrieved error(s)")
    if set(exit_errors) & either:
        event("a late join's error was also raised at the exit (Trio)")

    # Settled handles after the block, errors included.
    check_handles(jobs, model)
    for i in jobs.handles:
        job = model.jobs[i]
        if job.state == "failed":
            assert jobs.retrieve(i, False) == ("exception", job.value)
    with pytest.raises(RuntimeError):
        ex.spawn(jobs.job, 0)


async def run_program(
    backend: str,
    max_workers: int | None,
    max_queued: int | None,
    program: list[Step],
) -> None:
    model = Model(max_workers, max_queued, native=not FORCE_GENERIC)
    await run_with_helpers(partial(run_checked, backend, model, program))


@pytest.mark.parametrize("backend", _selected())
@settings(
    max_examples=600,
    deadline=None,
    phases=PHASES,
)
@given(max_workers=max_workers_values, max_queued=max_queued_values, program=programs)
def test_random_executor_programs_match_the_model(
    backend: tuple[str, dict[str, Any]],
    max_workers: int | None,
    max_queued: int | None,
    program: list[Step],
) -> None:
    name, options = backend
    anyio.run(
        run_program,
        name,
        max_workers,
        max_queued,
        program,
        backend=name,
        backend_options=options,
    )
