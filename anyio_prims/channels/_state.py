# The state one channel's endpoints share: the buffer, the counts, and the
# tasks parked on either side.  mpsc, spmc, mpmc and the anyio drop-in all
# run on this class; they differ only in how each side waits:
#
#   mpsc   senders park in a WaitQueue, the one receiver in a Slot
#   spmc   the one sender parks in a Slot, receivers in a WaitQueue
#   mpmc   a WaitQueue on both sides
#
# Each side's structure is made by the first task that parks on it; until
# then the side holds the core's shared, always-empty NOT_OPENED, which
# reads as "nobody parked".  Most channels never block, and a channel that
# is made, used and dropped then pays for neither structure.
#
# A blocked sender's waiter payload is ``(endpoint, item)``; a blocked
# receiver's is its endpoint, and its waiter names the call (see
# ``in_flight``): a waiter serves one call at a time, even when it is
# recycled for the next.  Items move by direct handoff: a send that finds
# a receiver parked grants it the item, with no hop through the buffer, and
# a receive that frees room grants the head sender (its item moves into the
# buffer, or straight to the receiver when the capacity is 0).
#
# Invariants (over *live* waiters: parked, not cancelled):
#   I1  a receiver is parked  =>  the buffer is empty
#   I2  a sender is parked    =>  the buffer holds >= capacity items
#   I3  ``in_flight`` lists, in grant order, the receivers granted an item
#       whose tasks have not resumed yet; ``waiter.value`` is the item
#   I4  the end of the stream is reported (EndOfStream) only when no sender
#       is open, the buffer is empty and ``in_flight`` is empty: an
#       in-flight item can still come back (below), so until the last one
#       has resumed, receivers wait for it
# The buffer may exceed the capacity by the items given back (below); sends
# wait until it is below the capacity again.
#
# Gates.  The fast paths in the endpoints test one number each instead of
# the waiters:
#   send     ``len(buffer) < send_limit``; send_limit is the capacity, or 0
#            while a receiver may be parked or no receiver is open, or, on
#            a single sender, while its taken send has not resumed
#   receive  ``len(buffer) > recv_floor``; recv_floor is 0, or inf while a
#            sender may be parked (its item must follow the one taken) or,
#            on a single receiver, while its granted receive has not
#            resumed (another task receiving then is BusyResourceError)
# The gates may be stricter than the truth, never looser: a task closes the
# gate itself before it parks, and ``sync()`` reopens a gate only after
# checking the waiters.  A stale gate costs one trip through the slow path,
# which ends with ``sync()``.
#
# Grant-then-cancel (asyncio: the task is cancelled after its waiter was
# granted, before it runs):
# * a send whose item was taken cannot be undone: it parks with
#   ``give_back=None``, returns normally and the core re-arms the
#   cancellation for its next checkpoint;
# * a receive can be undone: its item goes back without being reordered.
#   Receivers granted in the same loop iteration resume in grant order, so
#   the item of the cancelled one is passed down ``in_flight``: each later
#   in-flight receiver takes the item of the one before it, and the last
#   displaced item goes to the next parked receiver, or back to the front
#   of the buffer.  Granted R1=A, R2=B, then R1 cancelled: R2 gets A, and B
#   is next in line.  (A receive that completed on the buffer in that
#   window, before R1 was cancelled, keeps its later item; only asyncio can
#   produce that interleaving.)  An item that comes back after the last
#   sender closed is still delivered before the end of the stream (I4).
#
# Items a channel can no longer deliver (the last receiver closed) are
# dropped at once.  User code can run inside a release (an item's
# ``__del__``), so every release happens after the state is consistent.
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, Generic, Protocol, TypeVar, cast

import anyio

from .._core import Slot, Waiter, WaitQueue

T = TypeVar("T")
P = TypeVar("P")

INF: Final = math.inf


#: ``in_flight`` until a receiver first parks (``open_recv_waiters`` makes the
#: real deque): an empty tuple standing in for an empty deque, shared by
#: every such channel, so a mutation before then raises instead of leaking
#: into another channel.
NO_IN_FLIGHT: Final = cast("deque[Any]", ())


class _Nothing:
    """The type of :data:`NOTHING`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTHING"


#: "No item available now" (``None`` is a valid item).
NOTHING: Final = _Nothing()


@dataclass(frozen=True)
class ChannelStatistics:
    """A snapshot of a channel, as seen from any of its endpoints.

    :ivar items_buffered: items in the buffer now
    :ivar capacity: the buffer's capacity (an int, or ``math.inf``)
    :ivar open_senders: sender endpoints not closed
    :ivar open_receivers: receiver endpoints not closed
    :ivar tasks_waiting_send: tasks blocked in ``send()``
    :ivar tasks_waiting_receive: tasks blocked in ``receive()``
    """

    items_buffered: int
    capacity: float
    open_senders: int
    open_receivers: int
    tasks_waiting_send: int
    tasks_waiting_receive: int


def check_capacity(capacity: object) -> float:
    """``capacity`` as an int >= 0 or ``math.inf``, or a TypeError/ValueError."""
    if type(capacity) is not int:
        if isinstance(capacity, float):
            if capacity == INF:
                return INF
            raise ValueError(
                f"capacity must be an int >= 0 or math.inf, got {capacity}"
            )
        if not isinstance(capacity, int) or isinstance(capacity, bool):
            raise TypeError(
                f"capacity must be an int or math.inf, not {type(capacity).__name__}"
            )
        capacity = int(capacity)  # an int subclass, as a plain int
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0 or math.inf, got {capacity}")
    return capacity


def check_max_items(max_items: object) -> int:
    """``max_items`` as an int >= 1, or a TypeError/ValueError naming it."""
    if type(max_items) is not int and (
        not isinstance(max_items, int) or isinstance(max_items, bool)
    ):
        raise TypeError(f"max_items must be an int, not {type(max_items).__name__}")
    if max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items}")
    return int(max_items)


class Waiting(Protocol[P]):
    """What ``Slot`` and ``WaitQueue`` have in common."""

    @property
    def _spare(self) -> Waiter[Any] | None:
        """A settled waiter kept for the next wait (see _core/_waiter.py)."""

    @_spare.setter
    def _spare(self, waiter: Waiter[Any] | None) -> None: ...

    @property
    def parked(self) -> Any:
        """Falsy when nobody is parked (one attribute test, for close paths)."""

    def __bool__(self) -> bool: ...

    def pop(self) -> Waiter[P] | None: ...

    def grant_head(self, value: object) -> Waiter[P] | None: ...

    def enqueue(self, payload: P) -> Waiter[P]: ...

    def _interrupted(
        self,
        waiter: Waiter[Any],
        exc: BaseException,
        give_back: Callable[[Any], None] | None,
    ) -> bool: ...


def count_waiting(waiting: Waiting[Any]) -> int:
    """The live waiters parked in ``waiting``."""
    if isinstance(waiting, WaitQueue):
        return len(waiting)
    return 1 if waiting else 0


def take_owned(
    waiting: Waiting[P], owner: object, owner_of: Callable[[P], object]
) -> list[Waiter[P]]:
    """Remove the live waiters parked by ``owner``; fail them next."""
    if isinstance(waiting, WaitQueue):
        return waiting.take_where(lambda waiter: owner_of(waiter.payload) is owner)
    if isinstance(waiting, Slot):
        parked = waiting.parked
        if parked is not None and owner_of(parked.payload) is owner:
            live = waiting.pop()
            return [] if live is None else [live]
    return []


def _sender_of(payload: tuple[object, object]) -> object:
    return payload[0]


def _receiver_of(payload: object) -> object:
    return payload  # a blocked receive's payload is its endpoint


def drain(waiting: Waiting[Any]) -> list[Waiter[Any]]:
    """Remove every live waiter, in order; fail them next."""
    taken = []
    while (waiter := waiting.pop()) is not None:
        taken.append(waiter)
    return taken


class ChannelState(Generic[T]):
    """Buffer, counts and waiters of one channel.  Internal: see the endpoints.

    Made only by ``_endpoints.open_channel``, together with the channel's
    first sender and receiver, in one frame: the class has no ``__init__``
    (three Python calls fewer on every channel creation).  The attributes
    below are what ``open_channel`` sets.
    """

    __slots__ = (
        "__weakref__",
        "buffer",
        "capacity",
        "in_flight",
        "receivers",
        "recv_floor",
        "recv_waiters",
        "send_in_flight",
        "send_limit",
        "send_waiters",
        "senders",
        "single_receiver",
        "single_sender",
        "strict",
    )

    buffer: deque[T]
    #: an int >= 0, or ``math.inf``
    capacity: float
    #: every send and receive a checkpoint (else budgeted)
    strict: bool
    #: open endpoints; ``open_channel`` counts the first two, and each
    #: clone's ``__init__`` counts itself
    senders: int
    receivers: int
    #: Where blocked senders and receivers park: a Slot on a single side,
    #: else a WaitQueue, made by the first park on that side (see
    #: ``open_send_waiters``); until then the shared empty NOT_OPENED.
    send_waiters: Waiting[tuple[object, T]]
    recv_waiters: Waiting[object]
    single_sender: bool
    single_receiver: bool
    #: receivers granted an item whose tasks have not resumed (I3);
    #: NO_IN_FLIGHT until a receiver first parks
    in_flight: deque[Waiter[object]]
    #: a single sender's item was taken and its task has not resumed
    send_in_flight: bool
    #: the gates (see the top of the file)
    send_limit: float
    recv_floor: float

    def open_send_waiters(self) -> Waiting[tuple[object, T]]:
        """Make the senders' wait structure: a send is about to park first.

        Called only while ``send_waiters`` is NOT_OPENED (the caller tests
        it).  Most channels never block, so making each side's structure
        only when needed saves its cost on every channel that is created,
        used without waiting and dropped.
        """
        waiters = self.send_waiters = Slot() if self.single_sender else WaitQueue()
        return waiters

    def open_recv_waiters(self) -> Waiting[object]:
        """Make the receivers' wait structure; as :meth:`open_send_waiters`."""
        waiters = self.recv_waiters = Slot() if self.single_receiver else WaitQueue()
        # Only a receiver that parked can be granted an item (I3).
        self.in_flight = deque()
        return waiters

    def sync(self) -> None:
        """Recompute both gates from the waiters (after any slow-path change)."""
        # Written out, for one case each, in try_send() (a handoff) and in
        # ReceiveEndpoint.receive() (a resumed single receiver): keep in step.
        # ``w.parked and w`` is ``bool(w)`` without its call when nothing is
        # parked, the common case here (a Slot is emptied when it is popped).
        recv_waiters = self.recv_waiters
        self.send_limit = (
            self.capacity
            if self.receivers
            and not (recv_waiters.parked and recv_waiters)
            and not self.send_in_flight
            else 0
        )
        send_waiters = self.send_waiters
        self.recv_floor = (
            INF
            if (send_waiters.parked and send_waiters)
            or (self.single_receiver and self.in_flight)
            else 0
        )

    def send_would_park(self, closed: bool) -> bool:
        """Whether a send now would park (so it needs no checkpoint first).

        Exactly the case in which ``try_send`` returns ``False``; evaluated
        only when a checkpoint is due, so it is not on the fast path.
        """
        return (
            not closed
            and self.receivers > 0
            and not (self.single_sender and (self.send_waiters or self.send_in_flight))
            and not self.recv_waiters
            and len(self.buffer) >= self.capacity
        )

    def receive_would_park(self, closed: bool) -> bool:
        """Whether a receive now would park: ``try_receive`` returns NOTHING."""
        # ReceiveEndpoint.receive() tests the negation of this written out
        # (with ``.parked`` for bool()) before it parks: keep in step.
        return (
            not closed
            and not (self.single_receiver and (self.recv_waiters or self.in_flight))
            and not self.buffer
            and not self.send_waiters
            and (self.senders > 0 or bool(self.in_flight))
        )

    # -- sending ---------------------------------------------------------

    def try_send(self, closed: bool, item: T) -> bool:
        """Send ``item`` without blocking; ``False`` if the sender must wait.

        The slow half of ``send``/``send_nowait``: the checks the fast path
        skipped, then a handoff to a parked receiver, then the buffer.
        """
        if closed:
            raise anyio.ClosedResourceError
        if not self.receivers:
            raise anyio.BrokenResourceError
        if self.single_sender and (self.send_waiters or self.send_in_flight):
            raise anyio.BusyResourceError("sending")
        recv_waiters = self.recv_waiters
        waiter = recv_waiters.grant_head(item) if recv_waiters.parked else None
        if waiter is not None:
            # I1: the buffer is empty, so the item went straight to the head
            # receiver; it stays in in_flight until that task resumes.
            self.in_flight.append(waiter)
            # What sync() would do, cheaper: this is the ping-pong path.
            if not (recv_waiters.parked and recv_waiters) and not self.send_in_flight:
                self.send_limit = self.capacity
            if self.single_receiver:
                self.recv_floor = INF
            return True
        if len(self.buffer) < self.capacity:
            self.buffer.append(item)
            self.sync()
            return True
        return False

    def grant_sender(self, sender: Waiter[tuple[object, T]]) -> T:
        """Wake a parked sender whose item is being taken; return the item."""
        if self.single_sender:
            self.send_in_flight = True
        sender.grant()
        return sender.payload[1]

    # -- receiving -------------------------------------------------------

    def try_receive(self, closed: bool) -> T | _Nothing:
        """Receive without blocking; NOTHING if the receiver must wait.

        The slow half of ``receive``/``receive_nowait``: the checks the fast
        path skipped, then the buffer or the head sender.  Keeps I2: room
        freed in the buffer goes to the head sender's item.
        """
        if closed:
            raise anyio.ClosedResourceError
        if self.single_receiver and (
            (self.recv_waiters.parked and self.recv_waiters) or self.in_flight
        ):
            raise anyio.BusyResourceError("receiving")
        buffer = self.buffer
        send_waiters = self.send_waiters
        if buffer:
            item = buffer.popleft()
            if len(buffer) < self.capacity and send_waiters.parked:
                sender = send_waiters.pop()
                if sender is not None:
                    buffer.append(self.grant_sender(sender))
            self.sync()
            return item
        sender = send_waiters.pop() if send_waiters.parked else None
        if sender is not None:
            item = self.grant_sender(sender)
            self.sync()
            return item
        if not self.senders and not self.in_flight:  # I4
            raise anyio.EndOfStream
        return NOTHING

    def take_more(self, items: list[T], max_items: int) -> None:
        """Append up to ``max_items - len(items)`` more items, without waiting."""
        buffer = self.buffer
        want = max_items - len(items)
        while want and buffer:
            items.append(buffer.popleft())
            want -= 1
        senders = self.send_waiters
        while want:
            sender = senders.pop()
            if sender is None:
                break
            items.append(self.grant_sender(sender))
            want -= 1
        while len(buffer) < self.capacity:
            sender = senders.pop()
            if sender is None:
                break
            buffer.append(self.grant_sender(sender))
        self.sync()

    def give_back(self, waiter: Waiter[object], _item: object = None) -> None:
        """The receive that parked on ``waiter`` was granted, then cancelled:
        pass its item on.

        The core's ``give_back`` callback, bound to ``waiter`` (the item the
        core passes is ``waiter.value``, read here from the waiter).
        """
        in_flight = self.in_flight
        index = 0
        for granted in in_flight:
            if granted is waiter:
                break
            index += 1
        else:  # pragma: no cover - every granted receiver is in in_flight
            return
        carry = waiter.value
        for later in islice(in_flight, index + 1, None):
            later.value, carry = carry, later.value
        del in_flight[index]
        self.restore(carry)

    def restore(self, item: T) -> None:
        """Put ``item`` back at the head of the line (after in-flight items)."""
        if not self.receivers:
            self.sync()
            return  # nobody can receive it: drop it (released on return)
        waiter = self.recv_waiters.pop()
        if waiter is not None:
            self.in_flight.append(waiter)
            waiter.grant(item)
        else:
            self.buffer.appendleft(item)
        self.sync()

    # -- closing ---------------------------------------------------------

    # The endpoints' close() count the endpoint out and call these only when
    # a task may be parked (or, for a receiver, items may be buffered):
    # closing a channel nobody waits on is the common case, and it then
    # costs no call.  ``.parked`` is tested before ``bool(waiting)`` for the
    # same reason.

    def sender_closed(self, sender: object) -> None:
        """``sender`` closed: fail its blocked sends; maybe end the stream.

        ``senders`` no longer counts it (the endpoint has counted it out).
        """
        if self.send_waiters.parked and self.send_waiters:
            for waiter in take_owned(self.send_waiters, sender, _sender_of):
                waiter.fail(anyio.ClosedResourceError())
            self.sync()
        if not self.in_flight:  # else the last one to resume ends it (I4)
            self.end_of_stream()

    def end_of_stream(self) -> None:
        """Fail the parked receivers with EndOfStream if the stream has ended:
        no sender open and no item in flight (I4)."""
        if not self.senders and self.recv_waiters.parked and self.recv_waiters:
            # I1: the buffer is empty while receivers are parked.
            for waiter in drain(self.recv_waiters):
                waiter.fail(anyio.EndOfStream())
            self.sync()

    def receiver_closed(self, receiver: object) -> None:
        """``receiver`` closed: fail its blocked receives; maybe break sends.

        ``receivers`` no longer counts it (the endpoint has counted it out).
        If it was the last one, blocked and later sends break and the
        buffered items are released.
        """
        if self.recv_waiters.parked and self.recv_waiters:
            for waiter in take_owned(self.recv_waiters, receiver, _receiver_of):
                waiter.fail(anyio.ClosedResourceError())
            self.sync()
        if not self.receivers:
            if self.send_waiters.parked:
                # Whenever anything is parked, live or not: draining also
                # drops cancelled senders' waiters still queued, and the
                # items they hold.
                for waiter in drain(self.send_waiters):
                    waiter.fail(anyio.BrokenResourceError())
                self.sync()
            else:
                self.send_limit = 0  # what sync() gives with no receiver
            if self.buffer:
                # Release the items only now: their __del__ may use the
                # channel, which must be consistent by then.
                released, self.buffer = self.buffer, deque()
                del released

    def statistics(self) -> ChannelStatistics:
        """A snapshot of this channel."""
        return ChannelStatistics(
            items_buffered=len(self.buffer),
            capacity=self.capacity,
            open_senders=self.senders,
            open_receivers=self.receivers,
            tasks_waiting_send=count_waiting(self.send_waiters),
            tasks_waiting_receive=count_waiting(self.recv_waiters),
        )
