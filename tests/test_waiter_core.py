"""The waiter core: WaitQueue, Slot, park/grant/fail, the grant-then-cancel race.

Tasks are ordered with ``anyio.wait_all_tasks_blocked()`` (``settle()``), never
with sleeps.  The grant-then-cancel race exists on asyncio only (Trio cannot
deliver a cancellation to a task it has rescheduled); those tests skip on Trio
and run with both the native and the generic waiter.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import anyio_prims
import anyio_prims._core as core
from anyio_prims import BatchSemaphore
from anyio_prims._core import NOT_OPENED, WITHDRAWN, Slot, WaitQueue
from anyio_prims._core._waiter import (
    ABANDONED,
    GRANTED,
    PENDING,
    AsyncioWaiter,
    GenericWaiter,
    Waiter,
)
from anyio_prims.channels._state import Waiting

from ._tasks import assert_no_schedule_point, run_on_every_backend_in_turn
from ._waiter_count import WAITER_STATS

pytestmark = pytest.mark.anyio


async def settle() -> None:
    """Let every woken task run until all other tasks are blocked again."""
    # A few plain checkpoints first: on asyncio, wait_all_tasks_blocked()
    # sleeps 0.1 s whenever it finds a runnable task.
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio only: Trio cannot cancel a task it has rescheduled")


@pytest.fixture
def native_asyncio_only(asyncio_only: None) -> None:
    # The generic waiter sleeps on an anyio.Event, which cannot tell that its
    # task was cancelled before it runs: it has no _gone() and relies on the
    # grant-then-cancel path (give_back or re-armed cancellation) instead.
    if core.FORCE_GENERIC:
        pytest.skip("_gone() is a property of the native asyncio waiter")


def spawn(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """A plain asyncio task (so the test can call ``task.cancel()`` on it)."""
    return asyncio.get_running_loop().create_task(coro)


async def finish(*tasks: asyncio.Task[Any]) -> None:
    """Let the tasks run; they must be done (a failure, not a hang, if not)."""
    await settle()
    assert all(task.done() for task in tasks)


async def park_into(
    q: WaitQueue[Any] | Slot[Any],
    payload: object,
    results: dict[object, object],
    give_back: Callable[[Any], None] | None = None,
    recheck: Callable[[Waiter[Any]], bool] | None = None,
) -> None:
    try:
        results[payload] = await q.park(payload, give_back, recheck)
    except Exception as exc:  # a failure: recorded, the task ends normally
        results[payload] = exc
    except BaseException as exc:  # a cancellation: recorded and propagated
        results[payload] = exc
        raise


async def park_one_and_serve(
    structure: WaitQueue[str] | Slot[str],
    serve: Callable[[WaitQueue[str] | Slot[str]], object],
    recheck: Callable[[Waiter[Any]], bool] | None = None,
) -> object:
    """Park one task on ``structure`` (payload "a"), call ``serve(structure)``
    once it is parked, and return what its park returned."""
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(park_into, structure, "a", results, None, recheck)
        await settle()
        serve(structure)
    return results["a"]


async def park_one_and_grant(
    structure: WaitQueue[str] | Slot[str], check: Callable[[Waiter[str]], None]
) -> None:
    """Park one task on ``structure``, show its waiter to ``check``, grant it."""

    def serve(structure: WaitQueue[str] | Slot[str]) -> None:
        waiter = structure.pop()
        assert waiter is not None
        check(waiter)
        waiter.grant(1)

    assert await park_one_and_serve(structure, serve) == 1


async def park_cancellably(
    q: WaitQueue[Any] | Slot[Any],
    payload: object,
    scope: anyio.CancelScope,
    results: dict[object, object],
) -> None:
    with scope:
        results[payload] = await q.park(payload)


# ---------------------------------------------------------------------------
# WaitQueue: order, grant, fail
# ---------------------------------------------------------------------------


async def test_wait_queue_serves_waiters_in_arrival_order() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(park_into, q, i, results)
            await settle()  # one at a time: arrival order is i
        assert [w.payload for w in q] == list(range(6))
        popped = []
        while (waiter := q.pop()) is not None:
            popped.append(waiter.payload)
            waiter.grant(f"granted {waiter.payload}")
    assert popped == list(range(6))
    assert results == {i: f"granted {i}" for i in range(6)}


async def test_park_returns_the_granted_value() -> None:
    q: WaitQueue[str] = WaitQueue()
    results: dict[object, object] = {}
    value = object()
    async with anyio.create_task_group() as tg:
        tg.start_soon(park_into, q, "a", results)
        await settle()
        waiter = q.pop()
        assert waiter is not None
        waiter.grant(value)
    assert results["a"] is value


async def test_failed_waiter_raises_the_failure() -> None:
    q: WaitQueue[str] = WaitQueue()
    failure = anyio.ClosedResourceError("closed for the test")
    caught: list[BaseException] = []

    async def parker() -> None:
        try:
            await q.park("a")
        except anyio.ClosedResourceError as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(parker)
        await settle()
        waiter = q.pop()
        assert waiter is not None
        waiter.fail(failure)
    assert caught == [failure]


async def test_empty_queue_pops_and_peeks_none() -> None:
    q: WaitQueue[int] = WaitQueue()
    assert q.pop() is None
    assert q.peek() is None
    assert len(q) == 0
    assert not q


async def test_the_unopened_stand_in_reads_empty_and_refuses_a_waiter() -> None:
    stand_in = core.NOT_OPENED
    assert not stand_in.parked
    assert not stand_in
    assert len(stand_in) == 0
    # Read as the channels hold it (Unopened.pop() is declared to return None).
    waiting: Waiting[int] = stand_in
    assert waiting.pop() is None
    assert waiting.grant_head(1) is None  # nobody to grant
    assert stand_in.drain() == []  # as an Event reads it before its first wait
    before = WAITER_STATS.created
    with pytest.raises(RuntimeError, match="never opened"):
        stand_in.enqueue(1)
    assert WAITER_STATS.created == before
    assert not stand_in.parked  # still empty: shared by every channel


async def test_peek_returns_the_head_without_removing_it() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        for i in range(2):
            tg.start_soon(park_into, q, i, results)
            await settle()
        head = q.peek()
        assert head is not None
        assert head.payload == 0
        assert len(q) == 2
        assert q.pop() is head
        head.grant()
        last = q.pop()
        assert last is not None
        last.grant()


# ---------------------------------------------------------------------------
# WaitQueue: removal of cancelled waiters
# ---------------------------------------------------------------------------


async def test_cancelled_waiters_keep_len_and_bool_exact() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    scopes = [anyio.CancelScope() for _ in range(3)]
    async with anyio.create_task_group() as tg:
        for i, scope in enumerate(scopes):
            tg.start_soon(park_cancellably, q, i, scope, results)
            await settle()
        assert len(q) == 3
        scopes[1].cancel()
        await settle()
        assert len(q) == 2
        assert q
        scopes[0].cancel()
        scopes[2].cancel()
        await settle()
        assert len(q) == 0
        assert not q
    assert results == {}  # nobody was granted anything


async def test_a_drained_queue_counts_its_next_waiters_exactly() -> None:
    # drain() empties the queue, cancelled waiters included: the count of
    # cancelled ones starts again too (Condition.notify_all() drains a
    # queue that later waits use).
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    cancelled = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(park_cancellably, q, 0, cancelled, results)
        await settle()
        tg.start_soon(park_into, q, 1, results)
        await settle()
        cancelled.cancel()
        await settle()  # the cancelled task has run: a dead waiter stays queued
        assert len(q) == 1
        (live,) = q.drain()
        live.grant("drained")
        assert (len(q), bool(q)) == (0, False)
        tg.start_soon(park_into, q, 2, results)
        await settle()
        assert (len(q), bool(q)) == (1, True)
        waiter = q.pop()
        assert waiter is not None
        waiter.grant("next")
    assert results == {1: "drained", 2: "next"}


async def test_pop_skips_cancelled_waiters_and_keeps_order() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    scopes = [anyio.CancelScope() for _ in range(6)]
    async with anyio.create_task_group() as tg:
        for i, scope in enumerate(scopes):
            tg.start_soon(park_cancellably, q, i, scope, results)
            await settle()
        for i in (0, 1, 3):
            scopes[i].cancel()
        await settle()
        popped = []
        while (waiter := q.pop()) is not None:
            popped.append(waiter.payload)
            waiter.grant(waiter.payload)
    assert popped == [2, 4, 5]
    assert results == {2: 2, 4: 4, 5: 5}


async def test_grant_head_grants_live_waiters_in_order_past_cancelled_ones() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    scopes = [anyio.CancelScope() for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for i, scope in enumerate(scopes):
            tg.start_soon(park_cancellably, q, i, scope, results)
            await settle()
        scopes[0].cancel()
        scopes[2].cancel()
        await settle()
        granted = [q.grant_head("a"), q.grant_head("b"), q.grant_head("c")]
        # Read before the tasks run: a resumed task recycles its waiter.
        payloads = [None if w is None else w.payload for w in granted]
    assert payloads == [1, 3, None]  # the third found nobody left
    assert results == {1: "a", 3: "b"}
    assert not q


async def test_take_tail_takes_live_waiters_last_first_past_cancelled_ones() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    scopes = [anyio.CancelScope() for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for i, scope in enumerate(scopes):
            tg.start_soon(park_cancellably, q, i, scope, results)
            await settle()
        scopes[1].cancel()
        scopes[3].cancel()
        await settle()
        taken = [q.take_tail("a"), q.take_tail("b"), q.take_tail("c")]
        # Read before the tasks run: a resumed task recycles its waiter.
        payloads = [None if w is None else w.payload for w in taken]
        assert not q  # taken, and the dead ones dropped: the count is exact
        for waiter in taken:
            if waiter is not None:
                waiter.wake()
    assert payloads == [2, 0, None]  # the third found nobody left
    assert results == {2: "a", 0: "b"}
    assert len(q) == 0


async def test_compaction_keeps_the_order_of_live_waiters() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    scopes = [anyio.CancelScope() for _ in range(40)]
    async with anyio.create_task_group() as tg:
        for i, scope in enumerate(scopes):
            tg.start_soon(park_cancellably, q, i, scope, results)
            await settle()
        for i, scope in enumerate(scopes):
            if i % 4:
                scope.cancel()
        await settle()
        # Most of the queue died: it was compacted, not just marked.
        assert len(q.parked) < 40
        assert len(q) == 10
        assert [w.payload for w in q] == list(range(0, 40, 4))
        popped = []
        while (waiter := q.pop()) is not None:
            popped.append(waiter.payload)
            waiter.grant(waiter.payload)
    assert popped == list(range(0, 40, 4))


async def test_many_cancellations_do_not_grow_the_queue_without_bound() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}

    async def park_batch(scope: anyio.CancelScope, first: int) -> None:
        with scope:
            async with anyio.create_task_group() as batch:
                for i in range(first, first + 10):
                    batch.start_soon(q.park, i)

    sizes = []
    async with anyio.create_task_group() as tg:
        # A live waiter stays at the head all along, so pop() never gets to
        # drop the dead ones behind it: only compaction bounds the deque.
        tg.start_soon(park_into, q, -1, results)
        await settle()
        for batch_no in range(30):
            scope = anyio.CancelScope()
            tg.start_soon(park_batch, scope, batch_no * 10)
            await settle()
            assert len(q) == 11
            scope.cancel()
            await settle()
            assert len(q) == 1
            assert q
            sizes.append(len(q.parked))
        head = q.pop()
        assert head is not None
        assert head.payload == -1
        head.grant("head")
    assert results == {-1: "head"}
    # 300 waiters were cancelled behind the head; the deque stayed small.
    assert max(sizes) <= 40


# ---------------------------------------------------------------------------
# The grant-then-cancel race (asyncio)
# ---------------------------------------------------------------------------


@pytest.mark.usefixtures("asyncio_only")
async def test_grant_cancelled_before_the_task_ran_goes_to_give_back() -> None:
    q: WaitQueue[str] = WaitQueue()
    given_back: list[object] = []
    results: dict[object, object] = {}
    task = spawn(park_into(q, "a", results, given_back.append))
    await settle()
    waiter = q.pop()
    assert waiter is not None
    waiter.grant(7)
    task.cancel()  # same synchronous step: the task has not run yet
    await finish(task)
    assert task.cancelled()
    assert isinstance(results["a"], asyncio.CancelledError)
    assert given_back == [7]


@pytest.mark.usefixtures("asyncio_only")
async def test_grant_without_give_back_stands_and_cancels_at_the_next_await() -> None:
    q: WaitQueue[str] = WaitQueue()
    returned: list[object] = []
    reached_after_next_await = False

    async def parker() -> None:
        nonlocal reached_after_next_await
        returned.append(await q.park("a"))
        await asyncio.sleep(0)
        reached_after_next_await = True

    task = spawn(parker())
    await settle()
    waiter = q.pop()
    assert waiter is not None
    waiter.grant(7)
    task.cancel()
    await finish(task)
    assert returned == [7]
    assert not reached_after_next_await
    assert task.cancelled()


@pytest.mark.usefixtures("asyncio_only")
async def test_grant_without_give_back_under_asyncio_timeout_raises_at_next_await() -> (
    None
):
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout and Task.cancelling are 3.11+")
    q: WaitQueue[str] = WaitQueue()
    returned: list[object] = []
    timeouts: list[Any] = []
    cancelling: dict[str, int] = {}
    reached_after_next_await = False

    async def parker() -> None:
        nonlocal reached_after_next_await
        this = asyncio.current_task()
        assert this is not None
        cancelling["before"] = this.cancelling()
        try:
            async with asyncio.timeout(None) as timeout:
                timeouts.append(timeout)
                returned.append(await q.park("a"))
                await asyncio.sleep(0)
                reached_after_next_await = True
        except TimeoutError:
            cancelling["after"] = this.cancelling()
            raise

    task = spawn(parker())
    await settle()
    # Expire the timeout first (its callback is queued now), then grant: the
    # timeout fires on a task whose wait has already been granted.
    timeouts[0].reschedule(asyncio.get_running_loop().time())
    waiter = q.pop()
    assert waiter is not None
    waiter.grant(7)
    await finish(task)
    assert returned == [7]
    assert not reached_after_next_await
    assert isinstance(task.exception(), TimeoutError)
    assert cancelling["after"] == cancelling["before"]


@pytest.mark.usefixtures("asyncio_only")
async def test_grant_with_give_back_under_asyncio_timeout_is_given_back() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout and Task.cancelling are 3.11+")
    q: WaitQueue[str] = WaitQueue()
    given_back: list[object] = []
    timeouts: list[Any] = []
    cancelling: dict[str, int] = {}

    async def parker() -> None:
        this = asyncio.current_task()
        assert this is not None
        cancelling["before"] = this.cancelling()
        try:
            async with asyncio.timeout(None) as timeout:
                timeouts.append(timeout)
                await q.park("a", given_back.append)
        except TimeoutError:
            cancelling["after"] = this.cancelling()
            raise

    task = spawn(parker())
    await settle()
    timeouts[0].reschedule(asyncio.get_running_loop().time())
    waiter = q.pop()
    assert waiter is not None
    waiter.grant(7)
    await finish(task)
    assert isinstance(task.exception(), TimeoutError)
    assert given_back == [7]
    assert cancelling["after"] == cancelling["before"]


async def test_grant_without_give_back_in_cancel_scope_raises_at_next_checkpoint() -> (
    None
):
    q: WaitQueue[str] = WaitQueue()
    returned: list[object] = []
    reached_after_next_checkpoint = False
    scope = anyio.CancelScope()

    async def parker() -> None:
        nonlocal reached_after_next_checkpoint
        with scope:
            returned.append(await q.park("a"))
            await anyio.lowlevel.checkpoint()
            reached_after_next_checkpoint = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(parker)
        await settle()
        waiter = q.pop()
        assert waiter is not None
        waiter.grant(7)
        scope.cancel()  # same synchronous step as the grant
    assert returned == [7]
    assert not reached_after_next_checkpoint
    assert scope.cancelled_caught


@pytest.mark.usefixtures("asyncio_only")
async def test_grant_without_give_back_keeps_the_task_cancelling_count() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout and Task.cancelling are 3.11+")
    # The cancellation is re-armed, not added: Task.cancelling() counts one
    # request, as it would have without the race.
    q: WaitQueue[str] = WaitQueue()
    counts: list[int] = []

    async def parker() -> None:
        await q.park("a")
        this = asyncio.current_task()
        assert this is not None
        counts.append(this.cancelling())
        await asyncio.sleep(0)

    task = spawn(parker())
    await settle()
    waiter = q.pop()
    assert waiter is not None
    waiter.grant(7)
    task.cancel()
    await finish(task)
    assert counts == [1]
    assert task.cancelled()


# ---------------------------------------------------------------------------
# _gone() waiters: asyncio future cancelled, task not yet run
# ---------------------------------------------------------------------------


async def gone_then_live(
    q: WaitQueue[str], results: dict[object, object]
) -> tuple[asyncio.Task[Any], asyncio.Task[Any], Waiter[str]]:
    """Park "cancelled" then "live"; cancel the first's task before it runs."""
    cancelled = spawn(park_into(q, "cancelled", results))
    await settle()
    live = spawn(park_into(q, "live", results))
    await settle()
    gone_waiter = q.parked[0]
    cancelled.cancel()  # its future is cancelled; the task has not run yet
    return cancelled, live, gone_waiter


@pytest.mark.usefixtures("native_asyncio_only")
async def test_gone_waiter_is_skipped_by_peek_and_pop_and_never_granted() -> None:
    q: WaitQueue[str] = WaitQueue()
    results: dict[object, object] = {}
    cancelled, live, gone_waiter = await gone_then_live(q, results)
    assert gone_waiter._gone()
    head = q.peek()
    assert head is not None
    assert head.payload == "live"
    popped = q.pop()
    assert popped is head
    popped.grant("value")
    await finish(cancelled, live)
    assert gone_waiter.state == ABANDONED
    assert cancelled.cancelled()
    assert results == {
        "cancelled": results["cancelled"],
        "live": "value",
    }
    assert isinstance(results["cancelled"], asyncio.CancelledError)
    assert len(q) == 0
    assert not q


@pytest.mark.usefixtures("native_asyncio_only")
async def test_grant_head_passes_over_a_waiter_cancelled_before_it_ran() -> None:
    q: WaitQueue[str] = WaitQueue()
    results: dict[object, object] = {}
    cancelled, live, gone_waiter = await gone_then_live(q, results)
    granted = q.grant_head("value")
    assert granted is not None
    assert granted.payload == "live"
    await finish(cancelled, live)
    assert gone_waiter.state == ABANDONED
    assert results["live"] == "value"
    assert isinstance(results["cancelled"], asyncio.CancelledError)
    assert not q


@pytest.mark.usefixtures("asyncio_only")
async def test_cancel_before_grant_loses_nothing() -> None:
    # Native waiter: the cancelled task is gone, pop() skips it.  Generic
    # waiter: it is still popped and granted, and the grant is given back.
    q: WaitQueue[str] = WaitQueue()
    results: dict[object, object] = {}
    given_back: list[object] = []
    task = spawn(park_into(q, "a", results, given_back.append))
    await settle()
    task.cancel()
    waiter = q.pop()
    if waiter is not None:
        waiter.grant(5)
    await finish(task)
    assert task.cancelled()
    assert given_back == ([] if waiter is None else [5])
    assert len(q) == 0


@pytest.mark.usefixtures("native_asyncio_only")
async def test_gone_waiter_is_not_taken_by_take_where() -> None:
    q: WaitQueue[str] = WaitQueue()
    results: dict[object, object] = {}
    tasks = []
    for name in ("a", "gone", "b"):
        tasks.append(spawn(park_into(q, name, results)))
        await settle()
    gone_waiter = q.parked[1]
    tasks[1].cancel()
    taken = q.take_where(lambda waiter: True)
    assert [w.payload for w in taken] == ["a", "b"]
    for waiter in taken:
        waiter.grant(waiter.payload)
    await finish(*tasks)
    assert gone_waiter.state != GRANTED
    assert results["a"] == "a"
    assert results["b"] == "b"
    assert tasks[1].cancelled()
    assert len(q) == 0
    assert len(q.parked) == 0


@pytest.mark.usefixtures("native_asyncio_only")
async def test_gone_waiter_is_not_returned_by_drain() -> None:
    q: WaitQueue[str] = WaitQueue()
    results: dict[object, object] = {}
    tasks = []
    for name in ("gone", "a"):
        tasks.append(spawn(park_into(q, name, results)))
        await settle()
    tasks[0].cancel()
    drained = q.drain()
    assert [w.payload for w in drained] == ["a"]
    drained[0].fail(anyio.ClosedResourceError())
    await finish(*tasks)
    assert tasks[0].cancelled()
    assert isinstance(results["a"], anyio.ClosedResourceError)
    assert len(q) == 0


async def test_take_where_takes_fitting_waiters_in_order_and_keeps_the_rest() -> None:
    q: WaitQueue[int] = WaitQueue()
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        for n in (5, 1, 2, 7, 3):
            tg.start_soon(park_into, q, n, results)
            await settle()
        taken = q.take_where(lambda waiter: waiter.payload < 4)
        assert [w.payload for w in taken] == [1, 2, 3]
        assert [w.payload for w in q] == [5, 7]
        assert len(q) == 2
        for waiter in taken:
            waiter.grant("taken")
        for waiter in q.drain():
            waiter.grant("drained")
    assert results == {1: "taken", 2: "taken", 3: "taken", 5: "drained", 7: "drained"}


# ---------------------------------------------------------------------------
# Slot
# ---------------------------------------------------------------------------


async def test_slot_park_returns_the_granted_value() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        assert not slot
        tg.start_soon(park_into, slot, "a", results)
        await settle()
        assert slot
        waiter = slot.pop()
        assert waiter is not None
        assert waiter.payload == "a"
        assert not slot
        waiter.grant(3)
    assert results == {"a": 3}


async def test_slot_pop_of_an_empty_slot_is_none() -> None:
    slot: Slot[str] = Slot()
    assert slot.pop() is None
    assert not slot


async def test_slot_failed_waiter_raises_the_failure() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    failure = anyio.BrokenResourceError()

    async def parker() -> None:
        try:
            await slot.park("a")
        except anyio.BrokenResourceError as exc:
            results["a"] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(parker)
        await settle()
        waiter = slot.pop()
        assert waiter is not None
        waiter.fail(failure)
    assert results == {"a": failure}


async def test_slot_is_empty_after_its_waiter_is_cancelled() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(park_cancellably, slot, "a", scope, results)
        await settle()
        assert slot
        scope.cancel()
        await settle()
        assert not slot
        assert slot.parked is None
        assert slot.pop() is None
    assert results == {}
    assert scope.cancelled_caught


@pytest.mark.usefixtures("native_asyncio_only")
async def test_slot_pop_skips_a_gone_waiter() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    task = spawn(park_into(slot, "a", results))
    await settle()
    task.cancel()
    assert not slot
    assert slot.pop() is None
    await finish(task)
    assert task.cancelled()
    assert slot.parked is None


@pytest.mark.usefixtures("asyncio_only")
async def test_slot_grant_cancelled_before_the_task_ran_goes_to_give_back() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    given_back: list[object] = []
    task = spawn(park_into(slot, "a", results, given_back.append))
    await settle()
    waiter = slot.pop()
    assert waiter is not None
    waiter.grant(9)
    task.cancel()
    await finish(task)
    assert task.cancelled()
    assert given_back == [9]


async def test_slot_grant_head_grants_the_parked_waiter_and_empties_the_slot() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        assert slot.grant_head(1) is None  # nobody parked: nothing granted
        tg.start_soon(park_into, slot, "a", results)
        await settle()
        granted = slot.grant_head(7)
        assert granted is not None
        assert granted.payload == "a"
        assert slot.parked is None
        assert slot.grant_head(8) is None
    assert results == {"a": 7}


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_a_wait_structure_copies_empty_but_not_with_a_parked_task(
    kind: str,
) -> None:
    # Pins __getstate__ of both structures (see _core/_copying.py): a copy,
    # deep copy or pickle of an idle one is an empty one; one with a parked
    # task raises TypeError (a task cannot be copied), for a Slot as for a
    # WaitQueue.
    structure: WaitQueue[str] | Slot[str] = WaitQueue() if kind == "queue" else Slot()
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(park_into, structure, "a", results)
        await settle()
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="parked task"):
                attempt(structure)
        waiter = structure.pop()
        assert waiter is not None
        waiter.grant(1)
    assert results == {"a": 1}
    for dup in (
        copy.copy(structure),
        copy.deepcopy(structure),
        pickle.loads(pickle.dumps(structure)),
    ):
        assert type(dup) is type(structure)
        assert not dup
        assert dup.pop() is None


@pytest.mark.usefixtures("native_asyncio_only")
async def test_slot_grant_head_passes_over_a_waiter_cancelled_before_it_ran() -> None:
    slot: Slot[str] = Slot()
    results: dict[object, object] = {}
    task = spawn(park_into(slot, "a", results))
    await settle()
    waiter = slot.parked
    assert waiter is not None
    task.cancel()  # its future is cancelled; the task has not run yet
    assert slot.grant_head(5) is None
    assert waiter.state == ABANDONED
    assert slot.parked is None
    await finish(task)
    assert task.cancelled()
    assert isinstance(results["a"], asyncio.CancelledError)


# ---------------------------------------------------------------------------
# Fast paths create no waiter; backend detection
# ---------------------------------------------------------------------------


async def test_uncontended_acquire_and_release_create_no_waiter() -> None:
    sem = BatchSemaphore(3)
    before = WAITER_STATS.created
    for _ in range(1000):
        await sem.acquire()
        await sem.acquire(2)
        sem.release(3)
        sem.acquire_nowait(3)
        sem.release(3)
    assert WAITER_STATS.created == before


async def test_blocking_acquire_creates_a_waiter() -> None:
    sem = BatchSemaphore(0)
    before = WAITER_STATS.created
    async with anyio.create_task_group() as tg:
        tg.start_soon(sem.acquire)
        await settle()
        assert WAITER_STATS.created == before + 1
        sem.release()


async def test_every_wait_counts_one_waiter_made_or_recycled() -> None:
    # The count the fast-path tests read (tests/_waiter_count.py): a park on
    # a WaitQueue or a Slot adds one, also when it reuses the waiter of the
    # park before.
    structures: list[WaitQueue[Any] | Slot[Any]] = [WaitQueue(), Slot()]
    for structure in structures:
        for _ in range(2):
            results: dict[object, object] = {}
            before = WAITER_STATS.created
            async with anyio.create_task_group() as tg:
                tg.start_soon(park_into, structure, "p", results)
                await settle()
                assert WAITER_STATS.created == before + 1
                waiter = structure.pop()
                assert waiter is not None
                waiter.grant("granted")
            assert results == {"p": "granted"}
            assert WAITER_STATS.created == before + 1


async def test_park_works_through_every_waiter_kind(
    anyio_backend_name: str,
) -> None:
    # The waiter created matches the backend (native or generic).
    expected = "generic" if core.FORCE_GENERIC else anyio_backend_name

    def check(waiter: Waiter[str]) -> None:
        assert type(waiter).__name__.lower().startswith(expected)

    await park_one_and_grant(WaitQueue(), check)


async def test_the_generic_waiter_sleeps_on_anyios_event_under_the_drop_ins_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Code that migrates by putting the drop-ins under anyio's names (nox -s
    # conformance does, to run AnyIO's tests against them) must not make the
    # generic waiter sleep on anyio_prims.Event, which parks on a waiter in
    # turn: without end, with the generic waiter forced.
    anyios_event = anyio.Event
    monkeypatch.setattr(anyio, "Event", anyio_prims.Event)
    waiter: GenericWaiter[str] = GenericWaiter("p")
    assert isinstance(waiter._event, anyios_event)
    assert not isinstance(waiter._event, anyio_prims.Event)
    woke: list[object] = []

    async def park() -> None:
        await waiter.wait
        woke.append(waiter.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(park)
        await anyio.wait_all_tasks_blocked()
        waiter.grant("granted")
    assert woke == ["granted"]


def test_a_wait_structure_moved_between_event_loops_parks_on_the_running_one() -> None:
    # A queue or slot remembers the asyncio loop of its last waiter so that
    # the next one skips the backend dispatch; on another loop or backend it
    # must make a waiter of that one (an asyncio future of a closed loop
    # would never wake, and Trio refuses to await one).
    queue: WaitQueue[str] = WaitQueue()
    slot: Slot[str] = Slot()
    kinds: list[str] = []

    def check(waiter: Waiter[str]) -> None:
        kinds.append(type(waiter).__name__)
        if isinstance(waiter, AsyncioWaiter):
            assert waiter._fut.get_loop() is asyncio.get_running_loop()

    async def main() -> None:
        for structure in (queue, slot, queue):
            await park_one_and_grant(structure, check)

    runs = run_on_every_backend_in_turn(main)
    expected = [
        "GenericWaiter"
        if core.FORCE_GENERIC
        else "TrioWaiter"
        if run == "trio"
        else "AsyncioWaiter"
        for run in runs
        for _ in range(3)
    ]
    assert kinds == expected


def test_a_spare_waiter_reused_on_a_new_run_serves_one_wait_only(
    native_only: None,
) -> None:
    # The first wait of a run on a thread or loop a structure has not seen
    # takes the dispatch (_new_waiter), which reuses a spare waiter of the
    # running kind: on Trio, the one left by a run on another thread.  It
    # must serve that wait alone, carry its payload and be cancellable.
    queue: WaitQueue[str] = WaitQueue()
    cancelled_first: WaitQueue[str] = WaitQueue()
    reused: list[tuple[bool, bool]] = []

    async def main() -> None:
        spares = queue._spare, cancelled_first._spare
        made: list[Waiter[str]] = []
        # Two waits, the first made by the dispatch; each woken with its own
        # grant, in order.
        results: dict[object, object] = {}
        async with anyio.create_task_group() as tg:
            for name in ("a", "b"):
                tg.start_soon(park_into, queue, name, results)
                await settle()
            for value, name in enumerate(("a", "b")):
                waiter = queue.pop()
                assert waiter is not None
                assert waiter.payload == name
                made.append(waiter)
                waiter.grant(value)
        assert results == {"a": 0, "b": 1}
        # A wait made by the dispatch and cancelled leaves its queue; a
        # second wait there leaves a spare for the next run.
        scope = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(park_cancellably, cancelled_first, "x", scope, results)
            await settle()
            first = cancelled_first.parked[0]
            scope.cancel()
        assert not cancelled_first
        await park_one_and_grant(cancelled_first, lambda waiter: None)
        reused.append((made[0] is spares[0], first is spares[1]))

    runs = run_on_every_backend_in_turn(main)
    # Trio's run on another thread, and the Trio run after it, reuse the
    # waiters the Trio run before left (the test's point).
    if "trio" in runs:
        assert reused.count((True, True)) >= 2


class _OwnFuture(asyncio.Future[Any]):
    """The future class of a loop that makes its own."""


class _OwnFutureLoop(asyncio.SelectorEventLoop):
    """A loop whose ``create_future`` is its own, as the asyncio docs allow."""

    def create_future(self) -> asyncio.Future[Any]:
        return _OwnFuture(loop=self)


def test_a_loop_with_its_own_create_future_gets_its_futures_for_every_wait() -> None:
    # The waiter core makes its stock futures with asyncio.Future() where
    # that is faster (3.12 on); a loop that defines create_future must still
    # get its own futures, on the slow path's first wait and on the later
    # ones that skip the dispatch.
    if core.FORCE_GENERIC:
        pytest.skip("the generic waiter sleeps on an anyio.Event, not on a future")
    queue: WaitQueue[str] = WaitQueue()
    slot: Slot[str] = Slot()
    kinds: list[type[object]] = []

    def check(waiter: Waiter[str]) -> None:
        assert isinstance(waiter, AsyncioWaiter)
        assert waiter._fut.get_loop() is asyncio.get_running_loop()
        kinds.append(type(waiter._fut))

    async def main() -> None:
        for structure in (queue, slot, queue, slot):
            await park_one_and_grant(structure, check)

    own = _OwnFutureLoop()
    try:
        own.run_until_complete(main())
    finally:
        own.close()
    asyncio.run(main())  # the same structures, on a stock loop next
    assert kinds == [_OwnFuture] * 4 + [asyncio.Future] * 4


def test_future_factory_constructs_futures_only_where_it_is_faster() -> None:
    # asyncio.Future() finds the running loop cheaply from CPython 3.12 on;
    # before, and for a loop with its own create_future, the loop's method.
    from anyio_prims._core._backend import future_factory

    loops: list[asyncio.AbstractEventLoop] = [asyncio.new_event_loop()]
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is in the test extras
        pass
    else:
        loops.append(uvloop.new_event_loop())
    own = _OwnFutureLoop()
    try:
        for loop in loops:
            made = future_factory(loop)
            if sys.version_info >= (3, 12):
                assert made is asyncio.Future
            else:
                assert made == loop.create_future
        assert future_factory(own) == own.create_future
    finally:
        for loop in [*loops, own]:
            loop.close()


def test_asyncio_tasks_are_in_the_loop_task_map_exactly_where_it_is_kept() -> None:
    # TASK_MAP_KEPT says whether a running asyncio task is always found in
    # asyncio's loop -> task map (CPython 3.10-3.13, whose C tasks keep it);
    # the enqueue fast paths rely on it, so it must match what tasks do.
    from anyio_prims._core import _backend

    seen: list[bool] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen.append(_backend._tasks_by_loop.get(loop) is asyncio.current_task())

    asyncio.run(main())
    assert seen == [_backend.TASK_MAP_KEPT]
    if sys.version_info < (3, 14):
        assert _backend.TASK_MAP_KEPT


async def test_the_owner_lookup_is_the_backends_own_task_map(
    anyio_backend_name: str, task_map: str
) -> None:
    # Lock and RWLock find their owner on every fast-path call through the
    # map and key task_finder() binds: asyncio's own loop -> task dict and
    # the loop (asyncio.current_task itself where that dict is left empty),
    # or Trio's run-context dict and "task".  A slower map that finds the
    # same task (current_task(), a Python call per lookup) would pass every
    # behaviour test, so the choice is pinned here.
    from anyio_prims._core import _backend

    task, tasks, key = _backend.task_finder()

    def lookup() -> object:
        return tasks.get(key)

    assert lookup() is task
    if anyio_backend_name == "asyncio":
        assert task is asyncio.current_task()
        assert key is asyncio.get_running_loop()
        if task_map == "kept":
            assert tasks is _backend._tasks_by_loop
        else:
            assert tasks is _backend._LOOP_TASKS
    else:
        import trio.lowlevel

        assert task is trio.lowlevel.current_task()
        assert type(tasks) is dict
        assert key == "task"
    # Run elsewhere, it never finds the caller: in an asyncio loop callback
    # no task runs; Trio runs its callbacks in a system task of its own.
    seen: list[object] = []
    _backend.threadsafe_call_soon()(lambda: seen.append(lookup()))
    while not seen:
        await anyio.lowlevel.checkpoint()
    if anyio_backend_name == "asyncio":
        assert seen == [None]
    else:
        assert seen[0] is not None
        assert seen[0] is not task


async def test_the_checkpoints_are_the_backends_own(
    anyio_backend_name: str, task_map: str
) -> None:
    # The core's checkpoints call the running backend's own, cheapest form
    # (on asyncio a bare yield and AnyIO's asyncio backend's
    # checkpoint_if_cancelled, on Trio Trio's lowlevel functions), also
    # where asyncio's tasks leave their loop -> task map empty, and AnyIO's
    # public ones only under the generic waiter.  AnyIO's behave the same,
    # only slower, so no behaviour test tells them apart: the choice is
    # pinned here, by the code object of what each call returns.
    from anyio._backends._asyncio import AsyncIOBackend

    from anyio_prims._core import _backend

    def code_of(awaitable: Any) -> object:
        return getattr(awaitable, "cr_code", None) or awaitable.gi_code

    if core.FORCE_GENERIC:
        own_checkpoint: Any = anyio.lowlevel.checkpoint
        own_if_cancelled: Any = anyio.lowlevel.checkpoint_if_cancelled
        own_take: object = (
            _backend._OTHER_TAKE_CHECKPOINTS
            if anyio_backend_name == "asyncio"
            else _backend._GENERIC_TRIO_TAKE_CHECKPOINTS
        )
    elif anyio_backend_name == "asyncio":
        own_checkpoint = _backend._asyncio_yield
        own_if_cancelled = AsyncIOBackend.checkpoint_if_cancelled
        own_take = _backend._ASYNCIO_TAKE_CHECKPOINTS
    else:
        import trio.lowlevel

        own_checkpoint = trio.lowlevel.checkpoint
        own_if_cancelled = trio.lowlevel.checkpoint_if_cancelled
        own_take = (
            trio.lowlevel.checkpoint_if_cancelled,
            trio.lowlevel.cancel_shielded_checkpoint,
        )
    core.BUDGET.left = core.BUDGET_SIZE  # a checkpoint with budget left
    made = _backend.checkpoint()
    assert code_of(made) is own_checkpoint.__code__
    await made
    made = _backend.checkpoint_if_cancelled()
    assert code_of(made) is own_if_cancelled.__code__
    await made
    assert _backend.take_checkpoints() == own_take


def test_an_asyncio_loop_run_inside_a_trio_task_parks_its_tasks_on_asyncio(
    task_map: str,
) -> None:
    # A queue or slot last used by Trio skips the dispatch while a Trio task
    # runs on its thread; an asyncio loop run synchronously inside that Trio
    # task has its own tasks, which must still get asyncio waiters, also
    # where asyncio's tasks leave their loop -> task map empty.
    if core.FORCE_GENERIC:
        pytest.skip(
            "the generic waiter's anyio.Event follows sniffio, which names Trio "
            "inside an asyncio loop nested in a Trio task: only the native "
            "waiters can park there"
        )
    trio = pytest.importorskip("trio")
    queue: WaitQueue[str] = WaitQueue()
    slot: Slot[str] = Slot()
    kinds: list[str] = []

    def check(waiter: Waiter[str]) -> None:
        kinds.append(type(waiter).__name__)

    async def on_asyncio(structure: WaitQueue[str] | Slot[str]) -> object:
        def grant() -> None:
            waiter = structure.pop()
            assert waiter is not None
            check(waiter)
            waiter.grant(2)

        asyncio.get_running_loop().call_soon(grant)  # runs once it has parked
        return await structure.park("b")

    async def on_trio() -> None:
        for structure in (queue, slot):
            await park_one_and_grant(structure, check)
            assert asyncio.run(on_asyncio(structure)) == 2
            await park_one_and_grant(structure, check)

    trio.run(on_trio)
    assert kinds == ["TrioWaiter", "AsyncioWaiter", "TrioWaiter"] * 2


async def test_cancelled_waiter_lets_go_of_its_payload_while_still_queued() -> None:
    item = object()
    queue: WaitQueue[object] = WaitQueue()
    async with anyio.create_task_group() as tg:
        # A live waiter at the head keeps the cancelled one behind it queued.
        tg.start_soon(queue.park, "head")
        await settle()
        with anyio.CancelScope() as scope:

            async def cancel() -> None:
                scope.cancel()

            tg.start_soon(cancel)
            await queue.park(item)
        assert len(queue.parked) == 2
        assert len(queue) == 1
        assert all(waiter.payload is not item for waiter in queue.parked)
        head = queue.pop()
        assert head is not None
        head.grant()


# ---------------------------------------------------------------------------
# Recycling: a settled waiter is reused by the next wait on its structure
# ---------------------------------------------------------------------------


@pytest.fixture
def native_only() -> None:
    if core.FORCE_GENERIC:
        pytest.skip("only the native waiters are recycled")


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_a_settled_waiter_is_reused_by_the_next_wait_on_its_structure(
    kind: str, native_only: None, task_map: str
) -> None:
    # Also where asyncio's tasks leave their loop -> task map empty (CPython
    # 3.14): enqueue's asyncio fast path, where recycling happens, must not
    # depend on that map.
    structure: WaitQueue[str] | Slot[str] = WaitQueue() if kind == "queue" else Slot()
    seen: list[tuple[Waiter[str], object, str]] = []

    def check(waiter: Waiter[str]) -> None:
        seen.append((waiter, waiter.wait, waiter.payload))

    await park_one_and_grant(structure, check)
    await park_one_and_grant(structure, check)
    (first, first_wait, _), (second, second_wait, payload) = seen
    assert second is first  # no new object
    assert second_wait is not first_wait  # a new future or Trio sleep
    assert payload == "a"
    assert structure._spare is first
    assert first.payload is None  # keeps nothing
    assert first.value is None


async def test_a_reused_waiter_serves_one_wait_only(
    native_only: None, task_map: str
) -> None:
    # The spare is handed to one wait: two tasks that park after a settled
    # wait get two waiters, and each is woken with its own grant.
    q: WaitQueue[str] = WaitQueue()
    await park_one_and_grant(q, lambda waiter: None)
    spare = q._spare
    assert spare is not None
    results: dict[object, object] = {}
    async with anyio.create_task_group() as tg:
        for name in ("b", "c"):
            tg.start_soon(park_into, q, name, results)
            await settle()
        first, second = q.parked
        assert first is spare
        assert second is not spare
        assert q._spare is None
        for value in (1, 2):
            waiter = q.pop()
            assert waiter is not None
            waiter.grant(value)
    assert results == {"b": 1, "c": 2}


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_a_reused_waiter_cancelled_while_parked_was_granted_nothing(
    kind: str, native_only: None
) -> None:
    # The reused waiter was GRANTED in its last wait; the new wait starts
    # PENDING, so its cancellation gives nothing back.
    structure: WaitQueue[str] | Slot[str] = WaitQueue() if kind == "queue" else Slot()
    await park_one_and_grant(structure, lambda waiter: None)
    spare = structure._spare
    given_back: list[object] = []
    scope = anyio.CancelScope()

    async def park_then_cancelled() -> None:
        with scope:
            await structure.park("b", given_back.append)

    async with anyio.create_task_group() as tg:
        tg.start_soon(park_then_cancelled)
        await settle()
        assert structure._spare is None  # handed to this wait
        scope.cancel()
    assert scope.cancelled_caught
    assert given_back == []
    assert not structure
    await park_one_and_grant(structure, lambda waiter: None)
    assert structure._spare is not spare  # a cancelled waiter is not reused


async def test_a_cancelled_waiter_is_never_reused(native_only: None) -> None:
    # It may still sit in the queue (asyncio marks it and moves on), so the
    # next wait must get a new object.
    q: WaitQueue[str] = WaitQueue()
    seen: list[Waiter[str]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.park, "head")  # keeps the cancelled one queued
        await settle()
        with anyio.CancelScope() as scope:

            async def cancel() -> None:
                seen.append(q.parked[-1])
                scope.cancel()

            tg.start_soon(cancel)
            await q.park("cancelled")
        assert q._spare is None
        results: dict[object, object] = {}
        tg.start_soon(park_into, q, "next", results)
        await settle()
        assert q.parked[-1] is not seen[0]
        for _ in range(2):
            waiter = q.pop()
            assert waiter is not None
            waiter.grant("ok")
    assert results == {"next": "ok"}


# -- found by mutation testing of _core/_waiter.py ----------------------------


def _structure(kind: str) -> WaitQueue[str] | Slot[str]:
    return WaitQueue() if kind == "queue" else Slot()


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_a_recheck_that_finds_no_reason_to_wait_withdraws_the_parked_waiter(
    kind: str, anyio_backend_name: str
) -> None:
    # park() calls recheck once its waiter is parked and pending; True makes
    # it withdraw the waiter and return WITHDRAWN without sleeping, leaving
    # nobody waiting.  The structure serves the next wait as usual.
    structure = _structure(kind)
    seen: list[tuple[int, bool, bool]] = []

    def recheck(waiter: Waiter[str]) -> bool:
        seen.append((waiter.state, bool(structure), waiter.payload == "p"))
        return True

    with anyio.fail_after(5):  # a regression fails, it does not hang
        outcome = await assert_no_schedule_point(
            anyio_backend_name, lambda: structure.park("p", recheck=recheck)
        )
    assert outcome is WITHDRAWN
    assert seen == [(PENDING, True, True)]
    assert not structure
    assert structure.pop() is None

    def serve(structure: WaitQueue[str] | Slot[str]) -> None:
        waiter = structure.pop()
        assert waiter is not None
        assert waiter.payload == "a"  # the new wait's, not the withdrawn one's
        waiter.grant("granted")

    assert await park_one_and_serve(structure, serve) == "granted"


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_a_recheck_that_finds_a_reason_to_wait_parks_the_task(
    kind: str,
) -> None:
    structure = _structure(kind)
    calls: list[Waiter[str]] = []

    def recheck(waiter: Waiter[str]) -> bool:
        calls.append(waiter)
        return False

    def serve(structure: WaitQueue[str] | Slot[str]) -> None:
        assert len(calls) == 1
        assert structure
        waiter = structure.pop()
        assert waiter is calls[0]
        waiter.grant("granted")

    assert await park_one_and_serve(structure, serve, recheck) == "granted"


@pytest.mark.parametrize("kind", ["queue", "slot"])
def test_a_structure_moved_to_another_backend_serves_a_wait_after_a_cancelled_one(
    kind: str,
) -> None:
    # The first wait of each run is cancelled, so the waiter the last run
    # left for reuse (of another backend's kind, where the run moved between
    # backends) is still there when the next wait takes the fast path: that
    # wait must get a waiter of its own backend, park and be woken.
    structure = _structure(kind)
    results: list[object] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:

            async def cancel_when_parked() -> None:
                await settle()
                assert structure
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_parked)
                await structure.park("cancelled")
        assert scope.cancelled_caught
        assert not structure
        async with anyio.create_task_group() as tg:

            async def park() -> None:
                results.append(await structure.park("granted"))

            tg.start_soon(park)
            await settle()
            waiter = structure.pop()
            assert waiter is not None
            assert waiter.payload == "granted"
            waiter.grant(len(results))

    runs = run_on_every_backend_in_turn(main)
    assert results == list(range(len(runs)))


@pytest.mark.parametrize("kind", ["queue", "slot"])
@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, copy.deepcopy, lambda obj: pickle.loads(pickle.dumps(obj))],
    ids=["copy", "deepcopy", "pickle"],
)
async def test_a_copy_of_an_idle_structure_counts_the_tasks_that_park_on_it(
    kind: str, duplicate: Callable[[Any], Any]
) -> None:
    # A copy of an idle structure is an empty one that starts counting
    # afresh: a task parked on it is one live waiter, served as usual.
    original = _structure(kind)

    def serve(dup: WaitQueue[str] | Slot[str]) -> None:
        assert dup
        if isinstance(dup, WaitQueue):
            assert len(dup) == 1
            assert [w.payload for w in dup] == ["a"]
        waiter = dup.grant_head("granted")
        assert waiter is not None
        assert waiter.payload == "a"
        assert not dup

    assert await park_one_and_serve(duplicate(original), serve) == "granted"
    assert not original


async def test_the_unopened_stand_in_takes_nothing_and_copies_as_itself() -> None:
    # take_where() on the stand-in reads as on an empty queue (an empty
    # list, fits never called); copied or pickled, it stays the one
    # stand-in every primitive shares.
    asked: list[object] = []

    def fits(waiter: Waiter[Any]) -> bool:
        asked.append(waiter)
        return True

    assert NOT_OPENED.take_where(fits) == []
    assert asked == []
    assert list(NOT_OPENED) == []
    assert not NOT_OPENED.has_live()
    assert copy.copy(NOT_OPENED) is NOT_OPENED
    assert copy.deepcopy(NOT_OPENED) is NOT_OPENED
    assert pickle.loads(pickle.dumps(NOT_OPENED)) is NOT_OPENED


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_try_grant_of_a_live_parked_waiter_grants_it_its_value(kind: str) -> None:
    # try_grant() on a popped waiter whose task still waits: True, the
    # waiter is GRANTED and its task wakes with the value (BatchSemaphore's
    # release grants this way).
    structure = _structure(kind)

    def serve(structure: WaitQueue[str] | Slot[str]) -> None:
        waiter = structure.pop()
        assert waiter is not None
        assert waiter.try_grant("value") is True
        assert waiter.state == GRANTED

    assert await park_one_and_serve(structure, serve) == "value"


@pytest.mark.parametrize("kind", ["queue", "slot"])
async def test_grant_head_marks_the_waiter_it_grants_granted(kind: str) -> None:
    # PENDING --grant()--> GRANTED: grant_head() is pop() then grant() in one
    # call, and the waiter it returns is GRANTED, its task woken with the
    # value.
    structure = _structure(kind)

    def serve(structure: WaitQueue[str] | Slot[str]) -> None:
        waiter = structure.grant_head("value")
        assert waiter is not None
        assert waiter.state == GRANTED
        assert waiter.value == "value"
        assert not structure

    assert await park_one_and_serve(structure, serve) == "value"
