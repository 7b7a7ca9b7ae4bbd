"""``Executor(fail_fast=True)`` against a pure-Python model, on random programs.

A program runs on ``Executor(max_workers=W, max_queued=Q, fail_fast=True)``
with ``W`` in 1..3 or ``None`` and ``Q`` ``None`` or 1..3.  Each job is made
by one step and has a kind: it blocks on an ``anyio.Event`` of its own until
the program releases it, or not (a job released before it started does not
block, and passes no checkpoint); it then returns ``("value", i)`` or raises
``ValueError("job i")``; if cancelled while it blocks it lets the
cancellation propagate, catches it and returns ``("caught", i)``, or fails
on its way out with ``ValueError("cleanup i")``.  The steps, played by the
block's body with ``settle()`` after each (indexes taken modulo the
candidates):

* ``spawn(kind)``, ``submit(kind)`` (a helper task outside the block awaits
  ``ex.submit``, which waits while ``Q`` live jobs are queued),
  ``spawn_many(kinds)`` (no job of the batch fails without blocking: which
  of several jobs handed to idle workers at once starts first is up to the
  scheduler) and ``spawn_cancel(kind)`` (spawned and cancelled at once);
* ``release(k)`` a blocking job that does not raise, ``fail(k)`` one that
  does (running or not yet started);
* ``release_handing(k, kind)``: a running blocking job is released, and on
  waking it spawns a new job (handed to an idle worker if one is idle, else
  queued) before it returns or raises: a job handed over in the same step
  as the failure;
* ``cancel(k)`` (``handle.cancel()``; a running job that fails on its way
  out of that cancellation is a failure too), ``cancel_submit(k)``,
  ``join(k)`` (a helper task outside the block awaits a handle),
  ``cancel_join(k)``, ``retrieve(k, result)``.

The first job that fails (whichever step makes it fail) is the trigger: the
model then settles as cancelled, in this order, the jobs of the submitters
still waiting (each submit returns a handle that is already cancelled), the
queued jobs, and the jobs handed to a worker that has not started them;
every job still blocked sees the cancellation (and propagates it, catches
it, or fails in its cleanup); nothing starts after the trigger.  The body
must be cancelled in the ``settle()`` that follows the step: no later step
runs.  In its cancellation handler the body spawns (``spawn``,
``spawn_many``) and gets handles that are already cancelled and never run,
starts a helper task that spawns and submits (cancelled handles, or
``RuntimeError`` if the block closed before it ran), and may retrieve the
trigger with ``exception()``.  A program whose steps make no job fail ends
by releasing the blocking jobs one at a time, in spawn order, with a
``settle()`` after each; the last one may be released just before the body
returns, so that a failure arrives while the block's exit waits for it.
Programs drawn with ``failures=False`` have no job that can fail: they must
run as without ``fail_fast``.

Checked against the model after every step that made no job fail, as in
``test_model.py`` (the model's shared rules, the steps both tests play and
these checks are in ``_model_common.py``): which jobs ran, each at most
once and in spawn order (``spawn_many`` batches in any order), never more
than ``W`` at once, ``statistics()``, every handle's state and outcome,
what each job saw, each submitter's and join's outcome, submitted jobs
queued never more than ``Q``.  At the end: the block exited (no deadlock:
``_models.run_block``), every job settled, every submitter served, every
join done, never more than ``W`` jobs at once, ``statistics()`` all zero,
whether the body was cancelled (iff the trigger came before it returned),
and the exit's exception group: the trigger
first (even if a join or the body retrieved it), then the errors of the
jobs that failed on their way out of the cancellation, each once, those
retrieved by a join left out (on Trio a join woken by a job's failure may
run after the exit collected that error: those may or may not be in the
group, as in ``test_model.py``); no group at all without a failure.

What the model special-cases, and why: a job released before it started
skips its wait (no checkpoint), so that a worker runs a chain of queued
jobs without yielding, as the model does; no step makes two jobs ready at
once; a submitted job may run and fail before its submitter's task has
stored its handle, and then neither the cancellation handler's checks nor
its retrieval of the trigger can reach it.

Not covered here (``test_model.py`` and the example tests do): the
races of one synchronous step that grants and cancels a submitter or a
join, ``map``, ``max_per_second``, ``idle_timeout``, and a failure made
by two jobs at once (which is the trigger then depends on the scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.abc
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from anyio_prims import Executor, JoinHandle
from anyio_prims._core._backend import FORCE_GENERIC

from .._tasks import settle
from ..conftest import _selected
from . import _model_common as common
from ._model_common import (
    COMMON_STEPS,
    MAX_JOBS,
    UNSETTLED,
    ModelJob,
    Played,
    Result,
    Step,
    check,
    check_closed,
    check_done,
    pick,
    play_common,
)
from ._models import PHASES, run_block, run_with_helpers

#: (blocks, raises, on cancellation: "propagate", "catch" or "fail")
Kind = tuple[bool, bool, str]

on_cancels = st.sampled_from(["propagate", "propagate", "catch", "fail"])
kinds: st.SearchStrategy[Kind] = st.tuples(
    st.sampled_from([True, True, True, False]),
    st.booleans(),
    on_cancels,
)
#: A batch's jobs that do not block do not raise (see the docstring).
batch_kinds: st.SearchStrategy[Kind] = kinds.map(lambda k: (k[0], k[0] and k[1], k[2]))
picks = st.integers(0, 15)
making: st.SearchStrategy[Step] = st.one_of(
    st.tuples(st.just("spawn"), kinds),
    st.tuples(st.just("submit"), kinds),
    st.tuples(st.just("submit"), kinds),
    st.tuples(st.just("spawn_many"), st.lists(batch_kinds, min_size=2, max_size=3)),
    st.tuples(st.just("spawn_cancel"), kinds),
)
acting: st.SearchStrategy[Step] = st.one_of(
    st.tuples(st.just("release"), picks),
    st.tuples(st.just("release"), picks),
    st.tuples(st.just("fail"), picks),
    st.tuples(st.just("fail"), picks),
    st.tuples(st.just("release_handing"), picks, kinds),
    st.tuples(st.just("cancel"), picks),
    st.tuples(st.just("cancel_submit"), picks),
    st.tuples(st.just("join"), picks),
    st.tuples(st.just("join"), picks),
    st.tuples(st.just("cancel_join"), picks),
    st.tuples(st.just("retrieve"), picks, st.booleans()),
)
steps: st.SearchStrategy[Step] = st.one_of(making, acting)
programs = st.lists(steps, min_size=10, max_size=40)
max_workers_values = st.sampled_from([1, 1, 2, 2, 3, None])
max_queued_values = st.sampled_from([None, 1, 1, 1, 2, 3])


def harmless(step: Step) -> Step:
    """``step`` with no job that can fail (a program drawn without failures)."""

    def kind(k: Kind) -> Kind:
        return (k[0], False, "propagate" if k[2] == "fail" else k[2])

    name = step[0]
    if name in ("spawn", "submit", "spawn_cancel"):
        return (name, kind(step[1]))
    if name == "spawn_many":
        return (name, [kind(k) for k in step[1]])
    if name == "release_handing":
        return (name, step[1], kind(step[2]))
    return step


# -- the model -----------------------------------------------------------------


@dataclass
class MJob(ModelJob):
    on_cancel: str
    #: the job this one spawns once released, before it returns or raises
    hands: int | None = None

    def ended(self) -> str | None:
        if self.state == "succeeded":
            return "caught" if self.value[0] == "caught" else "returned"
        if self.state == "failed":
            return "cleanup_raised" if self.value.startswith("cleanup") else "raised"
        if self.state == "cancelled" and self.started:
            return "cancelled"
        return None


@dataclass
class Model(common.Model[MJob]):
    #: jobs handed to an idle worker by a job, that worker not run yet
    handed: list[int] = field(default_factory=list)
    #: the first job that failed, and what the failure cancelled
    trigger: int | None = None
    cancelled_queued: list[int] = field(default_factory=list)
    #: the failures after the trigger, in the order the model met them
    later_failures: list[int] = field(default_factory=list)

    @property
    def cancelling(self) -> bool:
        return self.trigger is not None

    def new_job(self, kind: Kind, state: str) -> int:
        self.jobs.append(MJob(*kind, state=state))
        return len(self.jobs) - 1

    def fails_late(self, i: int) -> bool:
        return i != self.trigger

    def free(self) -> int:
        return super().free() - len(self.handed)

    def enqueue(self, i: int) -> None:
        # spawn() from the body: after the failure, a handle already
        # cancelled; before it, straight to an idle worker (which starts it
        # in this settle()), else the tail of the queue.
        if self.cancelling:
            self.jobs[i].state = "queued"
            self.settle(i, "cancelled")
            return
        super().enqueue(i)

    def spawn_from_job(self, i: int) -> None:
        # spawn() from a running job: the worker running it is busy, so an
        # idle one gets the job (it starts when that worker runs, unless
        # the executor is cancelling by then); else it is queued, and a
        # worker started for it if the bound allows.
        self.jobs[i].state = "queued"
        if self.free() > 0 and not self.queue:
            self.handed.append(i)
            return
        self.queue.append(i)
        if self.max_workers is None or self.workers < self.max_workers:
            self.workers += 1

    def run_handed(self) -> bool:
        if not self.handed:
            return False
        i = self.handed.pop(0)
        if self.cancelling:
            event("a job handed to an idle worker never started")
            self.settle(i, "cancelled")
        else:
            self.start(i)
        return True

    def start(self, i: int) -> None:
        assert not self.cancelling
        super().start(i)

    def arrive(self, i: int) -> None:
        if self.cancelling:
            event("a submit arrived after the failure: its handle is cancelled")
            self.subs[i].outcome = "spawned"
            self.enqueue(i)
        else:
            super().arrive(i)

    def fail(self, i: int, message: str) -> None:
        if self.cancelling:
            self.later_failures.append(i)
            self.settle(i, "failed", message)
            return
        self.trigger = i
        pending = sum(job.state in UNSETTLED for job in self.jobs)
        event(f"jobs not settled at the failure: {min(pending, 6)}+")
        self.settle(i, "failed", message)
        self.cancel_all()

    def cancel_all(self) -> None:
        """What the trigger's failure does, at once, in the order it does it."""
        if self.submitters:
            event(f"submitters waiting at the failure: {len(self.submitters)}")
        for i in self.submitters:
            # Granted a handle that is already cancelled.
            self.subs[i].outcome = "spawned"
            self.jobs[i].state = "queued"
            self.settle(i, "cancelled")
        self.submitters.clear()
        if self.queue:
            event(f"queued jobs at the failure: {min(len(self.queue), 3)}+")
        for i in self.queue:
            self.cancelled_queued.append(i)
            self.settle(i, "cancelled")
        self.queue.clear()
        blocked = [i for i in self.running if self.jobs[i].finish_as is None]
        if blocked:
            event("running jobs were cancelled by the failure")
        for i in blocked:
            event(f"a running job cancelled by the failure: {self.jobs[i].on_cancel}")
            self.jobs[i].finish_as = "cancel"

    def finish(self, i: int) -> None:
        job = self.jobs[i]
        if job.finish_as == "release" and job.hands is not None:
            self.spawn_from_job(job.hands)
        self.running.remove(i)
        if job.finish_as == "cancel":
            if job.on_cancel == "catch":
                self.settle(i, "succeeded", ("caught", i))
            elif job.on_cancel == "fail":
                self.fail(i, f"cleanup {i}")
            else:
                self.settle(i, "cancelled")
        elif job.raises:
            self.fail(i, f"job {i}")
        else:
            self.settle(i, "succeeded", ("value", i))

    def cancel(self, i: int) -> bool:
        job = self.jobs[i]
        if job.state == "running" and job.on_cancel == "fail" and not job.finish_as:
            event("cancelled a running job that fails on its way out")
        return super().cancel(i)

    def cancel_submitter(self, i: int) -> None:
        event("cancelled a waiting submitter")
        super().cancel_submitter(i)


# -- the real thing --------------------------------------------------------------


@dataclass
class JobRecord(common.JobRecord):
    on_cancel: str
    hands: int | None = None


class Jobs(common.Jobs[JobRecord]):
    def __init__(self, ex: Executor, helpers: anyio.abc.TaskGroup) -> None:
        super().__init__(ex, helpers)
        #: handles spawned after the failure, and whether any of them ran
        self.late: list[JoinHandle[None]] = []
        self.late_ran = 0
        #: what the helper task that spawned after the failure got
        self.late_helper: list[str] = []

    def new_job(self, kind: Kind) -> int:
        self.jobs.append(JobRecord(*kind))
        return len(self.jobs) - 1

    async def act(self, i: int) -> Result:
        rec = self.jobs[i]
        # Released before it started: no wait, so no checkpoint either.
        if rec.blocks and not rec.event.is_set():
            try:
                await rec.event.wait()
            except anyio.get_cancelled_exc_class():
                if rec.on_cancel == "catch":
                    rec.ended = "caught"
                    return ("caught", i)
                if rec.on_cancel == "fail":
                    rec.ended = "cleanup_raised"
                    raise ValueError(f"cleanup {i}") from None
                rec.ended = "cancelled"
                raise
        if rec.hands is not None:
            self.handles[rec.hands] = self.ex.spawn(self.job, rec.hands)
        return self.end(i)

    async def never_runs(self) -> None:
        self.late_ran += 1

    async def spawn_late(self) -> None:
        # A task outside the block spawns and submits once the failure has
        # cancelled the body: cancelled handles, or RuntimeError if the
        # block has closed since.
        for how in ("spawn", "submit"):
            try:
                if how == "spawn":
                    handle = self.ex.spawn(self.never_runs)
                else:
                    handle = await self.ex.submit(self.never_runs)
            except RuntimeError:
                self.late_helper.append(f"{how}: closed")
                continue
            self.late.append(handle)
            self.late_helper.append(
                f"{how}: " + ("cancelled" if handle.cancelled() else "live")
            )


# -- the steps -------------------------------------------------------------------


def body_cancelled(jobs: Jobs, model: Model, retrieve_trigger: bool) -> None:
    """The body's cancellation handler, after the failure (synchronous)."""
    ex = jobs.ex
    trigger = model.trigger
    assert trigger is not None
    event("the failure cancelled the body")
    # Every queued job was cancelled at once, with the failure.
    assert ex.statistics().jobs_queued == 0
    for i in model.cancelled_queued:
        # (An admitted submitter's helper may not have stored its handle yet.)
        assert i not in jobs.handles or jobs.handles[i].cancelled(), i
    # Spawning now returns handles that are already cancelled.
    late = [ex.spawn(jobs.never_runs), *ex.spawn_many(jobs.never_runs, [(), ()])]
    assert all(handle.cancelled() for handle in late)
    assert not any(handle.cancel() for handle in late)
    jobs.late.extend(late)
    jobs.helpers.start_soon(jobs.spawn_late)
    if retrieve_trigger and trigger not in jobs.handles:
        # A submitted job that ran and failed before its submitter's task
        # ran on from submit(): the body has no handle to retrieve it by.
        event("the trigger's submitter had not stored its handle yet")
    elif retrieve_trigger:
        event("the body retrieved the trigger as it was cancelled")
        expected = model.retrieve(trigger, False)
        assert jobs.retrieve(trigger, False) == expected


async def after_step(
    jobs: Jobs, model: Model, retrieve_trigger: bool, played: Played
) -> None:
    """``settle()``, and the step checked: the body must be cancelled there
    if and only if the step made a job fail."""
    model.drain()
    if model.trigger is not None:
        try:
            await settle()
        except anyio.get_cancelled_exc_class():
            body_cancelled(jobs, model, retrieve_trigger)
            raise
        raise AssertionError("the failure did not cancel the body")
    try:
        await settle()
    except anyio.get_cancelled_exc_class():
        raise AssertionError("the body was cancelled, and no job failed") from None
    check(jobs, model, played)


def play(jobs: Jobs, model: Model, step: Step) -> Played | None:
    """Play one of this test's own steps (not in ``COMMON_STEPS``); ``None``
    if it is skipped (nothing to act on, or too many jobs)."""
    kind = step[0]
    if kind in ("release", "fail"):
        i = pick(
            [j for j in model.releasable() if model.jobs[j].raises == (kind == "fail")],
            step[1],
        )
        if i is None:
            return None
        if kind == "fail":
            event(
                "failed a running job"
                if model.jobs[i].state == "running"
                else "released a failing job before it started"
            )
        jobs.jobs[i].event.set()
        model.release(i)
    else:  # release_handing
        _, k, handed_kind = step
        i = pick([j for j in model.releasable() if j in model.running], k)
        if i is None or len(model.jobs) >= MAX_JOBS:
            return None
        h = jobs.new_job(handed_kind)
        model.new_job(handed_kind, "unspawned")
        jobs.jobs[i].hands = model.jobs[i].hands = h
        event(
            "a job spawned a job and "
            + ("failed" if model.jobs[i].raises else "returned")
            + (" (an idle worker)" if model.free() > 0 else " (queued)")
        )
        jobs.jobs[i].event.set()
        model.release(i)
    return Played()


async def run_steps(
    jobs: Jobs,
    model: Model,
    program: list[Step],
    retrieve_trigger: bool,
    last_at_exit: bool,
) -> None:
    for step in program:
        if step[0] in COMMON_STEPS:
            played = play_common(jobs, model, step)
        else:
            played = play(jobs, model, step)
        if played is None:
            continue
        await after_step(jobs, model, retrieve_trigger, played)

    # No job failed: release the blocking jobs one at a time, in spawn
    # order; the last one maybe just before the body returns.
    event("the steps made no job fail")
    while candidates := model.releasable():
        i = candidates[0]
        jobs.jobs[i].event.set()
        model.release(i)
        if len(candidates) == 1 and last_at_exit:
            event("released the last job as the body returned")
            return
        await after_step(jobs, model, retrieve_trigger, Played())


async def run_checked(
    backend: str,
    model: Model,
    program: list[Step],
    retrieve_trigger: bool,
    last_at_exit: bool,
    helpers: anyio.abc.TaskGroup,
) -> None:
    ex = Executor(model.max_workers, max_queued=model.max_queued, fail_fast=True)
    jobs = Jobs(ex, helpers)

    async def body(ex: Executor) -> str:
        await run_steps(jobs, model, program, retrieve_trigger, last_at_exit)
        return "returned"

    # The body "returned", or was "cancelled" by the failure.
    ended, exit_errors = await run_block(ex, body, helpers, cancelled="cancelled")
    await settle()
    model.drain()

    check_done(jobs, model)

    # Spawned after the failure: cancelled, never run.
    assert jobs.late_ran == 0
    assert all(handle.cancelled() for handle in jobs.late)
    if ended == "cancelled":
        # The helper the cancelled body started made both calls.
        assert [seen.split(":")[0] for seen in jobs.late_helper] == [
            "spawn",
            "submit",
        ], jobs.late_helper
    for seen in jobs.late_helper:
        event(f"the helper spawning after the failure: {seen}")
        assert not seen.endswith("live"), seen

    trigger = model.trigger
    if trigger is None:
        # No failure: as without fail_fast.
        assert ended == "returned"
        assert exit_errors == []
        event("no job failed")
    else:
        # Cancelled iff the trigger came before the body returned.
        at_exit = ended == "returned"
        if at_exit:
            event("the failure came while the block's exit waited")
            assert last_at_exit
        else:
            assert ended == "cancelled"
        # The trigger first, retrieved or not; then the errors of the jobs
        # that failed on their way out, unretrieved, each once.
        assert exit_errors, "the trigger is missing from the exit's group"
        assert exit_errors[0] == model.jobs[trigger].value, exit_errors
        assert len(exit_errors) == len(set(exit_errors)), exit_errors
        if model.jobs[trigger].retrieved:
            event("the trigger had been retrieved, and led the group")
        rest = {
            model.jobs[i].value
            for i in model.later_failures
            if not model.jobs[i].retrieved
        }
        either = {
            model.jobs[i].value
            for i in model.later_failures
            if model.jobs[i].late_join_failure and backend == "trio"
        }
        assert set(exit_errors[1:]) - either == rest - either, (exit_errors, rest)
        event(f"errors after the trigger in the group: {min(len(exit_errors) - 1, 2)}+")
        if set(exit_errors) & either:
            event("a late join's error was also raised at the exit (Trio)")

    check_closed(jobs, model)


async def run_program(
    backend: str,
    max_workers: int | None,
    max_queued: int | None,
    program: list[Step],
    retrieve_trigger: bool,
    last_at_exit: bool,
) -> None:
    model = Model(max_workers, max_queued, native=not FORCE_GENERIC)
    await run_with_helpers(
        partial(run_checked, backend, model, program, retrieve_trigger, last_at_exit)
    )


@pytest.mark.parametrize("backend", _selected())
@settings(max_examples=3000, deadline=None, phases=PHASES)
@given(
    max_workers=max_workers_values,
    max_queued=max_queued_values,
    program=programs,
    failures=st.sampled_from([True, True, True, False]),
    retrieve_trigger=st.booleans(),
    last_at_exit=st.booleans(),
)
def test_fail_fast_programs_match_the_model(
    backend: tuple[str, dict[str, Any]],
    max_workers: int | None,
    max_queued: int | None,
    program: list[Step],
    failures: bool,
    retrieve_trigger: bool,
    last_at_exit: bool,
) -> None:
    name, options = backend
    if not failures:
        program = [harmless(step) for step in program]
    anyio.run(
        run_program,
        name,
        max_workers,
        max_queued,
        program,
        retrieve_trigger,
        last_at_exit,
        backend=name,
        backend_options=options,
    )
