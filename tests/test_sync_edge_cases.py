"""BatchSemaphore, Semaphore and RWLock behaviours the other tests left
unpinned, found by mutation testing."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import (
    BatchSemaphore,
    CapacityLimiter,
    Condition,
    Event,
    Lock,
    RWLock,
    Semaphore,
)

from ._tasks import settle

pytestmark = pytest.mark.anyio


class Permits(int):
    """An int subclass: accepted as a permit count (only bool is refused)."""


@pytest.mark.parametrize("fair", [True, False])
async def test_acquire_of_an_int_subclass_equal_to_the_available_permits_proceeds(
    fair: bool,
) -> None:
    sem = BatchSemaphore(3, fair=fair)
    with anyio.fail_after(5):
        await sem.acquire(Permits(3))
    assert sem.available_permits == 0
    sem.release(3)
    assert sem.available_permits == 3


@pytest.mark.parametrize("fair", [True, False])
async def test_strict_acquire_of_exactly_the_available_permits_is_a_checkpoint(
    fair: bool,
) -> None:
    # Strict mode: every call checkpoints, also one that takes every permit.
    sem = BatchSemaphore(2, fair=fair, strict=True)
    for _ in range(3):  # the budget cannot line up with every attempt
        with anyio.CancelScope() as scope:
            scope.cancel()
            await sem.acquire(2)
        assert scope.cancelled_caught
        assert sem.available_permits == 2
        assert sem.statistics().tasks_waiting == 0


async def test_async_with_on_a_default_semaphore_is_a_cancellation_point() -> None:
    # fast_acquire=False (the default): ``async with sem:`` checkpoints on
    # every entry, as acquire() does and as anyio.Semaphore does.
    sem = Semaphore(1)
    for _ in range(3):  # the 64-call budget cannot line up with every attempt
        entered = False
        with anyio.CancelScope() as scope:
            scope.cancel()
            async with sem:
                entered = True
        assert scope.cancelled_caught
        assert not entered
        assert sem.value == 1


async def test_read_granted_then_cancelled_admits_the_writer_queued_behind_it(
    anyio_backend_name: str,
) -> None:
    # Only plain asyncio task.cancel() can cancel a task whose wait was granted.
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation (Trio cannot cancel a granted task)")
    lock = RWLock()
    log: list[str] = []
    await lock.acquire_write()
    reader = asyncio.ensure_future(lock.acquire_read())
    await settle()

    async def writer() -> None:
        await lock.acquire_write()
        log.append("w")
        lock.release_write()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        await settle()
        lock.release_write()  # the reader is granted; the writer waits for it
        assert lock.statistics().readers == 1
        reader.cancel()  # ...and cancelled before it runs: it gives the lock back
        with pytest.raises(asyncio.CancelledError):
            await reader
        with anyio.fail_after(5):
            await settle()
            while not log:
                await anyio.sleep(0.01)
    assert log == ["w"]
    assert lock.statistics().readers == 0
    assert lock.statistics().writer is None


@pytest.mark.parametrize("kind", ["read", "write"])
async def test_context_manager_whose_enter_was_cancelled_can_be_entered_again(
    kind: str,
) -> None:
    # A blocked ``async with`` that is cancelled never entered: the same
    # context manager object must not stay marked "in use".
    lock = RWLock()
    cm = lock.read() if kind == "read" else lock.write()
    release = anyio.Event()

    async def writer() -> None:
        await lock.acquire_write()
        await release.wait()
        lock.release_write()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        await settle()
        assert lock.statistics().writer is not None
        with anyio.move_on_after(0.05) as scope:
            async with cm:
                raise AssertionError("entered while another task held the lock")
        assert scope.cancelled_caught
        release.set()
    with anyio.fail_after(5):
        async with cm:
            pass
    assert lock.statistics().readers == 0
    assert lock.statistics().writer is None


async def test_each_sync_primitive_repr_names_its_state_and_waiting_tasks() -> None:
    lock, event, cond = Lock(), Event(), Condition()
    sem, limiter = Semaphore(1, max_value=2), CapacityLimiter(2)
    rwlock, batch = RWLock(), BatchSemaphore(1)
    prims: list[object] = [lock, sem, event, cond, limiter, rwlock, batch]
    assert [repr(p) for p in prims] == [
        "<Lock unlocked waiting=0>",
        "<Semaphore value=1 max_value=2 waiting=0>",
        "<Event unset waiting=0>",
        "<Condition locked=False waiting=0>",
        "<CapacityLimiter 0/2 waiting=0>",
        "<RWLock readers=0 writer=False waiting=0>",
        "<BatchSemaphore available=1 waiting=0 fair=True>",
    ]

    async def wait_on_condition() -> None:
        async with cond:
            await cond.wait()

    await lock.acquire()
    await sem.acquire()
    limiter.acquire_on_behalf_of_nowait("a")
    limiter.acquire_on_behalf_of_nowait("b")
    await rwlock.acquire_read()
    await batch.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lock.acquire)
        tg.start_soon(sem.acquire)
        tg.start_soon(event.wait)
        tg.start_soon(wait_on_condition)
        tg.start_soon(limiter.acquire_on_behalf_of, "c")
        tg.start_soon(rwlock.acquire_write)
        tg.start_soon(batch.acquire)
        await settle()
        await cond.acquire()
        assert [repr(p) for p in prims] == [
            "<Lock locked waiting=1>",
            "<Semaphore value=0 max_value=2 waiting=1>",
            "<Event unset waiting=1>",
            "<Condition locked=True waiting=1>",
            "<CapacityLimiter 2/2 waiting=1>",
            "<RWLock readers=1 writer=False waiting=1>",
            "<BatchSemaphore available=0 waiting=1 fair=True>",
        ]
        cond.release()
        event.set()
        assert repr(event) == "<Event set waiting=0>"
        tg.cancel_scope.cancel()
