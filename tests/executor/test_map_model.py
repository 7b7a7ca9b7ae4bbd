"""Executor.map against a pure-Python model, on random programs (hypothesis).

A program maps a job over ``N`` items (``N`` in 0..12) on
``Executor(max_workers=W)``, ``W`` in 1..3 or ``None``, with
``ex.map(job, input, ordered=..., window=...)``, ``window`` ``None`` (the
default: ``W``, or 64 without a bound) or 1, 2, 3, 5.  The input yields
the item numbers ``0, 1, ...``; it may raise ``ValueError("input broke")``
at its read number ``m`` (``m <= N``: the items from ``m`` on are never
read).  It is one of: a sync iterator, a generator, an async iterator, an
async generator (none of them waits), or an async iterator that passes a
checkpoint before each item, so that jobs run while the map reads.  Item
``k``'s job blocks on an ``anyio.Event`` of its own until the program
releases it, or not (it passes a checkpoint then); it returns
``"result k"`` or raises ``ValueError("job k")``.  Steps refer to items by
an index taken modulo the candidates:

* ``take``: a consumer task calls ``__anext__`` once, in a cancel scope of
  its own (while one waits, the test task calls it too and must get
  ``anyio.BusyResourceError``);
* ``release(k)``: an item's event is set (also before it was read);
* ``cancel_take``: the waiting call's scope is cancelled;
* ``release_cancel_take(k, release_first)``: an item's event is set and the
  waiting call's scope cancelled, in either order, in one synchronous step;
* ``close(how)``: ``aclose()``, ``close()`` or an ``async with`` block
  left (a third of these steps act: closing ends most of a program);
* ``release_close(k)``: a running job's event is set and the map closed in
  one synchronous step (on the same terms);
* ``close_cancel_take(close_first)``: the map is closed and the waiting
  call's scope cancelled, in either order, in one synchronous step (on the
  same terms): the close may wake the call before its cancellation lands.

The map exposes no job handles, so no step cancels one job.  No call is
cancelled while it reads the input (no input waits): an async generator
would end there (documented).

After every step all tasks run until blocked (``settle()``), and the model
replays the step.  A call takes a result that is ready (the head, in input
order, when ordered; else the earliest job to finish, in the order the jobs
themselves recorded); otherwise it reads the input while fewer than
``window`` jobs are in flight (at least one read, and exactly up to the
window when the input does not checkpoint), then the end of the input, or
its error once every job before it was delivered, or waits.  The executor
hands jobs out in input order to at most ``W`` workers.  Checked: every
call's outcome; how many times the input was read, and no read outside a
call; at every read, fewer than ``window`` items read and not delivered;
which jobs started (each at most once) and how each ended; the jobs
running, never more than ``W``; the jobs each step finished;
``statistics()`` (nothing pending once the map is closed); the input never
closed by the map.  A close cancels the jobs in flight (queued ones never
start), ends a waiting call and drops the input's error; a release closed
in the same step wins over the close (the job ends as released).  A
cancelled call loses nothing (its result comes with the next call); when
its job was released in the same step it may have returned the result
instead, and when the map was closed in the same step it may have ended
(either is what the docs allow).  An ordered call that waits for a
head that fails as another step closes the map gets that error or the end
(the docs say only that a close ends the iteration).

At the end every job is released and the program ends one of three ways:
drain (call until the end: every item read is delivered once, and the
input's error once), close, or abandon (leave the executor's block with
the map open).  The block must exit (no deadlock) and raise exactly the
errors of the jobs that failed and were not delivered.  After it, a call
still delivers what was ready, and one that would read raises
``RuntimeError`` and reads nothing.

Hypothesis cannot run inside a running event loop, so the test is a plain
function that calls ``anyio.run`` once per example, on each backend of
``tests/conftest.py``'s list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from anyio_prims import Executor, MapIterator

from .. import _tasks
from ..conftest import _selected
from ._models import PHASES, run_block, run_with_helpers

MAX_ITEMS = 12

Step = tuple[Any, ...]
#: (blocks, raises)
Kind = tuple[bool, bool]
#: A call's outcome: ("value", v), ("raised", message), ("stop",),
#: ("cancelled",), ("RuntimeError", message), ...
Outcome = tuple[Any, ...]

INPUTS = ("sync", "generator", "async", "async_generator", "async_checkpoint")

kinds: st.SearchStrategy[Kind] = st.tuples(
    st.sampled_from([True, True, False]), st.sampled_from([False, False, True])
)
picks = st.integers(0, 15)
gates = st.integers(0, 2)
steps: st.SearchStrategy[Step] = st.one_of(
    st.just(("take",)),
    st.just(("take",)),
    st.just(("take",)),
    st.just(("take",)),
    st.tuples(st.just("release"), picks),
    st.tuples(st.just("release"), picks),
    st.tuples(st.just("release"), picks),
    st.just(("cancel_take",)),
    st.tuples(st.just("release_cancel_take"), picks, st.booleans()),
    st.tuples(st.just("close"), st.sampled_from(["aclose", "close", "with"]), gates),
    st.tuples(st.just("release_close"), picks, gates),
    st.tuples(st.just("close_cancel_take"), st.booleans(), gates),
)
programs = st.lists(steps, min_size=4, max_size=30)
max_workers_values = st.sampled_from([1, 1, 2, 2, 3, None])
window_values = st.sampled_from([None, None, 1, 2, 3, 5])
error_at_values = st.one_of(st.none(), st.none(), st.integers(0, MAX_ITEMS))
ends = st.sampled_from(["drain", "drain", "close", "abandon"])


async def settle() -> None:
    """``_tasks.settle()``, after a few more checkpoints: a take step runs a
    chain of tasks (the consumer, a worker it starts, the job, the consumer
    again) longer than its four, and on asyncio
    ``wait_all_tasks_blocked()`` sleeps 0.1 s whenever it finds a task
    that can run (most of the run time on uvloop, without these)."""
    for _ in range(4):
        await anyio.lowlevel.checkpoint()
    await _tasks.settle()


UNSETTLED = ("unread", "queued", "running")
FINISHED = ("returned", "raised")


# -- the model -----------------------------------------------------------------


@dataclass
class MItem:
    blocks: bool
    raises: bool
    released: bool = False
    #: unread, queued, running, returned, raised or cancelled
    state: str = "unread"
    started: bool = False
    delivered: bool = False

    def finishes(self) -> bool:
        """Whether the job, started, runs to its end."""
        return not self.blocks or self.released

    def ended(self) -> str | None:
        """What the job itself saw, as ``World.job`` records it."""
        if not self.started or self.state == "running":
            return None
        return self.state


@dataclass
class Model:
    items: list[MItem]
    ordered: bool
    window: int
    max_workers: int | None
    #: the read that raises, or None
    error_at: int | None
    #: the input passes no checkpoint: a call's reads are known exactly
    exact_reads: bool
    #: reads of the input, the one that ended it (or raised) included
    calls: int = 0
    read_items: int = 0
    exhausted: bool = False
    #: the input's error, read and not yet raised
    input_error: bool = False
    closed: bool = False
    #: the executor: jobs queued, jobs running (blocked)
    queue: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    #: the order the jobs finished in, as they recorded it
    finish_order: list[int] = field(default_factory=list)
    #: every call's outcome; None while the last one waits
    outcomes: list[Outcome | None] = field(default_factory=list)

    def waiting(self) -> bool:
        return bool(self.outcomes) and self.outcomes[-1] is None

    def in_flight(self) -> int:
        if self.closed:
            return 0
        return sum(not it.delivered for it in self.items[: self.read_items])

    def next_delivery(self) -> int | None:
        """The item whose outcome the next call takes, if one is ready."""
        if self.closed:
            return None
        if self.ordered:
            for k in range(self.read_items):
                it = self.items[k]
                if not it.delivered:
                    return k if it.state in FINISHED else None
            return None
        for k in self.finish_order:
            if not self.items[k].delivered:
                return k
        return None

    def deliver(self, k: int) -> Outcome:
        it = self.items[k]
        it.delivered = True
        if it.state == "raised":
            event("a job's error was delivered")
            return ("raised", f"job {k}")
        return ("value", f"result {k}")

    def read_bounds(self) -> tuple[int, int]:
        """The input's read count after a call that starts now: at least, at
        most (the reads up to a full window, or the input's end)."""
        if (
            self.closed
            or self.next_delivery() is not None
            or (self.exhausted and self.in_flight() == 0)
        ):
            return self.calls, self.calls
        c, flying, ended = self.calls, self.in_flight(), self.exhausted
        while not ended and flying < self.window:
            if c == self.error_at or c == len(self.items):
                ended = True
            else:
                flying += 1
            c += 1
        if self.exact_reads or c == self.calls:
            return c, c
        # Jobs run while the input checkpoints: a result may be ready after
        # the first read, and the call takes it.
        return self.calls + 1, c

    def read(self) -> None:
        c = self.calls
        self.calls += 1
        if c == self.error_at:
            self.exhausted = True
            self.input_error = True
        elif c == len(self.items):
            self.exhausted = True
        else:
            assert c == self.read_items
            self.read_items += 1
            self.items[c].state = "queued"
            self.queue.append(c)

    def drain(self) -> set[int]:
        """Let the executor run until every job blocks; the jobs finished."""
        done: set[int] = set()

        def finish(k: int) -> None:
            it = self.items[k]
            it.state = "raised" if it.raises else "returned"
            done.add(k)

        for k in [k for k in self.running if self.items[k].finishes()]:
            self.running.remove(k)
            finish(k)
        # Workers take the jobs in input order; one that finishes frees its
        # worker for the next.
        while self.queue and (
            self.max_workers is None or len(self.running) < self.max_workers
        ):
            k = self.queue.pop(0)
            it = self.items[k]
            it.started = True
            if it.finishes():
                finish(k)
            else:
                it.state = "running"
                self.running.append(k)
        return done

    def release(self, k: int) -> None:
        self.items[k].released = True

    def head(self) -> int | None:
        for k in range(self.read_items):
            if not self.items[k].delivered:
                return k
        return None

    def close(self) -> None:
        if not self.closed:
            if self.waiting():
                event("closed while a call waited")
            event(f"closed with {self.in_flight()} job(s) in flight")
        self.closed = True
        self.exhausted = True
        self.input_error = False
        for k in range(self.read_items):
            it = self.items[k]
            if it.delivered or it.state in FINISHED:
                continue
            if it.state == "queued":
                self.queue.remove(k)  # never starts
                it.state = "cancelled"
            elif not it.finishes():
                self.running.remove(k)
                it.state = "cancelled"
            # else released in the same step: it ends as released (drain)

    def resolve(
        self, real: Outcome | None, cancelled: bool, race_head: int | None
    ) -> None:
        """The waiting call, after the step: its outcome, or still waiting."""
        if not self.waiting():
            return
        if cancelled:
            if real == ("cancelled",):
                if self.next_delivery() is not None:
                    event("a call cancelled as its result came left it ready")
                self.outcomes[-1] = real
                return
            if self.closed:
                event("a call cancelled as the map closed ended")
            elif self.next_delivery() is None:
                self.outcomes[-1] = ("cancelled",)
                return
            else:
                event("a call cancelled as its result came returned it")
        if self.closed:
            if race_head is not None and real == ("raised", f"job {race_head}"):
                event("a head that failed as the map closed raised its error")
                self.outcomes[-1] = self.deliver(race_head)
            else:
                self.outcomes[-1] = ("stop",)
            return
        k = self.next_delivery()
        if k is not None:
            self.outcomes[-1] = self.deliver(k)
            return
        if self.exhausted and self.in_flight() == 0:
            self.outcomes[-1] = self.end_of_input()
            return
        # Still waiting: only with a full window, or the input ended.
        assert self.exhausted or self.in_flight() == self.window, (
            "a call waits with room in its window",
            self.in_flight(),
            self.window,
        )
        event("a call waited")

    def end_of_input(self) -> Outcome:
        if self.input_error:
            self.input_error = False
            event("the input's error was raised")
            return ("raised", "input broke")
        return ("stop",)

    def call_after_exit(self) -> Outcome:
        """A call once the executor's block has exited (every job settled)."""
        k = self.next_delivery()
        if k is not None:
            event("a result was delivered after the exit")
            return self.deliver(k)
        if self.closed or (self.exhausted and self.in_flight() == 0):
            return self.end_of_input() if not self.closed else ("stop",)
        event("a call after the exit would read: RuntimeError")
        return ("RuntimeError", "the Executor is closed")


# -- the real thing --------------------------------------------------------------


@dataclass
class JobRecord:
    blocks: bool
    raises: bool
    event: anyio.Event = field(default_factory=anyio.Event)
    runs: int = 0
    ended: str | None = None


@dataclass
class CallRecord:
    scope: anyio.CancelScope | None = None
    outcome: Outcome | None = None


class Source:
    """The input's items, counting its reads."""

    def __init__(self, world: World, n: int, error_at: int | None) -> None:
        self.world = world
        self.n = n
        self.error_at = error_at
        self.calls = 0
        self.items = 0
        self.closed = False

    def take(self) -> int | None:
        """The next item, or None at the end."""
        world = self.world
        if self.items - world.delivered >= world.window:
            world.violations.append(
                f"read {self.calls} with {self.items - world.delivered} in flight"
            )
        c = self.calls
        self.calls += 1
        if c == self.error_at:
            raise ValueError("input broke")
        if c >= self.n:
            return None
        self.items += 1
        return c


class SyncInput:
    def __init__(self, source: Source) -> None:
        self.source = source

    def __iter__(self) -> SyncInput:
        return self

    def __next__(self) -> int:
        k = self.source.take()
        if k is None:
            raise StopIteration
        return k

    def close(self) -> None:  # pragma: no cover - a fault
        self.source.closed = True


class AsyncInput:
    def __init__(self, source: Source, checkpoint: bool) -> None:
        self.source = source
        self.checkpoint = checkpoint

    def __aiter__(self) -> AsyncInput:
        return self

    async def __anext__(self) -> int:
        if self.checkpoint:
            await anyio.lowlevel.checkpoint()
        k = self.source.take()
        if k is None:
            raise StopAsyncIteration
        return k

    async def aclose(self) -> None:  # pragma: no cover - a fault
        self.source.closed = True


def generator(source: Source) -> Iterator[int]:
    try:
        while (k := source.take()) is not None:
            yield k
    except GeneratorExit:  # pragma: no cover - a fault (or the final cleanup)
        source.closed = True
        raise


async def async_generator(source: Source) -> AsyncIterator[int]:
    try:
        while (k := source.take()) is not None:
            yield k
    except GeneratorExit:  # pragma: no cover - a fault (or the final cleanup)
        source.closed = True
        raise


class World:
    """The executor, the map, its input, the jobs and the calls."""

    def __init__(
        self,
        ex: Executor,
        helpers: anyio.abc.TaskGroup,
        items: list[Kind],
        error_at: int | None,
        window: int,
    ) -> None:
        self.ex = ex
        self.helpers = helpers
        self.window = window
        self.jobs = [JobRecord(*kind) for kind in items]
        self.source = Source(self, len(items), error_at)
        self.calls: list[CallRecord] = []
        #: the jobs that ran to their end, in the order they did
        self.finished: list[int] = []
        self.running = 0
        self.peak = 0
        #: job outcomes (results and errors) the calls returned
        self.delivered = 0
        self.violations: list[str] = []
        self.input: Any = None

    def make_input(self, kind: str) -> Any:
        source = self.source
        if kind == "sync":
            self.input = SyncInput(source)
        elif kind == "generator":
            self.input = generator(source)
        elif kind == "async_generator":
            self.input = async_generator(source)
        else:
            self.input = AsyncInput(source, checkpoint=kind == "async_checkpoint")
        return self.input

    async def job(self, k: int) -> str:
        rec = self.jobs[k]
        rec.runs += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if rec.blocks:
                try:
                    await rec.event.wait()
                except anyio.get_cancelled_exc_class():
                    rec.ended = "cancelled"
                    raise
            else:
                await anyio.lowlevel.checkpoint()
            self.finished.append(k)
            if rec.raises:
                rec.ended = "raised"
                raise ValueError(f"job {k}")
            rec.ended = "returned"
            return f"result {k}"
        finally:
            self.running -= 1

    async def call(self, it: MapIterator[str]) -> Outcome:
        """One ``__anext__``: its outcome."""
        try:
            value = await it.__anext__()
        except StopAsyncIteration:
            return ("stop",)
        except ValueError as exc:
            if str(exc).startswith("job "):
                self.delivered += 1
            return ("raised", str(exc))
        except anyio.BusyResourceError:
            return ("busy",)
        except RuntimeError as exc:
            return ("RuntimeError", str(exc))
        except Exception as exc:  # a mismatch for check(), not a crash
            return ("unexpected", repr(exc))
        self.delivered += 1
        return ("value", value)

    async def take(self, it: MapIterator[str], rec: CallRecord) -> None:
        with anyio.CancelScope() as scope:
            rec.scope = scope
            rec.outcome = await self.call(it)
        if scope.cancelled_caught:  # (with an outcome: one returned, then lost)
            rec.outcome = ("cancelled",) + (rec.outcome or ())


def check(world: World, model: Model) -> None:
    """The map, its input, the jobs and the executor against the model."""
    assert not world.violations, world.violations
    assert [rec.outcome for rec in world.calls] == model.outcomes
    assert not world.source.closed, "the map closed its input"
    # Each job at most once, the ones the model started; how each ended.
    assert [rec.runs for rec in world.jobs] == [int(it.started) for it in model.items]
    assert [rec.ended for rec in world.jobs] == [it.ended() for it in model.items]
    assert world.running == len(model.running)
    limit = model.max_workers
    assert limit is None or world.peak <= limit, (world.peak, limit)
    if not model.closed:
        assert world.source.items - world.delivered <= model.window
    stats = world.ex.statistics()
    assert limit is None or stats.workers <= limit
    assert stats.jobs_queued == len(model.queue)
    # (None once the map is closed and its jobs cancelled.)
    assert stats.jobs_pending == len(model.queue) + len(model.running)


def replay(
    world: World,
    model: Model,
    bounds: tuple[int, int] | None,
    cancelled: bool = False,
    race_head: int | None = None,
) -> None:
    """The model's side of a step whose tasks have all run."""
    reads = world.source.calls
    if bounds is None:
        assert reads == model.calls, "the input was read outside a call"
    else:
        lo, hi = bounds
        assert lo <= reads <= hi, ("reads", reads, bounds)
        if lo < hi:
            event(f"a read that checkpoints: {'fewer' if reads < hi else 'all'} reads")
    while model.calls < reads:
        model.read()
    done = model.drain()
    new = world.finished[len(model.finish_order) :]
    assert sorted(new) == sorted(done), (new, done)
    model.finish_order.extend(new)
    real = world.calls[-1].outcome if world.calls else None
    model.resolve(real, cancelled, race_head)
    check(world, model)


def pick(candidates: list[int], k: int) -> int | None:
    return candidates[k % len(candidates)] if candidates else None


async def close_map(it: MapIterator[str], how: str) -> None:
    if how == "aclose":
        await it.aclose()
    elif how == "close":
        it.close()
    else:
        async with it:
            pass


async def run_steps(
    world: World, model: Model, it: MapIterator[str], program: list[Step]
) -> None:
    for step in program:
        kind = step[0]
        bounds: tuple[int, int] | None = None
        cancelled = False
        race_head: int | None = None
        releasable = [
            k
            for k, item in enumerate(model.items)
            if item.blocks and not item.released and item.state in UNSETTLED
        ]
        if kind == "take":
            if model.waiting():
                event("a second consumer was refused")
                assert await world.call(it) == ("busy",)
                continue
            bounds = model.read_bounds()
            model.outcomes.append(None)
            world.calls.append(CallRecord())
            world.helpers.start_soon(world.take, it, world.calls[-1])
        elif kind == "release":
            k = pick(releasable, step[1])
            if k is None:
                continue
            if model.items[k].state == "unread":
                event("released a job before its item was read")
            world.jobs[k].event.set()
            model.release(k)
        elif kind == "cancel_take":
            if not model.waiting():
                continue
            scope = world.calls[-1].scope
            assert scope is not None
            scope.cancel()
            cancelled = True
        elif kind == "release_cancel_take":
            _, n, release_first = step
            k = pick(releasable, n)
            if k is None or not model.waiting():
                continue
            event(
                f"released a job and cancelled the call, release first: {release_first}"
            )
            scope = world.calls[-1].scope
            assert scope is not None
            if release_first:
                world.jobs[k].event.set()
                scope.cancel()
            else:
                scope.cancel()
                world.jobs[k].event.set()
            model.release(k)
            cancelled = True
        elif kind == "close":
            _, how, gate = step
            if gate or model.closed:
                continue
            await close_map(it, how)
            model.close()
        elif kind == "close_cancel_take":
            _, close_first, gate = step
            if gate or model.closed or not model.waiting():
                continue
            event(f"closed the map and cancelled the call, close first: {close_first}")
            scope = world.calls[-1].scope
            assert scope is not None
            if close_first:
                it.close()
                scope.cancel()
            else:
                scope.cancel()
                it.close()
            model.close()
            cancelled = True
        else:  # release_close
            _, n, gate = step
            k = pick([k for k in releasable if k in model.running], n)
            if k is None or gate or model.closed:
                continue
            event("released a running job and closed the map")
            if (
                model.ordered
                and model.waiting()
                and model.head() == k
                and model.items[k].raises
            ):
                race_head = k
            world.jobs[k].event.set()
            it.close()
            model.release(k)
            model.close()
        await settle()
        replay(world, model, bounds, cancelled, race_head)


async def finish(world: World, model: Model, it: MapIterator[str], end: str) -> None:
    """Release every job; then drain the map, close it, or leave it open."""
    for k, rec in enumerate(world.jobs):
        rec.event.set()
        model.release(k)
    await settle()
    replay(world, model, None)
    if end == "close":
        if not model.closed:
            await close_map(it, "aclose")
            model.close()
        await settle()
        replay(world, model, None)
    elif end == "drain":
        was_closed = model.closed
        for _ in range(len(model.items) + 3):
            if model.outcomes and model.outcomes[-1] == ("stop",):
                break
            bounds = model.read_bounds()
            model.outcomes.append(None)
            world.calls.append(CallRecord())
            world.helpers.start_soon(world.take, it, world.calls[-1])
            await settle()
            replay(world, model, bounds)
        assert world.calls[-1].outcome == ("stop",), "the iteration never ended"
        async with it:  # leaving the block closes the map
            pass
        model.closed = True
        if not was_closed:
            # Nothing lost while the map was open: every item read is
            # delivered once, and the input's error once (if it was read).
            outcomes = [rec.outcome for rec in world.calls]
            error_at = world.source.error_at
            readable = len(world.jobs) if error_at is None else error_at
            expected = [
                ("raised", f"job {k}") if rec.raises else ("value", f"result {k}")
                for k, rec in enumerate(world.jobs[:readable])
            ]
            if error_at is not None:
                expected.append(("raised", "input broke"))
            delivered = [o for o in outcomes if o is not None and o[0] != "stop"]
            delivered = [o for o in delivered if o != ("cancelled",)]
            assert sorted(delivered) == sorted(expected)
        await settle()
        replay(world, model, None)


async def run_checked(
    model: Model,
    input_kind: str,
    end: str,
    program: list[Step],
    helpers: anyio.abc.TaskGroup,
    window: int | None,
) -> None:
    error_at = model.error_at
    items = [(it.blocks, it.raises) for it in model.items]

    async def body(ex: Executor) -> tuple[World, MapIterator[str]]:
        world = World(ex, helpers, items, error_at, model.window)
        it = ex.map(
            world.job,
            world.make_input(input_kind),
            ordered=model.ordered,
            window=window,
        )
        await run_steps(world, model, it, program)
        await finish(world, model, it, end)
        return world, it

    ex = Executor(model.max_workers)
    (world, it), exit_errors = await run_block(ex, body, helpers)

    # The errors of the jobs that failed and were never delivered, each once.
    assert len(exit_errors) == len(set(exit_errors)), exit_errors
    undelivered = {
        f"job {k}"
        for k, item in enumerate(model.items)
        if item.state == "raised" and not item.delivered
    }
    assert set(exit_errors) == undelivered
    event(f"the block raised {len(exit_errors)} undelivered error(s)")

    # Every job settled: none pending, none running, each run at most once.
    stats = ex.statistics()
    assert (stats.workers, stats.jobs_queued, stats.jobs_pending) == (0, 0, 0)
    assert world.running == 0
    assert all(rec.runs <= 1 for rec in world.jobs)

    # After the exit: what was ready is delivered, a read raises and reads
    # nothing, the end stays the end.
    for _ in range(model.in_flight() + 2):
        outcome = await world.call(it)
        assert outcome == model.call_after_exit()
        assert world.source.calls == model.calls, "a read after the exit"

    if input_kind == "generator":
        world.input.close()
    elif input_kind == "async_generator":
        await world.input.aclose()


async def run_program(
    max_workers: int | None,
    window: int | None,
    ordered: bool,
    input_kind: str,
    items: list[Kind],
    error_at: int | None,
    end: str,
    program: list[Step],
) -> None:
    if error_at is not None and error_at > len(items):
        error_at = None
    effective = window
    if effective is None:
        effective = max_workers if max_workers is not None else 64
    model = Model(
        [MItem(*kind) for kind in items],
        ordered,
        effective,
        max_workers,
        error_at,
        exact_reads=input_kind != "async_checkpoint",
    )
    event(f"input: {input_kind}, end: {end}, ordered: {ordered}")
    await run_with_helpers(
        partial(run_checked, model, input_kind, end, program, window=window)
    )


@pytest.mark.parametrize("backend", _selected())
@settings(
    max_examples=1000,
    deadline=None,
    phases=PHASES,
)
@given(
    max_workers=max_workers_values,
    window=window_values,
    ordered=st.booleans(),
    input_kind=st.sampled_from(INPUTS),
    items=st.lists(kinds, max_size=MAX_ITEMS),
    error_at=error_at_values,
    end=ends,
    program=programs,
)
def test_random_map_programs_match_the_model(
    backend: tuple[str, dict[str, Any]],
    max_workers: int | None,
    window: int | None,
    ordered: bool,
    input_kind: str,
    items: list[Kind],
    error_at: int | None,
    end: str,
    program: list[Step],
) -> None:
    name, options = backend
    anyio.run(
        run_program,
        max_workers,
        window,
        ordered,
        input_kind,
        items,
        error_at,
        end,
        program,
        backend=name,
        backend_options=options,
    )
