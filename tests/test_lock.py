"""anyio_prims Lock: the drop-in for anyio.Lock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from types import SimpleNamespace

import anyio
import anyio._core._eventloop
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest

from anyio_prims._core import BUDGET, BUDGET_SIZE, WaitQueue, _backend
from anyio_prims.sync._lock import Lock

from ._anyio_version import ANYIO_RELEASE
from ._sync_support import (
    CANCEL_SOURCES,
    assert_schedule_point,
    cancel_while_blocked,
    settle,
    skip_if_unsupported,
    start_in_order,
    task_id,
)
from ._tasks import run_on_every_backend_in_turn
from ._waiter_count import WAITER_STATS

pytestmark = pytest.mark.anyio

#: release() by a task that does not hold the lock: AnyIO's asyncio wording,
#: or Trio's own, which AnyIO passes through on Trio.
NOT_OWNER = "not holding this lock|can't release a Lock you don't own"


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation")


@asynccontextmanager
async def held_by_another_task(lock: Lock) -> AsyncIterator[None]:
    """Hold ``lock`` in a helper task for the block; released at its end."""
    done = anyio.Event()

    async def hold() -> None:
        async with lock:
            await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await settle()
        assert lock.locked()
        yield
        done.set()


def test_created_outside_an_event_loop() -> None:
    lock = Lock()
    assert not lock.locked()
    assert lock.statistics() == anyio.LockStatistics(False, None, 0)


async def test_uncontended_acquire_and_release() -> None:
    lock = Lock()
    await lock.acquire()
    assert lock.locked()
    lock.release()
    assert not lock.locked()


async def test_async_with_holds_the_lock_for_the_block() -> None:
    lock = Lock()
    async with lock as entered:
        assert entered is None
        assert lock.locked()
    assert not lock.locked()


async def test_uncontended_acquire_creates_no_waiter() -> None:
    lock = Lock()
    created = WAITER_STATS.created
    for _ in range(10):
        async with lock:
            pass
    assert WAITER_STATS.created == created


async def test_acquire_nowait_takes_a_free_lock() -> None:
    lock = Lock()
    lock.acquire_nowait()
    assert lock.statistics().owner == anyio.get_current_task()
    lock.release()


async def test_acquire_nowait_on_a_held_lock_raises_would_block() -> None:
    lock = Lock()
    failed = False

    async def try_nowait() -> None:
        nonlocal failed
        with pytest.raises(anyio.WouldBlock):
            lock.acquire_nowait()
        failed = True

    async with lock, anyio.create_task_group() as tg:
        tg.start_soon(try_nowait)
    assert failed


async def test_acquire_nowait_on_a_handed_over_lock_raises_would_block() -> None:
    lock = Lock()
    await lock.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lock.acquire)
        await settle()
        lock.release()  # handed to the waiter, which has not run yet
        with pytest.raises(anyio.WouldBlock):
            lock.acquire_nowait()


async def test_reacquiring_a_held_lock_raises() -> None:
    lock = Lock()
    async with lock:
        with pytest.raises(RuntimeError, match="already held Lock"):
            await lock.acquire()
        assert lock.statistics().owner == anyio.get_current_task()


async def test_reacquiring_a_held_lock_nowait_raises() -> None:
    lock = Lock()
    async with lock:
        with pytest.raises(RuntimeError, match="already held Lock"):
            lock.acquire_nowait()


async def test_release_by_another_task_raises() -> None:
    lock = Lock()
    raised = False

    async def release() -> None:
        nonlocal raised
        with pytest.raises(RuntimeError, match=NOT_OWNER):
            lock.release()
        raised = True

    async with lock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(release)
        assert lock.locked()
    assert raised


@pytest.mark.parametrize("fast_acquire", [False, True])
def test_owner_checks_hold_when_the_lock_moves_between_event_loops(
    fast_acquire: bool, task_map: str
) -> None:
    # The lock binds a cheap way to find the current task on first use; on
    # the next loop (or backend) it must find the new task, not the old one,
    # also where asyncio's tasks leave their loop -> task map empty (there
    # the way is asyncio.current_task(loop) itself).
    lock = Lock(fast_acquire=fast_acquire)
    owners: list[object] = []

    async def main() -> None:
        async def release_elsewhere() -> None:
            with pytest.raises(RuntimeError, match=NOT_OWNER):
                lock.release()

        for _ in range(2):
            await lock.acquire()
            owners.append(lock.statistics().owner)
            assert lock.statistics().owner == anyio.get_current_task()
            async with anyio.create_task_group() as tg:
                tg.start_soon(release_elsewhere)
            with pytest.raises(RuntimeError, match="already held"):
                lock.acquire_nowait()
            lock.release()
        assert not lock.locked()

    runs = run_on_every_backend_in_turn(main)
    assert len(owners) == 2 * len(runs)


async def test_release_of_a_free_lock_raises() -> None:
    lock = Lock()
    with pytest.raises(RuntimeError, match=NOT_OWNER):
        lock.release()


async def test_contended_acquire_waits_for_release() -> None:
    lock = Lock()
    got_it = anyio.Event()

    async def contend() -> None:
        async with lock:
            got_it.set()

    await lock.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(contend)
        await settle()
        assert not got_it.is_set()
        lock.release()
    assert got_it.is_set()
    assert not lock.locked()


async def test_waiters_acquire_in_arrival_order() -> None:
    lock = Lock()
    order: list[int] = []

    async def contend(i: int) -> None:
        async with lock:
            order.append(i)

    await lock.acquire()
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(contend, i) for i in range(5)))
        lock.release()
    assert order == [0, 1, 2, 3, 4]


async def test_release_hands_the_lock_to_the_first_waiter() -> None:
    lock = Lock()
    await lock.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lock.acquire)
        await settle()
        lock.release()
        assert lock.locked()
        assert lock.statistics().tasks_waiting == 0
    # the waiter's task ended holding the lock


async def test_statistics_name_the_owner_and_count_waiters() -> None:
    lock = Lock()
    await lock.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lock.acquire)
        tg.start_soon(lock.acquire)
        await settle()
        stats = lock.statistics()
        assert stats.locked
        assert stats.owner == anyio.get_current_task()
        assert stats.tasks_waiting == 2
        tg.cancel_scope.cancel()
    lock.release()
    assert lock.statistics() == anyio.LockStatistics(False, None, 0)


async def test_uncontended_acquire_is_a_schedule_point(
    anyio_backend_name: str,
) -> None:
    lock = Lock()
    await assert_schedule_point(anyio_backend_name, lock.acquire)
    assert lock.locked()
    lock.release()


async def test_acquire_in_a_cancelled_scope_raises_and_holds_nothing() -> None:
    lock = Lock()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await lock.acquire()
    assert scope.cancelled_caught
    assert not lock.locked()


async def test_fast_acquire_checks_cancellation_once_per_budget() -> None:
    lock = Lock(fast_acquire=True)
    acquired = 0
    BUDGET.left = BUDGET_SIZE
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(2 * BUDGET_SIZE):
            await lock.acquire()
            acquired += 1
            lock.release()
    assert scope.cancelled_caught
    assert acquired == BUDGET_SIZE - 1
    assert not lock.locked()


@pytest.mark.parametrize("source", CANCEL_SOURCES)
async def test_cancelled_acquire_holds_nothing(
    source: str, anyio_backend_name: str
) -> None:
    skip_if_unsupported(source, anyio_backend_name)
    lock = Lock()
    async with held_by_another_task(lock):
        await cancel_while_blocked(source, lock.acquire)
        assert lock.statistics().tasks_waiting == 0
    assert not lock.locked()
    lock.acquire_nowait()
    lock.release()


async def test_cancelled_waiter_keeps_the_others_in_order() -> None:
    lock = Lock()
    order: list[str] = []
    scope = anyio.CancelScope()

    async def first() -> None:
        async with lock:
            order.append("first")

    async def middle() -> None:
        with scope:
            async with lock:
                order.append("middle")

    async def last() -> None:
        async with lock:
            order.append("last")

    await lock.acquire()
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, first, middle, last)
        scope.cancel()
        await settle()
        assert lock.statistics().tasks_waiting == 2
        lock.release()
    assert order == ["first", "last"]


def _owner_id(lock: Lock) -> int | None:
    owner = lock.statistics().owner
    return None if owner is None else owner.id


@pytest.mark.usefixtures("asyncio_only")
async def test_granted_then_cancelled_acquire_passes_the_lock_on() -> None:
    lock = Lock()
    holders: list[int] = []

    async def take() -> None:
        await lock.acquire()
        holders.append(task_id())

    await lock.acquire()
    first = asyncio.ensure_future(take())
    await settle()
    second = asyncio.ensure_future(take())
    await settle()
    lock.release()  # grants first ...
    assert lock.statistics().tasks_waiting == 1
    assert _owner_id(lock) == id(first)
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert _owner_id(lock) == id(second), "the lock was not handed on"
    await settle()
    assert second.done(), "the grant was lost"
    await second
    assert holders == [id(second)]
    owner = lock.statistics().owner
    assert owner is not None
    assert owner.id == id(second)


@pytest.mark.usefixtures("asyncio_only")
async def test_granted_then_cancelled_acquire_leaves_the_lock_free() -> None:
    lock = Lock()
    await lock.acquire()
    waiter = asyncio.ensure_future(lock.acquire())
    await settle()
    lock.release()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not lock.locked()
    assert lock.statistics() == anyio.LockStatistics(False, None, 0)


async def test_mutual_exclusion_and_owner_under_random_cancellation() -> None:
    lock = Lock()
    inside = 0
    entered = 0
    scopes = [anyio.CancelScope() for _ in range(12)]

    def check_owner() -> None:
        # A held or handed-over lock always names its owner; a free one none.
        stats = lock.statistics()
        assert stats.locked == (stats.owner is not None)

    async def worker(scope: anyio.CancelScope) -> None:
        nonlocal inside, entered
        with scope:
            for _ in range(5):
                async with lock:
                    inside += 1
                    entered += 1
                    assert inside == 1
                    assert _owner_id(lock) == anyio.get_current_task().id
                    try:
                        await anyio.lowlevel.checkpoint()
                    finally:
                        inside -= 1
                check_owner()

    async with anyio.create_task_group() as tg:
        for scope in scopes:
            tg.start_soon(worker, scope)
        for i, scope in enumerate(scopes):
            if i % 3 == 0:
                scope.cancel()
            await anyio.lowlevel.checkpoint()
            check_owner()
    assert not lock.locked()
    assert lock.statistics().tasks_waiting == 0
    assert entered > 0


async def test_a_lock_that_was_waited_for_keeps_no_reference_to_the_waiter() -> None:
    # The waiter a contended acquire parked on is kept for the next wait
    # (see _core/_waiter.py); the task it named must not be kept with it.
    lock = Lock()
    await lock.acquire()

    async def wait_for_it() -> None:
        async with lock:
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_for_it)
        await anyio.wait_all_tasks_blocked()
        lock.release()
    spare = lock._sem._waiters._spare
    assert spare is not None
    assert spare.task is None
    assert spare.payload == 1


async def test_a_lock_keeps_no_task_of_an_acquire_that_was_cancelled() -> None:
    # A cancelled waiter behind the head stays in the queue until a grant
    # passes over it: it must not keep the task that waited on it, nor with
    # it that task's frames.
    lock = Lock()
    await lock.acquire()
    scope = anyio.CancelScope()
    cancelled: list[int] = []

    async def wait_for_it(scope: anyio.CancelScope) -> None:
        with scope:
            await lock.acquire()
        if scope.cancelled_caught:
            cancelled.append(task_id())
        else:
            lock.release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_for_it, anyio.CancelScope())
        await settle()
        tg.start_soon(wait_for_it, scope)
        await settle()
        assert lock.statistics().tasks_waiting == 2
        scope.cancel()
        await settle()
        waiters = lock._sem._waiters
        assert isinstance(waiters, WaitQueue)
        kept = [*waiters.parked, waiters._spare]
        assert cancelled
        assert [w for w in kept if w is not None and id(w.task) in cancelled] == []
        lock.release()
    assert scope.cancelled_caught
    assert not lock.locked()


@pytest.mark.usefixtures("asyncio_only")
async def test_release_skips_a_waiter_cancelled_before_it_ran() -> None:
    lock = Lock()
    await lock.acquire()
    first = asyncio.ensure_future(lock.acquire())
    second = asyncio.ensure_future(lock.acquire())
    await settle()
    first.cancel()  # its future is cancelled; the task has not run yet
    lock.release()  # must pass over it and name the second task the owner
    assert lock.locked()
    await settle()
    assert _owner_id(lock) == id(second)
    assert first.cancelled()
    assert second.done()
    assert second.exception() is None
    assert lock.statistics().tasks_waiting == 0


async def test_release_from_a_loop_callback_says_no_task_runs_there(
    anyio_backend_name: str,
) -> None:
    # anyio.from_thread.run_sync runs the call as a callback of the event
    # loop, in no task: the error says so, not that no event loop runs.
    if anyio_backend_name != "asyncio":
        pytest.skip("on Trio the call runs in the task that started the thread")
    lock = Lock()
    await lock.acquire()
    # Messages, not the exceptions: an exception kept here puts its
    # traceback's frames (the library's among them) on a cycle through this
    # list, which becomes garbage whenever AnyIO's worker thread lets go of
    # this function (AnyIO 4.6.0 keeps it until its next job or its exit),
    # perhaps inside another test's reference-cycle check.
    errors: list[str] = []

    def release_from_a_thread() -> None:
        try:
            anyio.from_thread.run_sync(lock.release)
        except RuntimeError as exc:
            errors.append(str(exc))

    await anyio.to_thread.run_sync(release_from_a_thread)
    assert errors == [
        "no task is running: call this from a task of an event loop, not from"
        " outside one or from a loop callback"
    ]
    assert lock.locked()
    lock.release()


def test_outside_a_loop_acquire_nowait_raises_what_the_installed_anyio_raises() -> None:
    # Runs under every AnyIO (the parity module compares more calls, from
    # 4.14 on): sniffio's error before 4.12, AnyIO's NoEventLoopError from
    # 4.12.1.  4.12.0 alone raises a private class, no RuntimeError; the
    # library raises AnyIO's public error there, as later releases do.
    private = getattr(anyio._core._eventloop, "NoCurrentAsyncBackend", RuntimeError)
    with pytest.raises((RuntimeError, private)) as theirs:
        anyio.Lock().acquire_nowait()
    with pytest.raises(RuntimeError) as ours:
        Lock().acquire_nowait()
    if ANYIO_RELEASE == "4.12.0":
        assert type(theirs.value) is private
        assert type(ours.value) is anyio.NoEventLoopError
    else:
        assert type(ours.value) is type(theirs.value)


def test_the_error_outside_a_loop_is_sniffio_s_to_anyio_4_11_then_anyio_s() -> None:
    # AnyIO 4.11 defines NoEventLoopError (for anyio.from_thread) but its
    # primitives raise sniffio's error outside a loop; 4.12.0 added
    # get_available_backends(), and from 4.12.1 they raise NoEventLoopError.
    # Present the library with 4.12's names, then with 4.11's, and ask which
    # error it raises.
    class NoEventLoopError(RuntimeError):
        pass

    anyio_4_12 = SimpleNamespace(
        NoEventLoopError=NoEventLoopError, get_available_backends=lambda: ()
    )
    assert _backend._no_event_loop_error(anyio_4_12) is NoEventLoopError
    sniffio = pytest.importorskip("sniffio")
    anyio_4_11 = SimpleNamespace(NoEventLoopError=NoEventLoopError)
    assert (
        _backend._no_event_loop_error(anyio_4_11) is sniffio.AsyncLibraryNotFoundError
    )
