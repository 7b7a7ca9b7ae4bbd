"""What the executor's job model tests (``test_model.py``,
``test_fail_fast_model.py``) share: the model's state and the rules the two
agree on, the tasks that play a program (jobs, submitters, joins), the steps
both play, and the checks of the executor against the model after a step
and after the block.

Each test subclasses ``ModelJob``, ``Model``, ``JobRecord`` and ``Jobs``
with its own job kind, what a job does, and the rules that differ (how a job
ends; with ``fail_fast``, what a failure cancels).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from anyio_prims import Executor, JobCancelled, JoinHandle

MAX_JOBS: Final = 12
MAX_JOINS: Final = 12

Step = tuple[Any, ...]
Result = tuple[str, int]

UNSETTLED: Final = ("submitting", "queued", "running")
SETTLED: Final = ("succeeded", "failed", "cancelled")

#: The steps ``play_common`` plays.
COMMON_STEPS: Final = frozenset(
    {
        "spawn",
        "submit",
        "spawn_cancel",
        "spawn_many",
        "cancel",
        "cancel_submit",
        "join",
        "cancel_join",
        "retrieve",
    }
)


# -- the model -----------------------------------------------------------------


@dataclass
class ModelJob(ABC):
    """A job in the model; a subclass adds the rest of its kind (the fields
    after ``raises``)."""

    blocks: bool
    raises: bool
    _: KW_ONLY
    #: unspawned (a job a job will spawn), submitting (a submitter waits
    #: with it), queued, running, succeeded, failed, cancelled, or dropped
    #: (its submit was cancelled)
    state: str
    released: bool = False
    #: how a running job will end: "release" or "cancel", whichever came first
    finish_as: str | None = None
    started: bool = False
    retrieved: bool = False
    value: Any = None
    #: failed late (``Model.fails_late``) with a join waiting for it
    late_join_failure: bool = False

    def has_handle(self) -> bool:
        return self.state not in ("unspawned", "submitting", "dropped")

    @abstractmethod
    def ended(self) -> str | None:
        """What the job itself saw, as ``Jobs.job`` records it."""


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


J = TypeVar("J", bound=ModelJob)


@dataclass
class Model(ABC, Generic[J]):
    """The executor's state and its rules, as far as the tests agree."""

    max_workers: int | None
    max_queued: int | None
    native: bool
    jobs: list[J] = field(default_factory=list)
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

    @abstractmethod
    def new_job(self, kind: Any, state: str) -> int: ...

    @abstractmethod
    def finish(self, i: int) -> None:
        """A running job whose ``finish_as`` is set runs to its end."""

    @abstractmethod
    def fails_late(self, i: int) -> bool:
        """Whether job ``i``, failing now, wakes its joins late: on Trio a
        join it wakes may run after the block's exit collected the error,
        which then may or may not be in the exit's group."""

    def note(self, what: str) -> None:
        """A rule met, for hypothesis's statistics: ``test_model.py`` notes
        them as ``event``\\ s; ``test_fail_fast_model.py`` notes its own."""

    def run_handed(self) -> bool:
        """A worker that was handed a job while idle runs: whether one did
        (only ``fail_fast``'s jobs spawn jobs)."""
        return False

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
            self.note("a cancelled submit was granted before its task ran (generic)")
            sub.outcome = "spawned_then_cancelled"
        else:
            sub.outcome = "spawned"
        self.note("a waiting submitter was admitted")
        self.enqueue(i)

    def arrive(self, i: int) -> None:
        # The submit helper runs submit().
        q = self.max_queued
        if q is None or (len(self.queue) < q and not self.submitters):
            self.subs[i].outcome = "spawned"
            self.enqueue(i)
        else:
            self.note("a submit waited for room")
            self.jobs[i].state = "submitting"
            self.submitters.append(i)

    def settle(self, i: int, state: str, value: Any = None) -> None:
        job = self.jobs[i]
        job.state = state
        job.value = value
        for join in self.joins:
            if join.job == i and join.outcome is None:
                join.outcome = self.join_outcome(i)
                if state == "failed" and self.fails_late(i):
                    job.late_join_failure = True

    def join_outcome(self, i: int) -> tuple[Any, ...]:
        job = self.jobs[i]
        if job.state == "succeeded":
            return ("returned", job.value)
        if job.state == "failed":
            job.retrieved = True
            return ("raised", job.value)
        return ("job_cancelled",)  # cancelled

    def drain(self) -> None:
        """Let every task run until all are blocked."""
        for i in [s for s in self.submitters if self.subs[s].cancel_pending]:
            self.submitters.remove(i)
            self.drop(i)
        while True:
            if self.arrivals:
                self.arrive(self.arrivals.pop(0))
                continue
            if self.run_handed():
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
            self.note("cancelled a queued job")
            self.queue.remove(i)
            self.admit()
            self.settle(i, "cancelled")
            return True
        if job.state == "running":
            self.note("cancelled a running job")
            if job.finish_as is None:
                job.finish_as = "cancel"
            return True
        self.note("cancelled a settled job")
        return False

    def spawn_cancel(self, i: int) -> None:
        if self.free() > 0 and not self.queue:
            self.note("cancelled a job handed to an idle worker")
            self.settle(i, "cancelled")
            return
        self.note("cancelled a job just queued")
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
            self.note("a submit returned its handle as it was cancelled")
            sub.outcome = "spawned_then_cancelled"
        elif self.native:
            self.submitters.remove(i)
            self.drop(i)
        else:
            sub.cancel_pending = True

    def cancel_join(self, n: int) -> None:
        join = self.joins[n]
        if join.outcome is None:
            self.note("a join was cancelled")
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

    def live_submitters(self) -> list[int]:
        return [i for i in self.submitters if not self.subs[i].cancel_pending]

    def releasable(self) -> list[int]:
        """The blocking jobs not released, not settled, not being cancelled."""
        return [
            i
            for i, job in enumerate(self.jobs)
            if job.blocks
            and not job.released
            and job.state in UNSETTLED
            and job.finish_as is None
        ]


# -- the real thing --------------------------------------------------------------


@dataclass
class JobRecord:
    """What a job saw; a subclass adds the rest of its kind (the fields after
    ``raises``)."""

    blocks: bool
    raises: bool
    _: KW_ONLY
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


R = TypeVar("R", bound=JobRecord)


class Jobs(ABC, Generic[R]):
    """The jobs, the helper tasks and what they saw."""

    def __init__(self, ex: Executor, helpers: anyio.abc.TaskGroup) -> None:
        self.ex = ex
        self.helpers = helpers
        self.jobs: list[R] = []
        self.handles: dict[int, JoinHandle[Result]] = {}
        self.subs: dict[int, SubmitterRecord] = {}
        self.joins: list[JoinRecord] = []
        self.starts: list[int] = []
        self.running = 0
        self.peak = 0

    @abstractmethod
    def new_job(self, kind: Any) -> int: ...

    async def job(self, i: int) -> Result:
        """Job ``i``, as the executor runs it: its start counted in
        ``jobs[i].runs`` and ``starts``, and how many jobs run at once in
        ``running`` and ``peak``, around what it does (``act``)."""
        rec = self.jobs[i]
        rec.runs += 1
        self.starts.append(i)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            return await self.act(i)
        finally:
            self.running -= 1

    @abstractmethod
    async def act(self, i: int) -> Result:
        """What job ``i`` does, as its kind says; it notes in
        ``jobs[i].ended`` how it ended."""

    def end(self, i: int) -> Result:
        """The end of job ``i`` when it was not cancelled: it raises or
        returns, as its kind says."""
        rec = self.jobs[i]
        if rec.raises:
            rec.ended = "raised"
            raise ValueError(f"job {i}")
        rec.ended = "returned"
        return ("value", i)

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


# -- the steps -------------------------------------------------------------------


@dataclass(frozen=True)
class Played:
    """A step played, for ``check``.  A ``spawn_many`` handed to several
    workers at once leaves two things to the scheduler: the order in which
    its jobs start (``loose_from``: the jobs in ``Model.started`` from there
    on) and how many workers the growth rule starts (at least
    ``workers_before``, at most one more per job ``spawned``)."""

    loose_from: int | None = None
    workers_before: int | None = None
    spawned: int = 0


def scope_of(record: SubmitterRecord | JoinRecord) -> anyio.CancelScope:
    """The cancel scope a waiting submitter or join entered."""
    assert record.scope is not None
    return record.scope


def pick(candidates: list[int], k: int) -> int | None:
    return candidates[k % len(candidates)] if candidates else None


def play_common(jobs: Jobs[Any], model: Model[Any], step: Step) -> Played | None:
    """Play one of ``COMMON_STEPS`` on the executor and on the model, up to
    the ``settle()`` that follows; ``None`` if it is skipped (too many jobs
    or joins, or nothing to act on)."""
    ex = jobs.ex
    kind = step[0]
    i: int | None
    with_handle = [i for i, job in enumerate(model.jobs) if job.has_handle()]
    if kind in ("spawn", "submit"):
        if len(model.jobs) >= MAX_JOBS:
            return None
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
            return None
        i = jobs.new_job(step[1])
        model.new_job(step[1], "submitting")
        jobs.handles[i] = ex.spawn(jobs.job, i)
        assert jobs.handles[i].cancel()
        model.spawn_cancel(i)
    elif kind == "spawn_many":
        if len(model.jobs) + len(step[1]) > MAX_JOBS:
            return None
        ids = [jobs.new_job(k) for k in step[1]]
        for k in step[1]:
            model.new_job(k, "submitting")
        handles = ex.spawn_many(jobs.job, [(i,) for i in ids])
        assert len(handles) == len(ids)
        jobs.handles.update(zip(ids, handles, strict=True))
        played = Played()
        if model.max_workers != 1:
            played = Played(len(model.started), model.workers, len(ids))
        for i in ids:
            model.enqueue(i)
        return played
    elif kind == "cancel":
        i = pick(with_handle, step[1])
        if i is None:
            return None
        expected = model.cancel(i)
        assert jobs.handles[i].cancel() == expected
    elif kind == "cancel_submit":
        i = pick(model.live_submitters(), step[1])
        if i is None:
            return None
        scope_of(jobs.subs[i]).cancel()
        model.cancel_submitter(i)
    elif kind == "join":
        i = pick(with_handle, step[1])
        if i is None or len(model.joins) >= MAX_JOINS:
            return None
        jobs.joins.append(JoinRecord(i))
        model.joins.append(MJoin(i))
        if model.jobs[i].state in SETTLED:
            model.joins[-1].outcome = model.join_outcome(i)
        else:
            model.note("a join waited")
        jobs.helpers.start_soon(jobs.join, len(jobs.joins) - 1)
    elif kind == "cancel_join":
        n = pick([n for n, j in enumerate(model.joins) if j.outcome is None], step[1])
        if n is None:
            return None
        scope_of(jobs.joins[n]).cancel()
        model.cancel_join(n)
    else:
        assert kind == "retrieve", kind
        i = pick(with_handle, step[1])
        if i is None:
            return None
        _, _, use_result = step
        assert jobs.retrieve(i, use_result) == model.retrieve(i, use_result)
    return Played()


# -- the checks ------------------------------------------------------------------


def check_handles(jobs: Jobs[Any], model: Model[Any]) -> None:
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


def check_tasks(jobs: Jobs[Any], model: Model[Any]) -> None:
    """What each job, submitter and join saw."""
    for i, rec in enumerate(jobs.jobs):
        job = model.jobs[i]
        assert rec.runs == int(job.started), (i, job)
        assert rec.ended == job.ended(), (i, job)
    real_subs = {i: rec.outcome for i, rec in jobs.subs.items()}
    assert real_subs == {i: sub.outcome for i, sub in model.subs.items()}
    assert [j.outcome for j in jobs.joins] == [j.outcome for j in model.joins]


def check(jobs: Jobs[Any], model: Model[Any], played: Played) -> None:
    """The executor and the tasks against the model, after a step (with
    ``fail_fast``, one that made no job fail)."""
    # Starts: each job once, in spawn order (``loose_from``: the jobs
    # started in this step may start in any order).
    loose_from = played.loose_from
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
    workers_before = played.workers_before
    if workers_before is not None:
        # spawn_many hands jobs to several workers at once, and how many
        # workers the growth rule starts then depends on which runs first:
        # check the bounds it must keep and go on with what it did.
        assert stats.workers >= max(workers_before, len(model.running))
        assert stats.workers <= workers_before + played.spawned  # one per job
        assert limit is None or stats.workers <= limit
        if model.queue:
            assert stats.workers == limit
        model.workers = stats.workers
    assert stats.workers == model.workers
    assert stats.idle_workers == model.free()
    assert stats.jobs_queued == len(model.queue)
    assert stats.jobs_pending == len(model.queue) + len(model.running)

    check_tasks(jobs, model)
    check_handles(jobs, model)
    if model.max_queued is not None:
        # Submitted jobs never fill the queue past max_queued (spawn may).
        queued = [
            i
            for i, handle in jobs.handles.items()
            if i in jobs.subs and not handle.done() and i not in jobs.starts
        ]
        assert len(queued) <= model.max_queued, queued


def check_done(jobs: Jobs[Any], model: Model[Any]) -> None:
    """After the block, drained: every job accounted for (settled, or never
    spawned: its submit was cancelled), every submitter and join done, no
    worker left, each job run at most once, never more than ``max_workers``
    at once; what each job, submitter and join saw."""
    dropped = {i for i, rec in jobs.subs.items() if rec.outcome == "cancelled"}
    assert set(jobs.handles) | dropped == set(range(len(jobs.jobs)))
    assert all(handle.done() for handle in jobs.handles.values())
    assert all(rec.outcome != "waiting" for rec in jobs.subs.values())
    assert all(rec.outcome is not None for rec in jobs.joins)
    stats = jobs.ex.statistics()
    assert (stats.workers, stats.idle_workers) == (0, 0)
    assert (stats.jobs_queued, stats.jobs_pending) == (0, 0)
    assert jobs.running == 0
    assert len(jobs.starts) == len(set(jobs.starts)), jobs.starts
    max_workers = model.max_workers
    if max_workers == 1:
        assert jobs.starts == model.started
    else:  # the final phase releases several workers at once
        assert sorted(jobs.starts) == sorted(model.started)
    assert max_workers is None or jobs.peak <= max_workers
    check_tasks(jobs, model)


def check_closed(jobs: Jobs[Any], model: Model[Any]) -> None:
    """The settled handles after the block, errors included, and no spawn
    once the block is closed."""
    check_handles(jobs, model)
    for i in jobs.handles:
        job = model.jobs[i]
        if job.state == "failed":
            assert jobs.retrieve(i, False) == ("exception", job.value)
    with pytest.raises(RuntimeError):
        jobs.ex.spawn(jobs.job, 0)
