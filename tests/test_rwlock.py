"""RWLock: sharing, exclusion, task fairness, cancellation, ownership.

Tasks are ordered with ``settle()`` (``anyio.wait_all_tasks_blocked()``),
never with sleeps.  The grant-then-cancel race and the plain asyncio
cancellation sources exist on asyncio only; those tests skip on Trio.  The
model test at the end drives several tasks through random acquires, releases
and cancellations and checks every step against a model of the policy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskGroup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anyio_prims._core import BUDGET, BUDGET_SIZE, FORCE_GENERIC
from anyio_prims.sync._rwlock import RWLock, RWLockStatistics

from ._tasks import run_on_every_backend_in_turn
from ._waiter_count import WAITER_STATS

pytestmark = pytest.mark.anyio

READ, WRITE = "read", "write"
FREE = RWLockStatistics(
    readers=0, writer=None, tasks_waiting_read=0, tasks_waiting_write=0
)


async def settle() -> None:
    """Let every woken task run until all other tasks are blocked again."""
    # Plain checkpoints first: on asyncio, wait_all_tasks_blocked() sleeps
    # 0.1 s whenever it finds a runnable task.
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


async def acquire(lock: RWLock, kind: str) -> None:
    if kind == READ:
        await lock.acquire_read()
    else:
        await lock.acquire_write()


def release(lock: RWLock, kind: str) -> None:
    if kind == READ:
        lock.release_read()
    else:
        lock.release_write()


class Holder:
    """A task that acquires ``lock`` one way, logs its name, and holds the
    lock until ``done`` is set (or its scope is cancelled)."""

    def __init__(self, lock: RWLock, kind: str, name: str, log: list[str]) -> None:
        self.lock, self.kind, self.name, self.log = lock, kind, name, log
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()

    async def run(self) -> None:
        with self.scope:
            await acquire(self.lock, self.kind)
            self.log.append(self.name)
            try:
                await self.done.wait()
            finally:
                release(self.lock, self.kind)


async def start(
    tg: TaskGroup, lock: RWLock, kind: str, name: str, log: list[str]
) -> Holder:
    """Start a Holder and wait until it holds the lock or is queued."""
    holder = Holder(lock, kind, name, log)
    tg.start_soon(holder.run)
    await settle()
    return holder


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation (Trio cannot cancel a granted task)")


def spawn(coro: Awaitable[Any]) -> asyncio.Future[Any]:
    """A plain asyncio task, so the test can call ``task.cancel()`` on it."""
    return asyncio.ensure_future(coro)


# -- sharing and exclusion ---------------------------------------------------


async def test_readers_share() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        a = await start(tg, lock, READ, "a", log)
        b = await start(tg, lock, READ, "b", log)
        assert log == ["a", "b"]
        assert lock.statistics().readers == 2
        a.done.set()
        b.done.set()
    assert lock.statistics() == FREE


async def test_writer_excludes_readers() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        await start(tg, lock, READ, "r", log)
        assert log == []
        lock.release_write()
        await settle()
        assert log == ["r"]
        tg.cancel_scope.cancel()


async def test_writer_excludes_writers() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        await start(tg, lock, WRITE, "w", log)
        assert log == []
        lock.release_write()
        await settle()
        assert log == ["w"]
        tg.cancel_scope.cancel()


async def test_readers_exclude_writer() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        await start(tg, lock, WRITE, "w", log)
        assert log == []
        lock.release_read()
        await settle()
        assert log == ["w"]
        tg.cancel_scope.cancel()


async def test_writer_admitted_only_after_last_reader_leaves() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r1 = await start(tg, lock, READ, "r1", log)
        r2 = await start(tg, lock, READ, "r2", log)
        await start(tg, lock, WRITE, "w", log)
        r1.done.set()
        await settle()
        assert log == ["r1", "r2"]
        r2.done.set()
        await settle()
        assert log == ["r1", "r2", "w"]
        tg.cancel_scope.cancel()


# -- fairness -----------------------------------------------------------------


async def test_queued_writer_blocks_later_readers() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        w = await start(tg, lock, WRITE, "w", log)
        await start(tg, lock, READ, "r", log)
        # Only readers hold, yet the new reader waits behind the writer.
        assert log == []
        lock.release_read()
        await settle()
        assert log == ["w"]
        w.done.set()
        await settle()
        assert log == ["w", "r"]
        tg.cancel_scope.cancel()


async def test_queued_readers_admitted_together_up_to_next_writer() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        r1 = await start(tg, lock, READ, "r1", log)
        r2 = await start(tg, lock, READ, "r2", log)
        w2 = await start(tg, lock, WRITE, "w2", log)
        await start(tg, lock, READ, "r3", log)
        lock.release_write()
        await settle()
        assert sorted(log) == ["r1", "r2"]
        assert lock.statistics() == RWLockStatistics(
            readers=2, writer=None, tasks_waiting_read=1, tasks_waiting_write=1
        )
        r1.done.set()
        r2.done.set()
        await settle()
        assert log[2:] == ["w2"]
        w2.done.set()
        await settle()
        assert log[3:] == ["r3"]
        tg.cancel_scope.cancel()


async def test_writers_admitted_in_arrival_order() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        writers = [await start(tg, lock, WRITE, f"w{i}", log) for i in range(3)]
        lock.release_write()
        for i, writer in enumerate(writers):
            await settle()
            assert log == [f"w{j}" for j in range(i + 1)]
            writer.done.set()


async def test_writer_not_starved_by_overlapping_readers() -> None:
    # Two readers re-acquire in turn so that one of them always holds the
    # lock; a reader-preferring lock would keep the writer out until both
    # loops end.
    lock = RWLock()
    log: list[str] = []
    rounds = 20
    readers_done = 0

    async def reader(name: str) -> None:
        nonlocal readers_done
        for _ in range(rounds):
            async with lock.read():
                log.append(name)
                await anyio.lowlevel.checkpoint()
        readers_done += 1

    async def writer() -> None:
        async with lock.write():
            log.append(f"w after {readers_done} readers done")

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader, "a")
        tg.start_soon(reader, "b")
        for _ in range(4):
            await anyio.lowlevel.checkpoint()
        tg.start_soon(writer)
    assert "w after 0 readers done" in log


async def test_reader_not_starved_by_writers() -> None:
    # Two writers re-acquire in turn, so one of them is always queued; a
    # writer-preferring lock would keep the reader out until both loops end.
    lock = RWLock()
    log: list[str] = []
    rounds = 20
    writers_done = 0

    async def writer(name: str) -> None:
        nonlocal writers_done
        for _ in range(rounds):
            async with lock.write():
                log.append(name)
                await anyio.lowlevel.checkpoint()
        writers_done += 1

    async def reader() -> None:
        async with lock.read():
            log.append(f"r after {writers_done} writers done")

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer, "a")
        tg.start_soon(writer, "b")
        for _ in range(4):
            await anyio.lowlevel.checkpoint()
        tg.start_soon(reader)
    assert "r after 0 writers done" in log


# -- cancellation ---------------------------------------------------------------


async def test_cancelled_queued_reader_holds_nothing() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        r.scope.cancel()
        await settle()
        assert lock.statistics().tasks_waiting_read == 0
    assert r.scope.cancelled_caught
    lock.release_write()
    assert log == []
    assert lock.statistics() == FREE


async def test_cancelled_queued_writer_holds_nothing() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        w = await start(tg, lock, WRITE, "w", log)
        w.scope.cancel()
    assert w.scope.cancelled_caught
    lock.release_read()
    assert log == []
    assert lock.statistics() == FREE


async def test_cancelled_queued_writer_admits_readers_behind_it() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        w = await start(tg, lock, WRITE, "w", log)
        r1 = await start(tg, lock, READ, "r1", log)
        r2 = await start(tg, lock, READ, "r2", log)
        w.scope.cancel()
        await settle()
        assert sorted(log) == ["r1", "r2"]
        assert lock.statistics().readers == 3
        r1.done.set()
        r2.done.set()
    lock.release_read()
    assert lock.statistics() == FREE


async def test_cancelled_queued_writer_gives_its_place_to_next_writer() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        w1 = await start(tg, lock, WRITE, "w1", log)
        w2 = await start(tg, lock, WRITE, "w2", log)
        w1.scope.cancel()
        await settle()
        assert log == ["r"]
        r.done.set()
        await settle()
        assert log == ["r", "w2"]
        w2.done.set()
    assert lock.statistics() == FREE


async def test_cancelled_queued_reader_keeps_order_of_others() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        r1 = await start(tg, lock, READ, "r1", log)
        w = await start(tg, lock, WRITE, "w", log)
        r2 = await start(tg, lock, READ, "r2", log)
        r1.scope.cancel()
        await settle()
        lock.release_write()
        await settle()
        assert log == ["w"]
        w.done.set()
        await settle()
        assert log == ["w", "r2"]
        r2.done.set()
    assert lock.statistics() == FREE


@pytest.mark.parametrize("behind", [0, 1])
@pytest.mark.parametrize("call", ["acquire_read_nowait", "acquire_read"])
async def test_a_queued_writer_cancelled_before_it_runs_holds_no_reader_back(
    anyio_backend_name: str, call: str, behind: int
) -> None:
    # task.cancel() on a queued asyncio task ends its wait at once; the task
    # runs later.  statistics() counts nobody waiting from then on, and a
    # reader arriving meanwhile is not held back by that writer either: it
    # admits the readers queued behind the writer (as the writer's task
    # would when it runs) and shares the lock with them, without waiting.
    if anyio_backend_name != "asyncio" or FORCE_GENERIC:
        pytest.skip("asyncio waiters only: they see a cancelled wait at once")
    lock = RWLock()
    done = asyncio.Event()

    async def read_until_done() -> None:
        await lock.acquire_read()
        await done.wait()
        lock.release_read()

    holder = asyncio.ensure_future(read_until_done())
    await asyncio.sleep(0)
    writer = asyncio.ensure_future(lock.acquire_write())
    await asyncio.sleep(0)
    queued = [asyncio.ensure_future(read_until_done()) for _ in range(behind)]
    await asyncio.sleep(0)
    assert lock.statistics().tasks_waiting_read == behind
    writer.cancel()
    assert lock.statistics().tasks_waiting_write == 0
    if call == "acquire_read_nowait":
        lock.acquire_read_nowait()
    else:
        # Budget left, so no checkpoint: it would only park.
        BUDGET.left = BUDGET_SIZE
        await lock.acquire_read()
    assert not writer.done()  # it has not run: taken without waiting
    assert lock.statistics() == RWLockStatistics(
        readers=2 + behind, writer=None, tasks_waiting_read=0, tasks_waiting_write=0
    )
    lock.release_read()
    done.set()
    await holder
    for reader in queued:
        await reader
    with pytest.raises(asyncio.CancelledError):
        await writer
    assert lock.statistics() == FREE


async def test_trio_cancel_scope_cancels_queued_acquire(
    anyio_backend_name: str,
) -> None:
    if anyio_backend_name != "trio":
        pytest.skip("Trio's own cancel scope")
    import trio

    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        w = await start(tg, lock, WRITE, "w", log)
        with trio.CancelScope() as scope:
            scope.deadline = trio.current_time()
            await lock.acquire_read()
        assert scope.cancelled_caught
        assert lock.statistics().tasks_waiting_read == 0
        w.done.set()
    assert lock.statistics() == FREE


async def test_move_on_after_cancels_queued_acquire() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        with anyio.move_on_after(0) as scope:
            await lock.acquire_write()
        assert scope.cancelled_caught
        assert lock.statistics().tasks_waiting_write == 0
        r.done.set()
    assert lock.statistics() == FREE


@pytest.mark.usefixtures("asyncio_only")
async def test_task_cancel_of_queued_writer_admits_readers_behind_it() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        w = spawn(lock.acquire_write())
        await settle()
        r = await start(tg, lock, READ, "r", log)
        w.cancel()
        with pytest.raises(asyncio.CancelledError):
            await w
        await settle()
        assert log == ["r"]
        r.done.set()
    lock.release_read()
    assert lock.statistics() == FREE


@pytest.mark.usefixtures("asyncio_only")
@pytest.mark.parametrize("kind", [READ, WRITE])
async def test_a_release_passes_over_a_writer_whose_task_was_just_cancelled(
    kind: str,
) -> None:
    # task.cancel() on a parked asyncio task cancels its wait at once, but the
    # task runs only later.  A release in between drops that writer from the
    # queue, so an acquire right after it is admitted without waiting for
    # the writer's task to run.
    if FORCE_GENERIC:
        pytest.skip("asyncio waiters only: they see a cancelled wait at once")
    lock = RWLock()
    await lock.acquire_read()
    w = spawn(lock.acquire_write())
    await settle()
    w.cancel()
    lock.release_read()
    await acquire(lock, kind)  # no wait: ``w`` has not run yet
    assert not w.done()
    stats = lock.statistics()
    assert (stats.readers, stats.writer is not None) == (
        (1, False) if kind == READ else (0, True)
    )
    with pytest.raises(asyncio.CancelledError):
        await w
    release(lock, kind)
    assert lock.statistics() == FREE


@pytest.mark.usefixtures("asyncio_only")
async def test_wait_for_timeout_on_queued_acquire_holds_nothing() -> None:
    lock = RWLock()
    await lock.acquire_write()
    # In a task of its own: from 3.12 on, wait_for() runs the awaitable in
    # the calling task, which holds the write lock (RuntimeError, not a wait).
    waiter = asyncio.ensure_future(asyncio.wait_for(lock.acquire_read(), 0.01))
    with pytest.raises(asyncio.TimeoutError):
        await waiter
    assert lock.statistics().tasks_waiting_read == 0
    lock.release_write()
    assert lock.statistics() == FREE


@pytest.mark.usefixtures("asyncio_only")
@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
async def test_asyncio_timeout_on_queued_acquire_holds_nothing() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):  # type: ignore[attr-defined]
                await lock.acquire_write()
        assert lock.statistics().tasks_waiting_write == 0
        r.done.set()
    assert lock.statistics() == FREE


# -- the grant-then-cancel race (asyncio) ------------------------------------------


@pytest.mark.usefixtures("asyncio_only")
async def test_read_granted_then_cancelled_is_given_back() -> None:
    lock = RWLock()
    await lock.acquire_write()
    r = spawn(lock.acquire_read())
    await settle()
    lock.release_write()
    assert lock.statistics().readers == 1  # granted, not yet run
    r.cancel()
    with pytest.raises(asyncio.CancelledError):
        await r
    assert lock.statistics() == FREE
    lock.acquire_write_nowait()


@pytest.mark.usefixtures("asyncio_only")
async def test_write_granted_then_cancelled_is_given_back() -> None:
    lock = RWLock()
    await lock.acquire_read()
    w = spawn(lock.acquire_write())
    await settle()
    lock.release_read()
    assert lock.statistics().writer is not None  # granted, not yet run
    w.cancel()
    with pytest.raises(asyncio.CancelledError):
        await w
    assert lock.statistics() == FREE


@pytest.mark.usefixtures("asyncio_only")
async def test_write_granted_then_cancelled_admits_readers_behind_it() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        w = spawn(lock.acquire_write())
        await settle()
        r = await start(tg, lock, READ, "r", log)
        lock.release_read()
        assert lock.statistics().writer is not None
        w.cancel()
        with pytest.raises(asyncio.CancelledError):
            await w
        await settle()
        assert log == ["r"]
        assert lock.statistics().writer is None
        r.done.set()
    assert lock.statistics() == FREE


# -- ownership and reentrancy -------------------------------------------------------


async def test_release_read_without_holding_raises() -> None:
    with pytest.raises(RuntimeError, match="does not hold"):
        RWLock().release_read()


async def test_release_write_without_holding_raises() -> None:
    with pytest.raises(RuntimeError, match="does not hold"):
        RWLock().release_write()


async def test_release_read_while_holding_write_raises() -> None:
    lock = RWLock()
    await lock.acquire_write()
    with pytest.raises(RuntimeError, match="does not hold"):
        lock.release_read()
    assert lock.statistics().writer == anyio.get_current_task()


async def test_release_write_while_holding_read_raises() -> None:
    lock = RWLock()
    await lock.acquire_read()
    with pytest.raises(RuntimeError, match="does not hold"):
        lock.release_write()
    assert lock.statistics().readers == 1


@pytest.mark.parametrize("nowait", [False, True], ids=["acquire", "nowait"])
@pytest.mark.parametrize("kind", [READ, WRITE])
async def test_release_by_another_task_raises(kind: str, nowait: bool) -> None:
    # The lock's first call finds the task that holds it, either way.
    lock = RWLock()
    if nowait:
        getattr(lock, f"acquire_{kind}_nowait")()
    else:
        await acquire(lock, kind)
    errors: list[BaseException] = []

    async def intruder() -> None:
        try:
            release(lock, kind)
        except RuntimeError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(intruder)
    assert len(errors) == 1
    held = lock.statistics()
    assert held.readers == (1 if kind == READ else 0)
    assert (held.writer is not None) == (kind == WRITE)
    release(lock, kind)
    assert lock.statistics() == FREE


@pytest.mark.parametrize("kind", [READ, WRITE])
def test_ownership_holds_when_the_lock_moves_between_event_loops(
    kind: str, task_map: str
) -> None:
    # The lock binds a cheap way to find the current task on first use; on
    # the next loop (or backend) it must find the new task, not the old one,
    # also where asyncio's tasks leave their loop -> task map empty.
    lock = RWLock()
    held: list[RWLockStatistics] = []

    async def main() -> None:
        async def intruder() -> None:
            with pytest.raises(RuntimeError, match="does not hold"):
                release(lock, kind)

        for _ in range(2):
            await acquire(lock, kind)
            held.append(lock.statistics())
            async with anyio.create_task_group() as tg:
                tg.start_soon(intruder)
            with pytest.raises(RuntimeError, match="not reentrant"):
                await acquire(lock, kind)
            release(lock, kind)
            assert lock.statistics() == FREE

    runs = run_on_every_backend_in_turn(main)
    assert len(held) == 2 * len(runs)
    if kind == WRITE:
        assert all(s.writer is not None and s.readers == 0 for s in held)
    else:
        assert all(s.writer is None and s.readers == 1 for s in held)


async def errors_without_blocking(
    make: Callable[[], Awaitable[None]],
) -> list[RuntimeError]:
    """Await ``make()`` in this task and return the RuntimeError it raised.

    Fails, instead of hanging, if the call blocks: a watchdog task cancels
    it once every task is blocked (a reentrant acquire would deadlock).
    """
    errors: list[RuntimeError] = []
    scope = anyio.CancelScope()

    async def watchdog() -> None:
        await anyio.wait_all_tasks_blocked()
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog)
        with scope:
            try:
                await make()
            except RuntimeError as exc:
                errors.append(exc)
        tg.cancel_scope.cancel()
    assert not scope.cancelled_caught, "the call blocked"
    assert len(errors) == 1, "the call did not raise RuntimeError"
    return errors


async def call(lock: RWLock, name: str) -> None:
    """Call an acquire method by name, awaiting it if it is a coroutine."""
    result = getattr(lock, name)()
    if result is not None:
        await result


@pytest.mark.parametrize("held", [READ, WRITE])
@pytest.mark.parametrize(
    "again",
    ["acquire_read", "acquire_write", "acquire_read_nowait", "acquire_write_nowait"],
)
async def test_acquire_while_holding_raises(held: str, again: str) -> None:
    lock = RWLock()
    await acquire(lock, held)
    before = lock.statistics()
    errors = await errors_without_blocking(lambda: call(lock, again))
    assert "not reentrant" in str(errors[0])
    assert lock.statistics() == before


async def test_reentrant_read_behind_queued_writer_raises_instead_of_deadlock() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        await start(tg, lock, WRITE, "w", log)
        errors = await errors_without_blocking(lock.acquire_read)
        assert "not reentrant" in str(errors[0])
        assert lock.statistics().tasks_waiting_read == 0
        lock.release_read()
        await settle()
        assert log == ["w"]
        tg.cancel_scope.cancel()


async def test_read_context_manager_cannot_be_entered_twice_at_once() -> None:
    lock = RWLock()
    guard = lock.read()
    async with guard:
        with pytest.raises(RuntimeError, match="already in use"):
            await guard.__aenter__()
    assert lock.statistics() == FREE


@pytest.mark.parametrize("kind", [READ, WRITE])
async def test_exiting_a_context_manager_that_was_not_entered_releases_nothing(
    kind: str,
) -> None:
    # The task holds the lock through acquire_*(), not through this guard:
    # the guard's exit must not release it.
    lock = RWLock()
    await acquire(lock, kind)
    guard = lock.read() if kind == READ else lock.write()
    with pytest.raises(RuntimeError, match="was not entered"):
        await guard.__aexit__(None, None, None)
    held = lock.statistics()
    assert (held.readers, held.writer is not None) == (
        (1, False) if kind == READ else (0, True)
    )
    release(lock, kind)
    assert lock.statistics() == FREE


# -- nowait --------------------------------------------------------------------------


async def test_acquire_read_nowait_shares_with_readers() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        lock.acquire_read_nowait()
        assert lock.statistics().readers == 2
        lock.release_read()
        r.done.set()


async def test_acquire_read_nowait_would_block_while_writer_holds() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        w = await start(tg, lock, WRITE, "w", log)
        with pytest.raises(anyio.WouldBlock):
            lock.acquire_read_nowait()
        w.done.set()
    assert lock.statistics() == FREE


async def test_acquire_read_nowait_would_block_while_writer_queued() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        await start(tg, lock, WRITE, "w", log)
        with pytest.raises(anyio.WouldBlock):
            lock.acquire_read_nowait()
        assert lock.statistics().readers == 1
        r.done.set()
        tg.cancel_scope.cancel()


async def test_acquire_write_nowait_would_block_while_reader_holds() -> None:
    lock = RWLock()
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        with pytest.raises(anyio.WouldBlock):
            lock.acquire_write_nowait()
        r.done.set()
    assert lock.statistics() == FREE


async def test_acquire_write_nowait_takes_free_lock() -> None:
    lock = RWLock()
    lock.acquire_write_nowait()
    assert lock.statistics().writer == anyio.get_current_task()
    lock.release_write()
    assert lock.statistics() == FREE


# -- context managers --------------------------------------------------------------


@pytest.mark.parametrize("kind", [READ, WRITE])
async def test_context_manager_releases_on_exception(kind: str) -> None:
    lock = RWLock()
    guard = lock.read() if kind == READ else lock.write()

    async def fail_inside() -> None:
        async with guard:
            assert lock.statistics() != FREE
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        await fail_inside()
    assert lock.statistics() == FREE


@pytest.mark.parametrize("kind", [READ, WRITE])
async def test_context_manager_can_be_used_again_after_exit(kind: str) -> None:
    lock = RWLock()
    guard = lock.read() if kind == READ else lock.write()
    for _ in range(2):
        async with guard:
            assert lock.statistics() != FREE
    assert lock.statistics() == FREE


# -- statistics ---------------------------------------------------------------------


async def test_statistics_of_free_lock() -> None:
    assert RWLock().statistics() == FREE


async def test_statistics_name_the_writer_task() -> None:
    lock = RWLock()
    async with lock.write():
        assert lock.statistics().writer == anyio.get_current_task()


async def test_statistics_count_waiting_readers_and_writers() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        for name, kind in [("r1", READ), ("w1", WRITE), ("r2", READ), ("r3", READ)]:
            await start(tg, lock, kind, name, log)
        assert lock.statistics() == RWLockStatistics(
            readers=0,
            writer=anyio.get_current_task(),
            tasks_waiting_read=3,
            tasks_waiting_write=1,
        )
        tg.cancel_scope.cancel()
    lock.release_write()


async def test_granted_waiter_counts_as_holder_at_once() -> None:
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    async with anyio.create_task_group() as tg:
        r = await start(tg, lock, READ, "r", log)
        lock.release_write()
        # Before the reader has run.
        assert lock.statistics() == RWLockStatistics(
            readers=1, writer=None, tasks_waiting_read=0, tasks_waiting_write=0
        )
        r.done.set()


async def test_statistics_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RWLock().statistics().readers = 1  # type: ignore[misc]


# -- checkpoints ---------------------------------------------------------------------

ACQUIRES: dict[str, Callable[[RWLock], Awaitable[None]]] = {
    "acquire_read": lambda lock: lock.acquire_read(),
    "acquire_write": lambda lock: lock.acquire_write(),
    "read()": lambda lock: lock.read().__aenter__(),
    "write()": lambda lock: lock.write().__aenter__(),
}


@pytest.mark.parametrize("how", list(ACQUIRES))
async def test_strict_uncontended_acquire_is_a_checkpoint(how: str) -> None:
    lock = RWLock(strict=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await ACQUIRES[how](lock)
    assert scope.cancelled_caught
    assert lock.statistics() == FREE


@pytest.mark.parametrize("mode", ["strict", "budget_due"])
@pytest.mark.parametrize("how", list(ACQUIRES))
async def test_an_acquire_that_must_wait_parks_without_yielding_first(
    how: str, mode: str
) -> None:
    # Parking is the checkpoint: a call that must wait queues at once, so
    # arrival order is call order (a yield first would let others queue in
    # between, and Trio resumes a batch in any order).  A budgeted call
    # whose checkpoint is due parks first too, and takes it once admitted.
    # A holder told when each call starts hands the lock over as soon as
    # it sees the caller parked, and counts the times it looked too early.
    lock = RWLock(strict=mode == "strict")
    rounds = 10
    started = -1
    misses = 0
    clean_ups: list[Any] = []
    held = anyio.Event()

    async def holder() -> None:
        nonlocal misses
        await lock.acquire_write()
        held.set()
        for i in range(rounds):
            while started != i:
                await anyio.lowlevel.checkpoint()
            while not (
                lock.statistics().tasks_waiting_read
                or lock.statistics().tasks_waiting_write
            ):
                misses += 1
                await anyio.lowlevel.checkpoint()
            lock.release_write()
            await lock.acquire_write()
        lock.release_write()

    async def caller() -> None:
        nonlocal started
        await held.wait()
        for i in range(rounds):
            started = i
            if mode == "budget_due":
                BUDGET.left = 1
            await ACQUIRES[how](lock)
            if "read" in how:
                lock.release_read()
            else:
                lock.release_write()
        clean_ups.append(None)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            tg.start_soon(caller)
    assert clean_ups == [None]
    assert misses == 0
    assert lock.statistics() == FREE


@pytest.mark.parametrize("how", list(ACQUIRES))
async def test_budgeted_uncontended_acquire_is_not_always_a_checkpoint(
    how: str,
) -> None:
    lock = RWLock()
    BUDGET.left = BUDGET_SIZE
    with anyio.CancelScope() as scope:
        scope.cancel()
        await ACQUIRES[how](lock)
    assert not scope.cancelled_caught
    assert lock.statistics() != FREE


@pytest.mark.parametrize("kind", [READ, WRITE])
async def test_budgeted_acquires_reach_a_checkpoint_within_the_budget(
    kind: str,
) -> None:
    lock = RWLock()
    done = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(BUDGET_SIZE + 1):
            await acquire(lock, kind)
            release(lock, kind)
            done += 1
    assert scope.cancelled_caught
    assert done < BUDGET_SIZE
    assert lock.statistics() == FREE


async def test_uncontended_acquires_create_no_waiter() -> None:
    lock = RWLock()
    before = WAITER_STATS.created
    for _ in range(3):
        await lock.acquire_read()
        lock.release_read()
        await lock.acquire_write()
        lock.release_write()
        async with lock.read():
            pass
        async with lock.write():
            pass
    assert WAITER_STATS.created == before


async def test_strict_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="strict"):
        RWLock(strict=1)  # type: ignore[arg-type]


# -- model test -------------------------------------------------------------------

WORKERS = 4
IDLE, QUEUED_READ, QUEUED_WRITE = "idle", "queued read", "queued write"
#: A worker's command to acquire without waiting, and the kind it takes.
NOWAIT = {"read_nowait": READ, "write_nowait": WRITE}


class Model:
    """The policy, sequentially: FIFO queue, readers share, a writer alone."""

    def __init__(self) -> None:
        self.readers: set[int] = set()
        self.writer: int | None = None
        self.queue: list[tuple[int, str]] = []

    def state(self, i: int) -> str:
        if i in self.readers:
            return READ
        if self.writer == i:
            return WRITE
        for j, kind in self.queue:
            if j == i:
                return QUEUED_READ if kind == READ else QUEUED_WRITE
        return IDLE

    def acquire(self, i: int, kind: str) -> None:
        self.queue.append((i, kind))
        self.grant()

    def acquire_nowait(self, i: int, kind: str) -> None:
        # Only with no writer and nobody queued (a queued writer holds back
        # later readers), and for a write with no reader either.
        if self.writer is not None or self.queue:
            return
        if kind == READ:
            self.readers.add(i)
        elif not self.readers:
            self.writer = i

    def release(self, i: int) -> None:
        if self.writer == i:
            self.writer = None
        else:
            self.readers.remove(i)
        self.grant()

    def cancel(self, i: int) -> None:
        # Cancelled while queued, or granted then cancelled (given back).
        if self.writer == i or i in self.readers:
            self.release(i)
        else:
            self.queue = [(j, k) for j, k in self.queue if j != i]
            self.grant()

    def grant(self) -> None:
        while self.writer is None and self.queue:
            i, kind = self.queue[0]
            if kind == WRITE:
                if self.readers:
                    return
                self.writer = i
            else:
                self.readers.add(i)
            del self.queue[0]


class Worker:
    """A task that acquires and releases on command; cancelled from outside."""

    def __init__(self, lock: RWLock) -> None:
        self.lock = lock
        self.state = IDLE
        self.scope: anyio.CancelScope | None = None
        self.asyncio_task: Any = None
        self.info: anyio.TaskInfo | None = None
        self.send, self.receive = anyio.create_memory_object_stream[
            tuple[str, "Worker | None"]
        ](1)

    async def run(self) -> None:
        self.info = anyio.get_current_task()
        if asyncio_running():
            self.asyncio_task = asyncio.current_task()
        async with self.receive:
            async for command, other in self.receive:
                if command in (READ, WRITE):
                    await self.acquire(command)
                elif command in NOWAIT:
                    self.acquire_nowait(NOWAIT[command])
                else:
                    release(self.lock, self.state)
                    self.state = IDLE
                    if other is not None:
                        other.cancel_raw()

    async def acquire(self, kind: str) -> None:
        self.state = QUEUED_READ if kind == READ else QUEUED_WRITE
        try:
            with anyio.CancelScope() as self.scope:
                await acquire(self.lock, kind)
                self.state = kind
        except asyncio.CancelledError:
            # cancel_raw(): plain task.cancel(), asyncio only.  (There is
            # no count to hand back before 3.11.)
            if sys.version_info >= (3, 11):
                self.asyncio_task.uncancel()
        self.scope = None
        if self.state in (QUEUED_READ, QUEUED_WRITE):
            self.state = IDLE

    def acquire_nowait(self, kind: str) -> None:
        take = (
            self.lock.acquire_read_nowait
            if kind == READ
            else self.lock.acquire_write_nowait
        )
        try:
            take()
        except anyio.WouldBlock:
            return
        self.state = kind

    def cancel_raw(self) -> None:
        """Cancel the pending acquire the way that races with a grant."""
        if self.asyncio_task is not None:
            self.asyncio_task.cancel()
        else:
            assert self.scope is not None
            self.scope.cancel()


def asyncio_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


# A step (i, choice, j) acts on worker i according to its state: an idle
# worker acquires (choice 0-1: read, 2-3: write; without waiting for j == 3,
# so that it holds or gets WouldBlock); a holder releases (choice
# 0-2) or releases and cancels the first queued worker from j on (choice 3);
# a queued worker is cancelled (choice 0) or left queued.
STEPS = st.lists(
    st.tuples(
        st.integers(0, WORKERS - 1),
        st.integers(0, 3),
        st.integers(0, WORKERS - 1),
    ),
    min_size=5,
    max_size=40,
)


def check(lock: RWLock, workers: list[Worker], model: Model) -> None:
    states = [w.state for w in workers]
    assert states == [model.state(i) for i in range(WORKERS)]
    writers = states.count(WRITE)
    assert writers == 0 or (writers == 1 and states.count(READ) == 0)
    writer = None if model.writer is None else workers[model.writer].info
    assert lock.statistics() == RWLockStatistics(
        readers=len(model.readers),
        writer=writer,
        tasks_waiting_read=states.count(QUEUED_READ),
        tasks_waiting_write=states.count(QUEUED_WRITE),
    )


async def run_steps(
    lock: RWLock, workers: list[Worker], steps: list[tuple[int, int, int]]
) -> None:
    model = Model()
    for i, choice, j in steps:
        w = workers[i]
        queued = [
            k
            for k in [*range(j, WORKERS), *range(j)]
            if workers[k].state in (QUEUED_READ, QUEUED_WRITE)
        ]
        if w.state == IDLE and j == WORKERS - 1:
            kind = READ if choice < 2 else WRITE
            await w.send.send((f"{kind}_nowait", None))
            await settle()
            model.acquire_nowait(i, kind)
        elif w.state == IDLE:
            kind = READ if choice < 2 else WRITE
            await w.send.send((kind, None))
            await settle()
            model.acquire(i, kind)
        elif w.state in (READ, WRITE) and choice == 3 and queued:
            # The holder releases and, in the same step, cancels a queued
            # task, which the release may just have granted: the grant then
            # either stands (anyio scope, Trio) or is given back (asyncio
            # task.cancel()); either way the outcome must match the model.
            other = queued[0]
            await w.send.send(("release", workers[other]))
            await settle()
            model.release(i)
            if workers[other].state == IDLE:
                model.cancel(other)
        elif w.state in (READ, WRITE):
            await w.send.send(("release", None))
            await settle()
            model.release(i)
        elif choice == 0:
            assert w.scope is not None
            w.scope.cancel()
            await settle()
            model.cancel(i)
        else:
            continue
        check(lock, workers, model)
    # No deadlock: releasing every holder in turn drains the queue.
    for _ in range(WORKERS + 1):
        for i, w in enumerate(workers):
            if w.state in (READ, WRITE):
                await w.send.send(("release", None))
                await settle()
                model.release(i)
                check(lock, workers, model)
    assert all(w.state == IDLE for w in workers)
    assert lock.statistics() == FREE


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
async def test_random_rwlock_steps_match_the_model(
    steps: list[tuple[int, int, int]],
) -> None:
    """Random acquires (awaited or without waiting), releases and
    cancellations over several tasks.

    After every step each task's state (idle, queued, holding) and the
    statistics equal the model's: a writer never holds with anyone else,
    holders are neither lost nor invented, admission is in FIFO order; and
    at the end releasing the holders drains the queue (no deadlock).
    """
    lock = RWLock()
    workers = [Worker(lock) for _ in range(WORKERS)]
    async with anyio.create_task_group() as tg:
        for w in workers:
            tg.start_soon(w.run)
        await settle()
        try:
            await run_steps(lock, workers, steps)
        finally:
            for w in workers:
                w.send.close()
            if any(w.state != IDLE for w in workers):
                tg.cancel_scope.cancel()


REACQUIRES: dict[str, tuple[str, Callable[[RWLock], Awaitable[None]]]] = {
    # (what the task holds, the acquire that must raise RuntimeError)
    "read, then acquire_write": (READ, lambda lock: lock.acquire_write()),
    "read, then write()": (READ, lambda lock: lock.write().__aenter__()),
    "write, then acquire_read": (WRITE, lambda lock: lock.acquire_read()),
    "write, then read()": (WRITE, lambda lock: lock.read().__aenter__()),
}


@pytest.mark.parametrize("case", list(REACQUIRES))
async def test_a_strict_reacquire_in_a_cancelled_scope_raises_the_cancellation(
    case: str,
) -> None:
    # The call does not park (it raises), so it takes its checkpoint first.
    held, again = REACQUIRES[case]
    lock = RWLock(strict=True)
    await acquire(lock, held)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await again(lock)
    assert scope.cancelled_caught
    release(lock, held)


@pytest.mark.parametrize("case", list(REACQUIRES))
async def test_failing_reacquires_reach_a_checkpoint_within_the_budget(
    case: str,
) -> None:
    held, again = REACQUIRES[case]
    lock = RWLock()
    await acquire(lock, held)
    calls = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(BUDGET_SIZE + 1):
            calls += 1
            with pytest.raises(RuntimeError, match="not reentrant"):
                await again(lock)
    assert scope.cancelled_caught
    assert calls <= BUDGET_SIZE
    release(lock, held)


# -- regressions found by mutation testing --------------------------------------


async def test_reentering_a_write_context_manager_keeps_the_outer_block() -> None:
    # Pins: entering the same lock.write() object again raises "already in
    # use" and leaves the outer block intact (its exit releases the lock).
    lock = RWLock()
    writing = lock.write()
    async with writing:
        with pytest.raises(RuntimeError, match="already in use"):
            async with writing:
                pass  # pragma: no cover
    assert lock.statistics().writer is None


async def test_nested_read_block_raises_and_keeps_the_outer_read_lock() -> None:
    # Pins: a nested lock.read() in the same task raises "not reentrant" at
    # once and does not release the outer block's read lock.
    lock = RWLock()
    async with lock.read():
        with pytest.raises(RuntimeError, match="not reentrant"):
            async with lock.read():
                pass  # pragma: no cover
        assert lock.statistics().readers == 1
    assert lock.statistics().readers == 0


async def test_strict_reentrant_read_with_writer_queued_checkpoints_first() -> None:
    # Pins: a strict re-entrant acquire_read() takes its due checkpoint
    # before raising RuntimeError, even with a writer queued.
    lock = RWLock(strict=True)
    wrote: list[bool] = []

    async def writer() -> None:
        await lock.acquire_write()
        wrote.append(True)
        lock.release_write()

    await lock.acquire_read()
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)  # queues behind our read lock
        await anyio.wait_all_tasks_blocked()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await lock.acquire_read()  # re-entrant: cancelled at the checkpoint
            pytest.fail("re-entrant acquire_read() returned")  # pragma: no cover
        assert scope.cancelled_caught
        lock.release_read()  # the writer gets the lock
    assert wrote == [True]


async def test_strict_read_past_abandoned_writer_takes_its_checkpoint(
    anyio_backend_name: str,
) -> None:
    # Pins: a cancelled parked writer not yet run (Trio's abort marks it
    # abandoned at once) is no live waiter: a strict acquire_read() that can
    # proceed still takes its checkpoint.
    if anyio_backend_name != "trio":
        pytest.skip("Trio's abort callback abandons a parked waiter before it runs")
    lock = RWLock(strict=True)
    scopes: list[anyio.CancelScope] = []
    release = anyio.Event()

    async def reader() -> None:
        await lock.acquire_read()
        await release.wait()
        lock.release_read()

    async def writer() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await lock.acquire_write()  # queues behind the reader

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(writer)
        await anyio.wait_all_tasks_blocked()
        scopes[0].cancel()  # the writer has not run since
        acquired = False
        with anyio.CancelScope() as mine:
            mine.cancel()
            await lock.acquire_read()  # strict: must checkpoint (and raise)
            acquired = True  # pragma: no cover
            lock.release_read()  # pragma: no cover
        release.set()
    assert not acquired


@pytest.mark.parametrize("writing", [False, True], ids=["read", "write"])
async def test_a_due_acquire_cancelled_at_its_checkpoint_once_admitted_holds_nothing(
    writing: bool,
) -> None:
    # A due acquire parks first (keeping its place) and takes its
    # checkpoint once admitted; cancelled there, it gives the lock back
    # and whoever can now proceed is admitted.
    lock = RWLock()
    await lock.acquire_write()
    returned: list[bool] = []
    scope = anyio.CancelScope()

    async def acquire() -> None:
        with scope:
            BUDGET.left = 1  # this call spends the last unit: due
            if writing:
                await lock.acquire_write()
            else:
                await lock.acquire_read()
            returned.append(True)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(acquire)
            await settle()  # parked
            assert (
                lock.statistics().tasks_waiting_read
                + (lock.statistics().tasks_waiting_write)
                == 1
            )
            lock.release_write()  # admits it
            scope.cancel()  # before it runs its checkpoint
    assert scope.cancelled_caught
    assert returned == []
    assert lock.statistics() == FREE
