"""Waiter-core behaviours the other tests left unpinned, found by mutation
testing: at the core, and through a channel."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

import anyio_prims._core as core
from anyio_prims import mpmc, mpsc, spmc
from anyio_prims._core import WaitQueue

from ._tasks import Call, settle

pytestmark = pytest.mark.anyio


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio only: Trio cannot cancel a task it has rescheduled")


async def _park(q: WaitQueue[Any], payload: str, results: dict[str, Any]) -> None:
    try:
        results[payload] = await q.park(payload)
    except BaseException as exc:
        results[payload] = exc
        raise


@pytest.mark.usefixtures("asyncio_only")
async def test_take_tail_passing_over_a_cancelled_waiter_keeps_the_count_exact() -> (
    None
):
    # As grant_head() at the head: the waiter take_tail() passes over at the
    # tail (its task cancelled, not yet run) counts nothing when it runs.
    if core.FORCE_GENERIC:
        pytest.skip("_gone() is a property of the native asyncio waiter")
    q: WaitQueue[str] = WaitQueue()
    results: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    live = loop.create_task(_park(q, "live", results))
    await settle()
    cancelled = loop.create_task(_park(q, "cancelled", results))
    await settle()
    cancelled.cancel()
    taken = q.take_tail("value")
    assert taken is not None
    assert taken.payload == "live"
    taken.wake()
    await settle()
    assert cancelled.done()
    assert live.done()
    assert results["live"] == "value"
    assert len(q) == 0
    later = loop.create_task(_park(q, "later", results))
    await settle()
    assert len(q) == 1
    taken = q.take_tail("again")
    assert taken is not None
    assert taken.payload == "later"
    taken.wake()
    await settle()
    assert later.done()
    assert results["later"] == "again"


@pytest.mark.usefixtures("asyncio_only")
async def test_grant_head_passing_over_a_cancelled_waiter_keeps_the_count_exact() -> (
    None
):
    # The waiter grant_head() passes over (its task cancelled, not yet run)
    # is already out of the queue: when its task runs it must count nothing.
    if core.FORCE_GENERIC:
        pytest.skip("_gone() is a property of the native asyncio waiter")
    q: WaitQueue[str] = WaitQueue()
    results: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    cancelled = loop.create_task(_park(q, "cancelled", results))
    await settle()
    live = loop.create_task(_park(q, "live", results))
    await settle()
    cancelled.cancel()
    granted = q.grant_head("value")
    assert granted is not None
    assert granted.payload == "live"
    await settle()
    assert cancelled.done()
    assert live.done()
    assert len(q) == 0
    later = loop.create_task(_park(q, "later", results))
    await settle()
    assert len(q) == 1
    assert q
    granted = q.grant_head("again")
    assert granted is not None
    assert granted.payload == "later"
    await settle()
    assert later.done()
    assert results["later"] == "again"


@pytest.mark.usefixtures("asyncio_only")
async def test_a_send_wakes_a_receiver_parked_after_one_was_passed_over() -> None:
    # Through a channel: R1 is cancelled (task.cancel(), not yet run) and a
    # send in the same step goes to R2.  Later R3 parks; a send must wake it,
    # not go into the buffer beside it.
    tx, rx = mpmc.channel[str](1)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, "asyncio_task_cancel").start(tg)
        await settle()
        second = Call(rx.receive).start(tg)
        await settle()
        first.cancel()
        tx.send_nowait("A")  # passes over R1, to R2
        await settle()
        third = Call(rx.receive).start(tg)
        await settle()
        assert rx.statistics().tasks_waiting_receive == 1
        tx.send_nowait("B")
        await settle()
        assert third.outcome == "returned"
    assert first.outcome == "cancelled"
    assert second.result == "A"
    assert third.result == "B"


async def test_closing_a_receiver_clone_keeps_another_clones_blocked_receive_reachable(
    anyio_backend_name: str,
) -> None:
    # A cancelled receive of clone 1 is still queued (lazily) when clone 1
    # closes; clone 2's blocked receive must still be counted and served.
    tx, rx = mpmc.channel[str](1)
    other = rx.clone()
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        second = Call(other.receive).start(tg)
        await settle()
        first.cancel()
        await first.finished.wait()
        rx.close()  # takes clone 1's waiters out of the queue
        assert other.statistics().tasks_waiting_receive == 1
        tx.send_nowait("x")
        await settle()
    assert first.outcome == "cancelled"
    assert second.result == "x"
    assert other.statistics().items_buffered == 0


@pytest.mark.usefixtures("asyncio_only")
@pytest.mark.parametrize("flavour", ["mpsc", "spmc"])
async def test_a_single_side_call_made_before_a_cancelled_one_runs_stays_parked(
    flavour: str,
) -> None:
    # Task A is parked on the single side and cancelled (task.cancel()), and
    # before A runs the test task calls on that side again: A's wait is gone,
    # so the call is not busy and parks.  When A runs and leaves, it must not
    # take the new call's waiter with it.
    if core.FORCE_GENERIC:
        pytest.skip("the generic waiter cannot tell its task was cancelled: busy")
    tx, rx = mpsc.channel[str](0) if flavour == "mpsc" else spmc.channel[str](0)
    got: list[str] = []

    async def other_side() -> None:
        await settle()
        if flavour == "mpsc":
            tx.send_nowait("x")
        else:
            got.append(rx.receive_nowait())

    async with anyio.create_task_group() as tg:
        if flavour == "mpsc":
            first = Call(rx.receive, "asyncio_task_cancel").start(tg)
        else:
            first = Call(lambda: tx.send("lost"), "asyncio_task_cancel").start(tg)
        await settle()
        first.cancel()
        tg.start_soon(other_side)
        with anyio.fail_after(5):
            if flavour == "mpsc":
                got.append(await rx.receive())
            else:
                await tx.send("x")
    await first.finished.wait()
    assert first.outcome == "cancelled"
    assert got == ["x"]


def test_a_trio_waiter_settled_before_its_task_sleeps_lets_the_cancellation_wait() -> (
    None
):
    # Code that runs inside a task's own step, after its waiter is parked
    # and before the task goes to sleep (a finalizer the collector runs
    # there, say), may grant the waiter: Trio then has the task rescheduled
    # before it sleeps.  A cancellation pending as it goes to sleep makes
    # Trio call the abort callback of a waiter already settled: it must
    # refuse (the task keeps its grant, and the cancellation waits for its
    # next checkpoint), not take the waiter out a second time.
    trio = pytest.importorskip("trio")
    if core.FORCE_GENERIC:
        pytest.skip("Trio's own waiter")

    async def main() -> tuple[object, bool]:
        slot: core.Slot[None] = core.Slot()
        with trio.CancelScope() as scope:
            waiter = slot.enqueue(None)
            granted = slot.pop()
            assert granted is waiter
            granted.grant("the grant")
            scope.cancel()
            await waiter.wait  # rescheduled already: returns, not cancelled
            value = waiter.value
            await trio.lowlevel.checkpoint()  # the cancellation, here
        return value, scope.cancelled_caught

    assert trio.run(main) == ("the grant", True)
