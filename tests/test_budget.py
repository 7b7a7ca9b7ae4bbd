"""The cooperative budget and strict mode (DESIGN.md, "Checkpoints").

A call that completes without blocking spends one unit of the budget; every
BUDGET_SIZE such calls, one of them goes through a full checkpoint first.  So
a loop of non-blocking calls can neither starve the other tasks nor outlive a
cancellation by more than BUDGET_SIZE calls.  Strict mode makes every call a
checkpoint.  BatchSemaphore.acquire with plenty of permits is the call under
test.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from anyio_prims import (
    BatchSemaphore,
    CapacityLimiter,
    Event,
    Lock,
    RWLock,
    Semaphore,
    mpmc,
)
from anyio_prims._core import BUDGET, BUDGET_SIZE

pytestmark = pytest.mark.anyio

#: Calls a cancelled loop may make before the test gives up on it (so that a
#: broken budget fails the test instead of hanging it).
LIMIT = 10 * BUDGET_SIZE


class Ticker:
    """Counts the schedule points another task lets it have."""

    def __init__(self) -> None:
        self.ticks = 0
        self.done = False

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        while not self.done:
            self.ticks += 1
            await anyio.lowlevel.checkpoint()


@asynccontextmanager
async def ticking() -> AsyncIterator[Ticker]:
    """A Ticker task that runs for the block: ``ticks`` grows only when the
    block's task reaches a schedule point."""
    ticker = Ticker()
    async with anyio.create_task_group() as tg:
        await tg.start(ticker.run)
        try:
            yield ticker
        finally:
            ticker.done = True


async def test_non_blocking_loop_lets_another_task_run() -> None:
    sem = BatchSemaphore(10)
    flag = False
    seen_at: int | None = None

    async def set_flag() -> None:
        nonlocal flag
        flag = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(set_flag)
        for i in range(4 * BUDGET_SIZE):
            await sem.acquire()
            sem.release()
            if flag:
                seen_at = i
                break
    # The loop reached a schedule point within one budget; on Trio the other
    # task may be scheduled after the loop in that batch, hence two budgets.
    assert seen_at is not None
    assert seen_at < 2 * BUDGET_SIZE


async def test_budgeted_calls_do_not_yield_on_every_call() -> None:
    # The other side of the budget: non-strict calls are not schedule points
    # each time (the cost the budget exists to avoid).
    sem = BatchSemaphore(10)
    calls = 4 * BUDGET_SIZE
    async with ticking() as ticker:
        before = ticker.ticks
        for _ in range(calls):
            await sem.acquire()
            sem.release()
        during = ticker.ticks - before
    assert during <= calls // BUDGET_SIZE + 1


class Parking:
    """One primitive that the current task parks on once: ``park()`` blocks
    until another task, which ``hold()`` may have made the holder first,
    sees it parked (``parked()``) and calls ``open()``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.prim: Any = None
        self.token = object()
        if kind == "BatchSemaphore.acquire":
            self.prim = BatchSemaphore(0)
        elif kind == "Lock.acquire":
            self.prim = Lock(fast_acquire=True)
        elif kind in ("Semaphore.acquire", "async with Semaphore"):
            self.prim = Semaphore(0, fast_acquire=True)
        elif kind == "CapacityLimiter.acquire":
            self.prim = CapacityLimiter(1)
        elif kind == "Event.wait":
            self.prim = Event()
        elif kind == "RWLock.acquire_read":
            self.prim = RWLock()
        elif kind in ("send", "receive"):
            self.prim = mpmc.channel(0)
        else:
            raise AssertionError(kind)

    async def hold(self) -> None:
        if self.kind == "Lock.acquire":
            await self.prim.acquire()
        elif self.kind == "CapacityLimiter.acquire":
            self.prim.acquire_on_behalf_of_nowait(self.token)
        elif self.kind == "RWLock.acquire_read":
            await self.prim.acquire_write()

    def parked(self) -> bool:
        if self.kind in ("send", "receive"):
            stats = self.prim[0].statistics()
            return bool(stats.tasks_waiting_send or stats.tasks_waiting_receive)
        if self.kind == "RWLock.acquire_read":
            return bool(self.prim.statistics().tasks_waiting_read)
        return bool(self.prim.statistics().tasks_waiting)

    def open(self) -> None:
        kind = self.kind
        if kind == "Event.wait":
            self.prim.set()
        elif kind == "CapacityLimiter.acquire":
            self.prim.release_on_behalf_of(self.token)
        elif kind == "RWLock.acquire_read":
            self.prim.release_write()
        elif kind == "send":
            self.prim[1].receive_nowait()
        elif kind == "receive":
            self.prim[0].send_nowait(1)
        else:
            self.prim.release()

    async def park(self) -> None:
        kind = self.kind
        if kind == "Event.wait":
            await self.prim.wait()
        elif kind == "RWLock.acquire_read":
            await self.prim.acquire_read()
            self.prim.release_read()
        elif kind == "async with Semaphore":
            async with self.prim:
                pass
        elif kind == "send":
            await self.prim[0].send(1)
        elif kind == "receive":
            assert await self.prim[1].receive() == 1
        else:
            await self.prim.acquire()
            self.prim.release()

    async def opener(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        await self.hold()
        task_status.started()
        while not self.parked():
            await anyio.lowlevel.checkpoint()
        self.open()


PARKINGS = [
    "BatchSemaphore.acquire",
    "Lock.acquire",
    "Semaphore.acquire",
    "async with Semaphore",
    "CapacityLimiter.acquire",
    "Event.wait",
    "RWLock.acquire_read",
    "send",
    "receive",
]


@pytest.mark.parametrize("kind", PARKINGS)
async def test_a_park_that_is_granted_starts_no_new_budget(kind: str) -> None:
    # A park that ends granted is a schedule point, but on asyncio not
    # always a cancellation point (a grant that comes before the
    # cancellation lands raises nothing): it refills nothing, and the
    # budgeted calls after it take their checkpoint when the budget they
    # left runs out.  (Every place that parks once refilled it, and a loop
    # of waits each granted as it parked could not be cancelled.)
    parking = Parking(kind)
    async with anyio.create_task_group() as tg:
        await tg.start(parking.opener)
        BUDGET.left = 2  # nearly spent
        await parking.park()  # parks until the opener sees it parked
        assert BUDGET.left <= 2


@pytest.mark.parametrize("source", ["cancel scope", "task.cancel()"])
@pytest.mark.parametrize("kind", PARKINGS)
async def test_a_park_that_a_cancellation_ends_starts_a_new_budget(
    kind: str, source: str, anyio_backend_name: str
) -> None:
    # A cancellation reaches a parked task only when the loop runs it
    # again: the task has been through a schedule point, as a woken one
    # has, and the budgeted calls after it start a full budget.
    if source == "task.cancel()" and anyio_backend_name != "asyncio":
        pytest.skip("a plain asyncio cancellation")
    sem = BatchSemaphore(10)
    parking = Parking(kind)
    cancel: list[Callable[[], object]] = []

    async def canceller(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        await parking.hold()
        task_status.started()
        while not parking.parked():
            await anyio.lowlevel.checkpoint()
        cancel[0]()

    async def park_then_call(ticker: Ticker) -> int:
        BUDGET.left = 2  # nearly spent
        if source == "cancel scope":
            with anyio.CancelScope() as scope:
                cancel.append(scope.cancel)
                await parking.park()
            assert scope.cancelled_caught
        else:
            task = asyncio.current_task()
            assert task is not None
            cancel.append(task.cancel)
            with pytest.raises(asyncio.CancelledError):
                await parking.park()
            if hasattr(task, "uncancel"):
                task.uncancel()
        before = ticker.ticks
        with no_checkpoints():
            for _ in range(BUDGET_SIZE - 1):
                await sem.acquire()
                sem.release()
        return ticker.ticks - before

    # The ticker sees every schedule point on asyncio; on Trio it may run
    # after the calls in the batch they yield into, so Trio's own count of
    # the task's checkpoints is read there.
    no_checkpoints: Callable[[], AbstractContextManager[object]] = nullcontext
    if anyio_backend_name == "trio":
        import trio.testing

        no_checkpoints = trio.testing.assert_no_checkpoints
    async with ticking() as ticker, anyio.create_task_group() as tg:
        await tg.start(canceller)
        if source == "cancel scope":
            during = await park_then_call(ticker)
        else:
            during = await asyncio.get_running_loop().create_task(
                park_then_call(ticker)
            )
    assert during == 0


async def test_cancelled_loop_stops_within_the_budget() -> None:
    sem = BatchSemaphore(10)
    calls_after_cancel = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(LIMIT):
            calls_after_cancel += 1  # counts the call that raises, too
            await sem.acquire()
            sem.release()
    assert scope.cancelled_caught
    # At most BUDGET_SIZE calls are made after cancel(), the last of which
    # raises (the budget may be anywhere from full to nearly spent).
    assert calls_after_cancel <= BUDGET_SIZE
    assert sem.available_permits == 10


async def test_cancelled_loop_stops_within_the_budget_on_asyncio_task_cancel(
    anyio_backend_name: str,
) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("a plain asyncio cancellation")
    sem = BatchSemaphore(10)
    calls_after_cancel = 0

    async def loop() -> None:
        nonlocal calls_after_cancel
        this = asyncio.current_task()
        assert this is not None
        this.cancel()
        for _ in range(LIMIT):
            calls_after_cancel += 1
            await sem.acquire()
            sem.release()

    task = asyncio.get_running_loop().create_task(loop())
    await asyncio.wait({task})
    assert task.cancelled()
    assert calls_after_cancel <= BUDGET_SIZE
    assert sem.available_permits == 10


async def test_cancelled_hold_loop_stops_within_the_budget() -> None:
    sem = BatchSemaphore(10)
    calls_after_cancel = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(LIMIT):
            calls_after_cancel += 1
            async with sem.hold(2):
                pass
    assert scope.cancelled_caught
    assert calls_after_cancel <= BUDGET_SIZE
    assert sem.available_permits == 10


async def test_strict_mode_makes_every_call_a_schedule_point(
    anyio_backend_name: str,
) -> None:
    sem = BatchSemaphore(10, strict=True)
    calls = 100
    seen = []
    async with ticking() as ticker:
        for _ in range(calls):
            seen.append(ticker.ticks)
            await sem.acquire()
            sem.release()
        seen.append(ticker.ticks)
    if anyio_backend_name == "asyncio":
        # FIFO scheduling: the ticker runs between every two calls.
        assert all(a < b for a, b in itertools.pairwise(seen))
    else:
        # Trio runs every runnable task once per batch, in a random order:
        # each call yields into the next batch, where the ticker runs too.
        assert seen[-1] - seen[0] >= calls - 1


async def test_strict_mode_makes_every_call_a_cancellation_point() -> None:
    sem = BatchSemaphore(10, strict=True)
    calls_after_cancel = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(LIMIT):
            calls_after_cancel += 1
            await sem.acquire()
            sem.release()
    assert scope.cancelled_caught
    assert calls_after_cancel == 1
    assert sem.available_permits == 10


def _budgeted_calls() -> dict[str, Callable[[], Callable[[], Awaitable[object]]]]:
    """Each kind of budgeted call: a maker of a callable that makes exactly
    one such call (and undoes what it took, with calls that spend nothing)."""

    def batch_semaphore() -> Callable[[], Awaitable[object]]:
        sem = BatchSemaphore(LIMIT)
        return sem.acquire

    def lock(cls: Callable[[], Any]) -> Callable[[], Callable[[], Awaitable[None]]]:
        def make() -> Callable[[], Awaitable[None]]:
            held = cls()

            async def call() -> None:
                await held.acquire()
                held.release()

            return call

        return make

    def send() -> Callable[[], Awaitable[object]]:
        tx, _rx = mpmc.channel[object](math.inf)
        return partial(tx.send, "item")

    def receive() -> Callable[[], Awaitable[object]]:
        tx, rx = mpmc.channel[int](math.inf)
        for i in range(LIMIT):
            tx.send_nowait(i)
        return rx.receive

    def iterate() -> Callable[[], Awaitable[object]]:
        tx, rx = mpmc.channel[int](math.inf)
        for i in range(LIMIT):
            tx.send_nowait(i)
        return rx.__aiter__().__anext__

    def rwlock(side: str, guard: bool) -> Callable[[], Callable[[], Awaitable[None]]]:
        def make() -> Callable[[], Awaitable[None]]:
            rw = RWLock()
            if guard:
                block = rw.read if side == "read" else rw.write

                async def enter() -> None:
                    async with block():
                        pass

                return enter
            acquire = rw.acquire_read if side == "read" else rw.acquire_write
            release = rw.release_read if side == "read" else rw.release_write

            async def call() -> None:
                await acquire()
                release()

            return call

        return make

    return {
        "BatchSemaphore.acquire": batch_semaphore,
        "Lock(fast_acquire=True).acquire": lock(partial(Lock, fast_acquire=True)),
        "Semaphore(fast_acquire=True).acquire": lock(
            partial(Semaphore, 1, fast_acquire=True)
        ),
        "async with Semaphore(fast_acquire=True)": _semaphore_block,
        "send": send,
        "receive": receive,
        "async for": iterate,
        "RWLock.acquire_read": rwlock("read", guard=False),
        "RWLock.acquire_write": rwlock("write", guard=False),
        "async with RWLock.read()": rwlock("read", guard=True),
        "async with RWLock.write()": rwlock("write", guard=True),
    }


def _semaphore_block() -> Callable[[], Awaitable[None]]:
    sem = Semaphore(1, fast_acquire=True)

    async def call() -> None:
        async with sem:
            pass

    return call


BUDGETED_CALLS = _budgeted_calls()


@pytest.mark.parametrize("kind", list(BUDGETED_CALLS))
async def test_a_cancelled_loop_raises_at_the_last_call_of_a_full_budget(
    kind: str,
) -> None:
    # From a full budget, the BUDGET_SIZE-th call is the one that goes
    # through the checkpoint, and no other: with the cancellation pending,
    # exactly BUDGET_SIZE calls are made, the last of which raises.
    call = BUDGETED_CALLS[kind]()
    calls = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        BUDGET.left = BUDGET_SIZE
        for _ in range(LIMIT):
            calls += 1
            await call()
    assert scope.cancelled_caught
    assert calls == BUDGET_SIZE
