"""anyio_prims Event and Condition: the drop-ins for anyio.Event and
anyio.Condition."""

from __future__ import annotations

import asyncio
from functools import partial

import anyio
import pytest

from anyio_prims._core import WAITER_STATS
from anyio_prims.sync._event import Condition, Event
from anyio_prims.sync._lock import Lock

from ._sync_support import (
    CANCEL_SOURCES,
    assert_schedule_point,
    cancel_while_blocked,
    settle,
    skip_if_unsupported,
    start_in_order,
)

pytestmark = pytest.mark.anyio

NOT_HOLDING = "The current task is not holding the underlying lock"


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation")


def holds_lock(cond: Condition) -> bool:
    return cond.statistics().lock_statistics.owner == anyio.get_current_task()


# Event


def test_event_created_outside_an_event_loop() -> None:
    event = Event()
    assert not event.is_set()
    assert event.statistics() == anyio.EventStatistics(0)


async def test_set_wakes_every_waiter() -> None:
    event = Event()
    woken = 0

    async def wait() -> None:
        nonlocal woken
        await event.wait()
        woken += 1

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(wait)
        await settle()
        assert woken == 0
        event.set()
        assert event.is_set()
    assert woken == 3


async def test_set_is_idempotent() -> None:
    event = Event()
    event.set()
    event.set()
    assert event.is_set()
    await event.wait()


async def test_wait_on_a_set_event_is_a_schedule_point(
    anyio_backend_name: str,
) -> None:
    event = Event()
    event.set()
    await assert_schedule_point(anyio_backend_name, event.wait)


async def test_wait_on_a_set_event_creates_no_waiter() -> None:
    event = Event()
    event.set()
    created = WAITER_STATS.created
    await event.wait()
    assert WAITER_STATS.created == created


async def test_wait_on_a_set_event_in_a_cancelled_scope_raises() -> None:
    event = Event()
    event.set()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await event.wait()
    assert scope.cancelled_caught


async def test_event_statistics_count_waiters() -> None:
    event = Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(event.wait)
        tg.start_soon(event.wait)
        await settle()
        assert event.statistics() == anyio.EventStatistics(tasks_waiting=2)
        event.set()
    assert event.statistics() == anyio.EventStatistics(tasks_waiting=0)


@pytest.mark.parametrize("source", CANCEL_SOURCES)
async def test_cancelled_wait_leaves_the_event_alone(
    source: str, anyio_backend_name: str
) -> None:
    skip_if_unsupported(source, anyio_backend_name)
    event = Event()
    await cancel_while_blocked(source, event.wait)
    assert not event.is_set()
    assert event.statistics().tasks_waiting == 0


@pytest.mark.usefixtures("asyncio_only")
async def test_set_then_cancelled_wait_raises_and_others_wake() -> None:
    event = Event()
    first = asyncio.ensure_future(event.wait())
    second = asyncio.ensure_future(event.wait())
    await settle()
    event.set()
    first.cancel()  # granted, cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await settle()
    assert second.done(), "the grant was lost"
    await second
    assert event.is_set()


# Condition


def test_condition_created_outside_an_event_loop() -> None:
    cond = Condition()
    assert not cond.locked()
    assert cond.statistics() == anyio.ConditionStatistics(
        0, anyio.LockStatistics(False, None, 0)
    )


async def test_condition_uses_the_lock_given() -> None:
    lock = Lock()
    cond = Condition(lock)
    async with cond as entered:
        assert entered is None
        assert lock.locked()
    assert not lock.locked()


def test_condition_with_another_kind_of_lock_raises_type_error() -> None:
    with pytest.raises(TypeError, match="lock must be"):
        Condition(object())  # type: ignore[arg-type]


async def test_acquire_nowait_release_and_locked_use_the_lock() -> None:
    cond = Condition()
    cond.acquire_nowait()
    assert cond.locked()
    assert holds_lock(cond)
    cond.release()
    assert not cond.locked()
    await cond.acquire()
    assert cond.locked()
    cond.release()


@pytest.mark.parametrize("method", ["notify", "notify_all"])
async def test_notify_without_the_lock_raises(method: str) -> None:
    cond = Condition()
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        getattr(cond, method)()


async def test_notify_with_the_lock_held_by_another_task_raises() -> None:
    cond = Condition()
    raised = False

    async def notify() -> None:
        nonlocal raised
        with pytest.raises(RuntimeError, match=NOT_HOLDING):
            cond.notify()
        raised = True

    async with cond, anyio.create_task_group() as tg:
        tg.start_soon(notify)
    assert raised


async def test_wait_without_the_lock_raises() -> None:
    cond = Condition()
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        await cond.wait()
    assert cond.statistics().tasks_waiting == 0


async def test_wait_releases_the_lock_until_notified() -> None:
    cond = Condition()
    held_after_wait = False

    async def wait() -> None:
        nonlocal held_after_wait
        async with cond:
            await cond.wait()
            held_after_wait = holds_lock(cond)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await settle()
        assert not cond.locked()
        async with cond:
            cond.notify()
    assert held_after_wait


async def test_notify_wakes_waiters_in_arrival_order() -> None:
    cond = Condition()
    order: list[int] = []

    async def wait(i: int) -> None:
        async with cond:
            await cond.wait()
            order.append(i)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(wait, i) for i in range(4)))
        for _ in range(4):
            async with cond:
                cond.notify()
            await settle()
    assert order == [0, 1, 2, 3]


async def test_notify_n_wakes_the_first_n_waiters() -> None:
    cond = Condition()
    woken: list[int] = []

    async def wait(i: int) -> None:
        async with cond:
            await cond.wait()
            woken.append(i)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(wait, i) for i in range(4)))
        async with cond:
            cond.notify(2)
            assert cond.statistics().tasks_waiting == 2
        await settle()
        assert sorted(woken) == [0, 1]
        async with cond:
            cond.notify(5)  # more than wait
    assert sorted(woken) == [0, 1, 2, 3]


async def test_notify_all_wakes_every_waiter() -> None:
    cond = Condition()
    woken = 0

    async def wait() -> None:
        nonlocal woken
        async with cond:
            await cond.wait()
            woken += 1

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(wait)
        await settle()
        async with cond:
            cond.notify_all()
            assert cond.statistics().tasks_waiting == 0
    assert woken == 3


async def test_a_notification_with_nobody_waiting_is_not_kept() -> None:
    cond = Condition()
    woken = False

    async def wait() -> None:
        nonlocal woken
        async with cond:
            await cond.wait()
            woken = True

    async with cond:
        cond.notify()
    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await settle()
        assert not woken
        assert cond.statistics().tasks_waiting == 1
        async with cond:
            cond.notify()
    assert woken


async def test_wait_for_returns_the_true_predicate_value() -> None:
    cond = Condition()
    items: list[str] = []

    async def consume() -> None:
        async with cond:
            got = await cond.wait_for(lambda: items and items[-1])
            assert got == "b"

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await settle()
        async with cond:
            items.append("")  # still false: the waiter waits again
            cond.notify()
        await settle()
        assert cond.statistics().tasks_waiting == 1
        async with cond:
            items.append("b")
            cond.notify()


async def test_wait_for_a_true_predicate_does_not_wait() -> None:
    cond = Condition()
    async with cond:
        assert await cond.wait_for(lambda: 42) == 42


async def test_condition_statistics_count_waiters_and_show_the_lock() -> None:
    cond = Condition()

    async def wait() -> None:
        async with cond:
            await cond.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        tg.start_soon(wait)
        await settle()
        async with cond:
            stats = cond.statistics()
            assert stats.tasks_waiting == 2
            assert stats.lock_statistics.locked
            assert stats.lock_statistics.owner == anyio.get_current_task()
            cond.notify_all()


async def test_wait_in_a_cancelled_scope_raises_and_keeps_the_lock() -> None:
    cond = Condition()
    async with cond:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await cond.wait()
        assert scope.cancelled_caught
        assert holds_lock(cond)
    assert cond.statistics().tasks_waiting == 0


@pytest.mark.parametrize("source", CANCEL_SOURCES)
async def test_cancelled_wait_holds_the_lock_when_it_raises(
    source: str, anyio_backend_name: str
) -> None:
    skip_if_unsupported(source, anyio_backend_name)
    cond = Condition()
    held: list[bool] = []

    async def wait() -> None:
        async with cond:
            try:
                await cond.wait()
            finally:
                held.append(holds_lock(cond))

    await cancel_while_blocked(source, wait)
    assert held == [True]
    assert not cond.locked()
    assert cond.statistics().tasks_waiting == 0


async def test_cancelled_wait_waits_for_the_lock_before_raising() -> None:
    cond = Condition()
    scope = anyio.CancelScope()
    held: list[bool] = []

    async def wait() -> None:
        with scope:
            async with cond:
                try:
                    await cond.wait()
                finally:
                    held.append(holds_lock(cond))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await settle()
        async with cond:
            scope.cancel()
            await settle()
            assert held == []  # blocked on the lock, shielded
    assert held == [True]
    assert scope.cancelled_caught


@pytest.mark.usefixtures("asyncio_only")
async def test_notified_then_cancelled_waiter_passes_the_notification_on() -> None:
    cond = Condition()
    woken: list[str] = []

    async def wait(name: str) -> None:
        async with cond:
            await cond.wait()
            woken.append(name)

    first = asyncio.ensure_future(wait("first"))
    await settle()
    second = asyncio.ensure_future(wait("second"))
    await settle()
    async with cond:
        cond.notify()  # grants first ...
        first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await settle()
    assert second.done(), "the grant was lost"
    await second
    assert woken == ["second"]
    assert not cond.locked()


@pytest.mark.usefixtures("asyncio_only")
async def test_task_cancel_while_reacquiring_still_reacquires() -> None:
    cond = Condition()
    held: list[bool] = []

    async def wait() -> None:
        async with cond:
            try:
                await cond.wait()
            finally:
                held.append(holds_lock(cond))

    waiter = asyncio.ensure_future(wait())
    await settle()
    async with cond:
        cond.notify()
        await settle()  # the waiter now waits for the lock
        waiter.cancel()
        await settle()
        assert held == []
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert held == [True]
    assert not cond.locked()
