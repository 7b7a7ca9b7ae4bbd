"""A finalizer that releases, sets or closes a primitive while an acquire
or wait on it parks (see tests/channels/test_reentry.py for the channels).

Making the waiter allocates, so a garbage collection there may run a
``__del__`` that frees what the call is about to wait for, before the
waiter is parked where that release can grant it.  The call must not wait
for what has already happened: it gets the permits, token or flag, or the
error of the close, as if that code had run just before it.  The code runs
inside the wait queue's ``enqueue``, before or after the waiter is parked.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import anyio_prims
from anyio_prims import BatchSemaphore

from ._reentry import Arm, arm_inside_enqueue
from ._tasks import Call, assert_schedule_point, settle

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["before", "after"])
def inside_enqueue(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Arm]:
    """Arm a one-shot action to run inside the next ``enqueue``, before or
    after the waiter is parked."""
    armed = arm_inside_enqueue(monkeypatch, request.param)
    yield armed.append
    assert not armed, "the action never ran: the call did not park"


@pytest.mark.parametrize("fair", [True, False])
async def test_an_acquire_gets_the_permits_released_while_it_parks(
    inside_enqueue: Arm, fair: bool
) -> None:
    sem = BatchSemaphore(1, fair=fair)
    inside_enqueue(lambda: sem.release(2))
    with anyio.fail_after(5):
        await sem.acquire(3)
    assert sem.available_permits == 0
    assert sem.statistics().tasks_waiting == 0


async def test_an_acquire_raises_closed_when_the_semaphore_closes_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    sem = BatchSemaphore(0)
    inside_enqueue(sem.close)
    with anyio.fail_after(5), pytest.raises(anyio.ClosedResourceError):
        await sem.acquire()
    assert sem.statistics().tasks_waiting == 0


async def test_a_release_while_an_acquire_parks_keeps_a_larger_head_first(
    inside_enqueue: Arm,
) -> None:
    # Fair: a request for 3 is queued first.  A release of 1 while a request
    # for 1 parks must not let that request past it.
    sem = BatchSemaphore(0)
    async with anyio.create_task_group() as tg:
        head = Call(lambda: sem.acquire(3)).start(tg)
        await settle()
        inside_enqueue(lambda: sem.release(1))
        second = Call(sem.acquire).start(tg)
        await settle()
        assert head.outcome is None
        assert second.outcome is None
        assert sem.statistics().tasks_waiting == 2
        sem.release(3)
        await settle()
    assert head.outcome == "returned"
    assert second.outcome == "returned"
    assert sem.available_permits == 0


@pytest.mark.parametrize("form", ["acquire", "async with"])
async def test_a_drop_in_semaphore_acquire_gets_the_unit_released_while_it_parks(
    inside_enqueue: Arm, form: str
) -> None:
    sem = anyio_prims.Semaphore(1)
    await sem.acquire()
    inside_enqueue(sem.release)
    with anyio.fail_after(5):
        if form == "acquire":
            await sem.acquire()
        else:
            async with sem as entered:
                assert entered is sem
                assert sem.value == 0
            await sem.acquire()  # the unit came back on leaving the block
    assert sem.value == 0
    assert sem.statistics().tasks_waiting == 0


async def test_an_event_wait_returns_when_the_event_is_set_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    event = anyio_prims.Event()
    inside_enqueue(event.set)
    with anyio.fail_after(5):
        await event.wait()
    assert event.statistics().tasks_waiting == 0


async def test_an_event_wait_set_while_it_parks_is_still_a_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only "before": set after the waiter is parked, the wait is woken
    # normally (on asyncio a cancellation then takes effect at the next
    # checkpoint, as for any wait woken and cancelled in one step).
    armed = arm_inside_enqueue(monkeypatch, "before")
    event = anyio_prims.Event()
    armed.append(event.set)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await event.wait()
    assert scope.cancelled_caught
    assert not armed


@pytest.mark.parametrize("how", ["release", "more tokens"])
async def test_a_limiter_acquire_gets_the_token_freed_while_it_parks(
    inside_enqueue: Arm, how: str
) -> None:
    limiter = anyio_prims.CapacityLimiter(1)
    other = object()
    limiter.acquire_on_behalf_of_nowait(other)

    def free() -> None:
        if how == "release":
            limiter.release_on_behalf_of(other)
        else:
            limiter.total_tokens = 2

    inside_enqueue(free)
    with anyio.fail_after(5):
        await limiter.acquire()
    assert limiter.statistics().tasks_waiting == 0
    limiter.release()


async def test_a_limiter_acquire_granted_while_it_parks_then_cancelled_holds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The token freed inside enqueue, before the waiter is parked, is
    # granted to the acquire by its own look again, and the same step
    # cancels its scope: the acquire raises at the checkpoint it then takes
    # and gives the token back (found by mutation testing: neither was
    # pinned).  Freed after the park, the grant would complete the call
    # before the cancellation arrives (docs/semantics.md).
    limiter = anyio_prims.CapacityLimiter(1)
    other = object()
    limiter.acquire_on_behalf_of_nowait(other)
    returned = False
    with anyio.CancelScope() as scope:

        def release_and_cancel() -> None:
            limiter.release_on_behalf_of(other)
            scope.cancel()

        armed = arm_inside_enqueue(monkeypatch, "before")
        armed.append(release_and_cancel)
        await limiter.acquire()
        returned = True
    assert not armed, "the action never ran: the call did not park"
    assert not returned
    assert scope.cancelled_caught
    assert limiter.borrowed_tokens == 0  # given back
    assert limiter.statistics().tasks_waiting == 0


# A call granted by its own look again, while its task runs, did not wait:
# it is a checkpoint as a call that found the release done before it.  Only
# "before" (released after the waiter is parked, it was woken from a wait,
# and on asyncio a cancellation then takes effect at the next checkpoint,
# as for any wait woken and cancelled in one step).


@pytest.fixture
def before_the_park(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """One-shot actions to run inside the next ``enqueue``, before the
    waiter is parked."""
    return arm_inside_enqueue(monkeypatch, "before")


@pytest.mark.parametrize("fair", [True, False])
async def test_a_strict_acquire_granted_by_a_release_while_it_parks_checkpoints(
    before_the_park: list[Any], fair: bool
) -> None:
    sem = BatchSemaphore(0, fair=fair, strict=True)
    before_the_park.append(lambda: sem.release(2))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sem.acquire(2)
    assert scope.cancelled_caught
    assert not before_the_park
    assert sem.available_permits == 2  # given back
    assert sem.statistics().tasks_waiting == 0


async def test_a_strict_acquire_on_a_semaphore_closed_while_it_parks_checkpoints_first(
    before_the_park: list[Any],
) -> None:
    # As on a semaphore closed just before the call: a strict acquire takes
    # the checkpoint it skipped to park before it raises
    # ClosedResourceError; in a cancelled scope, the cancellation.  (A
    # budgeted one whose checkpoint is due takes it before it parks.)
    sem = BatchSemaphore(0, strict=True)
    before_the_park.append(sem.close)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sem.acquire()
    assert scope.cancelled_caught
    assert not before_the_park
    assert sem.statistics().tasks_waiting == 0


@pytest.mark.parametrize("form", ["acquire", "async with"])
async def test_a_drop_in_semaphore_acquire_granted_while_it_parks_checkpoints(
    before_the_park: list[Any], form: str
) -> None:
    sem = anyio_prims.Semaphore(1)
    await sem.acquire()
    before_the_park.append(sem.release)
    with anyio.CancelScope() as scope:
        scope.cancel()
        if form == "acquire":
            await sem.acquire()
        else:
            async with sem:
                pytest.fail("entered in a cancelled scope")
    assert scope.cancelled_caught
    if before_the_park:
        # On Trio the acquire checks for cancellation before it parks (as
        # AnyIO's): the release never ran.
        before_the_park.pop()()
    assert sem.value == 1  # the cancelled acquire holds nothing


async def test_a_limiter_acquire_granted_while_it_parks_is_a_schedule_point(
    before_the_park: list[Any], anyio_backend_name: str
) -> None:
    limiter = anyio_prims.CapacityLimiter(1)
    other = object()
    limiter.acquire_on_behalf_of_nowait(other)
    before_the_park.append(lambda: limiter.release_on_behalf_of(other))
    await assert_schedule_point(anyio_backend_name, limiter.acquire)
    assert not before_the_park
    assert limiter.borrowed_tokens == 1
    limiter.release()


@pytest.mark.parametrize("fast_acquire", [False, True])
async def test_a_release_inside_the_wake_of_the_next_owner_is_refused(
    fast_acquire: bool, inside_wake: Arm
) -> None:
    # release() hands the lock to the first waiter; a second release() by
    # the same task, run as that waiter is woken, finds it no longer the
    # owner (it let the second waiter in too, and two tasks held the lock).
    lock = anyio_prims.Lock(fast_acquire=fast_acquire)
    await lock.acquire()
    inside = 0
    most = 0
    refused: list[str] = []

    async def hold() -> None:
        nonlocal inside, most
        async with lock:
            inside += 1
            most = max(most, inside)
            await anyio.lowlevel.checkpoint()
            inside -= 1

    def release_again() -> None:
        assert lock.statistics().owner is None  # none named yet
        assert lock.locked()
        try:
            lock.release()
        except RuntimeError:
            refused.append("RuntimeError")

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        tg.start_soon(hold)
        await settle()
        inside_wake(release_again)
        lock.release()
    assert refused == ["RuntimeError"]
    assert most == 1
    assert not lock.locked()


async def test_a_lock_passed_on_by_a_cancelled_waiter_names_its_owner_before_waking_it(
    anyio_backend_name: str, inside_wake: Arm
) -> None:
    # release() hands the lock to the first waiter, which is cancelled
    # before it runs; it passes the lock on to the second.  As the second
    # is woken, statistics() already names it the owner.
    if anyio_backend_name != "asyncio":
        pytest.skip("plain asyncio task.cancel() of a woken waiter")
    import asyncio

    lock = anyio_prims.Lock()
    await lock.acquire()
    loop = asyncio.get_running_loop()
    first = loop.create_task(lock.acquire(), name="first")
    await settle()
    second = loop.create_task(lock.acquire(), name="second")
    await settle()
    owners: list[str | None] = []

    def record_owner() -> None:
        owner = lock.statistics().owner
        owners.append(None if owner is None else owner.name)

    inside_wake(lambda: None)  # the first waiter's wake-up
    inside_wake(record_owner)  # the second's, as the lock is passed on
    lock.release()
    first.cancel()
    await asyncio.wait([first, second])
    assert first.cancelled()
    assert owners == ["second"]
    owner = lock.statistics().owner
    assert owner is not None
    assert owner.name == "second"


@pytest.mark.parametrize("fast_acquire", [False, True])
async def test_a_lock_handed_to_its_only_waiter_cannot_be_copied_in_the_wake(
    fast_acquire: bool, inside_wake: Arm
) -> None:
    # As the only waiter is woken, the lock is held with no owner named
    # yet and nobody else parked: a copy made there would be a lock held by
    # nobody, for good.  It raises, as a copy of a held lock does.
    lock = anyio_prims.Lock(fast_acquire=fast_acquire)
    await lock.acquire()
    refused: list[str] = []

    def copy_now() -> None:
        try:
            copy.copy(lock)
        except TypeError:
            refused.append("TypeError")

    async with anyio.create_task_group() as tg:
        tg.start_soon(lock.acquire)
        await settle()
        inside_wake(copy_now)
        lock.release()
    assert refused == ["TypeError"]
