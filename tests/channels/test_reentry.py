"""A finalizer that uses a channel while a send or receive on it parks.

A garbage collection can run a ``__del__`` at any allocation, and making a
waiter allocates: user code may then send, receive or close between a
call's look at the channel and the moment its waiter is parked where the
others can see it.  The call must act on what that code did, as if it had
run just before the call: take the item sent, use the room made, raise the
error of the endpoint closed.  Never park for something that has already
happened.

Most tests here run the other code at that exact point, by wrapping the
wait structures' ``enqueue`` ("before": as ``enqueue`` makes the waiter;
"after": as it returns, the waiter parked), so that each case is hit on
every backend and waiter kind.  The last test sets the real collector off
at every allocation of the window.
"""

from __future__ import annotations

import gc
import math
import sys
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from types import FrameType
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims._core import FORCE_GENERIC, Slot, WaitQueue
from anyio_prims._core._waiter import ABANDONED, Parking
from anyio_prims.channels._endpoints import ReceiveEndpoint, SendEndpoint

from .._reentry import Arm, arm_inside_enqueue, arm_inside_refused_grant
from ._support import WITH_MEMORY, Call, drain, make, settle

pytestmark = pytest.mark.anyio


@pytest.fixture(params=WITH_MEMORY)
def kind(request: pytest.FixtureRequest) -> str:
    """mpsc, spmc, mpmc and the drop-in memory object streams."""
    name: str = request.param
    return name


@pytest.fixture(params=["before", "after"])
def where(request: pytest.FixtureRequest) -> str:
    """Whether the other code runs before or after the waiter is parked."""
    name: str = request.param
    return name


@pytest.fixture
def inside_enqueue(monkeypatch: pytest.MonkeyPatch, where: str) -> Iterator[Arm]:
    """Arm a one-shot action to run inside the next ``enqueue``."""
    armed = arm_inside_enqueue(monkeypatch, where)
    yield armed.append
    assert not armed, "the action never ran: the call did not park"


async def test_a_receive_takes_the_item_sent_while_it_parks(
    kind: str, inside_enqueue: Arm
) -> None:
    tx, rx = make(kind, math.inf)
    inside_enqueue(lambda: tx.send_nowait("sent"))
    with anyio.fail_after(5):
        assert await rx.receive() == "sent"
    # Nothing is left parked, and the gates are open again.
    assert rx.statistics().tasks_waiting_receive == 0
    tx.send_nowait("next")
    assert rx.receive_nowait() == "next"
    tx.close()
    rx.close()


async def test_a_receive_parked_when_a_send_finds_the_gate_open_still_gets_it(
    kind: str, inside_enqueue: Arm
) -> None:
    # The other code sends and receives: nothing is left buffered, but the
    # send reopened the gate that routes sends to a parked receiver.  A
    # later send must still reach the receive that parked.
    tx, rx = make(kind, math.inf)

    def send_and_take_back() -> None:
        tx.send_nowait("taken")
        assert rx.receive_nowait() == "taken"

    inside_enqueue(send_and_take_back)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        tx.send_nowait("later")
        with anyio.fail_after(5):
            await receiver.finished.wait()
    assert receiver.result == "later"
    tx.close()
    rx.close()


async def test_a_receive_ends_when_the_last_sender_closes_while_it_parks(
    kind: str, inside_enqueue: Arm
) -> None:
    tx, rx = make(kind, math.inf)
    inside_enqueue(tx.close)
    with anyio.fail_after(5), pytest.raises(anyio.EndOfStream):
        await rx.receive()
    rx.close()


async def test_a_receive_raises_closed_when_its_endpoint_closes_while_it_parks(
    kind: str, inside_enqueue: Arm
) -> None:
    tx, rx = make(kind, math.inf)
    inside_enqueue(rx.close)
    with anyio.fail_after(5), pytest.raises(anyio.ClosedResourceError):
        await rx.receive()
    tx.close()


async def test_a_send_uses_the_room_made_while_it_parks(
    kind: str, inside_enqueue: Arm
) -> None:
    tx, rx = make(kind, 1)
    tx.send_nowait("first")
    taken = []
    inside_enqueue(lambda: taken.append(rx.receive_nowait()))
    with anyio.fail_after(5):
        await tx.send("second")
    assert taken == ["first"]
    assert drain(rx) == ["second"]
    assert tx.statistics().tasks_waiting_send == 0
    tx.close()
    rx.close()


async def test_a_send_raises_broken_when_the_last_receiver_closes_while_it_parks(
    kind: str, inside_enqueue: Arm
) -> None:
    tx, rx = make(kind, 0)
    inside_enqueue(rx.close)
    with anyio.fail_after(5), pytest.raises(anyio.BrokenResourceError):
        await tx.send("lost")
    tx.close()


async def test_a_send_raises_closed_when_its_endpoint_closes_while_it_parks(
    kind: str, inside_enqueue: Arm
) -> None:
    tx, rx = make(kind, 0)
    inside_enqueue(tx.close)
    with anyio.fail_after(5), pytest.raises(anyio.ClosedResourceError):
        await tx.send("lost")
    rx.close()


@pytest.mark.parametrize("flavour", ["mpsc", "spmc", "mpmc"])
async def test_a_strict_receive_that_need_not_park_after_all_still_checkpoints(
    flavour: str, inside_enqueue: Arm
) -> None:
    # A strict receive skips its checkpoint because it is about to park
    # (parking is the checkpoint).  When it does not park after all, it
    # must still be a checkpoint: in a cancelled scope it raises the
    # cancellation and takes nothing.
    from ._support import CHANNELS

    tx, rx = CHANNELS[flavour](math.inf, strict=True)
    inside_enqueue(lambda: tx.send_nowait("sent"))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rx.receive()
    assert scope.cancelled_caught
    assert rx.receive_nowait() == "sent"
    tx.close()
    rx.close()


#: The calls that park: a frame of one of them on the stack is "inside".
_CALLS = (SendEndpoint.send.__code__, ReceiveEndpoint.receive.__code__)


def _inside_a_call() -> bool:
    """Whether a send or receive is running on this thread's stack."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _CALLS:
            return True
        frame = frame.f_back
    return False


class _Cycle:
    """An object in a reference cycle whose ``__del__`` runs ``action``."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.me = self
        self.action = action

    def __del__(self) -> None:
        self.action()


@pytest.mark.parametrize("side", ["receive", "send"])
async def test_a_collection_inside_a_call_that_parks_leaves_no_call_waiting(
    kind: str, side: str, anyio_backend_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real collector, set off k allocations into the call for every k
    # of a range that spans the window, runs a finalizer that sends (for a
    # receive) or receives (for a send, which then has room).
    if FORCE_GENERIC and anyio_backend_name == "asyncio":
        # The generic waiter sleeps in asyncio.Event.wait(), which has the
        # same window of its own: a set() that a collection runs between
        # its look at the flag and its future's append wakes nobody.
        pytest.skip("asyncio.Event.wait() loses a set() run inside it")
    withdrawn = 0

    def counting(real: Any) -> Any:
        def withdraw(self: Any, waiter: Any) -> bool:
            nonlocal withdrawn
            withdrawn += 1
            return bool(real(self, waiter))

        return withdraw

    monkeypatch.setattr(WaitQueue, "withdraw", counting(WaitQueue.withdraw))
    monkeypatch.setattr(Slot, "withdraw", counting(Slot.withdraw))
    threshold = gc.get_threshold()
    hung = []
    try:
        for k in range(1, 61):  # 0 would turn the collector off
            fired: list[int] = []
            tx, rx = make(kind, math.inf if side == "receive" else 1)
            if side == "send":
                tx.send_nowait("first")

            def action(
                tx: Any = tx, rx: Any = rx, fired: list[int] = fired, now: bool = False
            ) -> None:
                if not now and not _inside_a_call():
                    # Collected outside the call: in another thread (Trio's
                    # I/O thread, in guest mode), or, from CPython 3.12 on,
                    # where the collector runs at the next check after the
                    # threshold, in Trio's run loop between its copy of
                    # the run queue and its clear() (a task rescheduled
                    # there is lost: Trio's hazard, not the channel's).
                    # The test runs the action itself below.
                    return
                fired.append(1)
                if side == "receive":
                    tx.send_nowait("sent")
                else:
                    rx.receive_nowait()

            async def operation(
                k: int = k,
                action: Callable[[], None] = action,
                tx: Any = tx,
                rx: Any = rx,
            ) -> Any:
                # Set off in the call's own task, just before it: the count
                # then climbs to the window from here.
                gc.collect(0)
                _Cycle(action)
                gc.set_threshold(gc.get_count()[0] + k, *threshold[1:])
                if side == "receive":
                    return await rx.receive()
                await tx.send("second")
                return None

            async with anyio.create_task_group() as tg:
                call = Call(operation).start(tg)
                await settle()
                gc.set_threshold(*threshold)
                gc.collect(0)  # the finalizer has run, inside the call or now
                if not fired:
                    gc.collect()
                if not fired:
                    action(now=True)
                with anyio.move_on_after(2):
                    await call.finished.wait()
                if call.outcome is None:
                    hung.append(k)
                    call.cancel()
            assert drain(rx) == ([] if side == "receive" else ["second"]), (k, hung)
            tx.close()
            rx.close()
    finally:
        gc.set_threshold(*threshold)
    assert hung == []
    if kind == "memory" and anyio_backend_name == "trio":
        # The drop-in checkpoints before it parks: Trio's scheduler runs
        # there, and the collections it sets off land in it, not in the
        # window (the tests above run the code there instead).
        return
    assert withdrawn > 0, "no round ran the finalizer inside that window"


# ---------------------------------------------------------------------------
# Inside a wake-up
# ---------------------------------------------------------------------------
#
# Waking a parked task allocates too (a loop callback, Trio's reschedule),
# so a collection can run a finalizer there, in the middle of the call that
# wakes it.  The call must have put the channel in order first: the
# finalizer's calls then see it as they would just after that call.  The
# action runs there through the ``inside_wake`` fixture (tests/conftest.py).


def _send_of(tx: Any, item: str) -> Callable[[], Awaitable[None]]:
    """A sender's call of ``tx.send(item)``."""
    return lambda: tx.send(item)


def _send_x_or_note(tx: Any, got: list[str]) -> None:
    """Send "X" at once, or note that it would block."""
    try:
        tx.send_nowait("X")
    except anyio.WouldBlock:
        got.append("WouldBlock")


async def _receive_by(how: str, rx: Any) -> Any:
    if how == "receive_nowait":
        return rx.receive_nowait()
    if how == "receive":
        return await rx.receive()
    (item,) = await rx.receive_many(1)
    return item


@pytest.mark.parametrize("how", ["receive_nowait", "receive", "receive_many"])
@pytest.mark.parametrize("capacity", [1, 2])
async def test_a_send_inside_the_wake_of_a_blocked_sender_finds_the_buffer_full(
    kind: str, how: str, capacity: int, inside_wake: Arm
) -> None:
    # The receive takes the oldest item and moves the blocked sender's in;
    # a send_nowait() run as that sender is woken finds the buffer full
    # again (it went ahead of the blocked sender's item, past the capacity).
    if kind == "spmc":
        pytest.skip("one sender: a second send raises BusyResourceError")
    if kind == "memory" and how == "receive_many":
        pytest.skip("AnyIO's streams have no receive_many()")
    tx, rx = make(kind, capacity)
    for i in range(capacity):
        tx.send_nowait(f"pre{i}")
    got: list[str] = []

    async with anyio.create_task_group() as tg:
        blocked = Call(lambda: tx.send("B")).start(tg)
        await settle()
        inside_wake(partial(_send_x_or_note, tx, got))
        assert await _receive_by(how, rx) == "pre0"
        await blocked.finished.wait()
    assert got == ["WouldBlock"]
    assert drain(rx) == [f"pre{i}" for i in range(1, capacity)] + ["B"]
    tx.close()
    rx.close()


async def test_a_receive_inside_the_wake_of_a_blocked_sender_keeps_the_senders_order(
    kind: str, inside_wake: Arm
) -> None:
    # Two senders blocked, B1 first.  A receive_nowait() run as B1 is
    # woken takes the next item and lets B2's in: after B1's.
    if kind == "spmc":
        pytest.skip("one sender: no second task can block sending")
    tx, rx = make(kind, 2)
    tx.send_nowait("pre0")
    tx.send_nowait("pre1")
    taken: list[str] = []
    async with anyio.create_task_group() as tg:
        first = Call(lambda: tx.send("B1")).start(tg)
        await settle()
        second = Call(lambda: tx.send("B2")).start(tg)
        await settle()
        inside_wake(lambda: taken.append(rx.receive_nowait()))
        assert rx.receive_nowait() == "pre0"
        await first.finished.wait()
        await second.finished.wait()
    assert taken == ["pre1"]
    assert drain(rx) == ["B1", "B2"]
    tx.close()
    rx.close()


@pytest.mark.parametrize("how", ["send", "send_nowait"])
async def test_the_last_receiver_closed_inside_a_handoff_breaks_the_next_send(
    kind: str, how: str, inside_wake: Arm
) -> None:
    # A send hands its item to the parked receiver; the last receiver is
    # closed as the receiver is woken.  Later sends raise
    # BrokenResourceError (they were taken into a channel nobody could
    # receive from, and kept there).
    tx, rx = make(kind, 2)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        inside_wake(rx.close)
        if how == "send":
            await tx.send("A")
        else:
            tx.send_nowait("A")
        with pytest.raises(anyio.BrokenResourceError):
            tx.send_nowait("Y")
        await receiver.finished.wait()
        with pytest.raises(anyio.BrokenResourceError):
            tx.send_nowait("Z")
    assert receiver.result == "A"
    tx.close()


@pytest.mark.parametrize("flavour", ["mpmc", "memory"])
async def test_the_last_sender_closed_inside_a_handoff_ends_the_stream_after_the_item(
    flavour: str, anyio_backend_name: str, inside_wake: Arm
) -> None:
    # Two receivers parked; a send hands its item to the first, and the
    # last sender is closed as it is woken.  The first is then cancelled
    # before it runs (asyncio): the item goes to the second, and only then
    # does the stream end (the close saw no item in flight, and ended the
    # stream for the second at once).
    if anyio_backend_name != "asyncio":
        pytest.skip("plain asyncio task.cancel() of a woken task")
    import asyncio

    tx, rx = make(flavour, 0)
    loop = asyncio.get_running_loop()
    first = loop.create_task(rx.receive())
    await settle()
    second = loop.create_task(rx.receive())
    await settle()
    inside_wake(tx.close)
    tx.send_nowait("A")
    first.cancel()
    await asyncio.wait([first, second])
    assert first.cancelled()
    assert second.result() == "A"
    with pytest.raises(anyio.EndOfStream):
        rx.receive_nowait()
    rx.close()


@pytest.mark.parametrize("capacity", [0, 1])
async def test_a_receive_inside_a_handoff_to_the_single_receiver_is_busy(
    capacity: int, inside_wake: Arm
) -> None:
    # The mpsc receiver's task is parked; a send hands it an item, and
    # another receive on it runs as it is woken: that receiver is busy
    # (its granted receive has not resumed).
    tx, rx = make("mpsc", capacity)
    got: list[str] = []

    def receive_now() -> None:
        try:
            rx.receive_nowait()
        except anyio.BusyResourceError:
            got.append("busy")

    async with anyio.create_task_group() as tg:
        receiver = Call(rx.receive).start(tg)
        await settle()
        inside_wake(receive_now)
        tx.send_nowait("A")
        await receiver.finished.wait()
    assert got == ["busy"]
    assert receiver.result == "A"
    tx.close()
    rx.close()


@pytest.mark.parametrize("flavour", ["mpsc", "mpmc"])
async def test_a_receive_inside_a_wake_of_receive_many_comes_after_the_batch(
    flavour: str, inside_wake: Arm
) -> None:
    # receive_many(3) takes the items of three of four blocked senders: the
    # first as receive() does, waking its sender, the others in one step.
    # A receive_nowait() run as the second is woken gets the fourth's, not
    # one from the middle of that step.
    tx, rx = make(flavour, 0)
    taken: list[str] = []

    async with anyio.create_task_group() as tg:
        senders = []
        for i in range(1, 5):
            senders.append(Call(_send_of(tx, f"S{i}")).start(tg))
            await settle()
        inside_wake(lambda: None)  # the first sender's wake-up
        inside_wake(lambda: taken.append(rx.receive_nowait()))
        assert await rx.receive_many(3) == ["S1", "S2", "S3"]
        for sender in senders:
            await sender.finished.wait()
    assert taken == ["S4"]
    tx.close()
    rx.close()


@pytest.mark.parametrize("how", ["send", "send_nowait"])
@pytest.mark.parametrize("flavour", ["mpsc", "mpmc", "memory"])
async def test_a_send_past_a_cancelled_receiver_runs_no_code_half_way(
    flavour: str,
    how: str,
    anyio_backend_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The head receiver's task was cancelled and has not run: the send
    # skips it.  A grant refused by its future raises an error, which
    # allocates: a send run there found the first item counted as handed
    # over, and the first was delivered twice, the second lost.
    if anyio_backend_name != "asyncio":
        pytest.skip("plain asyncio task.cancel() of a parked receiver")
    if flavour == "memory" and how == "send":
        pytest.skip("the drop-in's send checkpoints first: the receiver leaves")
    import asyncio

    armed = arm_inside_refused_grant(monkeypatch)
    tx, rx = make(flavour, 2)
    receiver = asyncio.get_running_loop().create_task(rx.receive())
    await settle()
    receiver.cancel()
    armed.append(lambda: tx.send_nowait("Y"))
    if how == "send":
        await tx.send("X")
    else:
        tx.send_nowait("X")
    if armed:  # not run inside the send: run it just after
        armed.pop()()
    await asyncio.wait([receiver])
    assert receiver.cancelled()
    assert drain(rx) == ["X", "Y"]
    tx.close()
    rx.close()


@pytest.mark.parametrize("flavour", ["mpsc", "mpmc"])
async def test_a_send_inside_a_wake_of_receive_many_refilling_finds_the_buffer_full(
    flavour: str, inside_wake: Arm
) -> None:
    # receive_many(2) takes the first buffered item as receive() does,
    # letting the first blocked sender's item in and waking it; then the
    # second item, and the second sender's item in to refill the buffer.
    # A send_nowait() run as that sender is woken finds the buffer full.
    tx, rx = make(flavour, 2)
    tx.send_nowait("pre0")
    tx.send_nowait("pre1")
    got: list[str] = []

    async with anyio.create_task_group() as tg:
        senders = []
        for name in ("S1", "S2"):
            senders.append(Call(_send_of(tx, name)).start(tg))
            await settle()
        inside_wake(lambda: None)  # the first sender's wake-up
        inside_wake(partial(_send_x_or_note, tx, got))
        assert await rx.receive_many(2) == ["pre0", "pre1"]
        for sender in senders:
            await sender.finished.wait()
    assert got == ["WouldBlock"]
    assert drain(rx) == ["S1", "S2"]
    tx.close()
    rx.close()


async def test_an_item_given_back_is_the_next_receivers_before_it_is_woken(
    anyio_backend_name: str, inside_wake: Arm
) -> None:
    # A send hands its item to the first of two parked receivers, which is
    # cancelled before it runs: the item goes to the second.  A receive
    # run as the second is woken finds the item taken (it is owed to it).
    if anyio_backend_name != "asyncio":
        pytest.skip("plain asyncio task.cancel() of a woken receiver")
    import asyncio

    tx, rx = make("mpmc", 0)
    loop = asyncio.get_running_loop()
    first = loop.create_task(rx.receive())
    await settle()
    second = loop.create_task(rx.receive())
    await settle()
    got: list[str] = []

    def receive_now() -> None:
        try:
            got.append(rx.receive_nowait())
        except anyio.WouldBlock:
            got.append("WouldBlock")

    inside_wake(lambda: None)  # the first receiver's wake-up
    inside_wake(receive_now)  # the second's, as the item is given on
    tx.send_nowait("A")
    first.cancel()
    await asyncio.wait([first, second])
    assert first.cancelled()
    assert second.result() == "A"
    assert got == ["WouldBlock"]
    tx.close()
    rx.close()


@pytest.mark.parametrize("at", ["_interrupted", "_cancelled_parked"])
async def test_an_item_sent_as_a_cancelled_receive_settles_is_given_back(
    kind: str, at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other code runs as a call starts in the settling of a cancelled
    # receive: where a collection may run a finalizer (3.10 allocates each
    # call's frame; 3.12+ runs a pending collection as a call starts).  A
    # send there finds the receiver still waiting with the generic waiter,
    # which a cancellation does not mark, and grants it the item: the
    # receive, cancelled, must give it back (it was lost, or miscounted a
    # dead waiter, when the state was read before that point).
    tx, rx = make(kind, 0)
    armed: list[Callable[[], object]] = []
    outcome: list[str] = []

    def send() -> None:
        try:
            tx.send_nowait("X")
        except anyio.WouldBlock:  # the native waiters: the receiver is gone
            outcome.append("would block")
        else:
            outcome.append("sent")

    def run_first(cls: type[Any]) -> None:
        original = getattr(cls, at)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if armed:
                armed.pop()()
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, at, wrapper)

    for cls in (Parking,) if at == "_interrupted" else (WaitQueue, Slot):
        run_first(cls)
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:

            async def cancel_once_parked() -> None:
                while not rx.statistics().tasks_waiting_receive:
                    await anyio.lowlevel.checkpoint()
                armed.append(send)
                scope.cancel()

            tg.start_soon(cancel_once_parked)
            got = await rx.receive()
    assert not armed, "the other code never ran"
    if FORCE_GENERIC:
        assert outcome == ["sent"]
    if not scope.cancelled_caught:
        # Trio's own waiter: the send ran inside Trio's abort, so the grant
        # came first and the cancellation waits for the next checkpoint.
        assert got == "X"
        assert outcome == ["sent"]
    elif outcome == ["sent"]:
        assert rx.statistics().tasks_waiting_receive == 0
        assert rx.receive_nowait() == "X"
    with pytest.raises(anyio.WouldBlock):
        rx.receive_nowait()
    tx.close()
    rx.close()


@pytest.mark.parametrize("flavour", ["spmc", "mpmc", "memory"])
async def test_a_send_while_a_cancelled_receive_compacts_the_queue_loses_nothing(
    flavour: str,
) -> None:
    # The 17th of 19 parked receivers cancelled leaves more than half the
    # queue dead: its settling rebuilds the queue, with a filter that runs
    # Python code, where a collection may run a finalizer.  A send there
    # (run here by a stand-in dead waiter as the filter reads it) must not
    # break the rebuild, nor lose a waiter or the item.  (It raised
    # RuntimeError, and on Trio's own waiter the cancelled task hung.)
    n = 19
    tx, rx = make(flavour, 0)
    scopes = [anyio.CancelScope() for _ in range(n)]
    got: list[str] = []
    sent: list[str] = []

    async def receive(i: int) -> None:
        with scopes[i]:
            got.append(await rx.receive())

    class DeadWaiter:
        __slots__ = ()

        @property
        def state(self) -> object:
            if not sent:
                tx.send_nowait("X")
                sent.append("X")
            return ABANDONED

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(receive, i)
            while rx.statistics().tasks_waiting_receive < n:
                await anyio.lowlevel.checkpoint()
            for i in range(16):
                scopes[i].cancel()
                await settle()
            queue = rx._state.recv_waiters
            queue.parked.append(DeadWaiter())
            queue._dead += 1  # counted as the dead waiter it stands for
            scopes[16].cancel()
            await settle()
            assert sent == ["X"]
            tx.send_nowait("Y")
    assert sorted(got) == ["X", "Y"]
    assert all(scope.cancelled_caught for scope in scopes[:17])
    assert rx.statistics().tasks_waiting_receive == 0
    tx.close()
    rx.close()
