"""anyio_prims Semaphore: the drop-in for anyio.Semaphore."""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anyio_prims._core import BUDGET, BUDGET_SIZE
from anyio_prims.sync._lock import Semaphore

from ._sync_support import (
    CANCEL_SOURCES,
    assert_schedule_point,
    cancel_while_blocked,
    cancelled_acquire_beside_a_release,
    settle,
    skip_if_unsupported,
    start_in_order,
)
from ._waiter_count import WAITER_STATS

pytestmark = pytest.mark.anyio


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation")


def test_created_outside_an_event_loop() -> None:
    sem = Semaphore(3, max_value=5)
    assert sem.value == 3
    assert sem.max_value == 5
    assert sem.statistics() == anyio.SemaphoreStatistics(0)


def test_max_value_defaults_to_none() -> None:
    assert Semaphore(1).max_value is None


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("1",), {}, TypeError, "initial_value must be an integer"),
        ((1.0,), {}, TypeError, "initial_value must be an integer"),
        ((-1,), {}, ValueError, "initial_value must be >= 0"),
        ((1,), {"max_value": 2.0}, TypeError, "max_value must be an integer or None"),
        (
            (2,),
            {"max_value": 1},
            ValueError,
            "max_value must be equal to or higher than initial_value",
        ),
    ],
)
def test_bad_constructor_arguments_raise(
    args: tuple[object, ...],
    kwargs: dict[str, object],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=f"^{message}$"):
        Semaphore(*args, **kwargs)  # type: ignore[arg-type]


async def test_acquire_decrements_and_release_increments() -> None:
    sem = Semaphore(2)
    await sem.acquire()
    assert sem.value == 1
    await sem.acquire()
    assert sem.value == 0
    sem.release()
    assert sem.value == 1


@pytest.mark.parametrize("fast_acquire", [False, True])
@pytest.mark.parametrize("waits", [False, True], ids=["free", "after_waiting"])
async def test_async_with_returns_the_semaphore_and_holds_a_unit(
    fast_acquire: bool, waits: bool
) -> None:
    # Each way into the block (free: strict or budgeted; taken: the wait,
    # written out in __aenter__) returns the semaphore, as AnyIO's does.
    sem = Semaphore(0 if waits else 1, fast_acquire=fast_acquire)
    entered: list[object] = []

    async def enter() -> None:
        async with sem as got:
            entered.append(got)
            assert sem.value == 0

    async with anyio.create_task_group() as tg:
        tg.start_soon(enter)
        await settle()
        if waits:
            assert sem.statistics().tasks_waiting == 1
            sem.release()
    assert entered == [sem]
    assert sem.value == 1


async def test_uncontended_acquire_creates_no_waiter() -> None:
    sem = Semaphore(1)
    created = WAITER_STATS.created
    for _ in range(10):
        async with sem:
            pass
    assert WAITER_STATS.created == created


async def test_release_beyond_max_value_raises() -> None:
    sem = Semaphore(1, max_value=1)
    with pytest.raises(ValueError, match=r"^semaphore released too many times$"):
        sem.release()
    assert sem.value == 1


async def test_release_without_max_value_has_no_ceiling() -> None:
    sem = Semaphore(0)
    for _ in range(3):
        sem.release()
    assert sem.value == 3


async def test_acquire_nowait_takes_a_unit() -> None:
    sem = Semaphore(1)
    sem.acquire_nowait()
    assert sem.value == 0


async def test_acquire_nowait_at_zero_raises_would_block() -> None:
    sem = Semaphore(0)
    with pytest.raises(anyio.WouldBlock):
        sem.acquire_nowait()
    assert sem.value == 0


async def test_contended_acquire_waits_for_release() -> None:
    sem = Semaphore(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sem.acquire)
        await settle()
        assert sem.statistics().tasks_waiting == 1
        sem.release()
    assert sem.statistics().tasks_waiting == 0
    assert sem.value == 0


async def test_release_hands_the_unit_to_a_waiter_directly() -> None:
    sem = Semaphore(0, max_value=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sem.acquire)
        await settle()
        sem.release()
        assert sem.value == 0
        assert sem.statistics().tasks_waiting == 0


async def test_waiters_acquire_in_arrival_order() -> None:
    sem = Semaphore(0)
    order: list[int] = []

    async def take(i: int) -> None:
        await sem.acquire()
        order.append(i)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(take, i) for i in range(5)))
        for _ in range(5):
            sem.release()
            await settle()
    assert order == [0, 1, 2, 3, 4]


async def _enter_in_one_round(tasks: int) -> tuple[list[int], list[int]]:
    # ``tasks`` tasks, started in one scheduling round, enter ``async with
    # sem:`` on a semaphore at 0: the order they called in, and the order
    # they entered in.
    sem = Semaphore(0)
    called: list[int] = []
    entered: list[int] = []

    async def enter(i: int) -> None:
        called.append(i)
        async with sem:
            entered.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(tasks):
            tg.start_soon(enter, i)
        await settle()
        assert sem.statistics().tasks_waiting == tasks
        sem.release()
    return called, entered


async def test_async_with_serves_waiters_in_the_order_they_called() -> None:
    # Also when they call in one scheduling round (Trio runs a round's
    # tasks in an order of its own).  Several rounds, so a call that could
    # fall behind a later one would show it.
    for _ in range(20):
        called, entered = await _enter_in_one_round(4)
        assert entered == called


async def test_a_release_wakes_exactly_one_waiter() -> None:
    sem = Semaphore(0)
    woken = 0

    async def take() -> None:
        nonlocal woken
        await sem.acquire()
        woken += 1

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(take)
        await settle()
        sem.release()
        await settle()
        assert woken == 1
        assert sem.statistics().tasks_waiting == 2
        sem.release()
        sem.release()
    assert woken == 3


async def test_statistics_count_waiters() -> None:
    sem = Semaphore(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sem.acquire)
        tg.start_soon(sem.acquire)
        await settle()
        assert sem.statistics() == anyio.SemaphoreStatistics(tasks_waiting=2)
        tg.cancel_scope.cancel()
    assert sem.statistics() == anyio.SemaphoreStatistics(tasks_waiting=0)


async def test_uncontended_acquire_is_a_schedule_point(
    anyio_backend_name: str,
) -> None:
    sem = Semaphore(1)
    await assert_schedule_point(anyio_backend_name, sem.acquire)
    assert sem.value == 0


async def test_acquire_in_a_cancelled_scope_raises_and_takes_nothing() -> None:
    sem = Semaphore(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sem.acquire()
    assert scope.cancelled_caught
    assert sem.value == 1


async def test_fast_acquire_checks_cancellation_once_per_budget() -> None:
    sem = Semaphore(1, fast_acquire=True)
    acquired = 0
    BUDGET.left = BUDGET_SIZE
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(2 * BUDGET_SIZE):
            async with sem:
                acquired += 1
    assert scope.cancelled_caught
    assert acquired == BUDGET_SIZE - 1
    assert sem.value == 1


# The two ways in: acquire() and ``async with`` (__aenter__), each with its
# own copy of the contended wait.
ENTRIES = {
    "acquire": lambda sem: sem.acquire,
    "async_with": lambda sem: sem.__aenter__,
}


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("source", CANCEL_SOURCES)
async def test_cancelled_acquire_takes_nothing(
    source: str, entry: str, anyio_backend_name: str
) -> None:
    skip_if_unsupported(source, anyio_backend_name)
    sem = Semaphore(0)
    await cancel_while_blocked(source, ENTRIES[entry](sem))
    assert sem.statistics().tasks_waiting == 0
    sem.release()
    assert sem.value == 1


async def test_cancelled_waiter_keeps_the_others_in_order() -> None:
    sem = Semaphore(0)
    order: list[str] = []
    scope = anyio.CancelScope()

    async def take(name: str) -> None:
        await sem.acquire()
        order.append(name)

    async def cancelled_take() -> None:
        with scope:
            await take("middle")

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, partial(take, "first"), cancelled_take)
        await start_in_order(tg, partial(take, "last"))
        scope.cancel()
        await settle()
        sem.release()
        await settle()
        sem.release()
    assert order == ["first", "last"]
    assert sem.value == 0


@pytest.mark.usefixtures("asyncio_only")
@pytest.mark.parametrize("entry", ENTRIES)
async def test_granted_then_cancelled_acquire_passes_the_unit_on(entry: str) -> None:
    sem = Semaphore(0)
    first = asyncio.ensure_future(ENTRIES[entry](sem)())
    await settle()
    second = asyncio.ensure_future(sem.acquire())
    await settle()
    sem.release()  # grants first ...
    assert sem.statistics().tasks_waiting == 1
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await settle()
    assert second.done(), "the grant was lost"
    await second
    assert sem.value == 0
    assert sem.statistics().tasks_waiting == 0


@pytest.mark.usefixtures("asyncio_only")
async def test_granted_then_cancelled_acquire_returns_the_unit() -> None:
    sem = Semaphore(0, max_value=1)
    waiter = asyncio.ensure_future(sem.acquire())
    await settle()
    sem.release()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert sem.value == 1


@settings(max_examples=25, deadline=None)
@given(
    initial=st.integers(min_value=1, max_value=3),
    cancels=st.lists(st.booleans(), min_size=6, max_size=6),
    gaps=st.lists(st.integers(min_value=0, max_value=3), min_size=6, max_size=6),
)
async def test_never_more_holders_than_units_under_cancellation(
    initial: int, cancels: list[bool], gaps: list[int]
) -> None:
    sem = Semaphore(initial, max_value=initial)
    holders = 0
    most = 0
    scopes = [anyio.CancelScope() for _ in cancels]

    async def worker(scope: anyio.CancelScope) -> None:
        nonlocal holders, most
        with scope:
            for _ in range(3):
                async with sem:
                    holders += 1
                    most = max(most, holders)
                    try:
                        await anyio.lowlevel.checkpoint()
                    finally:
                        holders -= 1

    async with anyio.create_task_group() as tg:
        for scope in scopes:
            tg.start_soon(worker, scope)
        for scope, cancel, gap in zip(scopes, cancels, gaps, strict=True):
            for _ in range(gap):
                await anyio.lowlevel.checkpoint()
            if cancel:
                scope.cancel()
    assert most <= initial
    assert sem.value == initial
    assert sem.statistics().tasks_waiting == 0


@pytest.mark.usefixtures("asyncio_only")
async def test_release_skips_a_waiter_cancelled_before_it_ran() -> None:
    sem = Semaphore(0)
    first = asyncio.ensure_future(sem.acquire())
    second = asyncio.ensure_future(sem.acquire())
    await settle()
    first.cancel()  # its future is cancelled; the task has not run yet
    sem.release()  # must pass over it to the second waiter
    await settle()
    assert first.cancelled()
    assert second.done()
    assert second.exception() is None
    assert sem.value == 0
    assert sem.statistics().tasks_waiting == 0
    sem.release()
    assert sem.value == 1


# -- regressions found by mutation testing --------------------------------------


async def test_uncontended_fast_acquire_loop_still_lets_other_tasks_run() -> None:
    # Pins: fast_acquire=True still spends the budget on uncontended
    # acquires, so a long loop of them reaches a schedule point.
    sem = Semaphore(1, fast_acquire=True)
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        for _ in range(10 * BUDGET_SIZE):
            await sem.acquire()
            sem.release()
        assert ticks > 0
        tg.cancel_scope.cancel()


async def test_a_unit_granted_to_a_cancelled_acquire_stays_within_max_value(
    anyio_backend_name: str,
) -> None:
    # A release hands the unit to a parked acquire whose task is cancelled
    # and has not run (on asyncio, task.cancel() after the grant; on Trio,
    # whose grants are final, a cancel the generic waiter learns of only
    # when the task runs).  Another release, allowed as the value is still
    # 0, puts a unit in the value.  The cancelled acquire gives its unit
    # back, but not above max_value.
    sem = Semaphore(0, max_value=1)
    if anyio_backend_name == "asyncio":
        task = asyncio.ensure_future(sem.acquire())
        await settle()
        sem.release()  # to the parked acquire
        task.cancel()  # before it runs
        sem.release()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        scopes: list[anyio.CancelScope] = []

        async def acquirer() -> None:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await sem.acquire()

        async with anyio.create_task_group() as tg:
            tg.start_soon(acquirer)
            await anyio.wait_all_tasks_blocked()
            scopes[0].cancel()
            sem.release()
            # Trio's own waiter left at the cancel: the unit is in the value.
            with contextlib.suppress(ValueError):
                sem.release()
        assert scopes[0].cancelled_caught
    assert sem.value == 1


async def test_a_cancelled_acquire_raises_and_the_value_ends_at_max_value(
    anyio_backend_name: str,
) -> None:
    # An uncontended acquire in a scope cancelled before the call, beside a
    # task that releases if it sees the unit taken.  Off Trio the acquire
    # takes the unit for its checkpoint, and that release (one too many,
    # which AnyIO would refuse) brings the value back to max_value: the
    # acquire raises its cancellation, not the ValueError, and the value
    # stays at the ceiling.  On Trio, as AnyIO's (Trio's own), it checks
    # for cancellation first: nobody sees the unit taken.
    sem = Semaphore(1, max_value=1)
    caught, released = await cancelled_acquire_beside_a_release(
        sem.acquire, lambda: sem.value == 0, sem.release
    )
    assert caught
    assert released == (anyio_backend_name != "trio")
    assert sem.value == 1
