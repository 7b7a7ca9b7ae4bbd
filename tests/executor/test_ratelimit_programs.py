"""``Executor(max_per_second=R)`` on random programs, on Trio's fake clock.

A program runs on ``Executor(W, max_per_second=R, max_queued=Q)`` with ``W``
``None`` or 1..3, ``R`` 1, 4 or 10 starts a second and ``Q`` ``None`` or 1..3,
under ``trio.testing.MockClock(autojump_threshold=0)``: time moves only
when every task is blocked, straight to the next deadline, so a program's
timing is exact and its seconds cost nothing.  Steps, played by the block's
body (indexes taken modulo the candidates):

* ``spawn(duration)``: a job that records its start time and sleeps
  ``duration`` seconds (0 is a plain checkpoint);
* ``spawn_many(duration, n)``: ``n`` such jobs in one ``spawn_many()``;
* ``submit(duration)``: the same from a helper task, through ``submit()``
  (which waits while ``Q`` live jobs are queued);
* ``cancel(k)``: ``handle.cancel()`` of a job (queued, sleeping for its
  slot, running or settled);
* ``cancel_run(first, count)``: ``count`` jobs cancelled in spawn order in
  one synchronous step, as a map's close cancels its window;
* ``advance(seconds)``: the body sleeps.

Checked: every job starts at most once, and every job not cancelled starts
and returns its value; starts are at least ``1/R`` apart (GCRA with a burst
of one: a slot given back goes to a later job, never to two); no job starts
after its handle was cancelled; the jobs the body spawned start in spawn
order (each takes its slot as a worker takes it off the queue); the block
exits (no job is left waiting for a worker or a slot); and the workers
never outnumber the most jobs that ran at once by more than two, however
many jobs are cancelled (a worker whose job is cancelled while it waits
for its slot still counts as waiting, and no other starts meanwhile): the
workers a rate-limited flood starts are those its running jobs need; and
at most one worker waits for a slot at any time.

Trio only: the fake clock is Trio's.  ``tests/executor/test_ratelimit.py``
checks the same rules on every backend on the real clock, case by case.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anyio_prims.executor import Executor, JoinHandle

trio = pytest.importorskip("trio")

DURATIONS = st.sampled_from([0.0, 0.05, 0.3, 1.0, 5.0])
STEPS = st.one_of(
    st.tuples(st.just("spawn"), DURATIONS),
    st.tuples(st.just("submit"), DURATIONS),
    st.tuples(st.just("spawn_many"), DURATIONS, st.integers(2, 5)),
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("cancel_run"), st.integers(0, 50), st.integers(2, 6)),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.01, 0.1, 0.25, 1.0])),
)


class _Run:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex
        self.starts: dict[int, float] = {}
        self.cancelled_at: dict[int, float] = {}
        self.handles: dict[int, JoinHandle[int]] = {}
        #: the jobs the body spawned, in spawn order (a submitted job is
        #: spawned by whichever task makes room for it)
        self.spawned: list[int] = []
        self.count = 0
        self.running = 0
        self.most_running = 0
        self.most_workers = 0

    def sample(self) -> None:
        self.most_workers = max(self.most_workers, self.ex.statistics().workers)
        # One worker at a time waits for a slot (the executor's module
        # comment, "Rate limit").
        assert self.ex._slot_waits in (0, 1)

    async def job(self, i: int, duration: float) -> int:
        assert i not in self.starts, f"job {i} started twice"
        assert i not in self.cancelled_at, f"job {i} started after its cancel()"
        self.starts[i] = trio.current_time()
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        self.sample()
        try:
            if duration:
                await trio.sleep(duration)
            else:
                await trio.lowlevel.checkpoint()
        finally:
            self.running -= 1
        return i

    def cancel(self, i: int) -> None:
        handle = self.handles.get(i)
        if handle is None:  # a submit that has not spawned it yet
            return
        if i not in self.starts and not handle.done():
            self.cancelled_at[i] = trio.current_time()
        handle.cancel()

    async def submit(self, i: int, duration: float) -> None:
        self.handles[i] = await self.ex.submit(self.job, i, duration)


async def _play(
    program: list[tuple[Any, ...]],
    max_workers: int | None,
    rate: float,
    max_queued: int | None,
) -> _Run:
    ex = Executor(max_workers, max_per_second=rate, max_queued=max_queued)
    run = _Run(ex)
    with trio.fail_after(10_000):  # fake seconds: a hang ends the run
        async with trio.open_nursery() as submitters, ex:
            for step in program:
                kind = step[0]
                if kind == "spawn":
                    run.handles[run.count] = ex.spawn(run.job, run.count, step[1])
                    run.spawned.append(run.count)
                    run.count += 1
                elif kind == "spawn_many":
                    first = run.count
                    run.count += step[2]
                    handles = ex.spawn_many(
                        run.job, [(i, step[1]) for i in range(first, run.count)]
                    )
                    run.handles.update(
                        zip(range(first, run.count), handles, strict=True)
                    )
                    run.spawned.extend(range(first, run.count))
                elif kind == "submit":
                    submitters.start_soon(run.submit, run.count, step[1])
                    run.count += 1
                elif kind == "cancel" and run.count:
                    run.cancel(step[1] % run.count)
                elif kind == "cancel_run" and run.count:
                    first = step[1] % run.count
                    for i in range(first, min(first + step[2], run.count)):
                        run.cancel(i)
                elif kind == "advance":
                    await trio.sleep(step[1])
                run.sample()
            # The submitters are served before the block's exit waits.
            while len(run.handles) < run.count:
                await trio.sleep(0.01)
    return run


@settings(max_examples=400, deadline=None)
@given(
    program=st.lists(STEPS, max_size=40),
    max_workers=st.sampled_from([None, 1, 2, 3]),
    rate=st.sampled_from([1.0, 4.0, 10.0]),
    max_queued=st.sampled_from([None, 1, 3]),
)
def test_rate_limited_programs_start_each_job_once_on_a_slot_of_its_own(
    program: list[tuple[Any, ...]],
    max_workers: int | None,
    rate: float,
    max_queued: int | None,
) -> None:
    from trio.testing import MockClock

    run = trio.run(
        _play,
        program,
        max_workers,
        rate,
        max_queued,
        clock=MockClock(autojump_threshold=0),
    )
    for i in range(run.count):
        handle = run.handles[i]
        assert handle.done()
        if i in run.cancelled_at:
            assert handle.cancelled()
        if not handle.cancelled():
            assert handle.result() == i
            assert i in run.starts
    times = sorted(run.starts.values())
    interval = 1.0 / rate
    for earlier, later in itertools.pairwise(times):
        assert later - earlier >= interval - 1e-9, (earlier, later, interval)
    spawned_starts = [run.starts[i] for i in run.spawned if i in run.starts]
    assert spawned_starts == sorted(spawned_starts)
    assert run.most_workers <= run.most_running + 2
    if max_workers is not None:
        assert run.most_running <= max_workers
