"""mpsc, spmc and mpmc channels: buffering, order, closing, clones, the
single sides, receive_many, statistics, checkpoints, bad input.

Every behaviour runs on the three flavours where it applies (``flavour``),
on every backend, and with the generic waiter when the suite runs with
``ANYIO_PRIMS_WAITER=generic``.  Cancellation is in test_cancellation.py,
the model test in test_model.py.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import gc
import math
import pickle
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.stapled import StapledObjectStream

from anyio_prims import mpmc, mpsc, spmc
from anyio_prims._core import (
    BUDGET,
    BUDGET_SIZE,
    FORCE_GENERIC,
    NOT_OPENED,
    Slot,
    WaitQueue,
)
from anyio_prims.channels import ChannelStatistics, Receiver, Sender

from .._waiter_count import WAITER_STATS
from ._support import (
    CHANNELS,
    MANY_RECEIVERS,
    MANY_SENDERS,
    Call,
    drain,
    looks_between_call_and_park,
    make,
    park_receives,
    settle,
)

pytestmark = pytest.mark.anyio


def channel(flavour: str, capacity: float, **kwargs: Any) -> Any:
    return CHANNELS[flavour](capacity, **kwargs)


class Item:
    """A weakly referenceable payload."""

    def __init__(self, n: int) -> None:
        self.n = n


# ---------------------------------------------------------------------------
# Buffering and order
# ---------------------------------------------------------------------------


async def test_items_are_received_in_send_order(flavour: str) -> None:
    tx, rx = channel(flavour, 5)
    for i in range(5):
        await tx.send(i)
    assert [await rx.receive() for _ in range(5)] == [0, 1, 2, 3, 4]


async def test_send_blocks_while_the_buffer_is_full(flavour: str) -> None:
    tx, rx = channel(flavour, 2)
    await tx.send(0)
    await tx.send(1)
    async with anyio.create_task_group() as tg:
        third = Call(lambda: tx.send(2)).start(tg)
        await settle()
        assert third.outcome is None
        assert await rx.receive() == 0
        await settle()
        assert third.outcome == "returned"
    assert [rx.receive_nowait(), rx.receive_nowait()] == [1, 2]


async def test_rendezvous_send_completes_only_when_a_receiver_takes_it(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 0)
    with pytest.raises(anyio.WouldBlock):
        tx.send_nowait("x")
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send("x")).start(tg)
        await settle()
        assert sender.outcome is None
        assert rx.statistics().items_buffered == 0
        assert rx.receive_nowait() == "x"
        await settle()
        assert sender.outcome == "returned"


async def test_rendezvous_send_hands_the_item_to_a_blocked_receiver(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")
        await settle()
    assert receiver.result == "x"


async def test_unbounded_channel_never_blocks_a_send(flavour: str) -> None:
    tx, rx = channel(flavour, math.inf)
    for i in range(1000):
        tx.send_nowait(i)
    await tx.send(1000)
    assert rx.statistics().items_buffered == 1001
    assert rx.statistics().capacity == math.inf
    assert [rx.receive_nowait() for _ in range(1001)] == list(range(1001))


async def test_send_nowait_on_a_full_channel_raises_would_block(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    tx.send_nowait(1)
    with pytest.raises(anyio.WouldBlock):
        tx.send_nowait(2)
    assert rx.receive_nowait() == 1
    with pytest.raises(anyio.WouldBlock):
        rx.receive_nowait()


async def test_a_send_goes_straight_to_a_blocked_receiver(flavour: str) -> None:
    tx, rx = channel(flavour, 3)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        await tx.send("x")
        assert rx.statistics().items_buffered == 0
        await settle()
    assert receiver.result == "x"


async def test_receive_admits_a_blocked_sender_into_the_freed_room(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 1)
    await tx.send(1)
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send(2)).start(tg)
        await settle()
        assert rx.receive_nowait() == 1
        assert rx.statistics().items_buffered == 1
        await settle()
        assert sender.outcome == "returned"
    assert rx.receive_nowait() == 2


@pytest.mark.parametrize("capacity", [0, 1])
async def test_blocked_receivers_are_served_in_arrival_order(
    flavour: str, capacity: int
) -> None:
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver: nothing to order")
    tx, rx = channel(flavour, capacity)
    async with anyio.create_task_group() as tg:
        receivers = []
        for _ in range(3):
            receivers.append(Call(rx.clone().receive).start(tg))
            await settle()
        for i in range(3):
            await tx.send(i)
        await settle()
    assert [r.result for r in receivers] == [0, 1, 2]


@pytest.mark.parametrize("then", ["receive", "receive_nowait", "receive_many"])
@pytest.mark.parametrize("capacity", [0, 2, math.inf])
async def test_receivers_woken_together_each_get_their_items_in_send_order(
    flavour: str, capacity: float, then: str
) -> None:
    # Two parked receivers are granted 0 and 1 in one step.  Trio may run
    # the second first; receiving again before the first has run, it must
    # get a later item than its 1, not the 0 granted to the first.  Twenty
    # rounds, so that Trio runs the pair in both orders.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    if capacity == 0 and then == "receive_nowait":
        pytest.skip("at capacity 0 the last item waits for its sender to run")
    for _ in range(20):
        tx, rx = channel(flavour, capacity)
        got: list[list[int]] = [[], []]

        async def consume(mine: list[int], endpoint: Any) -> None:
            if then == "receive_many":
                while len(mine) < 2:
                    mine.extend(await endpoint.receive_many(2 - len(mine)))
            else:
                mine.append(await endpoint.receive())
                if then == "receive_nowait":
                    mine.append(endpoint.receive_nowait())
                else:
                    mine.append(await endpoint.receive())

        async def produce(tx: Any) -> None:
            for i in range(4):
                await tx.send(i)

        async with anyio.create_task_group() as tg:
            for parked, mine in enumerate(got, 1):
                tg.start_soon(consume, mine, rx.clone())
                while rx.statistics().tasks_waiting_receive < parked:
                    await anyio.lowlevel.checkpoint()
            if capacity:
                for i in range(4):
                    tx.send_nowait(i)  # two grants and two free items
            else:
                tg.start_soon(produce, tx)
        assert all(mine == sorted(mine) for mine in got), got
        assert sorted(got[0] + got[1]) == [0, 1, 2, 3]


@pytest.mark.parametrize("capacity", [0, math.inf])
async def test_a_receiver_beyond_the_last_items_gets_end_of_stream_after_them(
    flavour: str, capacity: float
) -> None:
    # Three receivers parked; A and B are granted to the first two and the
    # sender closes in one step.  The third gets EndOfStream, but only once
    # both items are delivered, whichever of the two Trio runs first.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    for _ in range(20):
        tx, rx = channel(flavour, capacity)
        with anyio.fail_after(10):  # a receiver left waiting fails, not hangs
            async with anyio.create_task_group() as tg:
                calls = await park_receives(tg, rx, 3)
                if capacity:
                    tx.send_nowait("A")
                    tx.send_nowait("B")
                    tx.close()
                else:

                    async def produce(tx: Any) -> None:
                        with tx:
                            await tx.send("A")
                            await tx.send("B")

                    tg.start_soon(produce, tx)
        assert [call.result for call in calls[:2]] == ["A", "B"]
        assert calls[2].outcome == "raised"
        assert isinstance(calls[2].error, anyio.EndOfStream)


@pytest.mark.parametrize("capacity", [0, 1])
async def test_blocked_senders_are_served_in_arrival_order(
    flavour: str, capacity: int
) -> None:
    if flavour not in MANY_SENDERS:
        pytest.skip("one sender: nothing to order")
    tx, rx = channel(flavour, capacity)
    for i in range(capacity):
        await tx.send(-1 - i)
    async with anyio.create_task_group() as tg:
        for i in range(3):
            Call(partial(tx.clone().send, i)).start(tg)
            await settle()
        got = [await rx.receive() for _ in range(3 + capacity)]
    assert got == [-1 - i for i in range(capacity)] + [0, 1, 2]


# ---------------------------------------------------------------------------
# Closing
# ---------------------------------------------------------------------------


async def test_receivers_drain_the_buffer_then_get_end_of_stream(flavour: str) -> None:
    tx, rx = channel(flavour, 3)
    await tx.send(1)
    await tx.send(2)
    tx.close()
    assert await rx.receive() == 1
    assert rx.receive_nowait() == 2
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()


async def test_async_for_ends_when_the_last_sender_closes(flavour: str) -> None:
    tx, rx = channel(flavour, 0)
    got = []

    async def produce() -> None:
        async with tx:
            for i in range(5):
                await tx.send(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async for item in rx:
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


async def test_blocked_receiver_gets_end_of_stream_when_the_last_sender_closes(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 1)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        tx.close()
        await settle()
    assert isinstance(receiver.error, anyio.EndOfStream)


async def test_the_stream_stays_open_while_a_sender_clone_is_open(
    flavour: str,
) -> None:
    if flavour not in MANY_SENDERS:
        pytest.skip("the sender cannot be cloned")
    tx, rx = channel(flavour, 1)
    other = tx.clone()
    tx.close()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        assert receiver.outcome is None
        await other.send("late")
        await settle()
    assert receiver.result == "late"
    other.close()
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()


async def test_send_after_the_last_receiver_closed_raises_broken_resource_error(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 5)
    rx.close()
    with pytest.raises(anyio.BrokenResourceError):
        await tx.send(1)
    with pytest.raises(anyio.BrokenResourceError):
        tx.send_nowait(1)


async def test_blocked_sender_gets_broken_resource_error_when_receivers_close(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send(1)).start(tg)
        await settle()
        rx.close()
        await settle()
    assert isinstance(sender.error, anyio.BrokenResourceError)


async def test_closing_the_last_receiver_releases_buffered_items(flavour: str) -> None:
    tx, rx = channel(flavour, 3)
    items = [Item(i) for i in range(3)]
    refs = [weakref.ref(item) for item in items]
    for item in items:
        await tx.send(item)
    del items, item
    rx.close()
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]
    assert tx.statistics().items_buffered == 0


async def test_the_last_receiver_closing_keeps_the_item_granted_to_a_blocked_receive(
    flavour: str,
) -> None:
    # A receive granted an item before the last receiver closed returns it;
    # the items nobody can receive any more are released at once.
    tx, rx = channel(flavour, 3)
    items = [Item(i) for i in range(3)]
    refs = [weakref.ref(item) for item in items]
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        for item in items:
            tx.send_nowait(item)  # the first to the blocked receive
        del items, item
        rx.close()  # before that receive resumes
        assert tx.statistics().items_buffered == 0
        gc.collect()
        assert [ref() is None for ref in refs] == [False, True, True]
        await first.finished.wait()
    assert first.result is refs[0]()
    with pytest.raises(anyio.BrokenResourceError):
        tx.send_nowait(Item(3))


@pytest.mark.parametrize("capacity", [1, math.inf])
async def test_a_receive_after_a_woken_receive_resumed_takes_the_item_sent_since(
    flavour: str, capacity: float
) -> None:
    # The receive gate follows the reservations back down when a woken
    # receive resumes: an item sent after that is free, and a receive takes
    # it at once instead of waiting for another send.
    tx, rx = channel(flavour, capacity)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        await tx.send("A")  # to the blocked receive
        await first.finished.wait()
        await tx.send("B")  # into the buffer: nobody is blocked
        before = WAITER_STATS.created
        with anyio.fail_after(5):
            assert await rx.receive() == "B"
        assert WAITER_STATS.created == before  # it did not wait
    assert first.result == "A"


@pytest.mark.parametrize("capacity", [0, 2])
async def test_a_receive_while_every_item_is_owed_to_woken_receivers_waits(
    flavour: str, capacity: int
) -> None:
    # R1 is granted A and R2 B, and neither has run: no item is free, so
    # another receiver takes none of theirs.  It waits, as if they had
    # run, and receive_nowait() raises WouldBlock.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = channel(flavour, capacity)
    third = rx.clone()
    async with anyio.create_task_group() as tg:
        first = Call(rx.clone().receive).start(tg)
        await settle()
        second = Call(rx.clone().receive).start(tg)
        await settle()
        tx.send_nowait("A")
        tx.send_nowait("B")
        with pytest.raises(anyio.WouldBlock):
            third.receive_nowait()
        late = Call(third.receive).start(tg)
        await settle()
        assert late.outcome is None
        tx.send_nowait("C")
    assert (first.result, second.result, late.result) == ("A", "B", "C")


async def test_closing_one_receiver_clone_keeps_buffered_items(flavour: str) -> None:
    if flavour not in MANY_RECEIVERS:
        pytest.skip("the receiver cannot be cloned")
    tx, rx = channel(flavour, 3)
    other = rx.clone()
    await tx.send(1)
    rx.close()
    assert other.receive_nowait() == 1


async def test_using_a_closed_sender_raises_closed_resource_error(flavour: str) -> None:
    tx, _rx = channel(flavour, 5)
    tx.close()
    with pytest.raises(anyio.ClosedResourceError):
        await tx.send(1)
    with pytest.raises(anyio.ClosedResourceError):
        tx.send_nowait(1)
    if flavour in MANY_SENDERS:
        with pytest.raises(anyio.ClosedResourceError):
            tx.clone()
    assert tx.closed


async def test_using_a_closed_receiver_raises_closed_resource_error(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 5)
    await tx.send(1)
    rx.close()
    with pytest.raises(anyio.ClosedResourceError):
        await rx.receive()
    with pytest.raises(anyio.ClosedResourceError):
        rx.receive_nowait()
    with pytest.raises(anyio.ClosedResourceError):
        await rx.receive_many(3)
    if flavour in MANY_RECEIVERS:
        with pytest.raises(anyio.ClosedResourceError):
            rx.clone()
    assert rx.closed


async def test_closing_a_sender_fails_its_blocked_send_with_closed_resource_error(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send("lost")).start(tg)
        await settle()
        tx.close()
        await settle()
    assert isinstance(sender.error, anyio.ClosedResourceError)
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()


async def test_closing_a_receiver_fails_its_blocked_receive_with_closed_error(
    flavour: str,
) -> None:
    _tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        rx.close()
        await settle()
    assert isinstance(receiver.error, anyio.ClosedResourceError)


@pytest.mark.parametrize("side", ["receive", "send"])
async def test_a_call_woken_by_the_other_side_closing_then_closed_raises_closed_error(
    flavour: str, side: str
) -> None:
    # Teardown that closes both ends back to back: the other side's close
    # wakes the blocked call (EndOfStream for a receive, BrokenResourceError
    # for a send), then its own endpoint closes before it runs.  A call on a
    # closed endpoint: ClosedResourceError, as AnyIO's memory streams.
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        call = Call(rx.receive if side == "receive" else lambda: tx.send("x"))
        call.start(tg)
        await settle()
        for endpoint in (tx, rx) if side == "receive" else (rx, tx):
            endpoint.close()
        await settle()
    assert isinstance(call.error, anyio.ClosedResourceError)


async def test_closing_a_sender_clone_leaves_other_clones_blocked_sends(
    flavour: str,
) -> None:
    if flavour not in MANY_SENDERS:
        pytest.skip("the sender cannot be cloned")
    tx, rx = channel(flavour, 0)
    other = tx.clone()
    async with anyio.create_task_group() as tg:
        mine = Call(lambda: tx.send(1)).start(tg)
        await settle()
        theirs = Call(lambda: other.send(2)).start(tg)
        await settle()
        tx.close()
        await settle()
        assert isinstance(mine.error, anyio.ClosedResourceError)
        assert theirs.outcome is None
        assert rx.receive_nowait() == 2
        await settle()
    assert theirs.outcome == "returned"


async def test_closing_a_receiver_clone_leaves_other_clones_blocked_receives(
    flavour: str,
) -> None:
    if flavour not in MANY_RECEIVERS:
        pytest.skip("the receiver cannot be cloned")
    tx, rx = channel(flavour, 0)
    other = rx.clone()
    async with anyio.create_task_group() as tg:
        mine = Call(rx.receive).start(tg)
        await settle()
        theirs = Call(other.receive).start(tg)
        await settle()
        rx.close()
        await settle()
        assert isinstance(mine.error, anyio.ClosedResourceError)
        assert theirs.outcome is None
        tx.send_nowait("x")
        await settle()
    assert theirs.result == "x"


@pytest.mark.parametrize("attempt", [copy.copy, copy.deepcopy, pickle.dumps])
def test_an_endpoint_cannot_be_copied_or_pickled(
    flavour: str, attempt: Callable[[Any], object]
) -> None:
    # A copy would be a handle the channel does not count (closing it and
    # the original would count one sender too many out).
    tx, rx = channel(flavour, 1)
    for endpoint in (tx, rx):
        with pytest.raises(TypeError, match="clone"):
            attempt(endpoint)
    assert tx.statistics().open_senders == 1


async def test_close_is_idempotent(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    tx.close()
    tx.close()
    rx.close()
    rx.close()
    stats = tx.statistics()
    assert (stats.open_senders, stats.open_receivers) == (0, 0)


async def test_async_with_closes_the_endpoint(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    async with tx as entered_tx, rx as entered_rx:
        assert entered_tx is tx
        assert entered_rx is rx
    assert tx.closed
    assert rx.closed


async def test_sync_with_closes_the_endpoint(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    with tx as entered_tx, rx as entered_rx:
        assert entered_tx is tx
        assert entered_rx is rx
    assert tx.closed
    assert rx.closed


async def test_aclose_closes_the_endpoint(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    await tx.aclose()
    await rx.aclose()
    assert tx.closed
    assert rx.closed


# ---------------------------------------------------------------------------
# Clones and the single sides
# ---------------------------------------------------------------------------


def test_clone_exists_only_on_the_sides_that_may_be_many() -> None:
    assert hasattr(mpsc.Sender, "clone")
    assert not hasattr(mpsc.Receiver, "clone")
    assert not hasattr(spmc.Sender, "clone")
    assert hasattr(spmc.Receiver, "clone")
    assert hasattr(mpmc.Sender, "clone")
    assert hasattr(mpmc.Receiver, "clone")


async def test_clones_count_as_open_endpoints(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    if flavour in MANY_SENDERS:
        clone = tx.clone()
        assert type(clone) is type(tx)
        assert tx.statistics().open_senders == 2
        clone.close()
    if flavour in MANY_RECEIVERS:
        clone = rx.clone()
        assert type(clone) is type(rx)
        assert rx.statistics().open_receivers == 2
        clone.close()
    stats = tx.statistics()
    assert (stats.open_senders, stats.open_receivers) == (1, 1)


async def test_clones_share_the_items(flavour: str) -> None:
    tx, rx = channel(flavour, 4)
    senders = [tx, tx.clone()] if flavour in MANY_SENDERS else [tx]
    receivers = [rx, rx.clone()] if flavour in MANY_RECEIVERS else [rx]
    for i in range(4):
        await senders[i % len(senders)].send(i)
    got = [await receivers[i % len(receivers)].receive() for i in range(4)]
    assert got == [0, 1, 2, 3]


async def test_second_task_receiving_on_an_mpsc_receiver_raises_busy() -> None:
    tx, rx = mpsc.channel[Any](0)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        with pytest.raises(anyio.BusyResourceError):
            await rx.receive()
        with pytest.raises(anyio.BusyResourceError):
            rx.receive_nowait()
        await tx.send("x")
        await settle()
    assert first.result == "x"


async def test_mpsc_receiver_is_busy_until_a_granted_receive_has_resumed() -> None:
    tx, rx = mpsc.channel[Any](1)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")  # granted; the task has not run yet
        tx.send_nowait("y")
        with pytest.raises(anyio.BusyResourceError):
            rx.receive_nowait()
        await settle()
    assert first.result == "x"
    assert rx.receive_nowait() == "y"


async def test_second_task_sending_on_an_spmc_sender_raises_busy() -> None:
    tx, rx = spmc.channel[Any](0)
    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("x")).start(tg)
        await settle()
        with pytest.raises(anyio.BusyResourceError):
            await tx.send("y")
        with pytest.raises(anyio.BusyResourceError):
            tx.send_nowait("y")
        assert await rx.receive() == "x"
        await settle()
    assert first.outcome == "returned"
    with pytest.raises(anyio.WouldBlock):
        rx.receive_nowait()


async def test_spmc_sender_is_busy_until_a_taken_send_has_resumed() -> None:
    tx, rx = spmc.channel[Any](1)
    tx.send_nowait("x")
    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("y")).start(tg)
        await settle()
        assert rx.receive_nowait() == "x"  # "y" taken; the task has not run
        with pytest.raises(anyio.BusyResourceError):
            tx.send_nowait("z")
        await settle()
    assert first.outcome == "returned"
    assert rx.receive_nowait() == "y"
    tx.send_nowait("z")
    assert rx.receive_nowait() == "z"


async def test_spmc_sender_is_busy_until_a_send_taken_by_receive_many_has_resumed() -> (
    None
):
    tx, rx = spmc.channel[Any](1)
    tx.send_nowait("x")
    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("y")).start(tg)
        await settle()
        BUDGET.left = BUDGET_SIZE  # no checkpoint due: the call does not yield
        assert await rx.receive_many(5) == ["x", "y"]  # the task has not run
        with pytest.raises(anyio.BusyResourceError):
            tx.send_nowait("z")
        await settle()
    assert first.outcome == "returned"
    tx.send_nowait("z")
    assert rx.receive_nowait() == "z"


async def test_an_awaited_spmc_send_is_busy_while_a_taken_send_has_not_resumed(
    anyio_backend_name: str,
) -> None:
    # The awaited send's handoff to a parked receiver (written out in
    # Sender.send) must refuse a second task while the single sender's taken
    # send has not resumed, as send_nowait does.  The second task is woken
    # before the first is granted: asyncio runs it first; Trio runs the two
    # in an order of its own, and if the first has resumed by then, the
    # second send is not busy and goes through.
    tx, rx = spmc.channel[str](1)
    tx.send_nowait("a")
    go = anyio.Event()
    seen: dict[str, bool] = {}

    async def second_send() -> None:
        await go.wait()
        seen["first_resumed"] = first.outcome is not None
        try:
            await tx.send("c")
        except anyio.BusyResourceError:
            seen["busy"] = True
            await first.finished.wait()
            await tx.send("c")
        else:
            seen["busy"] = False

    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("b")).start(tg)  # parks: the buffer is full
        tg.start_soon(second_send)
        await settle()
        go.set()  # the second task is now due to run before the first
        assert rx.receive_nowait() == "a"  # "b" is taken: the first is granted
        assert rx.receive_nowait() == "b"
        assert await rx.receive() == "c"  # parked while the second sends
    assert first.outcome == "returned"
    assert seen["busy"] is not seen["first_resumed"]
    if anyio_backend_name == "asyncio":
        assert seen["busy"]


@pytest.mark.parametrize("capacity", [0, 1])
async def test_a_closed_sender_clone_hands_nothing_to_a_parked_receiver(
    flavour: str, capacity: int
) -> None:
    # The awaited send's handoff to a parked receiver (written out in
    # Sender.send) must check the endpoint is open: the receiver stays
    # parked, and gets the next item an open clone sends.
    if flavour not in MANY_SENDERS:
        pytest.skip("the sender cannot be cloned")
    tx, rx = channel(flavour, capacity)
    other = tx.clone()
    async with anyio.create_task_group() as tg:
        receive = Call(rx.receive).start(tg)
        await settle()
        tx.close()
        with pytest.raises(anyio.ClosedResourceError):
            await tx.send("from the closed clone")
        assert rx.statistics().tasks_waiting_receive == 1
        await other.send("from the open clone")
    assert receive.result == "from the open clone"


async def test_the_single_side_is_free_again_after_its_call_returns() -> None:
    tx, rx = mpsc.channel[Any](0)
    for i in range(3):
        async with anyio.create_task_group() as tg:
            receiver = Call(rx.receive).start(tg)
            await settle()
            await tx.send(i)
        assert receiver.result == i


# ---------------------------------------------------------------------------
# receive_many
# ---------------------------------------------------------------------------


async def test_receive_many_returns_up_to_max_items_without_waiting(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 10)
    for i in range(5):
        await tx.send(i)
    assert await rx.receive_many(3) == [0, 1, 2]
    assert await rx.receive_many(10) == [3, 4]


async def test_receive_many_waits_for_the_first_item(flavour: str) -> None:
    tx, rx = channel(flavour, 10)
    async with anyio.create_task_group() as tg:
        receiver = Call(lambda: rx.receive_many(5)).start(tg)
        await settle()
        assert receiver.outcome is None
        await tx.send(1)
        await settle()
    assert receiver.result == [1]


async def test_receive_many_takes_items_of_blocked_senders_in_order(
    flavour: str,
) -> None:
    if flavour not in MANY_SENDERS:
        pytest.skip("one blocked sender at most")
    tx, rx = channel(flavour, 2)
    await tx.send(0)
    await tx.send(1)
    async with anyio.create_task_group() as tg:
        senders = []
        for i in (2, 3, 4, 5):
            senders.append(Call(partial(tx.clone().send, i)).start(tg))
            await settle()
        assert await rx.receive_many(4) == [0, 1, 2, 3]
        await settle()
        assert [s.outcome for s in senders] == ["returned"] * 4
    # The freed room went to the blocked senders, in order.
    assert rx.statistics().items_buffered == 2
    assert await rx.receive_many(5) == [4, 5]


async def test_receive_many_raises_end_of_stream_when_nothing_is_left(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 2)
    await tx.send(1)
    tx.close()
    assert await rx.receive_many(5) == [1]
    with pytest.raises(anyio.EndOfStream):
        await rx.receive_many(5)


async def test_receive_many_closed_after_its_grant_returns_the_granted_item_alone(
    flavour: str,
) -> None:
    # The endpoint is closed after a sender granted the parked call an item
    # and before the task resumed: the call returns that item, as receive()
    # does, and the items sent after it stay for the open clone.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("closing the only receiver releases what is buffered")
    tx, rx = channel(flavour, math.inf)
    other = rx.clone()
    async with anyio.create_task_group() as tg:
        receiver = Call(lambda: rx.receive_many(10)).start(tg)
        await settle()
        tx.send_nowait("granted")
        tx.send_nowait("b")
        tx.send_nowait("c")
        rx.close()
    assert receiver.result == ["granted"]
    assert other.statistics().items_buffered == 2
    assert await other.receive_many(10) == ["b", "c"]


async def test_receive_many_woken_with_a_receive_delivers_each_item_once_in_order(
    flavour: str,
) -> None:
    # A receive_many parked ahead of a receive; four items sent in one step
    # wake both.  Whichever task runs first (asyncio runs them in wake-up
    # order, Trio in any order: hence the rounds), each item is delivered
    # once, the receive_many gets the oldest item first and its items in
    # the order sent, and the items it did not take stay buffered, in
    # order.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = channel(flavour, math.inf)
    other = rx.clone()
    for round_ in range(20):
        sent = [(round_, i) for i in range(4)]
        async with anyio.create_task_group() as tg:
            many = Call(lambda: rx.receive_many(2)).start(tg)
            await settle()
            one = Call(other.receive).start(tg)
            await settle()
            for item in sent:
                tx.send_nowait(item)
        left = drain(rx)
        assert many.result[0] == sent[0]
        assert many.result == sorted(many.result)
        assert len(many.result) == 2
        assert left == sorted(left)
        assert sorted([*many.result, one.result, *left]) == sent


# ---------------------------------------------------------------------------
# Statistics, interfaces, typing
# ---------------------------------------------------------------------------


async def test_statistics_reports_buffer_endpoints_and_waiters(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    await tx.send(1)
    async with anyio.create_task_group() as tg:
        Call(lambda: tx.send(2)).start(tg)
        await settle()
        assert tx.statistics() == ChannelStatistics(
            items_buffered=1,
            capacity=1,
            open_senders=1,
            open_receivers=1,
            tasks_waiting_send=1,
            tasks_waiting_receive=0,
        )
        assert await rx.receive_many(2) == [1, 2]
        receiver = Call(rx.receive).start(tg)
        await settle()
        assert rx.statistics().tasks_waiting_receive == 1
        assert rx.statistics().tasks_waiting_send == 0
        receiver.cancel()


async def test_statistics_is_a_frozen_snapshot(flavour: str) -> None:
    tx, _rx = channel(flavour, 2)
    stats = tx.statistics()
    await tx.send(1)
    assert stats.items_buffered == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.items_buffered = 3


async def test_endpoints_are_anyio_object_streams(flavour: str) -> None:
    tx, rx = channel(flavour, 1)
    assert isinstance(tx, ObjectSendStream)
    assert isinstance(rx, ObjectReceiveStream)
    assert isinstance(tx, Sender)
    assert isinstance(rx, Receiver)
    stapled = StapledObjectStream(tx, rx)
    await stapled.send("through anyio's helper")
    assert await stapled.receive() == "through anyio's helper"
    await stapled.send_eof()
    with pytest.raises(anyio.EndOfStream):
        await stapled.receive()


def test_channel_accepts_a_type_parameter() -> None:
    tx, rx = mpsc.channel[int](1)
    assert isinstance(tx, mpsc.Sender)
    assert isinstance(rx, mpsc.Receiver)
    stx, srx = spmc.channel[str](capacity=0, strict=True)
    assert isinstance(stx, spmc.Sender)
    assert isinstance(srx, spmc.Receiver)
    mtx, mrx = mpmc.channel[bytes](math.inf)
    assert isinstance(mtx, mpmc.Sender)
    assert isinstance(mrx, mpmc.Receiver)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "argument"),
    [
        ((-1,), {}, ValueError, "capacity"),
        ((1.5,), {}, ValueError, "capacity"),
        (("3",), {}, TypeError, "capacity"),
        ((1,), {"strict": 1}, TypeError, "strict"),
    ],
)
def test_the_typed_form_rejects_what_the_untyped_form_rejects(
    flavour: str, args: Any, kwargs: Any, error: type[Exception], argument: str
) -> None:
    with pytest.raises(error, match=argument) as untyped:
        CHANNELS[flavour](*args, **kwargs)
    with pytest.raises(error, match=f"^{untyped.value}$"):
        CHANNELS[flavour][int](*args, **kwargs)


async def test_the_typed_form_passes_strict_through(flavour: str) -> None:
    tx, _rx = CHANNELS[flavour][int](5, strict=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tx.send(1)  # a strict send checkpoints though it would not block
    assert scope.cancelled_caught
    assert tx.statistics() == ChannelStatistics(0, 5, 1, 1, 0, 0)


@pytest.mark.parametrize("params", [(int, str), ()])
def test_a_subscript_with_other_than_one_item_type_raises_type_error(
    flavour: str, params: tuple[type, ...]
) -> None:
    factory = CHANNELS[flavour]
    with pytest.raises(TypeError, match="one item type"):
        factory[params]
    assert factory[(int,)] is factory[int]  # a 1-tuple is one item type


def test_repr_names_the_endpoint_and_its_state() -> None:
    tx, rx = mpmc.channel[int](2)
    assert "mpmc.Sender open buffered=0 capacity=2" in repr(tx)
    rx.close()
    assert "mpmc.Receiver closed" in repr(rx)


# ---------------------------------------------------------------------------
# Checkpoints and fast paths
# ---------------------------------------------------------------------------


async def test_sends_and_receives_that_do_not_block_create_no_waiter(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 4)
    before = WAITER_STATS.created
    for _ in range(3):
        for i in range(4):
            await tx.send(i)
        for _ in range(4):
            await rx.receive()
        tx.send_nowait(1)
        rx.receive_nowait()
    assert WAITER_STATS.created == before


async def test_a_channel_makes_each_wait_structure_when_a_task_first_parks(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 1)
    state = tx._state
    await tx.send(1)
    await rx.receive()
    tx.close()
    rx.close()
    assert state.send_waiters is NOT_OPENED
    assert state.recv_waiters is NOT_OPENED

    tx, rx = channel(flavour, 1)
    state = tx._state
    async with anyio.create_task_group() as tg:
        receive = Call(rx.receive)
        receive.start(tg)
        await settle()
        assert state.send_waiters is NOT_OPENED
        receivers_kind = WaitQueue if flavour in MANY_RECEIVERS else Slot
        assert type(state.recv_waiters) is receivers_kind
        assert rx.statistics().tasks_waiting_receive == 1
        await tx.send(1)
        await settle()
        assert receive.result == 1
        await tx.send(2)
        Call(partial(tx.send, 3)).start(tg)
        await settle()
        senders_kind = WaitQueue if flavour in MANY_SENDERS else Slot
        assert type(state.send_waiters) is senders_kind
        assert tx.statistics().tasks_waiting_send == 1
        assert await rx.receive() == 2
        assert await rx.receive() == 3


async def test_a_send_to_a_blocked_receiver_creates_no_waiter_for_the_sender(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 0)
    async with anyio.create_task_group() as tg:
        Call(rx.receive).start(tg)
        await settle()
        before = WAITER_STATS.created
        await tx.send(1)
        assert WAITER_STATS.created == before


async def test_strict_channel_checkpoints_before_a_send_that_would_not_block(
    flavour: str,
) -> None:
    tx, _rx = channel(flavour, 5, strict=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tx.send(1)
    assert scope.cancelled_caught
    assert tx.statistics().items_buffered == 0


async def test_strict_channel_checkpoints_before_a_receive_that_would_not_block(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 5, strict=True)
    await tx.send(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rx.receive()
    assert scope.cancelled_caught
    assert rx.receive_nowait() == 1


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("side", ["send", "receive"])
async def test_a_call_that_must_wait_parks_without_yielding_first(
    flavour: str, side: str, strict: bool
) -> None:
    # Parking is the checkpoint: a call that is going to block does not also
    # yield before it parks, in either mode (the park refills the budget).
    tx, rx = channel(flavour, 0, strict=strict)
    assert await looks_between_call_and_park(tx, rx, side) == 0


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("side", ["send", "receive"])
async def test_calls_that_must_wait_beside_a_cancelled_parked_peer_queue_in_call_order(
    flavour: str, side: str, strict: bool
) -> None:
    # The one peer parked on the other side is cancelled and has not run
    # yet (on asyncio its wait is cancelled but still queued; a grant skips
    # it).  Two calls that must wait, the first strict (or budgeted with
    # budget left: a due one checkpoints first, _core/_budget.py), queue in
    # the order they were made: the first does not yield and let the
    # second queue ahead of it.
    if flavour not in (MANY_SENDERS if side == "send" else MANY_RECEIVERS):
        pytest.skip("one sender" if side == "send" else "one receiver")
    if FORCE_GENERIC:
        # It sees the peer's cancellation only when the peer runs: to it the
        # first call can proceed, so it checkpoints first, and the second,
        # during that checkpoint, takes the peer.
        pytest.skip("the generic waiter counts the cancelled peer as parked")
    tx, rx = channel(flavour, 0, strict=strict)
    peer_scope = anyio.CancelScope()
    second_may_call = anyio.Event()
    got: dict[str, Any] = {}

    async def peer() -> None:
        with peer_scope:
            if side == "send":
                await rx.receive()
            else:
                await tx.send("never")

    async def call(name: str, endpoint: Any) -> None:
        if side == "send":
            await endpoint.send(name)
        else:
            got[name] = await endpoint.receive()

    async def first() -> None:
        peer_scope.cancel()
        second_may_call.set()
        BUDGET.left = BUDGET_SIZE  # not due, for the budgeted mode
        await call("first", tx if side == "send" else rx)

    async def second() -> None:
        await second_may_call.wait()
        await call("second", tx.clone() if side == "send" else rx.clone())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer)
            tg.start_soon(second)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(first)
            await anyio.wait_all_tasks_blocked()
            if side == "send":
                got["received"] = [rx.receive_nowait(), rx.receive_nowait()]
            else:
                tx.send_nowait("A")  # to the receive that queued first
                tx.send_nowait("B")
    if side == "send":
        assert got == {"received": ["first", "second"]}
    else:
        assert got == {"first": "A", "second": "B"}


async def test_budgeted_sends_reach_a_checkpoint_within_the_budget(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, math.inf)
    sent = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        for _ in range(BUDGET_SIZE):
            await tx.send(sent)
            sent += 1
    assert scope.cancelled_caught
    assert sent < BUDGET_SIZE
    # The cancelled send delivered nothing.
    assert rx.statistics().items_buffered == sent


@pytest.mark.parametrize("how", ["receive", "async_for"])
async def test_budgeted_receives_reach_a_checkpoint_within_the_budget(
    flavour: str, how: str
) -> None:
    tx, rx = channel(flavour, math.inf)
    for i in range(BUDGET_SIZE):
        tx.send_nowait(i)
    got = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        if how == "receive":
            for _ in range(BUDGET_SIZE):
                got.append(await rx.receive())
        else:
            async for item in rx:
                got.append(item)
    assert scope.cancelled_caught
    assert got == list(range(len(got)))
    assert len(got) < BUDGET_SIZE
    # The cancelled receive took nothing.
    assert rx.receive_nowait() == len(got)


async def test_a_tight_async_for_lets_other_tasks_run(flavour: str) -> None:
    tx, rx = channel(flavour, math.inf)
    for i in range(4 * BUDGET_SIZE):
        tx.send_nowait(i)
    tx.close()  # the loop ends, rather than waits, if it never yields
    ran = anyio.Event()
    got = []

    async def other() -> None:
        ran.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        async for item in rx:
            got.append(item)
            if ran.is_set():
                break
    # As for sends below: the other task runs by the second budget.
    assert 0 < len(got) <= 2 * BUDGET_SIZE
    assert got == list(range(len(got)))


async def test_async_for_on_a_strict_channel_checkpoints_on_every_item(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 5, strict=True)
    await tx.send(1)
    got = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        async for item in rx:
            got.append(item)
    assert scope.cancelled_caught
    assert got == []
    assert rx.receive_nowait() == 1


async def test_async_for_on_a_closed_receiver_raises_closed_resource_error(
    flavour: str,
) -> None:
    tx, rx = channel(flavour, 5)
    # Another receiver keeps the channel's items (mpsc has none: closing its
    # one receiver drops them).
    other = rx.clone() if flavour in MANY_RECEIVERS else None
    await tx.send(1)
    rx.close()
    with pytest.raises(anyio.ClosedResourceError):
        async for _ in rx:
            pass
    if other is not None:
        assert other.receive_nowait() == 1  # the closed endpoint took nothing


async def test_a_tight_send_loop_lets_other_tasks_run(flavour: str) -> None:
    tx, _rx = channel(flavour, math.inf)
    ran = anyio.Event()
    sends = 0

    async def other() -> None:
        ran.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        while not ran.is_set():
            await tx.send(sends)
            sends += 1
    # Every BUDGET_SIZE sends yield; Trio may run this task first in the
    # next batch of runnable tasks, so the other one runs by the second.
    assert sends <= 2 * BUDGET_SIZE


# ---------------------------------------------------------------------------
# Re-entrance
# ---------------------------------------------------------------------------


async def test_a_woken_receiver_can_use_the_channel_at_once(flavour: str) -> None:
    # The receiver, woken by a send, sends straight back into the channel
    # it was woken from and receives again, five times over.
    tx, rx = channel(flavour, 1)
    got: list[int] = []

    async def echo() -> None:
        while (item := await rx.receive()) < 5:
            got.append(item)
            await tx.send(item + 1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(echo)
        await settle()
        await tx.send(0)
    assert got == [0, 1, 2, 3, 4]
    assert tx.statistics() == ChannelStatistics(0, 1, 1, 1, 0, 0)


async def test_an_item_released_on_close_may_use_the_channel(flavour: str) -> None:
    tx, rx = channel(flavour, 3)
    seen: list[object] = []

    class Reentrant:
        def __del__(self) -> None:
            try:
                tx.send_nowait("again")
            except Exception as exc:
                seen.append(type(exc))

    await tx.send(Reentrant())
    await tx.send(Reentrant())
    rx.close()
    gc.collect()
    assert seen == [anyio.BrokenResourceError, anyio.BrokenResourceError]
    assert tx.statistics().items_buffered == 0


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [-1, -math.inf, 1.5, math.nan])
def test_bad_capacity_value_raises_value_error_naming_capacity(
    flavour: str, capacity: float
) -> None:
    with pytest.raises(ValueError, match="capacity"):
        channel(flavour, capacity)


@pytest.mark.parametrize("capacity", ["3", None, True, [1]])
def test_bad_capacity_type_raises_type_error_naming_capacity(
    flavour: str, capacity: Any
) -> None:
    with pytest.raises(TypeError, match="capacity"):
        channel(flavour, capacity)


def test_non_bool_strict_raises_type_error_naming_strict(flavour: str) -> None:
    with pytest.raises(TypeError, match="strict"):
        channel(flavour, 1, strict=1)


@pytest.mark.parametrize("max_items", [0, -1])
async def test_receive_many_of_fewer_than_one_raises_value_error(
    flavour: str, max_items: int
) -> None:
    tx, rx = channel(flavour, 1)
    await tx.send(1)
    with pytest.raises(ValueError, match="max_items"):
        await rx.receive_many(max_items)
    assert rx.receive_nowait() == 1


@pytest.mark.parametrize("max_items", ["2", 2.0, None, True])
async def test_receive_many_of_a_non_int_raises_type_error(
    flavour: str, max_items: Any
) -> None:
    tx, rx = channel(flavour, 1)
    await tx.send(1)
    with pytest.raises(TypeError, match="max_items"):
        await rx.receive_many(max_items)
    assert rx.receive_nowait() == 1


class Count(enum.IntEnum):
    """An int subclass that is not bool: a valid integer argument."""

    MINUS_ONE = -1
    ZERO = 0
    ONE = 1
    TWO = 2


async def test_an_int_subclass_capacity_of_zero_makes_a_rendezvous(
    flavour: str,
) -> None:
    # Pins check_capacity (which only an int subclass reaches with a valid
    # value): zero is accepted, as a plain int, and means a rendezvous.
    tx, rx = channel(flavour, Count.ZERO)
    stats = tx.statistics()
    assert stats.capacity == 0
    assert type(stats.capacity) is int
    with pytest.raises(anyio.WouldBlock):
        tx.send_nowait("x")  # no receiver waiting, no buffer
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")  # straight to the waiting receiver
    assert receiver.result == "x"
    assert rx.statistics().items_buffered == 0


async def test_an_int_subclass_capacity_buffers_that_many_items(flavour: str) -> None:
    tx, rx = channel(flavour, Count.TWO)
    assert type(tx.statistics().capacity) is int
    tx.send_nowait(1)
    tx.send_nowait(2)
    with pytest.raises(anyio.WouldBlock):
        tx.send_nowait(3)
    assert [rx.receive_nowait(), rx.receive_nowait()] == [1, 2]


def test_a_negative_int_subclass_capacity_raises_value_error(flavour: str) -> None:
    with pytest.raises(ValueError, match="capacity"):
        channel(flavour, Count.MINUS_ONE)


async def test_receive_many_takes_an_int_subclass_max_items(flavour: str) -> None:
    # Pins check_max_items (which only an int subclass reaches with a valid
    # value): 1 and 2 are valid, and bound the items taken.
    tx, rx = channel(flavour, 5)
    for i in range(4):
        tx.send_nowait(i)
    assert await rx.receive_many(Count.ONE) == [0]
    assert await rx.receive_many(Count.TWO) == [1, 2]
    assert await rx.receive_many(Count.TWO) == [3]


@pytest.mark.parametrize("max_items", [Count.ZERO, Count.MINUS_ONE])
async def test_receive_many_of_an_int_subclass_below_one_raises_value_error(
    flavour: str, max_items: Count
) -> None:
    tx, rx = channel(flavour, 1)
    tx.send_nowait(1)
    with pytest.raises(ValueError, match="max_items"):
        await rx.receive_many(max_items)
    assert rx.receive_nowait() == 1


async def test_a_handed_over_item_is_not_kept_by_the_channel_after_the_wait(
    flavour: str,
) -> None:
    # A task that waited hands its waiter back to the channel for the next
    # wait (see _core/_waiter.py); the waiter must not keep the item it
    # carried (a blocked send) or was granted (a blocked receive).
    tx, rx = channel(flavour, 0)
    sent, granted = Item(1), Item(2)
    refs = [weakref.ref(sent), weakref.ref(granted)]
    got: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(tx.send, sent)  # parks: capacity 0
        await settle()
        got.append(await rx.receive())  # takes it from the parked sender

        async def receive() -> None:
            got.append(await rx.receive())

        tg.start_soon(receive)  # parks: nothing to take
        await settle()
        await tx.send(granted)  # handed to the parked receiver
    assert [item.n for item in got] == [1, 2]
    got.clear()
    del sent, granted
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
    # Both endpoints are still open: the channel, and the waiters it keeps
    # for reuse, are alive.
    assert tx.statistics().open_receivers == 1


# ---------------------------------------------------------------------------
# Gates recomputed at the right moments (mutation-testing regressions)
# ---------------------------------------------------------------------------


async def test_a_receive_that_frees_the_buffer_admits_the_parked_sender() -> None:
    # Pins the single receiver's resume: while a sender is parked, the
    # receive gate stays closed, so taking B admits the blocked send of C.
    tx, rx = mpsc.channel[str](1)
    got: list[str] = []

    async def receiver() -> None:
        got.append(await rx.receive())  # parks, then is handed A
        got.append(rx.receive_nowait())  # B: frees the buffer for C

    with anyio.fail_after(5):  # hang guard
        async with anyio.create_task_group() as tg:
            tg.start_soon(receiver)
            await settle()
            tx.send_nowait("A")  # straight to the parked receiver
            tx.send_nowait("B")  # into the buffer
            await tx.send("C")  # buffer full: blocks until B is taken
    assert got == ["A", "B"]
    assert rx.receive_nowait() == "C"


async def test_a_send_after_the_only_receiver_closed_on_its_handoff_is_broken() -> None:
    # Pins the single receiver's resume: a receiver closed after it was
    # handed an item must not reopen the send gate when its task resumes.
    tx, rx = mpsc.channel[str](1)
    got: list[str] = []

    async def receiver() -> None:
        got.append(await rx.receive())

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await settle()
        tx.send_nowait("A")  # handed to the parked receiver
        rx.close()  # before the receiving task runs
    assert got == ["A"]
    with pytest.raises(anyio.BrokenResourceError):
        tx.send_nowait("B")
    assert tx.statistics().items_buffered == 0


async def test_the_single_sender_stays_busy_until_its_taken_send_resumes() -> None:
    # Pins ChannelState.sync: while a taken send has not resumed, the single
    # sender is still in use and another task's send is refused.
    tx, rx = spmc.channel[str](1)
    tx.send_nowait("a")
    async with anyio.create_task_group() as tg:
        tg.start_soon(tx.send, "b")  # blocks: the buffer is full
        await settle()
        assert rx.statistics().tasks_waiting_send == 1
        # All in one step, before the sending task resumes:
        assert rx.receive_nowait() == "a"  # "b" is admitted into the buffer
        assert rx.receive_nowait() == "b"
        with pytest.raises(anyio.BusyResourceError):
            tx.send_nowait("c")
    assert rx.statistics().items_buffered == 0


async def test_a_send_right_after_the_last_receiver_closed_is_broken(
    flavour: str,
) -> None:
    # Pins receiver_closed recomputing the send gate: after failing the
    # blocked senders and dropping the buffer, a send made before the failed
    # sender's task resumes is refused too.
    tx, rx = channel(flavour, 1)
    tx.send_nowait("a")
    blocked = Call(lambda: tx.send("b"))
    async with anyio.create_task_group() as tg:
        blocked.start(tg)
        await settle()
        rx.close()
        # In the same step, before the failed sender's task resumes:
        with pytest.raises(anyio.BrokenResourceError):
            tx.send_nowait("c")
    assert blocked.outcome == "raised"
    assert isinstance(blocked.error, anyio.BrokenResourceError)


async def test_a_strict_receive_at_end_of_stream_checkpoints_first(
    flavour: str,
) -> None:
    # Pins receive_would_park: with every sender closed the receive does not
    # park, so in strict mode it checkpoints (raising a pending cancellation)
    # before it raises EndOfStream.
    tx, rx = channel(flavour, 0, strict=True)
    tx.close()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rx.receive()
    assert scope.cancelled_caught
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()


async def test_a_strict_send_with_every_receiver_closed_checkpoints_first(
    flavour: str,
) -> None:
    # Pins send_would_park: with every receiver closed the send does not
    # park, so in strict mode it checkpoints (raising a pending cancellation)
    # before it raises BrokenResourceError.
    tx, rx = channel(flavour, 0, strict=True)
    rx.close()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tx.send("x")
    assert scope.cancelled_caught
    with pytest.raises(anyio.BrokenResourceError):
        await tx.send("x")


@pytest.mark.parametrize("kind", [*MANY_RECEIVERS, "memory"])
async def test_the_stream_ends_only_once_a_woken_receiver_has_run(kind: str) -> None:
    # docs/channels.md, Closing: the last sender closes while a receive
    # granted an item has not run yet.  Until it has, its item may still
    # come back, so the stream has not ended: receive_nowait() raises
    # WouldBlock (the drop-in too, where anyio's raises EndOfStream).
    tx, rx = make(kind, 0)
    async with anyio.create_task_group() as tg:
        woken = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")  # handed to the parked receive
        tx.close()
        with pytest.raises(anyio.WouldBlock):
            rx.receive_nowait()
    assert woken.result == "x"
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()
    rx.close()
