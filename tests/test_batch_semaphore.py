"""BatchSemaphore: permits, fairness, closing, cancellation, bad input.

Tasks are ordered with ``anyio.wait_all_tasks_blocked()`` (``settle()``).
Cancellation is tested from every source the library must handle: AnyIO's
scopes on every backend, Trio's own scopes on Trio, and plain asyncio
``task.cancel()``, ``asyncio.timeout()`` and ``asyncio.wait_for()`` on the
asyncio backends (``acquire_call()`` below runs one acquire under one source).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import gc
import sys
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from anyio_prims import BatchSemaphore, BatchSemaphoreStatistics, Event
from anyio_prims._core import BUDGET, BUDGET_SIZE, FORCE_GENERIC
from anyio_prims.sync._batch_semaphore import fair_semaphore

from ._tasks import Call, assert_no_schedule_point, assert_schedule_point, settle

pytestmark = pytest.mark.anyio


class Holder:
    """A task that acquires ``n`` permits and keeps them until told to stop."""

    def __init__(self, sem: BatchSemaphore, n: int = 1) -> None:
        self.sem = sem
        self.n = n
        self.holding = False
        self.error: BaseException | None = None
        self._stop = anyio.Event()

    def start(self, tg: anyio.abc.TaskGroup) -> Holder:
        tg.start_soon(self._run)
        return self

    async def _run(self) -> None:
        try:
            await self.sem.acquire(self.n)
        except Exception as exc:
            self.error = exc
            return
        self.holding = True
        await self._stop.wait()
        self.holding = False
        self.sem.release(self.n)

    def stop(self) -> None:
        self._stop.set()


# ---------------------------------------------------------------------------
# Cancellation sources
# ---------------------------------------------------------------------------

ALL = ("asyncio", "trio")
SOURCES: dict[str, tuple[str, ...]] = {
    "anyio_cancel_scope": ALL,
    "anyio_move_on_after": ALL,
    "anyio_fail_after": ALL,
    "trio_cancel_scope": ("trio",),
    "trio_move_on_after": ("trio",),
    "asyncio_task_cancel": ("asyncio",),
    "asyncio_timeout": ("asyncio",),
    "asyncio_wait_for": ("asyncio",),
}
#: Sources whose grant-then-cancel race reaches the give-back path: they
#: cancel the task even though the wait it is in has been granted.
GIVE_BACK_SOURCES = ("asyncio_task_cancel", "asyncio_timeout")


@pytest.fixture(params=list(SOURCES))
def source(request: pytest.FixtureRequest, anyio_backend_name: str) -> str:
    name: str = request.param
    if anyio_backend_name not in SOURCES[name]:
        pytest.skip(f"{name} is not a cancellation source on {anyio_backend_name}")
    if name == "asyncio_timeout" and sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    return name


def acquire_call(sem: BatchSemaphore, n: int, source: str) -> Call:
    """One ``sem.acquire(n)`` under one cancellation source (see ``Call``)."""
    return Call(lambda: sem.acquire(n), source)


# ---------------------------------------------------------------------------
# Acquire, release, statistics
# ---------------------------------------------------------------------------


async def test_acquire_takes_a_permit_and_release_returns_it() -> None:
    sem = BatchSemaphore(2)
    await sem.acquire()
    assert sem.available_permits == 1
    sem.release()
    assert sem.available_permits == 2


async def test_acquire_n_takes_n_permits_and_release_n_returns_them() -> None:
    sem = BatchSemaphore(5)
    await sem.acquire(3)
    assert sem.available_permits == 2
    sem.release(3)
    assert sem.available_permits == 5


async def test_acquire_nowait_takes_permits() -> None:
    sem = BatchSemaphore(5)
    sem.acquire_nowait()
    sem.acquire_nowait(3)
    assert sem.available_permits == 1


async def test_acquire_nowait_without_enough_permits_raises_would_block() -> None:
    sem = BatchSemaphore(2)
    with pytest.raises(anyio.WouldBlock):
        sem.acquire_nowait(3)
    assert sem.available_permits == 2


async def test_acquire_blocks_until_enough_permits_are_released() -> None:
    sem = BatchSemaphore(1)
    async with anyio.create_task_group() as tg:
        holder = Holder(sem, 3).start(tg)
        await settle()
        assert not holder.holding
        sem.release()
        await settle()
        assert not holder.holding  # 2 of 3
        sem.release()
        await settle()
        assert holder.holding
        assert sem.available_permits == 0
        holder.stop()
    assert sem.available_permits == 3


async def test_statistics_reports_permits_waiters_fairness_and_closing() -> None:
    sem = BatchSemaphore(1, fair=False)
    assert sem.statistics() == BatchSemaphoreStatistics(
        available_permits=1, tasks_waiting=0, fair=False, closed=False
    )
    async with anyio.create_task_group() as tg:
        holders = [Holder(sem, 2).start(tg) for _ in range(2)]
        await settle()
        stats = sem.statistics()
        assert stats.available_permits == 1
        assert stats.tasks_waiting == 2
        sem.close()
        await settle()
        assert sem.statistics() == BatchSemaphoreStatistics(
            available_permits=1, tasks_waiting=0, fair=False, closed=True
        )
        assert all(isinstance(h.error, anyio.ClosedResourceError) for h in holders)


async def test_statistics_is_a_frozen_snapshot() -> None:
    sem = BatchSemaphore(2)
    stats = sem.statistics()
    await sem.acquire()
    assert stats.available_permits == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.available_permits = 5  # type: ignore[misc]


async def test_properties_report_fairness_and_closing() -> None:
    sem = BatchSemaphore(1, fair=False)
    assert not sem.fair
    assert not sem.closed
    sem.close()
    assert sem.closed
    assert BatchSemaphore(1).fair


async def test_hold_holds_n_permits_for_its_block() -> None:
    sem = BatchSemaphore(5)
    async with sem.hold(3):
        assert sem.available_permits == 2
    assert sem.available_permits == 5


async def test_hold_releases_its_permits_when_the_block_raises() -> None:
    sem = BatchSemaphore(5)
    with pytest.raises(KeyError):
        async with sem.hold(4):
            raise KeyError("inside")
    assert sem.available_permits == 5


async def test_async_with_holds_one_permit() -> None:
    sem = BatchSemaphore(2)
    async with sem:
        assert sem.available_permits == 1
    assert sem.available_permits == 2


async def test_release_has_no_ceiling() -> None:
    sem = BatchSemaphore(1)
    sem.release(5)
    assert sem.available_permits == 6
    await sem.acquire(6)
    assert sem.available_permits == 0


async def test_acquire_of_more_than_exists_waits_until_released() -> None:
    sem = BatchSemaphore(2)
    async with anyio.create_task_group() as tg:
        holder = Holder(sem, 10).start(tg)
        await settle()
        assert not holder.holding
        assert sem.statistics().tasks_waiting == 1
        sem.release(8)
        await settle()
        assert holder.holding
        holder.stop()
    assert sem.available_permits == 10


# ---------------------------------------------------------------------------
# Fairness
# ---------------------------------------------------------------------------


async def test_fair_large_head_request_blocks_later_small_ones() -> None:
    sem = BatchSemaphore(1)
    async with anyio.create_task_group() as tg:
        large = Holder(sem, 3).start(tg)
        await settle()
        small = Holder(sem, 1).start(tg)
        await settle()
        assert not small.holding  # 1 permit is free, but the head waits
        assert sem.available_permits == 1
        with pytest.raises(anyio.WouldBlock):
            sem.acquire_nowait(1)
        sem.release(2)
        await settle()
        assert large.holding
        assert not small.holding
        large.stop()
        await settle()
        assert small.holding
        small.stop()
    assert sem.available_permits == 3


async def test_fair_waiters_are_served_in_arrival_order() -> None:
    sem = BatchSemaphore(0)
    order: list[int] = []

    async def acquire(i: int, n: int) -> None:
        await sem.acquire(n)
        order.append(i)

    async with anyio.create_task_group() as tg:
        for i, n in enumerate((2, 1, 3, 1)):
            tg.start_soon(acquire, i, n)
            await settle()
        for _ in range(7):
            sem.release()
            await settle()
    assert order == [0, 1, 2, 3]


async def test_fair_release_wakes_every_head_waiter_that_fits() -> None:
    sem = BatchSemaphore(0)
    async with anyio.create_task_group() as tg:
        holders = []
        for n in (1, 2, 4, 1):
            holders.append(Holder(sem, n).start(tg))
            await settle()
        sem.release(4)  # 1 and 2 fit; 4 does not, and it blocks the last 1
        await settle()
        assert [h.holding for h in holders] == [True, True, False, False]
        assert sem.available_permits == 1
        for h in holders[:2]:
            h.stop()
        await settle()  # 4 free: the 4 goes first, the last 1 still waits
        assert [h.holding for h in holders] == [False, False, True, False]
        holders[2].stop()
        await settle()
        assert holders[3].holding
        holders[3].stop()
    assert sem.available_permits == 4


async def test_non_fair_lets_a_fitting_request_pass_a_queued_larger_one() -> None:
    sem = BatchSemaphore(1, fair=False)
    async with anyio.create_task_group() as tg:
        large = Holder(sem, 3).start(tg)
        await settle()
        small = Holder(sem, 1).start(tg)
        await settle()
        assert small.holding
        assert not large.holding
        small.stop()
        sem.release(3)
        await settle()
        assert large.holding
        large.stop()


async def test_non_fair_release_grants_every_waiter_that_fits_in_order() -> None:
    sem = BatchSemaphore(0, fair=False)
    async with anyio.create_task_group() as tg:
        holders = []
        for n in (3, 1, 4, 1):
            holders.append(Holder(sem, n).start(tg))
            await settle()
        sem.release(2)  # 3 does not fit; the two 1s do, 4 does not
        await settle()
        assert [h.holding for h in holders] == [False, True, False, True]
        assert sem.available_permits == 0
        sem.release(3)
        await settle()
        assert [h.holding for h in holders] == [True, True, False, True]
        for i in (0, 1, 3):
            holders[i].stop()
        await settle()
        assert holders[2].holding
        holders[2].stop()
    assert sem.available_permits == 5


@pytest.mark.parametrize(
    "held_back", [False, True], ids=["no_permit_left", "held_back_by_the_head"]
)
async def test_an_acquire_with_its_checkpoint_due_queues_before_a_task_woken_earlier(
    held_back: bool,
) -> None:
    # Parking is the checkpoint: an acquire that must wait queues at once,
    # even with its budgeted checkpoint due, so arrival order is call
    # order.  A task woken just before the call (by an Event, whose wait
    # gives it a fresh budget) would queue first if the call yielded.
    # Held back: a permit is free, but a larger request queued first.
    sem = BatchSemaphore(1 if held_back else 0)
    woken = Event()
    got: list[str] = []

    async def acquire_one(name: str) -> None:
        await sem.acquire()
        got.append(name)

    async def woken_early() -> None:
        await woken.wait()
        await acquire_one("woken early")

    async def caller() -> None:
        woken.set()  # "woken early" is ready to run before this call
        BUDGET.left = 1  # this call's checkpoint is due
        await acquire_one("caller")

    async with anyio.create_task_group() as tg:
        head = Holder(sem, 2).start(tg) if held_back else None
        tg.start_soon(woken_early)
        await settle()
        tg.start_soon(caller)
        await settle()
        assert sem.statistics().tasks_waiting == (3 if held_back else 2)
        sem.release(2 if held_back else 1)  # the head's two, then one more
        await settle()
        assert got == ["caller"]
        sem.release()
        await settle()
        assert got == ["caller", "woken early"]
        if head is not None:
            assert head.holding
            head.stop()


@pytest.mark.parametrize(
    ("strict", "budget_left"),
    [(False, BUDGET_SIZE), (False, 1), (True, BUDGET_SIZE)],
    ids=["budget_left", "budget_due", "strict"],
)
async def test_an_acquire_that_must_wait_parks_without_yielding_first(
    strict: bool, budget_left: int
) -> None:
    # Also with its checkpoint due: it parks first, which keeps the order
    # of arrival, and takes the checkpoint once granted.
    # A holder told when each call starts releases one permit (which goes
    # straight to the caller) as soon as it sees the caller parked, and
    # counts the times it looked too early: a yield before parking would
    # let it look in between.
    sem = BatchSemaphore(0, strict=strict)
    rounds = 10
    started = -1
    misses = 0

    async def holder() -> None:
        nonlocal misses
        for i in range(rounds):
            while started != i:
                await anyio.lowlevel.checkpoint()
            while not sem.statistics().tasks_waiting:
                misses += 1
                await anyio.lowlevel.checkpoint()
            sem.release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        for i in range(rounds):
            started = i
            BUDGET.left = budget_left
            await sem.acquire()
    assert misses == 0
    assert sem.available_permits == 0
    sem.release(rounds)
    assert sem.available_permits == rounds


# ---------------------------------------------------------------------------
# Closing
# ---------------------------------------------------------------------------


async def test_close_fails_queued_acquires_with_closed_resource_error() -> None:
    sem = BatchSemaphore(0)
    async with anyio.create_task_group() as tg:
        holders = [Holder(sem, n).start(tg) for n in (1, 2)]
        await settle()
        sem.close()
        await settle()
        assert all(isinstance(h.error, anyio.ClosedResourceError) for h in holders)
    assert sem.available_permits == 0
    assert sem.statistics().tasks_waiting == 0


@pytest.mark.parametrize(("permits", "n"), [(5, 1), (5, 5), (1, 3), (0, 1)])
async def test_acquire_after_close_raises_closed_resource_error(
    permits: int, n: int
) -> None:
    # Also for more permits than there are, which would otherwise park.
    sem = BatchSemaphore(permits)
    sem.close()
    with pytest.raises(anyio.ClosedResourceError):
        await sem.acquire(n)
    with pytest.raises(anyio.ClosedResourceError):
        sem.acquire_nowait(n)
    assert sem.available_permits == permits


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("permits", [0, 5])
async def test_acquire_on_a_closed_semaphore_takes_its_due_checkpoint_first(
    strict: bool, permits: int
) -> None:
    # Only a call that parks skips its due checkpoint (parking is one); a
    # call that raises ClosedResourceError does not park, so inside a
    # cancelled scope it raises the cancellation, as a channel's send on a
    # broken channel does.  Budgeted: the checkpoint is made due.
    sem = BatchSemaphore(permits, strict=strict)
    sem.close()
    with anyio.CancelScope() as scope:
        scope.cancel()
        BUDGET.left = 1
        await sem.acquire()
    assert scope.cancelled_caught
    assert sem.available_permits == permits


async def test_release_still_works_after_close() -> None:
    sem = BatchSemaphore(2)
    await sem.acquire(2)
    sem.close()
    sem.release(2)
    assert sem.available_permits == 2


# ---------------------------------------------------------------------------
# Cancellation
# ---------------------------------------------------------------------------


async def test_cancelled_queued_acquire_holds_nothing(source: str) -> None:
    sem = BatchSemaphore(1)
    async with anyio.create_task_group() as tg:
        acquirer = acquire_call(sem, 2, source).start(tg)
        await settle()
        assert sem.statistics().tasks_waiting == 1
        acquirer.cancel()
        await settle()
        assert acquirer.finished.is_set()
    assert acquirer.outcome == "cancelled"
    assert sem.available_permits == 1
    assert sem.statistics().tasks_waiting == 0
    sem.release()
    await sem.acquire(2)  # the cancelled request left nothing behind


@pytest.mark.parametrize("form", ["async_with", "hold"])
async def test_cancelled_queued_async_with_never_enters_and_holds_nothing(
    source: str, form: str
) -> None:
    sem = BatchSemaphore(0)
    entered = False

    async def block() -> None:
        nonlocal entered
        async with sem if form == "async_with" else sem.hold(2):
            entered = True

    async with anyio.create_task_group() as tg:
        call = Call(block, source).start(tg)
        await settle()
        assert sem.statistics().tasks_waiting == 1
        call.cancel()
        await settle()
    assert call.outcome == "cancelled"
    assert not entered
    assert sem.available_permits == 0
    assert sem.statistics().tasks_waiting == 0
    sem.release(2)
    await sem.acquire(2)  # the cancelled block left nothing behind


async def test_cancelling_a_large_head_waiter_lets_smaller_ones_in(source: str) -> None:
    sem = BatchSemaphore(2)
    async with anyio.create_task_group() as tg:
        large = acquire_call(sem, 3, source).start(tg)
        await settle()
        small = [Holder(sem, 1).start(tg) for _ in range(2)]
        await settle()
        assert not any(h.holding for h in small)  # held back by the head
        large.cancel()
        await settle()
        assert large.finished.is_set()
        assert large.outcome == "cancelled"
        assert all(h.holding for h in small)
        assert sem.available_permits == 0
        for h in small:
            h.stop()
    assert sem.available_permits == 2


async def test_cancelling_every_queued_waiter_loses_nothing(source: str) -> None:
    sem = BatchSemaphore(2)
    async with anyio.create_task_group() as tg:
        acquirers = []
        for n in (3, 1, 5, 2):
            acquirers.append(acquire_call(sem, n, source).start(tg))
            await settle()
        assert sem.statistics().tasks_waiting == 4
        for acquirer in acquirers:
            acquirer.cancel()
        await settle()
        assert all(a.finished.is_set() for a in acquirers)
    assert [a.outcome for a in acquirers] == ["cancelled"] * 4
    assert sem.available_permits == 2
    assert sem.statistics().tasks_waiting == 0
    await sem.acquire(2)


@pytest.mark.parametrize(
    ("head", "released"), [(3, 1), (2, 2)], ids=["head_does_not_fit", "head_fits"]
)
async def test_release_passes_over_a_head_whose_task_was_just_cancelled(
    anyio_backend_name: str, head: int, released: int
) -> None:
    # task.cancel() on a parked asyncio task cancels its wait at once, but the
    # task runs only later.  A release in between must not let that head hold
    # back the smaller request behind it, whether or not the release fits
    # the head (release() grants a head that fits inline).
    if anyio_backend_name != "asyncio" or FORCE_GENERIC:
        pytest.skip("asyncio waiters only: they see a cancelled wait at once")
    sem = BatchSemaphore(0)
    async with anyio.create_task_group() as tg:
        large = acquire_call(sem, head, "asyncio_task_cancel").start(tg)
        await settle()
        small = Holder(sem, 1).start(tg)
        await settle()
        large.cancel()
        sem.release(released)
        assert sem.available_permits == released - 1  # ``small``'s at once
        await settle()
        assert large.outcome == "cancelled"
        assert small.holding
        small.stop()
    assert sem.available_permits == released
    assert sem.statistics().tasks_waiting == 0


async def test_a_due_checkpoint_is_taken_past_a_head_whose_task_was_just_cancelled(
    anyio_backend_name: str,
) -> None:
    # A waiter whose task was cancelled but has not run yet (asyncio) still
    # counts as queued when an acquire with its budget checkpoint due looks
    # (fair: it would queue behind it), so the acquire parks; it then finds
    # the permit free of that waiter and is granted it at once.  It still
    # takes the checkpoint that was due.
    sem = BatchSemaphore(1)
    async with anyio.create_task_group() as tg:
        large = acquire_call(sem, 2, "anyio_cancel_scope").start(tg)
        await settle()
        large.cancel()
        BUDGET.left = 1  # this call's checkpoint is due
        await assert_schedule_point(anyio_backend_name, sem.acquire)
        assert sem.available_permits == 0
        await settle()
        assert large.outcome == "cancelled"
    sem.release()
    assert sem.statistics().tasks_waiting == 0


async def test_cancelled_non_fair_acquire_holds_nothing(source: str) -> None:
    sem = BatchSemaphore(1, fair=False)
    async with anyio.create_task_group() as tg:
        large = acquire_call(sem, 3, source).start(tg)
        await settle()
        large.cancel()
        await settle()
        assert large.finished.is_set()
        assert large.outcome == "cancelled"
        small = Holder(sem, 1).start(tg)
        await settle()
        assert small.holding
        small.stop()
    assert sem.available_permits == 1


async def test_acquire_never_raises_a_cancellation_while_holding_permits(
    source: str,
) -> None:
    # Grant A's request and cancel A in one synchronous step.  Either A's
    # acquire returned (it holds the permits) or it raised and the permits
    # went on to B; never both, never neither.
    sem = BatchSemaphore(0)
    async with anyio.create_task_group() as tg:
        first = acquire_call(sem, 2, source).start(tg)
        await settle()
        second = Holder(sem, 2).start(tg)
        await settle()
        first.grant_then_cancel(lambda: sem.release(2))
        await settle()
        assert first.finished.is_set()
        if first.outcome == "cancelled":
            assert second.holding
        else:
            assert first.outcome == "returned"
            assert not second.holding
            sem.release(2)  # first's permits, returned by hand
            await settle()
            assert second.holding
        if source in GIVE_BACK_SOURCES:
            assert first.outcome == "cancelled"
        assert sem.available_permits == 0
        second.stop()
    assert sem.available_permits == 2


async def test_grant_then_cancel_gives_the_permits_to_the_next_waiters(
    source: str,
) -> None:
    if source not in GIVE_BACK_SOURCES:
        pytest.skip(f"{source} cannot cancel a granted wait")
    sem = BatchSemaphore(0)
    async with anyio.create_task_group() as tg:
        first = acquire_call(sem, 3, source).start(tg)
        await settle()
        rest = [Holder(sem, n).start(tg) for n in (1, 2)]
        await settle()
        first.grant_then_cancel(lambda: sem.release(3))
        await settle()
        assert first.finished.is_set()
        assert first.outcome == "cancelled"
        assert all(h.holding for h in rest)
        assert sem.available_permits == 0
        for h in rest:
            h.stop()
    assert sem.available_permits == 3


async def test_wait_for_timeout_leaves_nothing_held(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio.wait_for is asyncio only")
    sem = BatchSemaphore(1)
    with pytest.raises(asyncio.TimeoutError):  # TimeoutError from 3.11 on
        # Never satisfiable, so the timeout always fires; no time is asserted.
        await asyncio.wait_for(sem.acquire(2), timeout=0.01)
    assert sem.available_permits == 1
    assert sem.statistics().tasks_waiting == 0
    sem.release()
    await sem.acquire(2)


async def test_strict_acquire_in_a_cancelled_scope_holds_nothing() -> None:
    sem = BatchSemaphore(0, strict=True)
    with anyio.move_on_after(0) as scope:
        await sem.acquire()
    assert scope.cancelled_caught
    assert sem.statistics().tasks_waiting == 0
    sem.release()
    assert sem.available_permits == 1


class Count(enum.IntEnum):
    TWO = 2


@pytest.mark.parametrize("n", [2, Count.TWO], ids=["int", "IntEnum"])
async def test_a_strict_acquire_of_an_int_subclass_count_is_a_checkpoint(
    n: int,
) -> None:
    # An IntEnum is accepted as a count; in strict mode its acquire is a
    # checkpoint before it takes anything, as an int's is.
    sem = BatchSemaphore(5, strict=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sem.acquire(n)
    assert scope.cancelled_caught
    assert sem.available_permits == 5
    await sem.acquire(n)
    assert sem.available_permits == 3


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

NOT_INTS = [pytest.param(1.0, id="float"), pytest.param("1", id="str")]
NOT_INTS.append(pytest.param(True, id="bool"))


def test_negative_permits_raise_value_error_naming_permits() -> None:
    with pytest.raises(ValueError, match=r"^permits "):
        BatchSemaphore(-1)


def test_zero_permits_are_allowed() -> None:
    assert BatchSemaphore(0).available_permits == 0


def test_int_subclass_permits_are_accepted_as_a_plain_int() -> None:
    sem = BatchSemaphore(Count.TWO)
    assert sem.available_permits == 2
    assert type(sem.available_permits) is int
    assert type(sem.statistics().available_permits) is int
    sem.acquire_nowait(2)
    with pytest.raises(anyio.WouldBlock):
        sem.acquire_nowait()


@pytest.mark.parametrize("permits", NOT_INTS)
def test_non_int_permits_raise_type_error_naming_permits(permits: Any) -> None:
    with pytest.raises(TypeError, match=r"^permits "):
        BatchSemaphore(permits)


@pytest.mark.parametrize("flag", ["fair", "strict"])
def test_non_bool_flags_raise_type_error_naming_the_flag(flag: str) -> None:
    kwargs: dict[str, Any] = {flag: 1}
    with pytest.raises(TypeError, match=rf"^{flag} "):
        BatchSemaphore(1, **kwargs)


@pytest.mark.parametrize("n", [0, -1])
async def test_acquire_of_fewer_than_one_raises_value_error_naming_n(n: int) -> None:
    sem = BatchSemaphore(1)
    with pytest.raises(ValueError, match=r"^n "):
        await sem.acquire(n)
    with pytest.raises(ValueError, match=r"^n "):
        sem.acquire_nowait(n)
    assert sem.available_permits == 1


@pytest.mark.parametrize("n", NOT_INTS)
async def test_acquire_of_a_non_int_raises_type_error_naming_n(n: Any) -> None:
    sem = BatchSemaphore(2)
    with pytest.raises(TypeError, match=r"^n "):
        await sem.acquire(n)
    with pytest.raises(TypeError, match=r"^n "):
        sem.acquire_nowait(n)
    assert sem.available_permits == 2


@pytest.mark.parametrize("n", [0, -1])
def test_release_of_fewer_than_one_raises_value_error_naming_n(n: int) -> None:
    sem = BatchSemaphore(1)
    with pytest.raises(ValueError, match=r"^n "):
        sem.release(n)
    assert sem.available_permits == 1


@pytest.mark.parametrize("n", NOT_INTS)
def test_release_of_a_non_int_raises_type_error_naming_n(n: Any) -> None:
    sem = BatchSemaphore(1)
    with pytest.raises(TypeError, match=r"^n "):
        sem.release(n)
    assert sem.available_permits == 1


def test_hold_checks_n_when_called() -> None:
    sem = BatchSemaphore(1)
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^n "):
            sem.hold(bad)


@pytest.mark.parametrize("n", NOT_INTS)
def test_hold_of_a_non_int_raises_type_error_naming_n_when_called(n: Any) -> None:
    with pytest.raises(TypeError, match=r"^n must be an int"):
        BatchSemaphore(1).hold(n)


# -- regressions found by mutation testing --------------------------------------


async def test_fair_acquire_past_abandoned_waiter_takes_exactly_its_permits(
    anyio_backend_name: str,
) -> None:
    # Pins: with the only parked waiter abandoned but not yet run (Trio's
    # abort callback), the slow path's exact test grants a fair acquire,
    # takes its permits and returns.
    if anyio_backend_name != "trio":
        pytest.skip("Trio's abort callback abandons a parked waiter before it runs")
    sem = BatchSemaphore(1)
    scopes: list[anyio.CancelScope] = []

    async def big() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await sem.acquire(2)  # parks: only 1 permit

    async with anyio.create_task_group() as tg:
        tg.start_soon(big)
        await anyio.wait_all_tasks_blocked()
        scopes[0].cancel()  # big() has not run since
        with anyio.fail_after(5):  # hang guard only
            await sem.acquire(1)  # 1 permit free, no live waiter
        assert sem.available_permits == 0
    sem.release(1)


@pytest.mark.parametrize("permits", [0, 1, 5])
def test_the_locks_inner_semaphore_is_what_the_constructor_makes(permits: int) -> None:
    # Lock and Semaphore make theirs without __init__ (fair_semaphore): every
    # attribute must be what BatchSemaphore(permits) sets.
    made = fair_semaphore(permits)
    expected = BatchSemaphore(permits)
    for name in BatchSemaphore.__slots__:
        if name != "__weakref__":
            assert getattr(made, name) == getattr(expected, name), name
    assert repr(made) == repr(expected)


class _ReleasingFinalizer:
    """In a reference cycle: the collector runs ``__del__``, which releases
    one permit, at the allocation it is set off at."""

    def __init__(self, sem: BatchSemaphore, ran: list[bool]) -> None:
        self.sem = sem
        self.ran = ran
        self.me = self

    def __del__(self) -> None:
        self.sem.release(1)
        self.ran.append(True)


@pytest.mark.parametrize("fair", [True, False])
async def test_a_release_inside_a_release_grants_no_more_permits_than_exist(
    fair: bool, anyio_backend: Any
) -> None:
    # Waiters for 2 and 2; release(2), inside which (where its wake-up of
    # the first waiter allocates) a finalizer the collector runs releases
    # 1 more: 3 permits in all, so the first waiter gets 2 and the second
    # waits, with 1 available.  The permits are counted out before the
    # wake-up.  Each round sets the collector off k allocations into the
    # release, for every k of a range that spans the wake-up.
    threshold = gc.get_threshold()
    rounds_inside = 0
    try:
        for k in range(16):
            sem = BatchSemaphore(0, fair=fair)
            got: list[str] = []

            async def acquire(
                name: str, sem: BatchSemaphore = sem, got: list[str] = got
            ) -> None:
                await sem.acquire(2)
                got.append(name)

            async with anyio.create_task_group() as tg:
                for name in ("first", "second"):
                    tg.start_soon(acquire, name)
                    await settle()
                ran: list[bool] = []
                gc.disable()
                _ReleasingFinalizer(sem, ran)  # garbage at once
                # (A threshold of 0 would turn the collector off.)
                gc.set_threshold(max(1, gc.get_count()[0] + k), *threshold[1:])
                gc.enable()
                sem.release(2)
                inside = bool(ran)
                gc.set_threshold(*threshold)
                if not ran:  # after the release: the plain case
                    gc.collect(0)  # the young generation: the finalizer's
                    if not ran:
                        gc.collect()
                await settle()
                assert ran == [True]
                rounds_inside += inside
                assert got == ["first"]
                assert sem.available_permits == 1
                tg.cancel_scope.cancel()
    finally:
        gc.set_threshold(*threshold)
        gc.enable()
    if not anyio_backend[1].get("use_uvloop"):
        # (uvloop's wake-up allocates no Python object on some versions:
        # there the collector is never set off inside it.)
        assert rounds_inside > 0, "no round ran the finalizer inside the release"


# -- found by mutation testing: behaviours no test pinned -------------------


async def test_hold_without_a_count_holds_one_permit() -> None:
    sem = BatchSemaphore(3)
    async with sem.hold():
        assert sem.available_permits == 2
    assert sem.available_permits == 3


@pytest.mark.parametrize("n", [1.0, "1", True], ids=["float", "str", "bool"])
async def test_a_strict_acquire_of_a_non_int_raises_type_error_naming_n(n: Any) -> None:
    sem = BatchSemaphore(2, strict=True)
    with pytest.raises(TypeError, match=r"^n "):
        await sem.acquire(n)
    assert sem.available_permits == 2


@pytest.mark.parametrize("n", [0, -1])
async def test_a_strict_acquire_of_fewer_than_one_raises_before_its_checkpoint(
    n: int,
) -> None:
    # Bad input is refused before the checkpoint a strict call takes: in a
    # cancelled scope it is the ValueError, not the cancellation.
    sem = BatchSemaphore(1, strict=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(ValueError, match=r"^n "):
            await sem.acquire(n)
    assert not scope.cancelled_caught
    assert sem.available_permits == 1


class _Count(enum.IntEnum):
    TWO = 2


@pytest.mark.parametrize("fair", [True, False], ids=["fair", "not_fair"])
@pytest.mark.parametrize("n", [2, _Count.TWO], ids=["int", "IntEnum"])
async def test_a_budgeted_acquire_of_every_available_permit_is_no_schedule_point(
    anyio_backend_name: str, n: int, fair: bool
) -> None:
    # Taking exactly what is free takes it at once, as taking less does:
    # no park granted by its own recheck (a sleep on Trio, a checkpoint with
    # the generic waiter), and so no cancellation in a cancelled scope.
    sem = BatchSemaphore(2, fair=fair)
    BUDGET.left = BUDGET_SIZE  # no checkpoint due
    await assert_no_schedule_point(anyio_backend_name, lambda: sem.acquire(n))
    assert sem.available_permits == 0
    assert sem.statistics().tasks_waiting == 0
    sem.release(2)
    BUDGET.left = BUDGET_SIZE
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sem.acquire(n)
    assert not scope.cancelled_caught
    assert sem.available_permits == 0


async def test_an_acquire_past_a_just_cancelled_head_spends_one_unit_of_the_budget(
    anyio_backend_name: str,
) -> None:
    # Fair, the free permit counts a queued head whose task was just
    # cancelled (asyncio: cancelled, not run yet): the acquire parks and its
    # own recheck grants it at once, without a schedule point.  Its budget
    # goes on as for any call that did not block: the checkpoint comes when
    # the budget is spent, not one call early, and not never.  (Written out,
    # not with assert_no_schedule_point(), whose last await lets the
    # cancelled task run: a cancelled park refills the budget, as a woken
    # one does.)
    if anyio_backend_name != "asyncio" or FORCE_GENERIC:
        pytest.skip("asyncio waiters only: a cancelled task stays queued until it runs")
    sem = BatchSemaphore(1)
    other = BatchSemaphore(1)
    ran: list[bool] = []

    async def beside() -> None:
        ran.append(True)

    async with anyio.create_task_group() as tg:
        large = Call(lambda: sem.acquire(2), "asyncio_task_cancel").start(tg)
        await settle()
        large.cancel()
        task = asyncio.ensure_future(beside())
        BUDGET.left = 2  # this call leaves one unit: no checkpoint due
        await sem.acquire()
        assert not ran, "the call let another task run"
        assert sem.available_permits == 0
        # the next call spends the last unit: its checkpoint is due
        await other.acquire()
        assert ran, "the call returned without a schedule point"
        await task
        await settle()
        assert large.outcome == "cancelled"
