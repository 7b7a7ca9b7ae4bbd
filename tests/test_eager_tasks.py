"""asyncio's eager tasks (Python 3.12+): a task starts running inside
``create_task`` and may park there, before the task that made it resumes.

The waiter core recognises the running asyncio task through asyncio's own
loop -> task map, and ``Lock`` names its owner from it; an eager task is
entered into that map while it runs its first step, so it must park, be
granted, be cancelled and own locks as a task started the usual way does.
These tests start their own loop with ``asyncio.eager_task_factory`` (plain
asyncio, and uvloop where it accepts that factory), so they are plain
functions, run once per waiter implementation (the suite runs again with
``ANYIO_PRIMS_WAITER=generic``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import pytest

from anyio_prims import (
    BatchSemaphore,
    Event,
    Executor,
    Lock,
    RWLock,
    Semaphore,
    mpmc,
    mpsc,
    spmc,
)
from anyio_prims._core import BUDGET, BUDGET_SIZE

from ._anyio_version import ANYIO_VERSION

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="eager tasks came with Python 3.12"
)


@pytest.fixture(params=["asyncio", "uvloop"])
def run_eager(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run a coroutine function on a fresh loop whose tasks start eagerly."""
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        if sys.version_info >= (3, 13):
            # uvloop's create_task passes eager_start=, which the factory
            # asyncio ships rejects there (uvloop's incompatibility).
            pytest.skip("uvloop does not run asyncio's eager task factory on 3.13")
        new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    else:
        new_loop = asyncio.new_event_loop

    def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        loop = new_loop()
        loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined]
        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()

    return run


def test_an_eager_task_that_blocks_on_a_lock_parks_and_owns_it_when_granted(
    run_eager: Callable[..., Any],
) -> None:
    async def main() -> None:
        lock = Lock()
        order: list[int] = []

        async def worker(i: int) -> None:
            async with lock:
                order.append(i)
                await asyncio.sleep(0)

        await lock.acquire()
        tasks = [asyncio.create_task(worker(i)) for i in range(3)]
        # Each ran eagerly until it parked on the held lock.
        assert not any(task.done() for task in tasks)
        assert lock.statistics().tasks_waiting == 3
        lock.release()
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2]
        assert not lock.locked()

    run_eager(main)


def test_an_eager_task_that_does_not_own_a_lock_cannot_release_it(
    run_eager: Callable[..., Any],
) -> None:
    async def main() -> None:
        lock = Lock()
        await lock.acquire()

        async def release() -> str:
            try:
                lock.release()
            except RuntimeError:
                return "refused"
            return "released"

        assert await asyncio.create_task(release()) == "refused"
        assert lock.locked()
        lock.release()

        # An eager task that takes the free lock owns it.
        async def take() -> None:
            await lock.acquire()

        await asyncio.create_task(take())
        assert lock.locked()
        with pytest.raises(RuntimeError):
            lock.release()

    run_eager(main)


def test_an_eager_waiter_cancelled_while_parked_holds_nothing(
    run_eager: Callable[..., Any],
) -> None:
    async def main() -> None:
        sem = Semaphore(0)
        task = asyncio.create_task(sem.acquire())
        assert sem.statistics().tasks_waiting == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        sem.release()
        assert sem.value == 1
        assert sem.statistics().tasks_waiting == 0

    run_eager(main)


@pytest.mark.parametrize("module", [mpsc, spmc, mpmc], ids=lambda m: m.__name__)
def test_eager_receivers_get_every_item_once_in_order(
    run_eager: Callable[..., Any], module: Any
) -> None:
    async def main() -> list[int]:
        tx, rx = module.channel(0)
        got: list[int] = []

        async def receive() -> None:
            async with rx:
                async for item in rx:
                    got.append(item)

        task = asyncio.create_task(receive())  # parks at once, eagerly
        async with tx:
            for i in range(50):
                await tx.send(i)
        await task
        return got

    assert run_eager(main) == list(range(50))


def test_eager_readers_queued_behind_a_writer_are_admitted_together(
    run_eager: Callable[..., Any],
) -> None:
    async def main() -> None:
        rw = RWLock()
        async with rw.write():
            readers = [asyncio.create_task(rw.acquire_read()) for _ in range(3)]
            assert not any(task.done() for task in readers)
        await asyncio.gather(*readers)
        assert rw.statistics().readers == 3

    run_eager(main)


@pytest.mark.skipif(
    ANYIO_VERSION < (4, 7),
    reason="AnyIO's task groups run under eager task factories from 4.7 on",
)
def test_an_executor_runs_jobs_spawned_from_eager_tasks(
    run_eager: Callable[..., Any],
) -> None:
    async def main() -> list[int]:
        async def double(x: int) -> int:
            await asyncio.sleep(0)
            return 2 * x

        async with Executor(max_workers=3) as executor:
            handles = [executor.spawn(double, i) for i in range(10)]
        return [await handle for handle in handles]

    assert run_eager(main) == [2 * i for i in range(10)]


class _Ticker:
    """A task that counts the loop turns it is given."""

    def __init__(self) -> None:
        self.ticks = 0
        self.done = False

    async def run(self) -> None:
        while not self.done:
            self.ticks += 1
            await asyncio.sleep(0)


async def _turns_given_while(
    start: Callable[[], Coroutine[Any, Any, list[asyncio.Task[None]]]],
    let_go: Callable[[], None],
) -> int:
    """The loop turns another task gets while ``start()`` runs.

    ``start`` starts children that park; ``let_go()`` lets them all finish,
    and they are awaited afterwards.
    """
    ticker = _Ticker()
    ticking = asyncio.create_task(ticker.run())
    before = ticker.ticks
    children = await start()
    during = ticker.ticks - before
    let_go()
    await asyncio.gather(*children)
    ticker.done = True
    await ticking
    return during


def _event_wait() -> tuple[Callable[[], Awaitable[object]], Callable[[], None]]:
    ready = Event()  # parks through the core's WaitQueue.park
    return ready.wait, ready.set


def _channel_receive() -> tuple[Callable[[], Awaitable[object]], Callable[[], None]]:
    tx, rx = mpmc.channel[int](0)  # a receive's wait, written out in the endpoint

    async def receive() -> None:
        with contextlib.suppress(anyio.EndOfStream):
            await rx.receive()

    return receive, tx.close


def _lock_acquire() -> tuple[Callable[[], Awaitable[object]], Callable[[], None]]:
    lock = Lock()  # Lock.acquire's wait, written out
    lock.acquire_nowait()  # held by the creator until let go

    async def take_and_release() -> None:
        async with lock:
            pass

    return take_and_release, lock.release


def _semaphore_acquire() -> tuple[Callable[[], Awaitable[object]], Callable[[], None]]:
    sem = Semaphore(0)  # Semaphore.acquire's wait, written out

    def release_all() -> None:
        for _ in range(_EAGER_CHILDREN):
            sem.release()

    return sem.acquire, release_all


_EAGER_CHILDREN = 4 * BUDGET_SIZE


@pytest.mark.parametrize(
    "parking",
    [_event_wait, _channel_receive, _lock_acquire, _semaphore_acquire],
    ids=["event", "channel", "lock", "semaphore"],
)
def test_a_task_starting_eager_tasks_that_park_still_yields_within_the_budget(
    run_eager: Callable[..., Any],
    parking: Callable[[], tuple[Callable[[], Awaitable[object]], Callable[[], None]]],
) -> None:
    # Each child parks during its eager start, inside create_task(), in its
    # creator's turn: that park gives the turn back to the creator, not to
    # the loop, so it must not start a new budget for the creator.
    async def main() -> int:
        wait, let_go = parking()

        async def child() -> None:
            await wait()

        async def start() -> list[asyncio.Task[None]]:
            sem = BatchSemaphore(10)
            children = []
            for _ in range(_EAGER_CHILDREN):
                children.append(asyncio.create_task(child()))  # parks at once
                await sem.acquire()  # one budgeted call of the creator's own
                sem.release()
            return children

        return await _turns_given_while(start, let_go)

    # 256 budgeted calls with no other schedule point: at least 3 yields.
    assert run_eager(main) >= 3


def test_a_task_whose_eager_children_take_the_due_checkpoint_still_yields(
    run_eager: Callable[..., Any],
) -> None:
    # The creator spends all but one unit of each budget and each child the
    # last one, in its eager start: the child's checkpoint yields back to
    # the creator, not to the loop, so it must not start a new budget either.
    async def main() -> int:
        sem = BatchSemaphore(10)
        ready = Event()

        async def child() -> None:
            await sem.acquire()  # the budget's last unit: a checkpoint
            sem.release()
            await ready.wait()

        async def start() -> list[asyncio.Task[None]]:
            children = []
            BUDGET.left = BUDGET_SIZE  # a fresh budget, so that counts line up
            for _ in range(8):
                for _ in range(BUDGET_SIZE - 1):
                    await sem.acquire()
                    sem.release()
                children.append(asyncio.create_task(child()))
            return children

        return await _turns_given_while(start, ready.set)

    # 8 * 64 budgeted calls: the creator yields in (nearly) every round.
    assert run_eager(main) >= 7
