"""oneshot channels: one synchronous send, one receive, end of stream when
the sender is closed or dropped without sending, cancellation."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import oneshot
from anyio_prims._core import BUDGET, BUDGET_SIZE, FORCE_GENERIC, NOT_OPENED, Slot

from .._reentry import arm_inside_enqueue
from .._waiter_count import WAITER_STATS
from ._support import GIVE_BACK_SOURCES, SOURCES, Call, settle, source_param

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(SOURCES))
def source(request: pytest.FixtureRequest, anyio_backend_name: str) -> str:
    return source_param(request.param, anyio_backend_name)


class Item:
    pass


async def test_receive_returns_the_item_sent() -> None:
    tx, rx = oneshot.channel[int]()
    tx.send(7)
    assert await rx.receive() == 7


async def test_awaiting_the_receiver_returns_the_item() -> None:
    tx, rx = oneshot.channel[str]()
    tx.send("x")
    assert await rx == "x"


async def test_receive_nowait_returns_the_item_once_sent() -> None:
    tx, rx = oneshot.channel[int]()
    with pytest.raises(anyio.WouldBlock):
        rx.receive_nowait()
    tx.send(1)
    assert rx.receive_nowait() == 1


async def test_receive_blocks_until_the_item_is_sent() -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        assert receiver.outcome is None
        tx.send(5)
        await settle()
    assert receiver.result == 5


async def test_a_second_send_raises_runtime_error() -> None:
    tx, rx = oneshot.channel[int]()
    tx.send(1)
    with pytest.raises(RuntimeError, match="already sent"):
        tx.send(2)
    assert rx.receive_nowait() == 1


async def test_send_after_the_receiver_closed_raises_broken_resource_error() -> None:
    tx, rx = oneshot.channel[int]()
    rx.close()
    with pytest.raises(anyio.BrokenResourceError):
        tx.send(1)
    assert not tx.sent


async def test_send_on_a_closed_sender_raises_closed_resource_error() -> None:
    tx, _rx = oneshot.channel[int]()
    tx.close()
    with pytest.raises(anyio.ClosedResourceError):
        tx.send(1)


async def test_closing_the_sender_without_sending_ends_the_stream() -> None:
    tx, rx = oneshot.channel[int]()
    tx.close()
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()


async def test_closing_the_sender_wakes_a_blocked_receiver_with_end_of_stream() -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        tx.close()
        await settle()
    assert isinstance(receiver.error, anyio.EndOfStream)


async def test_a_sender_dropped_without_sending_ends_the_stream() -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        del tx
        gc.collect()
        await settle()
    assert isinstance(receiver.error, anyio.EndOfStream)


@pytest.mark.skipif(
    FORCE_GENERIC,
    reason="the generic waiter sees a cancellation when its task runs: the"
    " second receive is refused as busy until then",
)
async def test_a_receive_parked_after_a_cancelled_one_ends_when_the_sender_drops() -> (
    None
):
    # A cancelled receive's wait stops counting at once (asyncio: its
    # future is cancelled; Trio: the wait is aborted), so another receive
    # may park before the first runs.  The first, leaving then, must not
    # take the second's wake-up with it: the dropped sender ends the stream.
    tx, rx = oneshot.channel[int]()
    holder = [tx]
    del tx

    async def drop_the_sender_later() -> None:
        await settle()  # the second receive parks and the first leaves
        holder.clear()
        gc.collect()

    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        first.cancel()
        tg.start_soon(drop_the_sender_later)
        with anyio.fail_after(5), pytest.raises(anyio.EndOfStream):
            await rx.receive()
    assert first.outcome == "cancelled"


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    me: _Cycle
    sender: oneshot.Sender[int]


async def test_a_sender_collected_as_a_receive_parks_ends_the_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A dropped sender in a reference cycle is closed by its __del__ when
    # the collector runs, which may be at any allocation: also inside
    # receive(), after it found the sender open and while it makes its
    # waiter, before the waiter is in the slot (where that close finds
    # nobody to wake).  The receive must then not wait: it would wait for a
    # sender that no longer exists.  Each round sets the collector off k
    # allocations after the receive's task is started, for every k of a
    # range that spans the window; the rounds that land in it take the
    # waiter back (counted).
    withdrawn = 0
    withdraw = Slot.withdraw

    def counting_withdraw(slot: Slot[None], waiter: Any) -> bool:
        nonlocal withdrawn
        withdrawn += 1
        return withdraw(slot, waiter)

    monkeypatch.setattr(Slot, "withdraw", counting_withdraw)
    threshold = gc.get_threshold()
    hung = []
    try:
        for k in range(1, 121):  # 0 would turn the collector off
            async with anyio.create_task_group() as tg:
                gc.collect(0)  # the count starts from this round
                tx, rx = oneshot.channel[int]()
                sender = weakref.ref(tx)
                cycle = _Cycle()
                cycle.me = cycle
                cycle.sender = tx
                del tx, cycle
                gc.set_threshold(gc.get_count()[0] + k, *threshold[1:])
                receiver = Call(rx.receive).start(tg)
                await settle()
                gc.set_threshold(*threshold)
                if sender() is not None:  # the receive parked first
                    gc.collect(0)  # the young generation: where the cycle is
                    if sender() is not None:
                        gc.collect()
                # The wake-up of a parked receive comes from the event loop,
                # soon (a callback settle() does not wait for).
                with anyio.move_on_after(2):
                    await receiver.finished.wait()
                if receiver.outcome is None:
                    hung.append(k)
                    receiver.cancel()
                else:
                    assert isinstance(receiver.error, anyio.EndOfStream)
    finally:
        gc.set_threshold(*threshold)
    assert hung == []
    assert withdrawn > 0, "no round collected the sender inside that window"


@pytest.mark.parametrize(
    ("strict", "budget_left", "checkpoints"),
    [(True, BUDGET_SIZE, True), (False, 2, False)],
    ids=["strict", "budgeted_units_left"],
)
async def test_a_receive_that_finds_the_sender_gone_at_its_park_checkpoints_as_due(
    monkeypatch: pytest.MonkeyPatch, strict: bool, budget_left: int, checkpoints: bool
) -> None:
    # The receive skips its checkpoint because it is about to park (parking
    # is the checkpoint); the sender's last reference goes just before the
    # park (as a collection there drops it), so it does not park after all.
    # It must still take the checkpoint it was due: strict, always (then it
    # raises the cancellation of its cancelled scope, not EndOfStream);
    # budgeted with units left, not (mutation testing found the budgeted
    # case unpinned).  A budgeted call that spends the last unit takes its
    # checkpoint before it parks (_core/_budget.py).
    from anyio_prims._core import threadsafe_call_soon as real
    from anyio_prims.channels import _oneshot

    holder: list[object] = []

    def dropping_the_sender() -> Any:
        holder.clear()  # the sender's __del__ runs here
        return real()

    tx, rx = oneshot.channel[int](strict=strict)
    holder.append(tx)
    del tx
    monkeypatch.setattr(_oneshot, "threadsafe_call_soon", dropping_the_sender)
    ended = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        BUDGET.left = budget_left
        try:
            await rx.receive()
        except anyio.EndOfStream:
            ended = True
    assert scope.cancelled_caught is checkpoints
    assert ended is not checkpoints
    assert not holder
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()


@pytest.mark.parametrize("where", ["before", "after"])
async def test_a_receive_whose_receiver_closes_as_it_parks_raises_closed(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # Code run as the receive parks (a finalizer) closes the receiver:
    # before the waiter is in the slot, the close finds nobody to fail, and
    # the receive must not wait (it waited until the sender closed, then
    # raised EndOfStream); after, the close fails the waiter.
    armed = arm_inside_enqueue(monkeypatch, where)
    tx, rx = oneshot.channel[int]()
    armed.append(rx.close)
    with anyio.fail_after(5), pytest.raises(anyio.ClosedResourceError):
        await rx.receive()
    assert not armed, "the receive did not park"
    with pytest.raises(anyio.BrokenResourceError):
        tx.send(1)


async def test_a_sender_collected_in_another_thread_wakes_the_parked_receive() -> None:
    # The collector runs finalizers in whichever thread it runs in.  A
    # parked receive's wake-up from there must reach its event loop, asleep
    # in its wait for I/O (not merely be queued where that loop looks only
    # once something else wakes it): within a second, not at the timeout.
    def collect_after_a_while() -> None:
        time.sleep(0.2)  # the event loop is asleep, waiting for I/O
        gc.collect()

    gc.disable()  # the cycle stays for the other thread's collection
    try:
        tx, rx = oneshot.channel[int]()
        cycle = _Cycle()
        cycle.me = cycle
        cycle.sender = tx
        del tx, cycle
        async with anyio.create_task_group() as tg:
            receiver = Call(rx.receive).start(tg)
            await settle()
            collector = threading.Thread(target=collect_after_a_while)
            start = time.monotonic()
            collector.start()
            with anyio.move_on_after(10):
                await receiver.finished.wait()
            elapsed = time.monotonic() - start
            collector.join()
    finally:
        gc.enable()
    assert isinstance(receiver.error, anyio.EndOfStream)
    assert elapsed < 2


async def test_closing_the_sender_after_sending_keeps_the_item() -> None:
    tx, rx = oneshot.channel[int]()
    with tx:
        tx.send(3)
    assert tx.sent
    assert tx.closed
    assert await rx.receive() == 3


async def test_leaving_the_sender_block_without_sending_ends_the_stream() -> None:
    tx, rx = oneshot.channel[int]()
    with tx as entered:
        assert entered is tx
    with pytest.raises(anyio.EndOfStream):
        await rx


async def test_a_second_receive_raises_end_of_stream() -> None:
    tx, rx = oneshot.channel[int]()
    tx.send(1)
    assert await rx.receive() == 1
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()


async def test_async_for_yields_the_item_and_stops() -> None:
    tx, rx = oneshot.channel[int]()
    tx.send(9)
    assert [item async for item in rx] == [9]


async def test_closing_the_receiver_fails_a_blocked_receive() -> None:
    _tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        rx.close()
        await settle()
    assert isinstance(receiver.error, anyio.ClosedResourceError)


async def test_receiving_on_a_closed_receiver_raises_closed_resource_error() -> None:
    tx, rx = oneshot.channel[int]()
    tx.send(1)
    async with rx:
        pass
    assert rx.closed
    with pytest.raises(anyio.ClosedResourceError):
        await rx.receive()
    with pytest.raises(anyio.ClosedResourceError):
        rx.receive_nowait()


async def test_closing_the_receiver_releases_the_item() -> None:
    tx, rx = oneshot.channel[Item]()
    item = Item()
    ref = weakref.ref(item)
    tx.send(item)
    del item
    with rx as entered:
        assert entered is rx
    gc.collect()
    assert ref() is None


async def test_a_second_task_waiting_raises_busy_resource_error() -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        with pytest.raises(anyio.BusyResourceError):
            await rx.receive()
        with pytest.raises(anyio.BusyResourceError):
            rx.receive_nowait()
        tx.send(1)
        await settle()
    assert first.result == 1


@pytest.mark.parametrize("busy", ["parked", "granted"])
async def test_a_strict_receive_on_a_busy_receiver_checkpoints_first(busy: str) -> None:
    # A receive that raises BusyResourceError does not park, so in strict
    # mode it checkpoints first: a pending cancellation wins.
    tx, rx = oneshot.channel[int](strict=True)
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        if busy == "granted":
            tx.send(1)  # the first task has not run yet
        with anyio.CancelScope() as scope:
            scope.cancel()
            await rx.receive()
        assert scope.cancelled_caught
        if busy == "parked":
            with pytest.raises(anyio.BusyResourceError):
                await rx.receive()
            tx.send(1)
        await settle()
    assert first.result == 1


async def test_the_receiver_is_busy_until_a_granted_receive_has_resumed() -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        tx.send(1)  # granted; the task has not run yet
        with pytest.raises(anyio.BusyResourceError):
            rx.receive_nowait()
        await settle()
    assert first.result == 1


async def test_cancelled_receive_took_nothing(source: str) -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.cancel()
        await receiver.finished.wait()
    assert receiver.outcome == "cancelled"
    tx.send(1)
    assert await rx.receive() == 1


async def test_grant_then_cancel_keeps_the_item_for_the_next_receive(
    source: str,
) -> None:
    tx, rx = oneshot.channel[int]()
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive, source).start(tg)
        await settle()
        receiver.grant_then_cancel(lambda: tx.send(1))
        await receiver.finished.wait()
    if source in GIVE_BACK_SOURCES:
        assert receiver.outcome == "cancelled"
    if receiver.outcome == "cancelled":
        assert rx.receive_nowait() == 1
    else:
        assert receiver.result == 1
    # Received once, either way: the channel is done, not busy with a grant
    # that was given back.
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()
    with pytest.raises(anyio.EndOfStream):
        await rx.receive()


async def test_strict_receive_checkpoints_before_taking_the_item() -> None:
    tx, rx = oneshot.channel[int](strict=True)
    tx.send(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rx.receive()
    assert scope.cancelled_caught
    assert rx.receive_nowait() == 1


async def test_receiving_a_sent_item_creates_no_waiter() -> None:
    before = WAITER_STATS.created
    for i in range(10):
        tx, rx = oneshot.channel[int]()
        tx.send(i)
        assert await rx == i
    assert WAITER_STATS.created == before


async def test_a_oneshot_makes_its_wait_slot_when_a_receive_first_waits() -> None:
    tx, rx = oneshot.channel[int]()
    state = rx._state
    tx.send(1)
    assert await rx == 1
    rx.close()
    assert state.slot is NOT_OPENED

    tx, rx = oneshot.channel[int]()
    state = rx._state
    async with anyio.create_task_group() as tg:
        first = Call(rx.receive).start(tg)
        await settle()
        slot = state.slot
        assert type(slot) is Slot
        first.cancel()
        await first.finished.wait()
        second = Call(rx.receive).start(tg)
        await settle()
        assert state.slot is slot
        tx.send(2)
    assert first.outcome == "cancelled"
    assert second.result == 2


@pytest.mark.parametrize("typed", [False, True])
def test_non_bool_strict_raises_type_error_naming_strict(typed: bool) -> None:
    factory = oneshot.channel[int] if typed else oneshot.channel
    with pytest.raises(TypeError, match="strict"):
        factory(strict="yes")  # type: ignore[arg-type]


async def test_the_typed_form_passes_strict_through() -> None:
    tx, rx = oneshot.channel[int](strict=True)
    tx.send(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rx.receive()  # a strict receive checkpoints though the item is there
    assert scope.cancelled_caught
    assert rx.receive_nowait() == 1


def test_a_subscript_with_two_item_types_raises_type_error() -> None:
    with pytest.raises(TypeError, match="one item type"):
        oneshot.channel[int, str]  # type: ignore[misc]


def test_repr_shows_the_state() -> None:
    tx, rx = oneshot.channel[Any]()
    assert "waiting" in repr(rx)
    assert "open" in repr(tx)
    tx.send(None)
    assert "ready" in repr(rx)
    assert "sent" in repr(tx)
    rx.close()
    assert "closed" in repr(rx)
    tx, rx = oneshot.channel[Any]()
    tx.close()
    assert "closed" in repr(tx)
    assert "done" in repr(rx)


@pytest.mark.parametrize("attempt", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_oneshot_endpoint_cannot_be_copied_or_pickled(
    attempt: Callable[[Any], object],
) -> None:
    tx, rx = oneshot.channel[int]()
    for endpoint in (tx, rx):
        with pytest.raises(TypeError, match="cannot be copied"):
            attempt(endpoint)


async def test_a_strict_receive_that_must_wait_parks_without_yielding_first() -> None:
    # Parking is the checkpoint: the sender, told when the receive starts,
    # finds it parked at its first look.
    tx, rx = oneshot.channel[int](strict=True)
    started = False
    early_looks = 0
    got: list[int] = []

    async def sender() -> None:
        nonlocal early_looks
        while not started:
            await anyio.lowlevel.checkpoint()
        while not rx._state.slot:  # the receive parks in the channel's slot
            early_looks += 1
            await anyio.lowlevel.checkpoint()
        tx.send(7)

    async def receiver() -> None:
        nonlocal started
        started = True
        got.append(await rx.receive())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sender)
            tg.start_soon(receiver)
    assert got == [7]
    assert early_looks == 0


async def test_a_run_of_ready_receives_checkpoints_within_the_budget() -> None:
    # Pins the budget in Receiver.receive: after a receive that parked (and
    # refilled the budget), BUDGET_SIZE receives of ready items reach a
    # checkpoint, here raising the pending cancellation.
    first_tx, first_rx = oneshot.channel[str]()
    pairs = [oneshot.channel[str]() for _ in range(BUDGET_SIZE)]
    for tx, _ in pairs:
        tx.send("x")
    got: list[str] = []

    async def consumer() -> None:
        await first_rx.receive()  # parks: the budget starts full
        with anyio.CancelScope() as scope:
            scope.cancel()
            for _, rx in pairs:
                got.append(await rx.receive())
        assert scope.cancelled_caught

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        await settle()
        first_tx.send("go")
    assert len(got) < BUDGET_SIZE


# -- found by mutation testing: behaviours no test pinned -------------------


async def test_ready_receives_checkpoint_only_at_the_last_call_of_a_full_budget() -> (
    None
):
    # With a cancellation pending and a full budget, BUDGET_SIZE - 1 ready
    # receives (one oneshot each) return their item, each spending one unit,
    # and the BUDGET_SIZE-th raises, taking nothing.
    pairs = [oneshot.channel[int]() for _ in range(2 * BUDGET_SIZE)]
    for i, (tx, _) in enumerate(pairs):
        tx.send(i)
    got: list[int] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        BUDGET.left = BUDGET_SIZE
        for _, rx in pairs:
            got.append(await rx.receive())
    assert scope.cancelled_caught
    assert got == list(range(BUDGET_SIZE - 1))
    # the cancelled call took nothing: its item is still there
    assert pairs[BUDGET_SIZE - 1][1].receive_nowait() == BUDGET_SIZE - 1


async def test_a_receive_that_was_granted_starts_no_new_budget() -> None:
    # With the budget nearly spent before it parks, the ready receives
    # after it take their checkpoint when that budget runs out: a park that
    # ends granted refills nothing (_core/_budget.py), so with a
    # cancellation pending the first of them to find it spent raises it.
    first_tx, first_rx = oneshot.channel[str]()
    pairs = [oneshot.channel[int]() for _ in range(BUDGET_SIZE - 1)]
    for i, (tx, _) in enumerate(pairs):
        tx.send(i)
    got: list[int] = []

    async def consumer() -> None:
        BUDGET.left = 2  # nearly spent
        assert await first_rx.receive() == "go"  # parks
        with anyio.CancelScope() as scope:
            scope.cancel()
            for _, rx in pairs:
                got.append(await rx.receive())
        assert scope.cancelled_caught

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        await settle()
        first_tx.send("go")
    assert got == []  # 2 - 1 (the park) - 1: the first receive was due


class _Item:
    pass


async def test_an_item_handed_to_a_parked_receive_is_not_kept_by_the_channel() -> None:
    tx, rx = oneshot.channel[_Item]()
    refs: list[weakref.ref[_Item]] = []

    async def consumer() -> None:
        item = await rx.receive()  # parks: the item comes through the waiter
        refs.append(weakref.ref(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        await settle()
        tx.send(_Item())
    gc.collect()
    assert refs[0]() is None  # rx and tx still alive here
    assert not rx.closed
    assert tx.sent


def test_a_sender_made_without_a_channel_is_dropped_without_an_error() -> None:
    # A bare oneshot.Sender() (or one whose making was interrupted) never
    # got its channel: its finalizer must do nothing, not raise.
    unraisable: list[object] = []
    previous = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        sender = oneshot.Sender[int]()
        del sender
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert unraisable == []
