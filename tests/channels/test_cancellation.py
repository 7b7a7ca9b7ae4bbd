"""Cancellation of channel operations, from every source the library must
handle: AnyIO's scopes (cancel scope, move_on_after, fail_after) on every
backend, Trio's own scopes on Trio, and plain asyncio ``task.cancel()``,
``asyncio.timeout()`` and ``asyncio.wait_for()`` on the asyncio backends.

A cancelled send delivered nothing; a cancelled receive took nothing.  The
grant-then-cancel race (a waiter granted, its task cancelled before it
runs) is made by granting and cancelling in one synchronous step; only the
asyncio sources in GIVE_BACK_SOURCES can actually cancel a granted wait,
the others must then let the call complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import _core as core
from anyio_prims import mpmc, mpsc, oneshot, spmc

from ._support import (
    CHANNELS,
    GIVE_BACK_SOURCES,
    MANY_RECEIVERS,
    MANY_SENDERS,
    SOURCES,
    Call,
    drain,
    park_receives,
    settle,
    source_param,
    uncancel,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(SOURCES))
def source(request: pytest.FixtureRequest, anyio_backend_name: str) -> str:
    return source_param(request.param, anyio_backend_name)


def channel(flavour: str, capacity: float, **kwargs: Any) -> Any:
    return CHANNELS[flavour](capacity, **kwargs)


def plain_asyncio_only(anyio_backend_name: str) -> None:
    """Skip a test of plain asyncio cancellation on Trio."""
    if anyio_backend_name != "asyncio":
        pytest.skip("plain asyncio cancellation")


# ---------------------------------------------------------------------------
# Cancelled while blocked
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [0, 2])
async def test_cancelled_blocked_send_delivered_nothing(
    flavour: str, source: str, capacity: int
) -> None:
    tx, rx = channel(flavour, capacity)
    for i in range(capacity):
        await tx.send(i)
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send("lost"), source).start(tg)
        await settle()
        sender.cancel()
        await sender.finished.wait()
    assert sender.outcome == "cancelled"
    assert tx.statistics().tasks_waiting_send == 0
    assert drain(rx) == list(range(capacity))


async def test_cancelled_blocked_receive_took_nothing(
    flavour: str, source: str
) -> None:
    tx, rx = channel(flavour, 1)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.cancel()
        await receiver.finished.wait()
    assert receiver.outcome == "cancelled"
    assert rx.statistics().tasks_waiting_receive == 0
    await tx.send("kept")
    assert rx.receive_nowait() == "kept"


async def test_cancelled_receive_many_took_nothing(flavour: str, source: str) -> None:
    tx, rx = channel(flavour, 4)
    async with anyio.create_task_group() as tg:
        receiver = Call(lambda: rx.receive_many(4), source).start(tg)
        await settle()
        receiver.cancel()
        await receiver.finished.wait()
    assert receiver.outcome == "cancelled"
    await tx.send(1)
    await tx.send(2)
    assert await rx.receive_many(4) == [1, 2]


async def test_cancelling_every_blocked_receiver_leaves_the_channel_usable(
    source: str,
) -> None:
    tx, rx = CHANNELS["mpmc"](0)
    async with anyio.create_task_group() as tg:
        receivers = []
        for _ in range(20):
            receivers.append(Call(rx.clone().receive, source).start(tg))
            await settle()
        for receiver in receivers:
            receiver.cancel()
        for receiver in receivers:
            await receiver.finished.wait()
        assert [r.outcome for r in receivers] == ["cancelled"] * 20
        assert rx.statistics().tasks_waiting_receive == 0
        last = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")
        await settle()
    assert last.result == "x"


async def test_a_cancelled_blocked_send_frees_the_single_sender(source: str) -> None:
    tx, rx = spmc.channel[str](0)
    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("lost"), source).start(tg)
        await settle()
        first.cancel()
        await first.finished.wait()
        second = Call(lambda: tx.send("kept")).start(tg)
        await settle()
        assert second.outcome is None
        assert rx.receive_nowait() == "kept"
        await settle()
    assert first.outcome == "cancelled"
    assert second.outcome == "returned"


async def test_a_cancelled_blocked_receive_frees_the_single_receiver(
    source: str,
) -> None:
    tx, rx = mpsc.channel[str](0)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, source).start(tg)
        await settle()
        first.cancel()
        await first.finished.wait()
        second = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")
        await settle()
    assert first.outcome == "cancelled"
    assert second.result == "x"


async def test_strict_checkpoint_cancelled_by_task_cancel_does_nothing(
    flavour: str, anyio_backend_name: str
) -> None:
    plain_asyncio_only(anyio_backend_name)
    tx, rx = channel(flavour, 2, strict=True)
    await tx.send(1)
    task = asyncio.current_task()
    assert task is not None
    for operation in (partial(tx.send, 2), rx.receive):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await operation()
        uncancel(task)
    assert drain(rx) == [1]


# ---------------------------------------------------------------------------
# Grant, then cancel: receives
# ---------------------------------------------------------------------------


async def test_grant_then_cancel_receive_neither_loses_nor_duplicates(
    flavour: str, source: str
) -> None:
    tx, rx = channel(flavour, 2)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.grant_then_cancel(lambda: tx.send_nowait("x"))
        await receiver.finished.wait()
    if source in GIVE_BACK_SOURCES:
        assert receiver.outcome == "cancelled"
    if receiver.outcome == "cancelled":
        assert drain(rx) == ["x"]
    else:
        assert receiver.result == "x"
        assert drain(rx) == []


#: Sources whose cancel() reaches a parked task before anything else runs
#: (a deadline or an asyncio timeout is acted on later, by the loop).
CANCELLED_AT_ONCE = ("anyio_cancel_scope", "trio_cancel_scope", "asyncio_task_cancel")


async def test_a_send_just_after_the_receiver_is_cancelled_keeps_the_item(
    flavour: str, source: str
) -> None:
    # Cancel, then send in the same synchronous step: the cancelled receiver
    # is passed over (or, where its wait was granted first, gives the item
    # back), and the item waits in the buffer.
    tx, rx = channel(flavour, 1)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.cancel()
        tx.send_nowait("x")
        if source == "asyncio_task_cancel" and not core.FORCE_GENERIC:
            # The waiter's future is cancelled: the send sees it is gone.
            assert rx.statistics().items_buffered == 1
        await receiver.finished.wait()
    if source in CANCELLED_AT_ONCE:
        assert receiver.outcome == "cancelled"
    if receiver.outcome == "cancelled":
        assert drain(rx) == ["x"]
    else:
        assert receiver.result == "x"
        assert drain(rx) == []


async def test_an_item_given_back_goes_before_items_sent_after_it(
    flavour: str, source: str
) -> None:
    tx, rx = channel(flavour, 3)

    def grant() -> None:
        tx.send_nowait("A")  # to the blocked receiver
        tx.send_nowait("B")  # into the buffer

    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.grant_then_cancel(grant)
        await receiver.finished.wait()
    tx.send_nowait("C")
    if receiver.outcome == "cancelled":
        assert drain(rx) == ["A", "B", "C"]
    else:
        assert receiver.result == "A"
        assert drain(rx) == ["B", "C"]
    if source in GIVE_BACK_SOURCES:
        assert receiver.outcome == "cancelled"


async def test_grant_then_cancel_passes_the_item_to_the_next_blocked_receiver(
    flavour: str, source: str
) -> None:
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, source).start(tg)
        await settle()
        second = Call(rx.clone().receive).start(tg)
        await settle()
        first.grant_then_cancel(lambda: tx.send_nowait("x"))
        await first.finished.wait()
        await settle()
        if first.outcome == "cancelled":
            assert second.result == "x"
        else:
            assert first.result == "x"
            assert second.outcome is None
            tx.send_nowait("y")
            await settle()
            assert second.result == "y"
    if source in GIVE_BACK_SOURCES:
        assert first.outcome == "cancelled"


async def test_receivers_granted_together_keep_the_order_when_one_is_cancelled(
    flavour: str, source: str
) -> None:
    # R1 is granted A and R2 B in one step, then R1 is cancelled: R2 must get
    # A, and B must stay first in line (not be taken before A).
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = channel(flavour, 2)

    def grant() -> None:
        tx.send_nowait("A")
        tx.send_nowait("B")

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, source).start(tg)
        await settle()
        second = Call(rx.clone().receive).start(tg)
        await settle()
        first.grant_then_cancel(grant)
        await first.finished.wait()
        await settle()
    tx.send_nowait("C")
    if first.outcome == "cancelled":
        assert second.result == "A"
        assert drain(rx) == ["B", "C"]
    else:
        assert (first.result, second.result) == ("A", "B")
        assert drain(rx) == ["C"]
    if source in GIVE_BACK_SOURCES:
        assert first.outcome == "cancelled"


async def test_cancelling_the_middle_of_three_granted_receivers_shifts_the_items(
    flavour: str, source: str
) -> None:
    if flavour not in MANY_RECEIVERS or source not in GIVE_BACK_SOURCES:
        pytest.skip("needs several receivers and a give-back")
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        first = Call(rx.clone().receive).start(tg)
        await settle()
        middle = Call(rx.clone().receive, source).start(tg)
        await settle()
        last = Call(rx.clone().receive).start(tg)
        await settle()
        fourth = Call(rx.clone().receive).start(tg)
        await settle()

        def grant() -> None:
            for item in "ABC":
                tx.send_nowait(item)

        middle.grant_then_cancel(grant)
        await settle()
        # C was displaced and went on to the next blocked receiver.
        assert (first.result, middle.outcome, last.result) == ("A", "cancelled", "B")
        assert fourth.result == "C"


async def test_a_receive_while_a_grant_is_in_flight_takes_the_oldest_item(
    flavour: str, source: str
) -> None:
    # R1 is granted A, B is buffered, and another receiver takes an item
    # before R1 runs (and, on asyncio, is cancelled): it must take A, so
    # that no receiver gets B and then A given back.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = channel(flavour, 2)
    other = rx.clone()
    taken: list[Any] = []

    def grant() -> None:
        tx.send_nowait("A")
        tx.send_nowait("B")
        taken.append(other.receive_nowait())
        assert other.statistics().items_buffered == 0  # B is R1's now

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, source).start(tg)
        await settle()
        first.grant_then_cancel(grant)
        await first.finished.wait()
        await settle()
    tx.send_nowait("C")
    assert taken == ["A"]
    if first.outcome == "cancelled":
        assert drain(other) == ["B", "C"]
    else:
        assert first.result == "B"
        assert drain(other) == ["C"]
    if source in GIVE_BACK_SOURCES:
        assert first.outcome == "cancelled"


@pytest.mark.parametrize("parked", [1, 17])
@pytest.mark.parametrize("capacity", [1, 2])
async def test_a_receive_while_cancelled_sends_have_not_resumed_takes_the_buffered_item(
    flavour: str, source: str, capacity: int, parked: int
) -> None:
    # Sends park on a full buffer and are cancelled in one step; on Trio
    # they leave the queue at once, before their tasks run (17 make a
    # WaitQueue compact itself).  A receive in that window must take the
    # buffered item, not park beside it (where closing the senders would
    # then end the stream with the item never delivered).
    if parked > 1 and flavour not in MANY_SENDERS:
        pytest.skip("one sender")
    tx, rx = channel(flavour, capacity)
    for i in range(capacity):
        tx.send_nowait(i)
    endpoints = [tx.clone() for _ in range(parked)] if parked > 1 else [tx]
    async with anyio.create_task_group() as tg:
        senders = [
            Call(partial(endpoint.send, f"late {n}"), source).start(tg)
            for n, endpoint in enumerate(endpoints)
        ]
        await settle()
        assert tx.statistics().tasks_waiting_send == parked
        for sender in senders:
            sender.cancel()
        with anyio.fail_after(5):
            assert await rx.receive() == 0
        for sender in senders:
            await sender.finished.wait()
    for endpoint in endpoints:
        endpoint.close()
    rest: list[Any] = list(range(1, capacity))
    for n, sender in enumerate(senders):
        if source in CANCELLED_AT_ONCE and not core.FORCE_GENERIC:
            assert sender.outcome == "cancelled"
        if sender.returned:  # cancelled later than the receive let it in
            rest.append(f"late {n}")
        else:
            assert sender.outcome == "cancelled"
    tx.close()
    with anyio.fail_after(5):
        assert [item async for item in rx] == rest


@pytest.mark.parametrize("take", ["receive_nowait", "receive_many"])
@pytest.mark.parametrize("capacity", [0, 1])
async def test_a_receive_that_admits_a_parked_sender_during_a_grant_keeps_the_order(
    flavour: str, source: str, capacity: int, take: str, anyio_backend_name: str
) -> None:
    # R1 is granted A; in the same step a sender parks with its last item
    # and another task receives without waiting, then cancels R1.  That
    # receive takes the oldest items, the parked item joins the line after
    # what R1 holds, and whether R1 is cancelled or returns, the items come
    # out in the order they were sent.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    if anyio_backend_name == "trio":
        pytest.skip("needs asyncio's FIFO run queue to order the two tasks")
    tx, rx = channel(flavour, capacity)
    other = rx.clone()
    sent = ["A", "B"][: capacity + 1]
    taken: list[Any] = []
    go = anyio.Event()

    async def send_all() -> None:
        await go.wait()
        for item in sent:
            tx.send_nowait(item)  # A to R1, then B to the buffer
        await tx.send("S")  # parks: the buffer is full (and refills the budget)

    async def receive_and_cancel() -> None:
        await go.wait()  # runs after send_all(), before R1 resumes
        if take == "receive_nowait":
            taken.append(other.receive_nowait())
        else:
            taken.extend(await other.receive_many(10))  # does not wait
        first.cancel()

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, source).start(tg)
        await settle()
        tg.start_soon(send_all)
        tg.start_soon(receive_and_cancel)
        await settle()
        go.set()
        await first.finished.wait()
        await settle()
    assert taken  # the oldest items, A first
    assert taken == sent[: len(taken)]
    rest = drain(other)
    if first.outcome == "cancelled":
        assert taken + rest == [*sent, "S"]
    else:
        assert [*taken, first.result, *rest] == [*sent, "S"]
    if source == "asyncio_task_cancel":
        assert first.outcome == "cancelled"


async def test_an_item_given_back_when_every_receiver_closed_is_dropped(
    flavour: str, anyio_backend_name: str
) -> None:
    plain_asyncio_only(anyio_backend_name)
    tx, rx = channel(flavour, 1)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, "asyncio_task_cancel").start(tg)
        await settle()

        def grant_and_close() -> None:
            tx.send_nowait("x")
            rx.close()

        receiver.grant_then_cancel(grant_and_close)
        await receiver.finished.wait()
    assert receiver.outcome == "cancelled"
    assert tx.statistics().items_buffered == 0
    with pytest.raises(anyio.BrokenResourceError):
        tx.send_nowait("y")


def drain_to_end(rx: Any) -> list[Any]:
    """What ``receive_nowait()`` gives before it raises EndOfStream (it must,
    not WouldBlock: the stream has ended)."""
    items = []
    while True:
        try:
            items.append(rx.receive_nowait())
        except anyio.EndOfStream:
            return items


async def test_no_end_of_stream_while_an_item_given_back_may_still_come(
    flavour: str, source: str
) -> None:
    # The last sender closes while a receive's item is in flight: until that
    # receive has resumed, the item may still come back, so the stream has
    # not ended.  After it, the item (if given back) comes before the end.
    tx, rx = channel(flavour, 1)
    other = rx.clone() if flavour in MANY_RECEIVERS else None
    seen: list[str] = []

    def grant_and_close() -> None:
        tx.send_nowait("A")  # to the blocked receiver
        tx.close()
        if other is not None:
            try:
                seen.append(other.receive_nowait())
            except anyio.WouldBlock:
                seen.append("WouldBlock")

    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.grant_then_cancel(grant_and_close)
        await receiver.finished.wait()
    assert seen == ([] if other is None else ["WouldBlock"])
    if source in GIVE_BACK_SOURCES:
        assert receiver.outcome == "cancelled"
    if receiver.outcome == "cancelled":
        assert drain_to_end(other or rx) == ["A"]
    else:
        assert receiver.result == "A"
        assert drain_to_end(other or rx) == []


async def test_a_receiver_parked_when_the_last_sender_closes_gets_an_item_given_back(
    flavour: str, source: str
) -> None:
    # R1 is granted A, the last sender closes and R1 is cancelled, all in one
    # step, while R2 is parked: R2 waits for R1 instead of ending at once,
    # and gets A if R1 gives it back (else the end of the stream).
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = channel(flavour, 0)

    def grant_and_close() -> None:
        tx.send_nowait("A")
        tx.close()

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive, source).start(tg)
        await settle()
        second = Call(rx.clone().receive).start(tg)
        await settle()
        first.grant_then_cancel(grant_and_close)
        await first.finished.wait()
        await second.finished.wait()
    if source in GIVE_BACK_SOURCES:
        assert first.outcome == "cancelled"
    if first.outcome == "cancelled":
        assert second.result == "A"
    else:
        assert first.result == "A"
        assert second.outcome == "raised"
        assert isinstance(second.error, anyio.EndOfStream)
    assert drain_to_end(rx) == []


# ---------------------------------------------------------------------------
# Grant, then cancel: sends
# ---------------------------------------------------------------------------


async def test_a_send_whose_item_was_taken_returns_and_is_cancelled_later(
    flavour: str, source: str
) -> None:
    # The receiver takes the blocked sender's item and the sender is
    # cancelled in the same step: the send returns normally (the item was
    # delivered), and the cancellation hits the sender's next checkpoint.
    tx, rx = channel(flavour, 0)
    taken: list[str] = []
    async with anyio.create_task_group() as tg:
        sender = Call(
            lambda: tx.send("x"), source, after=anyio.lowlevel.checkpoint
        ).start(tg)
        await settle()
        sender.grant_then_cancel(lambda: taken.append(rx.receive_nowait()))
        await sender.finished.wait()
    assert taken == ["x"]
    assert drain(rx) == []
    if source in GIVE_BACK_SOURCES:
        assert sender.returned
    if sender.returned:
        assert sender.outcome == "cancelled"


async def test_a_rearmed_cancellation_keeps_task_cancelling_count(
    flavour: str, anyio_backend_name: str
) -> None:
    plain_asyncio_only(anyio_backend_name)
    if sys.version_info < (3, 11):
        pytest.skip("Task.cancelling() is 3.11+")
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        sender = Call(
            lambda: tx.send("x"), "asyncio_task_cancel", after=lambda: asyncio.sleep(0)
        ).start(tg)
        await settle()
        sender.grant_then_cancel(rx.receive_nowait)
        await sender.finished.wait()
    assert sender.returned
    assert sender.outcome == "cancelled"
    # One cancel() call, counted once: uncancel() and cancel() of the re-arm
    # cancel out.
    assert sender.cancelling_after == 1


async def test_a_rearmed_cancellation_does_not_trip_an_enclosing_asyncio_timeout(
    flavour: str, anyio_backend_name: str
) -> None:
    plain_asyncio_only(anyio_backend_name)
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    tx, rx = channel(flavour, 0)
    outcome: list[str] = []

    async def send_in_timeout() -> None:
        try:
            async with asyncio.timeout(1e6):
                await tx.send("x")
                outcome.append("sent")
                await asyncio.sleep(0)
        except TimeoutError:
            outcome.append("timeout")
        except asyncio.CancelledError:
            outcome.append("cancelled")

    task = asyncio.get_running_loop().create_task(send_in_timeout())
    await settle()
    assert rx.receive_nowait() == "x"
    task.cancel()
    await task
    assert outcome == ["sent", "cancelled"]


async def test_a_timeout_that_expires_at_a_taken_send_lets_nothing_out_of_its_block(
    flavour: str, anyio_backend_name: str
) -> None:
    # The timeout expires on a send whose item a receiver took in the same
    # step, and the block ends right after the send: the send returns, the
    # timeout counts as expired, and the task runs on past the block (on
    # Python 3.11 and 3.12 a cancel() re-made at once stayed pending after
    # the timeout's uncancel(), and the next await raised it).
    plain_asyncio_only(anyio_backend_name)
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    tx, rx = channel(flavour, 0)
    events: list[str] = []
    timeouts: list[Any] = []  # asyncio.Timeout, 3.11+
    loop = asyncio.get_running_loop()

    async def send_in_timeout() -> None:
        async with asyncio.timeout(None) as timeout:
            timeouts.append(timeout)
            await tx.send("x")
            events.append("sent")
        events.append(f"expired={timeout.expired()}")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        events.append("ran on")

    task = loop.create_task(send_in_timeout())
    await settle()
    # The timeout's callback is queued first (a past deadline), then the
    # grant: it fires on a wait that has been granted.
    timeouts[0].reschedule(loop.time())
    assert rx.receive_nowait() == "x"
    await asyncio.wait([task])
    assert not task.cancelled()
    assert events == ["sent", "expired=True", "ran on"]
    assert task.cancelling() == 0


@pytest.mark.parametrize("expired", ["outer", "inner", "both"])
async def test_nested_timeouts_that_expire_at_a_taken_send_keep_each_expiry(
    flavour: str, anyio_backend_name: str, expired: str
) -> None:
    # Two asyncio.timeout() blocks around a send; one or both expire as a
    # receiver takes the item, and only the inner block ends before the
    # next await.  An expired outer block still ends with TimeoutError
    # (two requests were made during the wait, one withdrawn by the inner
    # block's exit); an expired inner block alone lets nothing out.
    plain_asyncio_only(anyio_backend_name)
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    tx, rx = channel(flavour, 0)
    loop = asyncio.get_running_loop()
    events: list[str] = []
    timeouts: dict[str, Any] = {}  # asyncio.Timeout, 3.11+

    async def send_in_timeouts() -> None:
        try:
            async with asyncio.timeout(None) as timeouts["outer"]:
                async with asyncio.timeout(None) as timeouts["inner"]:
                    await tx.send("x")
                events.append("inner exited")
                await asyncio.sleep(0)
                events.append("ran on in the outer block")
        except TimeoutError:
            events.append("outer timed out")
        await asyncio.sleep(0)
        events.append("ran on")

    task = loop.create_task(send_in_timeouts())
    await settle()
    for name in ("outer", "inner") if expired == "both" else (expired,):
        timeouts[name].reschedule(loop.time())
    assert rx.receive_nowait() == "x"
    await asyncio.wait([task])
    if expired == "inner":
        assert events == ["inner exited", "ran on in the outer block", "ran on"]
    else:
        assert events == ["inner exited", "outer timed out", "ran on"]
    assert task.cancelling() == 0


async def test_a_cancel_at_a_taken_send_is_kept_when_an_older_request_is_withdrawn(
    flavour: str, anyio_backend_name: str
) -> None:
    # A task catches a cancellation and, before it withdraws that request
    # with uncancel() (what asyncio asks of code that swallows one), sends;
    # the send is taken as a new task.cancel() comes (an asyncio.TaskGroup's
    # abort, say).  The count is back to 1 after the uncancel(): the new
    # request, which must still cancel the task at its next await.  (A rule
    # that compared with the count when the send parked, 1, lost it.)
    plain_asyncio_only(anyio_backend_name)
    if sys.version_info < (3, 11):
        pytest.skip("Task.uncancel() is 3.11+")
    tx, rx = channel(flavour, 0)
    loop = asyncio.get_running_loop()
    events: list[str] = []

    async def swallow_then_run_on() -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            await asyncio.sleep(1e6)
        except asyncio.CancelledError:
            await tx.send("bye")
            task.uncancel()
        events.append(f"handler done, cancelling={task.cancelling()}")
        await asyncio.sleep(0)
        events.append("ran on")  # pragma: no cover - the failure

    task = loop.create_task(swallow_then_run_on())
    await settle()
    task.cancel()
    await settle()
    assert rx.receive_nowait() == "bye"
    task.cancel()
    await asyncio.wait([task])
    assert events == ["handler done, cancelling=1"]
    assert task.cancelled()


async def test_a_rearmed_cancellation_is_raised_before_the_next_send_parks(
    flavour: str, anyio_backend_name: str
) -> None:
    # A send is taken as task.cancel() comes: it returns, and its task goes
    # straight into a second send.  The cancellation is due at the task's
    # next checkpoint, which that send takes first (the re-arm spends the
    # budget): it raises there and sends nothing.  It used to park and be
    # taken before the re-armed request was made again, and return too:
    # a loop of such sends never met the cancellation.
    plain_asyncio_only(anyio_backend_name)
    tx, rx = channel(flavour, 0)
    tx2, rx2 = channel(flavour, 0)
    loop = asyncio.get_running_loop()
    events: list[str] = []

    async def send_twice() -> None:
        await tx.send("x")
        events.append("sent x")
        await tx2.send("y")
        events.append("sent y")
        await asyncio.sleep(0)
        events.append("ran on")

    task = loop.create_task(send_twice())
    await settle()
    assert rx.receive_nowait() == "x"
    task.cancel()
    # Queued before the re-arm: would take the second send's item before
    # the request is made again, had that send parked.

    def take() -> None:
        try:
            events.append(f"took {rx2.receive_nowait()}")
        except anyio.WouldBlock:
            events.append("nothing to take")

    loop.call_soon(take)
    await asyncio.wait([task])
    assert events == ["sent x", "nothing to take"]
    assert task.cancelled()


async def test_a_task_that_ends_with_a_send_taken_as_it_is_cancelled_ends_normally(
    flavour: str, anyio_backend_name: str
) -> None:
    # The send was the task's last call: it did what it was asked, and the
    # task has no checkpoint left for the cancellation to take effect at.
    plain_asyncio_only(anyio_backend_name)
    tx, rx = channel(flavour, 0)
    task = asyncio.get_running_loop().create_task(tx.send("x"))
    await settle()
    assert rx.receive_nowait() == "x"
    task.cancel()
    await asyncio.wait([task])
    assert not task.cancelled()
    assert task.result() is None


async def test_a_send_taken_inside_wait_for_as_it_times_out_is_reported_sent(
    flavour: str, anyio_backend_name: str
) -> None:
    # asyncio.wait_for() whose timeout fires as a receiver takes the item:
    # wait_for() returns the send's result, and the caller runs on.  On
    # 3.10 and 3.11 wait_for() runs the send in a task of its own, which it
    # cancels when its timeout has woken it: the timeout first, then the
    # receive.  From 3.12 it runs the send inside asyncio.timeout(), which
    # cancels the caller's task: the receive first.
    plain_asyncio_only(anyio_backend_name)
    tx, rx = channel(flavour, 0)
    loop = asyncio.get_running_loop()
    events: list[str] = []

    async def send_with_wait_for() -> None:
        try:
            await asyncio.wait_for(tx.send("x"), timeout=0.5)
        except asyncio.TimeoutError:
            events.append("timed out")
        else:
            events.append("sent")
        await asyncio.sleep(0)
        events.append("ran on")

    task = loop.create_task(send_with_wait_for())
    await settle()
    # Block the loop past both: the two callbacks run in one step, in the
    # order of their deadlines.
    got: list[str] = []
    receive_at = 0.01 if sys.version_info >= (3, 12) else 0.55
    loop.call_at(loop.time() + receive_at, lambda: got.append(rx.receive_nowait()))
    loop.call_soon(time.sleep, 0.6)
    await asyncio.wait([task])
    assert got == ["x"]
    assert events == ["sent", "ran on"]


async def _in_a_scope_under_another_cancellation(
    other: str, wait: Callable[[], Awaitable[object]], checkpoint_inside: bool
) -> tuple[asyncio.Task[None], list[str], Callable[[str], None]]:
    # A task that awaits wait() inside an AnyIO scope (inside
    # asyncio.timeout() when other is the timeout), started and settled.
    # Returns the task, the events it records, and step(name): "scope"
    # cancels the scope, "other" expires the timeout or calls task.cancel().
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout and Task.cancelling() are 3.11+")
    events: list[str] = []
    timeouts: list[Any] = []  # asyncio.Timeout, 3.11+
    scopes: list[anyio.CancelScope] = []

    async def body() -> None:
        block: Any = (
            asyncio.timeout(None)
            if other == "asyncio_timeout"
            else contextlib.nullcontext()
        )
        try:
            async with block as timeout:
                timeouts.append(timeout)
                with anyio.CancelScope() as scope:
                    scopes.append(scope)
                    await wait()
                    events.append("returned")
                    if checkpoint_inside:
                        await asyncio.sleep(0)
                        events.append("ran on in the cancelled scope")
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                events.append("ran on after the other cancellation")
        except TimeoutError:
            events.append("timeout")
        task = asyncio.current_task()
        assert task is not None
        events.append(f"cancelling={task.cancelling()}")

    task = asyncio.get_running_loop().create_task(body())
    await settle()

    def step(name: str) -> None:
        if name == "scope":
            scopes[0].cancel()
        elif other == "asyncio_timeout":
            timeouts[0].reschedule(asyncio.get_running_loop().time())
        else:
            task.cancel()

    return task, events, step


async def _anyio_scope_leaves_a_foreign_cancellation(other: str) -> bool:
    # Whether the installed anyio's cancel scope, cancelled in the same step
    # as an asyncio.timeout() expires or a task.cancel() comes, leaves that
    # other request alone (newer releases count cancel requests; older ones,
    # such as the floor nox -s tests_floor installs, swallow it): the test
    # below's scenario on a plain sleep.  The timeout is rescheduled first,
    # so that it fires before the task runs.
    task, events, step = await _in_a_scope_under_another_cancellation(
        other, lambda: asyncio.sleep(1e6), False
    )
    for name in (
        ("other", "scope") if other == "asyncio_timeout" else ("scope", "other")
    ):
        step(name)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return "ran on after the other cancellation" not in events


@pytest.mark.parametrize("checkpoint_inside", [True, False])
@pytest.mark.parametrize(
    "order", list(itertools.permutations(("scope", "take", "other")))
)
@pytest.mark.parametrize("other", ["asyncio_timeout", "task_cancel"])
async def test_a_send_cancelled_by_an_anyio_scope_and_plain_asyncio_loses_neither(
    flavour: str,
    anyio_backend_name: str,
    other: str,
    order: tuple[str, ...],
    checkpoint_inside: bool,
) -> None:
    # A parked send inside an AnyIO scope (inside asyncio.timeout() for the
    # timeout): in one step the scope is cancelled, the item is taken and
    # the other cancellation comes (the timeout expires, or task.cancel()),
    # in every order.  The item goes at most once; the scope's cancellation
    # stops the code left in the scope, if any; and the other one is not
    # lost, whether or not the scope had a checkpoint left to catch its own:
    # the timeout ends its block with TimeoutError and the task's cancel
    # count back to zero, and task.cancel() ends the task.  (Taken and
    # cancelled at once, a send returns normally with the generic waiter and
    # delivers nothing with the native ones.  Python 3.10 has no cancel
    # count: AnyIO's own scope then takes a task.cancel() as its own.)
    plain_asyncio_only(anyio_backend_name)
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout and Task.cancelling() are 3.11+")
    if not await _anyio_scope_leaves_a_foreign_cancellation(other):
        pytest.skip("this anyio's scope takes the other cancellation as its own")
    tx, rx = channel(flavour, 0)
    task, events, step = await _in_a_scope_under_another_cancellation(
        other, lambda: tx.send("x"), checkpoint_inside
    )
    taken: list[str] = []
    for name in order:
        if name == "take":
            taken += drain(rx)
        else:
            step(name)
    if other == "task_cancel":
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        await task
    assert taken in ([], ["x"])
    tail = ["timeout", "cancelling=0"] if other == "asyncio_timeout" else []
    assert events == [*(["returned"] if taken else []), *tail]
    assert drain(rx) == []


@pytest.mark.parametrize("checkpoint_inside", [True, False])
async def test_a_send_taken_after_its_scope_was_cancelled_keeps_the_cancellation_inside(
    flavour: str, checkpoint_inside: bool
) -> None:
    # The scope is cancelled first and the item taken next, in one step.  The
    # native waiters see the cancellation at once, so the send delivers
    # nothing; the generic waiter sees it only when the task runs, so the
    # item is taken and the send returns normally.  Either way the
    # cancellation belongs to the scope: it must not reach the code after
    # the scope, whether or not the scope checkpoints after the send.
    tx, rx = channel(flavour, 0)
    scopes: list[anyio.CancelScope] = []
    events: list[object] = []

    async def sender() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await tx.send("x")
            events.append("returned")
            if checkpoint_inside:
                await anyio.lowlevel.checkpoint()
                events.append("not cancelled inside")
        events.append(("caught", scope.cancelled_caught))
        await anyio.lowlevel.checkpoint()
        events.append("ran on after the scope")

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        await settle()
        scopes[0].cancel()
        taken = drain(rx)
        await settle()
    delivered = taken == ["x"]
    assert taken in ([], ["x"])
    assert events == [
        *(["returned"] if delivered else []),
        ("caught", checkpoint_inside or not delivered),
        "ran on after the scope",
    ]


# ---------------------------------------------------------------------------
# Give-back bookkeeping (mutation-testing regressions)
# ---------------------------------------------------------------------------


async def test_a_later_receiver_granted_after_its_cancellation_gives_the_item_back(
    anyio_backend_name: str,
) -> None:
    # Pins give_back's index into in_flight: with the generic waiter a
    # receiver cancelled before its grant resumes (and gives back) before an
    # earlier granted receiver; its item goes back to the channel, in order.
    if not core.FORCE_GENERIC or anyio_backend_name != "asyncio":
        pytest.skip("only the generic waiter on asyncio grants a cancelled wait")
    tx, rx = mpmc.channel[str](0)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        second = Call(rx.clone().receive).start(tg)
        await settle()
        assert rx.statistics().tasks_waiting_receive == 2
        # One step: cancel the second, then grant both.
        second.cancel()
        tx.send_nowait("A")
        tx.send_nowait("B")
    assert first.result == "A"
    assert second.outcome == "cancelled"
    assert drain(rx) == ["B"]


async def test_items_keep_their_order_when_two_granted_receivers_are_cancelled(
    anyio_backend_name: str,
) -> None:
    # Pins restore putting a receiver back at the end of in_flight: R1 and
    # R2 are granted A and B and cancelled in one step; A passes R2 on to
    # R3, B goes back to the channel, and the order is kept.
    if anyio_backend_name != "asyncio":
        pytest.skip("only plain asyncio cancellation cancels a granted wait")
    tx, rx = mpmc.channel[str](0)
    async with anyio.create_task_group() as tg:
        calls = []
        for _ in range(3):
            calls.append(Call(rx.clone().receive, "asyncio_task_cancel").start(tg))
            await settle()
        assert rx.statistics().tasks_waiting_receive == 3
        tx.send_nowait("A")
        tx.send_nowait("B")
        calls[0].cancel()
        calls[1].cancel()
        for call in calls:
            await call.finished.wait()
    assert [call.outcome for call in calls[:2]] == ["cancelled", "cancelled"]
    assert [calls[2].result, *drain(rx)] == ["A", "B"]


async def test_a_cancelled_woken_receiver_loses_no_item_whichever_runs_first(
    flavour: str, anyio_backend_name: str
) -> None:
    # R1, R2 and R3 are parked; R1 is cancelled, then A and B are sent and
    # the sender closes, in one step.  Where the cancellation is seen only
    # when the task runs (the generic waiter), R1 is granted A and R2 B, and
    # on Trio R2 may run first, taking B while A stays for R1; R1 then
    # gives A back, and R3 must get it, not the end of the stream.  Whatever
    # ran first, each item is received once, and only the receiver beyond
    # them gets EndOfStream; in arrival order, except in that one case (R3
    # gets A after R2 got B: docs/channels.md).  Twenty rounds, so that Trio
    # runs both orders.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    for _ in range(20):
        tx, rx = channel(flavour, math.inf)
        with anyio.fail_after(10):  # a receiver left waiting fails, not hangs
            async with anyio.create_task_group() as tg:
                calls = await park_receives(tg, rx, 3)
                calls[0].cancel()
                tx.send_nowait("A")
                tx.send_nowait("B")
                tx.close()
        first = calls[0]
        assert first.outcome in ("cancelled", "returned")
        served = [call.result for call in calls if call.outcome == "returned"]
        assert sorted(served) == ["A", "B"]
        if not (core.FORCE_GENERIC and anyio_backend_name == "trio"):
            assert served == ["A", "B"]
        ended = [call for call in calls if call.outcome == "raised"]
        assert len(served) + len(ended) + (first.outcome == "cancelled") == 3
        assert all(isinstance(call.error, anyio.EndOfStream) for call in ended)


# A call parked on a single side (the oneshot receiver, the spmc sender,
# the mpsc receiver) is cancelled; before its task runs, another task parks
# there and is granted.
# The cancelled call's cleanup must leave that grant's in-flight flag alone,
# or a third task's call skips the BusyResourceError it is owed.  The window
# is the same on every backend; asyncio's order is fixed with plain tasks,
# Trio runs the tasks of a batch in an order of its own, so the Trio run is
# repeated until both orders have been seen often.


async def _behind_a_cancelled_waiter(
    anyio_backend_name: str,
    park: Callable[[], Awaitable[object]],
    grant: Callable[[], object],
    probe: Callable[[], object],
) -> list[Any]:
    """The log of: A parks with ``park`` and is cancelled; B parks with
    ``park``; C calls ``grant`` (B's grant); D calls ``probe``; then
    whatever B got.  On asyncio A's task runs after C, before D."""
    log: list[Any] = []

    def record(name: str, fn: Callable[[], object]) -> None:
        try:
            log.append((name, fn()))
        except Exception as exc:
            log.append((name, type(exc).__name__))

    async def b() -> None:
        try:
            log.append(("B", await park()))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            log.append(("B", type(exc).__name__))

    if anyio_backend_name == "asyncio":
        go_b, go_c, go_d = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def a() -> None:
            with contextlib.suppress(asyncio.CancelledError):
                await park()

        async def b_after() -> None:
            await go_b.wait()
            await b()

        async def c() -> None:
            await go_c.wait()
            record("C", grant)

        async def d() -> None:
            await go_d.wait()
            record("D", probe)

        task_a = asyncio.create_task(a())
        tasks = [task_a, *(asyncio.create_task(f()) for f in (b_after, c, d))]
        await asyncio.sleep(0)  # A parks
        go_b.set()
        go_c.set()
        task_a.cancel()
        go_d.set()
        # return_exceptions: with the generic waiter A's send may be taken
        # before A learns of its cancellation; the re-armed cancellation
        # then ends A's task cancelled (docs/semantics.md).
        await asyncio.gather(*tasks, return_exceptions=True)
        return log

    async with anyio.create_task_group() as tg:
        scope_a = anyio.CancelScope()

        async def a_in_scope() -> None:
            with scope_a:
                await park()

        async def d() -> None:
            record("D", probe)

        async def c_then_d() -> None:
            record("C", grant)
            tg.start_soon(d)

        tg.start_soon(a_in_scope)
        await anyio.wait_all_tasks_blocked()
        scope_a.cancel()  # A's task runs in the next batch, with C
        tg.start_soon(c_then_d)
        await b()
    return log


def _runs(anyio_backend_name: str) -> range:
    return range(1 if anyio_backend_name == "asyncio" else 40)


async def test_a_cancelled_oneshot_receive_leaves_the_next_receives_grant_alone(
    anyio_backend_name: str,
) -> None:
    for _ in _runs(anyio_backend_name):
        tx, rx = oneshot.channel[str]()
        log = await _behind_a_cancelled_waiter(
            anyio_backend_name, rx.receive, partial(tx.send, "X"), rx.receive_nowait
        )
        if ("D", "EndOfStream") in log:
            # The end is final: it comes after the item was taken.
            assert ("B", "X") in log[: log.index(("D", "EndOfStream"))], log
        if anyio_backend_name == "asyncio":
            assert ("D", "EndOfStream") not in log, log
        if not core.FORCE_GENERIC:
            # The native waiters see A's cancellation when it is delivered:
            # B parks beside A's waiter instead of raising
            # BusyResourceError, and gets the item.
            assert ("B", "X") in log, log
        with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream):
            assert rx.receive_nowait() == "X"
            assert ("B", "X") not in log, log  # delivered once


async def test_a_cancelled_spmc_send_leaves_the_next_sends_grant_alone(
    anyio_backend_name: str,
) -> None:
    for _ in _runs(anyio_backend_name):
        tx, rx = spmc.channel[str](1)
        tx.send_nowait("p")  # full: a send parks

        def take_two(rx: Any = rx) -> list[str]:
            return [rx.receive_nowait(), rx.receive_nowait()]

        log = await _behind_a_cancelled_waiter(
            anyio_backend_name,
            partial(tx.send, "b"),
            take_two,
            partial(tx.send_nowait, "d"),
        )
        if ("D", None) in log and ("B", None) in log:
            # A send accepted while B's taken send had not resumed: the
            # single sender was busy then.
            assert log.index(("B", None)) < log.index(("D", None)), log
        if not core.FORCE_GENERIC:
            # As in the oneshot test: B parks, and its send is taken.
            assert ("B", None) in log, log
        if anyio_backend_name == "asyncio" and ("B", None) in log:
            # B parked and was taken (the native waiters; the generic one
            # still holds A's waiter there, and B raised Busy): D ran
            # before B resumed.
            assert ("D", "BusyResourceError") in log, log


async def test_a_cancelled_mpsc_receive_leaves_the_next_receives_grant_alone(
    anyio_backend_name: str,
) -> None:
    for _ in _runs(anyio_backend_name):
        tx, rx = mpsc.channel[str](1)
        log = await _behind_a_cancelled_waiter(
            anyio_backend_name,
            rx.receive,
            partial(tx.send_nowait, "X"),
            rx.receive_nowait,
        )
        if not core.FORCE_GENERIC:
            # As in the oneshot test: B parks, and gets the item.
            assert ("B", "X") in log, log
        if anyio_backend_name == "asyncio" and ("B", "X") in log:
            # D ran while B's grant was in flight: the receiver was busy.
            assert ("D", "BusyResourceError") in log, log
        left = [rx.receive_nowait()] if rx.statistics().items_buffered else []
        # Delivered once, whoever got it.
        assert [entry for entry in log if entry[1] == "X"] + left in (
            [("B", "X")],
            [("D", "X")],
            ["X"],
        ), log
