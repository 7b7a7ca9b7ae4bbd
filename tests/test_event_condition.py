"""anyio_prims Event and Condition: the drop-ins for anyio.Event and
anyio.Condition."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

import anyio
import pytest

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
from ._waiter_count import WAITER_STATS

pytestmark = pytest.mark.anyio

NOT_HOLDING = "The current task is not holding the underlying lock"


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation")


def holds_lock(cond: Condition) -> bool:
    return cond.statistics().lock_statistics.owner == anyio.get_current_task()


NewCondition = Callable[[], Condition]


@pytest.fixture(params=["Lock", "anyio.Lock", "anyio.Lock_made_before_the_loop"])
def new_condition(request: pytest.FixtureRequest) -> NewCondition:
    """Makes a Condition on each kind of lock it takes, as anyio's does: ours,
    an anyio.Lock made in the task (the backend's own lock), and one made
    outside an event loop (anyio's LockAdapter, which picks one on first
    use).  The Condition tests below hold for all three."""
    if request.param == "Lock":
        return lambda: Condition(Lock())
    if request.param == "anyio.Lock":
        return lambda: Condition(anyio.Lock())
    lock = anyio.Lock()  # a sync fixture runs outside the event loop
    return lambda: Condition(lock)


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


async def test_condition_accepts_an_anyio_lock() -> None:
    lock = anyio.Lock()
    cond = Condition(lock)
    assert cond.statistics() == anyio.ConditionStatistics(0, lock.statistics())
    async with cond:
        assert lock.locked()
        assert lock.statistics().owner == anyio.get_current_task()
        assert cond.statistics().lock_statistics == lock.statistics()
        cond.notify()  # the current task holds it: no RuntimeError
    assert not lock.locked()
    await lock.acquire()
    assert cond.locked()
    cond.release()  # the same lock, released through either
    assert not lock.locked()


class _LoggingLock:
    """Not an anyio.Lock: a wrapper of one with its methods, as AnyIO's
    Condition takes."""

    def __init__(self) -> None:
        self.inner = anyio.Lock()
        self.calls: list[str] = []

    async def acquire(self) -> None:
        self.calls.append("acquire")
        await self.inner.acquire()

    def acquire_nowait(self) -> None:
        self.calls.append("acquire_nowait")
        self.inner.acquire_nowait()

    def release(self) -> None:
        self.calls.append("release")
        self.inner.release()

    def locked(self) -> bool:
        return self.inner.locked()

    def statistics(self) -> anyio.LockStatistics:
        return self.inner.statistics()


async def test_condition_takes_an_object_with_the_lock_api_as_anyio_s_does() -> None:
    lock = _LoggingLock()
    cond = Condition(lock)  # type: ignore[arg-type]  # as AnyIO's: at run time
    woken = []

    async def waiter() -> None:
        async with cond:
            await cond.wait()
            woken.append(lock.inner.statistics().owner == anyio.get_current_task())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await settle()
        async with cond:
            cond.notify()
    assert woken == [True]
    assert lock.calls == ["acquire", "release"] * 3


class NotQuiteALock:
    """The lock API's names, one of them no method (found by mutation
    testing: only objects that lacked the API were tried)."""

    async def acquire(self) -> None:  # pragma: no cover - never called
        pass

    def acquire_nowait(self) -> None:  # pragma: no cover - never called
        pass

    def release(self) -> None:  # pragma: no cover - never called
        pass

    def locked(self) -> bool:  # pragma: no cover - never called
        return False

    statistics = None


@pytest.mark.parametrize(
    "not_a_lock",
    [object(), asyncio.Lock(), Event(), NotQuiteALock()],
    ids=["object", "asyncio.Lock", "Event", "a statistics that is no method"],
)
def test_condition_rejects_a_non_lock(not_a_lock: object) -> None:
    expected = (
        "lock must be an anyio_prims Lock, an anyio.Lock, or an object with "
        "their acquire, acquire_nowait, release, locked and statistics "
        f"methods, not {type(not_a_lock).__name__}"
    )
    with pytest.raises(TypeError, match=f"^{re.escape(expected)}$"):
        Condition(not_a_lock)  # type: ignore[arg-type]


async def test_acquire_nowait_release_and_locked_use_the_lock(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
    cond.acquire_nowait()
    assert cond.locked()
    assert holds_lock(cond)
    cond.release()
    assert not cond.locked()
    await cond.acquire()
    assert cond.locked()
    cond.release()


@pytest.mark.parametrize("method", ["notify", "notify_all"])
async def test_notify_without_the_lock_raises(
    method: str, new_condition: NewCondition
) -> None:
    cond = new_condition()
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        getattr(cond, method)()


async def test_notify_with_the_lock_held_by_another_task_raises(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
    raised = False

    async def notify() -> None:
        nonlocal raised
        with pytest.raises(RuntimeError, match=NOT_HOLDING):
            cond.notify()
        raised = True

    async with cond, anyio.create_task_group() as tg:
        tg.start_soon(notify)
    assert raised


async def test_wait_without_the_lock_raises(new_condition: NewCondition) -> None:
    cond = new_condition()
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        await cond.wait()
    assert cond.statistics().tasks_waiting == 0


async def test_wait_releases_the_lock_until_notified(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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


async def test_set_wakes_event_waiters_in_arrival_order(
    anyio_backend_name: str,
) -> None:
    # Woken in the order they began to wait (Trio's own Event, under
    # AnyIO's there, keeps no order).  Trio runs a batch of woken tasks in
    # an order of its own (backwards half the time; shuffled once
    # hypothesis is imported), so there only all of them must run.
    event = Event()
    order: list[int] = []

    async def wait(i: int) -> None:
        await event.wait()
        order.append(i)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(wait, i) for i in range(6)))
        event.set()
    arrival = list(range(6))
    if anyio_backend_name == "trio":
        assert sorted(order) == arrival
    else:
        assert order == arrival


async def test_notify_wakes_waiters_in_arrival_order(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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


async def test_notify_n_wakes_the_first_n_waiters(new_condition: NewCondition) -> None:
    cond = new_condition()
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


async def test_notify_all_wakes_every_waiter(new_condition: NewCondition) -> None:
    cond = new_condition()
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


async def test_a_notification_with_nobody_waiting_is_not_kept(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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


async def test_wait_for_returns_the_true_predicate_value(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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


async def test_wait_for_a_true_predicate_does_not_wait(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
    async with cond:
        assert await cond.wait_for(lambda: 42) == 42


async def test_condition_statistics_count_waiters_and_show_the_lock(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()

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


async def test_wait_in_a_cancelled_scope_raises_and_keeps_the_lock(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
    async with cond:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await cond.wait()
        assert scope.cancelled_caught
        assert holds_lock(cond)
    assert cond.statistics().tasks_waiting == 0


@pytest.mark.parametrize("source", CANCEL_SOURCES)
async def test_cancelled_wait_holds_the_lock_when_it_raises(
    source: str,
    anyio_backend_name: str,
    new_condition: NewCondition,
) -> None:
    skip_if_unsupported(source, anyio_backend_name)
    cond = new_condition()
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


async def test_cancelled_wait_waits_for_the_lock_before_raising(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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
async def test_notified_then_cancelled_waiter_passes_the_notification_on(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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
async def test_task_cancel_while_reacquiring_still_reacquires(
    new_condition: NewCondition,
) -> None:
    cond = new_condition()
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


async def _notify_one_of_two_then_cancel_it_while_reacquiring(
    cond: Condition,
    wait_first: Callable[[], Coroutine[Any, Any, str]],
    cancel_first: Callable[[asyncio.Task[str]], object],
) -> tuple[str, str]:
    # notify(1) with two waiting: the first is woken, then cancelled (by
    # ``cancel_first``) while it waits for the lock, so it never acts on the
    # notification: the second must get it.  Returns both outcomes.
    async def wait_second() -> str:
        async with cond:
            try:
                await cond.wait()
            except asyncio.CancelledError:
                return "still waiting"  # (cancelled at the end, below)
            return "notified"

    first = asyncio.ensure_future(wait_first())
    await settle()
    second = asyncio.ensure_future(wait_second())
    await settle()
    async with cond:
        cond.notify(1)
        await settle()  # the first waits for the lock now
        cancel_first(first)
        await settle()
    await asyncio.wait([second], timeout=5)
    if not second.done():
        second.cancel()  # the notification was lost: free the test
    return await first, await second


@pytest.mark.usefixtures("asyncio_only")
async def test_a_waiter_cancelled_while_reacquiring_passes_the_notification_on(
    new_condition: NewCondition,
) -> None:
    # task.cancel() gets through the re-acquisition's shield.
    cond = new_condition()

    async def wait_first() -> str:
        async with cond:
            try:
                await cond.wait()
            except asyncio.CancelledError:
                return "cancelled"
            return "notified"  # pragma: no cover

    outcomes = await _notify_one_of_two_then_cancel_it_while_reacquiring(
        cond, wait_first, lambda task: task.cancel()
    )
    assert outcomes == ("cancelled", "notified")
    assert not cond.locked()


@pytest.mark.usefixtures("asyncio_only")
async def test_a_waiter_timed_out_while_reacquiring_passes_the_notification_on(
    new_condition: NewCondition,
) -> None:
    # So does an asyncio.timeout() that expires then.
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout() is 3.11+")
    cond = new_condition()
    timeouts: list[Any] = []  # asyncio.Timeout, 3.11+

    async def wait_first() -> str:
        async with cond:
            try:
                async with asyncio.timeout(None) as timeout:
                    timeouts.append(timeout)
                    await cond.wait()
            except TimeoutError:
                return "timed out"
            return "notified"  # pragma: no cover

    def expire(_: object) -> None:
        timeouts[0].reschedule(asyncio.get_running_loop().time())

    outcomes = await _notify_one_of_two_then_cancel_it_while_reacquiring(
        cond, wait_first, expire
    )
    assert outcomes == ("timed out", "notified")
    assert not cond.locked()


# -- regressions found by mutation testing --------------------------------------


async def test_condition_wait_in_cancelled_scope_keeps_the_lock() -> None:
    # Pins: wait() in an already-cancelled scope raises before it releases
    # the lock, so no other task runs its critical section meanwhile.
    cond = Condition()
    events: list[str] = []

    async def other() -> None:
        async with cond:
            events.append("other")

    async with anyio.create_task_group() as tg, cond:
        tg.start_soon(other)
        await anyio.wait_all_tasks_blocked()  # other() waits for the lock
        with anyio.CancelScope() as scope:
            scope.cancel()
            await cond.wait()
        events.append("ours ends")
    assert events == ["ours ends", "other"]
