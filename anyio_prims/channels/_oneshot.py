# oneshot: a channel that carries at most one item.
#
# State: ``item`` (NOTHING until sent, and again once received), whether the
# sender is done (sent, or closed without sending) and whether the receiver
# is open, and a Slot for the one task that may wait on the receiver (made by
# the first receive that waits: most oneshots are sent to before anyone
# waits, and never need one).  Invariants:
#   * a receiver is parked  =>  ``item`` is NOTHING and the sender is not done
#   * the item is handed over once: to the parked receiver (direct handoff)
#     or into ``item``; a receiver granted the item and cancelled before it
#     runs puts it back into ``item``, so a later receive gets it;
#   * ``granted`` is true from that handoff until the receiving task runs:
#     another task receiving meanwhile gets BusyResourceError, as it would
#     while the receiver is parked.
# ``Sender.send`` is synchronous and never blocks: it can be called from
# callbacks and ``finally`` blocks.  A sender garbage-collected without
# sending counts as closed, so a receiver never waits for a sender that no
# longer exists.  Its ``__del__`` runs wherever the collector does: in
# another thread, inside the event loop's bookkeeping, or inside a receive
# between its look at the sender and its park.  So it marks the sender done
# at once, and wakes a parked receiver through the loop's thread-safe call
# (``wake_soon``, taken by the receive before it parks), never directly;
# and a receive looks at the sender again once its waiter is in the slot.
from __future__ import annotations

from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, Final, Generic, TypeVar

import anyio
from anyio.abc import ObjectReceiveStream

from .._core import (
    BUDGET,
    FAILED,
    NOT_OPENED,
    PENDING,
    NotCopied,
    Slot,
    Unopened,
    budget_checkpoint,
    settled_wait,
    threadsafe_call_soon,
)
from ._state import NOTHING, _Nothing

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)

_OPEN: Final = 0
_SENT: Final = 1
_CLOSED: Final = 2


class OneshotState(Generic[T]):
    """What a oneshot sender and receiver share.  Internal.

    Made only by :func:`open_oneshot`, with its sender and receiver, in one
    frame: the three classes have no ``__init__``.  The attributes below are
    what it sets.
    """

    __slots__ = (
        "granted",
        "item",
        "receiver_open",
        "sender_done",
        "slot",
        "wake_soon",
    )

    #: NOTHING until sent, and again once received
    item: T | _Nothing
    sender_done: bool
    receiver_open: bool
    #: NOT_OPENED until a receive first waits (every read of it sees an
    #: empty slot), then that receive's Slot.
    slot: Slot[None] | Unopened
    #: the item was handed to the parked receiver, which has not resumed
    granted: bool
    #: while a receive waits: its event loop's thread-safe call_soon, for
    #: a sender's __del__ to wake it with (see the module comment)
    wake_soon: Callable[[Callable[[], object]], object] | None

    def end_for_parked(self) -> None:
        """The sender was dropped: a parked receive gets EndOfStream.  Run
        by the parked task's event loop, soon after that ``__del__``."""
        waiter = self.slot.pop()
        if waiter is not None:
            waiter.fail(anyio.EndOfStream())

    def give_back(self, item: T) -> None:
        # Granted, then cancelled before the task ran: the item was not
        # received.  Keep it for the next receive unless nobody can take it.
        self.granted = False
        if self.receiver_open:
            self.item = item


class Sender(NotCopied, Generic[T_contra]):
    """The sending side of a oneshot channel: :meth:`send` once, or close.

    Closing it (or dropping it) without sending makes the receiver raise
    ``anyio.EndOfStream``.  Usable as a sync context manager (closes on exit).
    """

    __slots__ = ("__weakref__", "_state", "_status")
    _state: OneshotState[T_contra]
    #: _OPEN, _SENT or _CLOSED
    _status: int

    def send(self, item: T_contra) -> None:
        """Send the channel's one item.  Synchronous; never blocks.

        :raises RuntimeError: if this sender has already sent its item
        :raises anyio.ClosedResourceError: if this sender was closed
        :raises anyio.BrokenResourceError: if the receiver was closed (the
            sender stays unsent)
        """
        if self._status != _OPEN:
            if self._status == _SENT:
                raise RuntimeError(
                    "this oneshot sender has already sent its item; "
                    "a oneshot channel carries at most one item"
                )
            raise anyio.ClosedResourceError
        state = self._state
        if not state.receiver_open:
            raise anyio.BrokenResourceError
        self._status = _SENT
        state.sender_done = True
        waiter = state.slot.pop()
        if waiter is not None:
            state.granted = True
            waiter.grant(item)
        else:
            state.item = item

    def close(self) -> None:
        """Close without sending (no effect after :meth:`send`).  Idempotent;
        never blocks; not a checkpoint.

        A receiver waiting, or receiving later, gets ``anyio.EndOfStream``.
        """
        if self._status == _OPEN:
            self._status = _CLOSED
            state = self._state
            state.sender_done = True
            waiter = state.slot.pop()
            if waiter is not None:
                waiter.fail(anyio.EndOfStream())

    @property
    def sent(self) -> bool:
        """Whether :meth:`send` has succeeded."""
        return self._status == _SENT

    @property
    def closed(self) -> bool:
        """Whether the sender is done: sent, or closed without sending."""
        return self._status != _OPEN

    def __enter__(self) -> Sender[T_contra]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # Garbage-collected without sending: the receiver must not wait
        # forever.  As close(), except that a parked receive is woken by its
        # event loop, soon, not from here (see the module comment).
        if getattr(self, "_status", None) != _OPEN:
            return
        self._status = _CLOSED
        state = self._state
        state.sender_done = True
        wake_soon = state.wake_soon
        if state.slot and wake_soon is not None:
            try:
                wake_soon(state.end_for_parked)
            except RuntimeError:  # the event loop is closed: no task to wake
                pass

    def __repr__(self) -> str:
        status = ("open", "sent", "closed")[self._status]
        return f"<{type(self).__module__}.{type(self).__qualname__} {status}>"


class Receiver(NotCopied, ObjectReceiveStream[T_co], Generic[T_co]):
    """The receiving side of a oneshot channel.

    ``await receiver``, ``await receiver.receive()`` or
    ``receiver.receive_nowait()`` returns the item; ``async for`` yields it
    and stops.  Only one task may wait on it at a time.
    """

    __slots__ = ("_closed", "_state", "_strict")
    _state: OneshotState[T_co]
    _strict: bool
    _closed: bool

    async def receive(self) -> T_co:
        """Wait for the item and return it.

        A checkpoint when it blocks; otherwise as the channel's checkpoint
        mode says.  Cancelled: nothing was taken (an item granted to a task
        cancelled before it ran stays in the channel for the next call).

        :raises anyio.EndOfStream: if the sender was closed or dropped
            without sending, or the item has already been received
        :raises anyio.ClosedResourceError: if this receiver is closed, or is
            closed while the call waits
        :raises anyio.BusyResourceError: if another task is waiting on it
        """
        budget = BUDGET
        budget.left -= 1
        if budget.left <= 0 or (self._strict and not self._would_park()):
            # A strict one that must wait parks below instead: parking is
            # the checkpoint.  A due one checkpoints first all the same
            # (_core/_budget.py).
            await budget_checkpoint()
        state = self._state
        item = state.item
        if item is not NOTHING and not self._closed:
            state.item = NOTHING
            return item  # type: ignore[return-value]  # (no cast(): a call)
        self._check_can_wait()
        slot = state.slot
        if slot is NOT_OPENED:  # the first receive on this channel to wait
            slot = state.slot = Slot()
        state.wake_soon = threadsafe_call_soon()
        # slot.park(None, state.give_back), written out to look again once
        # the waiter is in the slot: a garbage collection since the look
        # above (the calls here allocate) may have run a dropped Sender's
        # __del__, which found nobody parked to wake (or code of the
        # caller's there may have sent, or closed this receiver).  Parked
        # now, this task would wait forever.
        waiter = slot.enqueue(None)
        if (state.sender_done or self._closed) and slot.withdraw(waiter):
            # (Not withdrawn if the sender's grant came meanwhile: awaited.)
            state.wake_soon = None
            if budget.left <= 0 or self._strict:
                # Not parking after all: the checkpoint skipped above for
                # the park, before the call raises or returns.
                await budget_checkpoint()
            return self.receive_nowait()
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (_core/_waiter.py)
                await settled_wait(waiter)
        except BaseException as exc:
            # With a give_back, a grant never stands: the item goes back.
            slot._interrupted(waiter, exc, state.give_back)
            if slot.parked is None:
                # Not if another receive parked after this one was
                # cancelled and before it ran (the wait no longer counted,
                # on asyncio once cancelled, on Trio once aborted): the
                # wake-up is that receive's now, and a dropped sender must
                # find it.
                state.wake_soon = None
            raise
        state.wake_soon = None
        value = waiter.value
        waiter.value = None  # recycled (see _core/_waiter.py); payload is None
        slot._spare = waiter
        if waiter.state is FAILED:
            try:
                raise value
            finally:
                del value  # the traceback keeps this frame: no cycle
        # ``granted`` is cleared by this call only once it has resumed with
        # the item (or by give_back): a receive cancelled before any grant,
        # or failed, must leave it alone, since another task may have parked
        # after it and been granted the item before this task ran.
        state.granted = False
        return value  # type: ignore[no-any-return]

    def receive_nowait(self) -> T_co:
        """Return the item if it has been sent.  Not a checkpoint.

        :raises anyio.WouldBlock: if the item has not been sent yet
        :raises anyio.EndOfStream: as :meth:`receive`
        :raises anyio.ClosedResourceError: if this receiver is closed
        :raises anyio.BusyResourceError: if another task is waiting on it
        """
        state = self._state
        item = state.item
        if item is not NOTHING and not self._closed:
            state.item = NOTHING
            return item  # type: ignore[return-value]  # (no cast(): a call)
        self._check_can_wait()
        raise anyio.WouldBlock

    def _would_park(self) -> bool:
        # Whether receive() is about to wait: no item, and none of the
        # errors of _check_can_wait().
        state = self._state
        return (
            state.item is NOTHING
            and not self._closed
            and not (state.slot or state.granted)
            and not state.sender_done
        )

    def _check_can_wait(self) -> None:
        state = self._state
        if self._closed:
            raise anyio.ClosedResourceError
        if state.slot or state.granted:
            raise anyio.BusyResourceError("receiving")
        if state.sender_done:
            raise anyio.EndOfStream

    def __await__(self) -> Generator[Any, None, T_co]:
        return self.receive().__await__()

    def close(self) -> None:
        """Close the receiver.  Idempotent; never blocks.

        A task waiting on it gets ClosedResourceError; a later ``send``
        raises ``anyio.BrokenResourceError``; an item already sent is
        released.
        """
        if not self._closed:
            self._closed = True
            state = self._state
            state.receiver_open = False
            waiter = state.slot.pop()
            if waiter is not None:
                waiter.fail(anyio.ClosedResourceError())
            state.item = NOTHING

    async def aclose(self) -> None:
        """As :meth:`close`.  Not a checkpoint."""
        self.close()

    @property
    def closed(self) -> bool:
        """Whether this receiver has been closed."""
        return self._closed

    def __enter__(self) -> Receiver[T_co]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self._state
        if self._closed:
            status = "closed"
        elif state.item is not NOTHING:
            status = "ready"
        elif state.sender_done:
            status = "done"
        else:
            status = "waiting"
        return f"<{type(self).__module__}.{type(self).__qualname__} {status}>"


def open_oneshot(strict: bool) -> tuple[Sender[Any], Receiver[Any]]:
    """A new oneshot channel: its state, sender and receiver.

    ``oneshot.channel()``'s one call; ``strict`` must be checked already.
    None of the three classes has an ``__init__``: each is made by a bare
    class call, and its attributes are set here.  A oneshot is often made
    for one request's reply: three ``__init__`` calls would cost about
    100 ns of a 910 ns ``oneshot.channel()``, send, receive and close on
    CPython 3.11, and ``object.__new__(cls)``, which skips an ``__init__``,
    about 25 ns more per object than the class call.
    """
    state: OneshotState[Any] = OneshotState()
    state.item = NOTHING
    state.sender_done = False
    state.receiver_open = True
    state.slot = NOT_OPENED
    state.granted = False
    state.wake_soon = None
    sender: Sender[Any] = Sender()
    sender._state = state
    sender._status = _OPEN
    receiver: Receiver[Any] = Receiver()
    receiver._state = state
    receiver._strict = strict
    receiver._closed = False
    return sender, receiver
