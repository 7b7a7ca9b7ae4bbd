"""Channel and oneshot behaviours the other channel tests left unpinned,
found by mutation testing: each test fails when the code it pins is
changed, on the backends where that change can be seen."""

from __future__ import annotations

import gc
import weakref
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import mpsc, oneshot, spmc
from anyio_prims._core import BUDGET, BUDGET_SIZE
from anyio_prims.streams import create_memory_object_stream

from .._tasks import assert_no_schedule_point
from .._waiter_count import WAITER_STATS
from ._support import (
    CHANNELS,
    MANY_RECEIVERS,
    MANY_SENDERS,
    Call,
    drain,
    settle,
)

pytestmark = pytest.mark.anyio


async def test_a_receive_after_a_cancelled_blocked_send_gets_the_buffered_item(
    flavour: str,
) -> None:
    # The cancelled send leaves the channel: the receive gate it closed when
    # it parked must open again, or the next receive() parks beside a
    # buffered item (spmc: the sender's Slot forgets the waiter at once).
    tx, rx = CHANNELS[flavour](1)
    tx.send_nowait("A")
    with anyio.move_on_after(0.05):
        await tx.send("B")  # parks: the buffer is full; then times out
    assert rx.statistics().tasks_waiting_send == 0
    with anyio.fail_after(5):
        assert await rx.receive() == "A"
    assert drain(rx) == []


async def test_a_receive_while_the_only_item_is_in_flight_waits_for_the_next(
    flavour: str,
) -> None:
    # R1 is granted A and has not run; a receive() made in the same step
    # finds no free item and must wait, not take A out from under R1.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = CHANNELS[flavour](1)
    other = rx.clone()

    async def send_later() -> None:
        await settle()
        tx.send_nowait("B")

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tg.start_soon(send_later)
        tx.send_nowait("A")  # granted to R1, which has not run yet
        got = await other.receive()  # same step: no item is free
        await settle()
    assert first.result == "A"
    assert got == "B"


async def test_mpsc_receiver_is_busy_while_granted_with_room_left() -> None:
    # As test_mpsc_receiver_is_busy_until_a_granted_receive_has_resumed, but
    # with room for the second item on the send fast path (capacity 2): the
    # handoff itself must close the single receiver's fast path.
    tx, rx = mpsc.channel[Any](2)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("x")  # granted; the task has not run yet
        tx.send_nowait("y")  # buffered through the send fast path
        with pytest.raises(anyio.BusyResourceError):
            rx.receive_nowait()
        with pytest.raises(anyio.BusyResourceError):
            await rx.receive()
        await settle()
    assert first.result == "x"
    assert rx.receive_nowait() == "y"


async def test_receive_many_admits_parked_senders_only_up_to_the_capacity(
    flavour: str,
) -> None:
    if flavour not in MANY_SENDERS:
        pytest.skip("one blocked sender at most")
    tx, rx = CHANNELS[flavour](1)
    tx.send_nowait("X")
    async with anyio.create_task_group() as tg:
        senders = []
        for item in ("A", "B", "C"):
            senders.append(Call(partial(tx.clone().send, item)).start(tg))
            await settle()
        assert await rx.receive_many(2) == ["X", "A"]
        stats = rx.statistics()
        assert stats.items_buffered == 1  # B, admitted into the freed room
        assert stats.tasks_waiting_send == 1  # C still waits
        await settle()
        assert [s.outcome for s in senders] == ["returned", "returned", None]
        assert rx.receive_nowait() == "B"
        await settle()
    assert rx.receive_nowait() == "C"


async def test_a_closed_sender_raises_closed_error_even_with_every_receiver_closed(
    flavour: str,
) -> None:
    # The endpoint's own state first, as anyio: closed, then broken.
    tx, rx = CHANNELS[flavour](1)
    rx.close()
    tx.close()
    with pytest.raises(anyio.ClosedResourceError):
        tx.send_nowait(1)
    with pytest.raises(anyio.ClosedResourceError):
        await tx.send(1)


async def test_a_closed_memory_send_stream_raises_closed_error_not_broken() -> None:
    tx, rx = create_memory_object_stream[int](1)
    rx.close()
    tx.close()
    with pytest.raises(anyio.ClosedResourceError):
        tx.send_nowait(1)
    with pytest.raises(anyio.ClosedResourceError):
        await tx.send(1)


async def test_a_strict_send_on_a_closed_sender_checkpoints_first(flavour: str) -> None:
    # A send on a closed endpoint does not park, so in strict mode it is a
    # checkpoint (raising a pending cancellation) before it raises
    # ClosedResourceError, even where an open sender's send would park.
    tx, rx = CHANNELS[flavour](0, strict=True)
    tx.close()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tx.send("x")
    assert scope.cancelled_caught
    with pytest.raises(anyio.ClosedResourceError):
        await tx.send("x")
    rx.close()


@pytest.mark.parametrize("side", ["send", "receive"])
async def test_a_strict_call_that_a_parked_peer_completes_checkpoints_first(
    flavour: str, side: str
) -> None:
    # A send to a parked receiver (or a receive from a parked sender) does
    # not park, so in strict mode it checkpoints first: a pending
    # cancellation wins, and the parked peer is left waiting.
    tx, rx = CHANNELS[flavour](0, strict=True)
    async with anyio.create_task_group() as tg:
        if side == "send":
            peer = Call(rx.receive).start(tg)
            call: Any = partial(tx.send, "mine")
        else:
            peer = Call(lambda: tx.send("theirs")).start(tg)
            call = rx.receive
        await settle()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await call()
        assert scope.cancelled_caught
        await settle()
        assert peer.outcome is None  # still parked: nothing was handed over
        if side == "send":
            await call()
        else:
            assert await call() == "theirs"
        await settle()
    assert peer.outcome == "returned"
    assert peer.result == ("mine" if side == "send" else None)


async def test_a_strict_send_on_a_busy_spmc_sender_checkpoints_first() -> None:
    # A send that raises BusyResourceError does not park, so in strict mode
    # it checkpoints first: a pending cancellation wins.
    tx, rx = spmc.channel[str](0, strict=True)
    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("x")).start(tg)
        await settle()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await tx.send("y")
        assert scope.cancelled_caught
        with pytest.raises(anyio.BusyResourceError):
            await tx.send("y")
        assert rx.receive_nowait() == "x"
        await settle()
    assert first.outcome == "returned"


async def test_a_strict_receive_on_a_busy_mpsc_receiver_checkpoints_first() -> None:
    # The same for a receive that raises BusyResourceError.
    tx, rx = mpsc.channel[str](0, strict=True)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await rx.receive()
        assert scope.cancelled_caught
        with pytest.raises(anyio.BusyResourceError):
            await rx.receive()
        tx.send_nowait("x")
        await settle()
    assert first.result == "x"


async def test_a_budgeted_receive_at_the_end_of_the_stream_is_no_schedule_point(
    flavour: str, anyio_backend_name: str
) -> None:
    # Every sender is closed and nothing is buffered: the receive does not
    # block, so on a channel that is not strict it raises EndOfStream
    # without a schedule point while no budget checkpoint is due.
    tx, rx = CHANNELS[flavour](1)
    tx.close()

    async def receive() -> None:
        with pytest.raises(anyio.EndOfStream):
            await rx.receive()

    BUDGET.left = BUDGET_SIZE
    await assert_no_schedule_point(anyio_backend_name, receive)


async def test_a_strict_receive_waiting_for_an_in_flight_item_parks_at_once(
    flavour: str,
) -> None:
    # Every sender is closed but R1's item is still in flight (it could be
    # given back), so another receive must wait (I4), and a call that is
    # going to wait parks at once: no checkpoint first.  A checkpoint would
    # let R1 run first, and the receive would then end without parking.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    tx, rx = CHANNELS[flavour](0, strict=True)
    other = rx.clone()
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("A")  # granted to R1, which has not run yet
        tx.close()
        before = WAITER_STATS.created
        with pytest.raises(anyio.EndOfStream):
            await other.receive()
        assert WAITER_STATS.created == before + 1  # it parked
        await settle()
    assert first.result == "A"


async def test_the_stream_does_not_end_while_a_second_granted_receive_has_not_resumed(
    flavour: str, anyio_backend_name: str
) -> None:
    # R1 and R2 are granted A and B, the last sender closes and R2 is
    # cancelled, all in one step, while R3 is parked.  R1 resuming must not
    # end the stream: R2 has not resumed, and gives B back, to R3 (I4).
    # Only plain asyncio cancellation cancels a granted wait.
    if flavour not in MANY_RECEIVERS:
        pytest.skip("one receiver")
    if anyio_backend_name != "asyncio":
        pytest.skip("the grant-then-cancel race needs plain asyncio cancellation")
    tx, rx = CHANNELS[flavour](0)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        second = Call(rx.clone().receive, "asyncio_task_cancel").start(tg)
        await settle()
        third = Call(rx.clone().receive).start(tg)
        await settle()
        tx.send_nowait("A")  # to R1
        tx.send_nowait("B")  # to R2
        tx.close()
        second.cancel()  # R2's wait was granted: it gives B back when it runs
        await second.finished.wait()
        await third.finished.wait()
    assert first.result == "A"
    assert second.outcome == "cancelled"
    assert third.outcome == "returned", third.error
    assert third.result == "B"


async def test_receive_many_during_a_grant_takes_the_oldest_items_in_order(
    flavour: str, anyio_backend_name: str
) -> None:
    # R1 is granted A; in the same step B is buffered, two senders park
    # (S1, S2) and another task calls receive_many(10), which does not wait.
    # It must take the oldest items: A, B and then S1 (reserved for R1, who
    # moves on to S2), not S2 ahead of S1.
    if flavour not in MANY_RECEIVERS or flavour not in MANY_SENDERS:
        pytest.skip("needs many receivers and many senders")
    if anyio_backend_name == "trio":
        pytest.skip("needs asyncio's FIFO run queue to order the tasks")
    tx, rx = CHANNELS[flavour](1)
    other = rx.clone()
    taken: list[Any] = []
    go = anyio.Event()

    async def send_all() -> None:
        await go.wait()
        tx.send_nowait("A")  # to R1
        tx.send_nowait("B")  # into the buffer
        await tx.send("S1")  # parks: the buffer is full

    async def send_one() -> None:
        await go.wait()
        await tx.clone().send("S2")  # parks behind S1

    async def take() -> None:
        await go.wait()  # runs after both senders, before R1 resumes
        taken.extend(await other.receive_many(10))

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tg.start_soon(send_all)
        tg.start_soon(send_one)
        tg.start_soon(take)
        await settle()
        go.set()
        await first.finished.wait()
        await settle()
    assert taken == ["A", "B", "S1"]
    assert first.result == "S2"
    assert drain(other) == []


# oneshot


class Item:
    pass


@pytest.mark.parametrize("how", ["closed", "received"])
async def test_a_strict_oneshot_receive_at_end_of_stream_checkpoints_first(
    how: str,
) -> None:
    # The receive raises EndOfStream without parking, so in strict mode it
    # checkpoints first (raising a pending cancellation), as the channels do.
    tx, rx = oneshot.channel[int](strict=True)
    if how == "closed":
        tx.close()
    else:
        tx.send(1)
        assert rx.receive_nowait() == 1
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rx.receive()
    assert scope.cancelled_caught
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()


async def test_a_closed_oneshot_receiver_raises_closed_error_while_granted() -> None:
    # The receiver's own state first: a closed receiver raises
    # ClosedResourceError, even in the window in which another task's
    # receive has been granted the item and has not run yet.
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tx.send(1)  # granted; the task has not run yet
        rx.close()
        with pytest.raises(anyio.ClosedResourceError):
            rx.receive_nowait()
        with pytest.raises(anyio.ClosedResourceError):
            await rx.receive()
        await settle()
    assert first.result == 1


async def test_an_item_given_back_after_the_oneshot_receiver_closed_is_released(
    anyio_backend_name: str,
) -> None:
    # Granted, the receiver closed, then the receive cancelled before it ran
    # (plain asyncio cancellation): nobody can receive the item any more,
    # so the channel must not keep it.
    if anyio_backend_name != "asyncio":
        pytest.skip("the grant-then-cancel race needs plain asyncio cancellation")
    tx, rx = oneshot.channel[Item]()
    item = Item()
    ref = weakref.ref(item)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, "asyncio_task_cancel").start(tg)
        await settle()
        tx.send(item)  # granted; the task has not run yet
        del item
        rx.close()
        receiver.cancel()
        await receiver.finished.wait()
    assert receiver.outcome == "cancelled"
    del receiver
    gc.collect()
    assert ref() is None
