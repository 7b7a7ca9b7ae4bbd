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
``tests/conftest.py``'s list.  The model, the tasks, the steps and the checks
this test shares with ``test_fail_fast_model.py`` are in
``_model_common.py``; this module adds its job kind, how a job ends, and its
own steps (``release`` and the races).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.abc
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from anyio_prims import Executor
from anyio_prims._core._backend import FORCE_GENERIC

from .._tasks import settle
from ..conftest import _selected
from . import _model_common as common
from ._model_common import (
    COMMON_STEPS,
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
    scope_of,
)
from ._models import PHASES, run_block, run_with_helpers

#: (blocks, raises, catches the cancellation)
Kind = tuple[bool, bool, bool]

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


# -- the model -----------------------------------------------------------------


@dataclass
class MJob(ModelJob):
    catches: bool

    def ended(self) -> str | None:
        if self.state == "succeeded":
            return "caught" if self.value[0] == "caught" else "returned"
        if self.state == "failed":
            return "raised"
        if self.state == "cancelled" and self.started:
            return "cancelled"
        return None


@dataclass
class Model(common.Model[MJob]):
    #: in the final phase: every event set, the block's exit waiting
    final: bool = False

    def new_job(self, kind: Kind, state: str) -> int:
        self.jobs.append(MJob(*kind, state=state))
        return len(self.jobs) - 1

    def note(self, what: str) -> None:
        event(what)

    def fails_late(self, i: int) -> bool:
        return self.final

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

    def release_all(self) -> None:
        self.final = True
        for i in range(len(self.jobs)):
            if self.jobs[i].state in UNSETTLED:
                self.release(i)


# -- the real thing --------------------------------------------------------------


@dataclass
class JobRecord(common.JobRecord):
    catches: bool


class Jobs(common.Jobs[JobRecord]):
    def new_job(self, kind: Kind) -> int:
        self.jobs.append(JobRecord(*kind))
        return len(self.jobs) - 1

    async def act(self, i: int) -> Result:
        rec = self.jobs[i]
        if rec.blocks:
            try:
                await rec.event.wait()
            except anyio.get_cancelled_exc_class():
                if rec.catches:
                    rec.ended = "caught"
                    return ("caught", i)
                rec.ended = "cancelled"
                raise
        return self.end(i)


# -- the steps -------------------------------------------------------------------


def play(jobs: Jobs, model: Model, step: Step) -> Played | None:
    """Play one of this test's own steps (not in ``COMMON_STEPS``); ``None``
    if it is skipped (nothing to act on)."""
    kind = step[0]
    if kind == "release":
        i = pick(model.releasable(), step[1])
        if i is None:
            return None
        if model.jobs[i].state != "running":
            event("released a job before it started")
        jobs.jobs[i].event.set()
        model.release(i)
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
            return None
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
            return None
        s = waiting[0]
        scope = scope_of(jobs.subs[s])
        event(f"made room and cancelled the head submitter, room first: {room_first}")
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
            return None
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
    return Played()


async def run_steps(jobs: Jobs, model: Model, program: list[Step]) -> None:
    for step in program:
        if step[0] in COMMON_STEPS:
            played = play_common(jobs, model, step)
        else:
            played = play(jobs, model, step)
        if played is None:
            continue
        await settle()
        model.drain()
        check(jobs, model, played)


async def run_checked(
    backend: str,
    model: Model,
    program: list[Step],
    helpers: anyio.abc.TaskGroup,
) -> None:
    ex = Executor(model.max_workers, max_queued=model.max_queued)

    async def body(ex: Executor) -> Jobs:
        jobs = Jobs(ex, helpers)
        await run_steps(jobs, model, program)
        # The end: every event set; the block must wait for every job (and
        # the submitters still waiting) and exit.
        for rec in jobs.jobs:
            rec.event.set()
        model.release_all()
        return jobs

    jobs, exit_errors = await run_block(ex, body, helpers)
    await settle()
    model.drain()

    check_done(jobs, model)
    if any(job.state == "cancelled" and not job.started for job in model.jobs):
        event("a job cancelled before it started never ran")

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

    check_closed(jobs, model)


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
