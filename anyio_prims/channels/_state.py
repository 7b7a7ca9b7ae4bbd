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
# a receiver parked grants it an item, and the woken receiver never
# competes again; a receive that frees room grants the head sender (its
# item moves into the buffer, or, at capacity 0 with nothing reserved,
# straight to that receive).
#
# A granted item waits for its receiver *in the buffer*: the buffer holds
# every item accepted and not yet delivered, oldest first, and its first
# ``len(in_flight)`` items are reserved, ``buffer[i]`` for
# ``in_flight[i]``.  The rest are the free items, the ones a receive that
# does not wait can take.  It takes ``buffer[0]``, the oldest, and with it
# every reservation moves up one place (the last in-flight receiver now
# has the first free item): whatever the order in which the calls
# complete, each takes the oldest item not yet delivered, except that
# receivers granted together keep their grant order among themselves.
# Nothing moves in memory for any of this; the reservation is a position.
#
# Pinned items.  Trio runs the tasks woken in one step in any order, so a
# receiver granted later can resume first: it takes its own item, later
# than the ones reserved before it.  Those items are then for their own
# receivers only, or the same task, receiving again, would take an item
# older than the one it just got: the resume moves each of them, with its
# receiver, out of the buffer and ``in_flight`` into ``pinned``.  The
# buffer's first item is again the oldest any receive may take, and the
# fast paths stay open.  asyncio resumes woken tasks in the order they
# were woken, so nothing is pinned there.
#
# Invariants (over *live* waiters: parked, not cancelled); ``free`` is
# ``len(buffer) - len(in_flight)``:
#   I0  free >= 0: every in-flight receiver has its item in the buffer
#   I1  a receiver is parked  =>  free == 0
#   I2  a sender is parked    =>  free >= capacity
#   I3  ``in_flight`` lists, in grant order, the receivers granted an item
#       whose tasks have not resumed yet; ``in_flight[i]`` resumes with
#       ``buffer[i]`` and both leave
#   I4  the end of the stream is reported (EndOfStream) only when no sender
#       is open, free == 0 and ``in_flight`` and ``pinned`` are empty: an
#       in-flight receive can still be cancelled and free its item (below),
#       so until the last one has resumed, receivers wait for it
#   I5  ``pinned`` maps receivers granted an item whose tasks have not
#       resumed, and that are not in ``in_flight``, to their items, which
#       are not in the buffer and are older than every item in it; a
#       receive that does not resume a grant takes ``buffer[0]``
# Free items may exceed the capacity by the items freed that way; sends
# wait until they are below the capacity again.
#
# Gates.  The fast paths in the endpoints test one number each instead of
# the waiters:
#   send     ``len(buffer) < send_limit``; send_limit is the capacity, or
#            0 while a receiver may be parked or no receiver is open, or, on
#            a single sender, while its taken send has not resumed.  It
#            counts reserved items as taking room: while items are
#            reserved, a send into the last places takes the slow path,
#            which counts only the free items
#   receive  ``len(buffer) > recv_floor``; recv_floor is ``len(in_flight)``,
#            or inf while a sender may be parked (its item must follow the
#            one taken), or, on a single receiver, while its granted receive
#            has not resumed (another task receiving then is
#            BusyResourceError).  A grant sets it and a granted receive
#            that resumes lowers it by one, so that it is exact whenever it
#            is not inf: a receive that fails a gate that is not inf knows
#            that no item is free, and parks at once.  An inf gate may be
#            stale (on Trio a parked sender leaves its queue when it is
#            cancelled, before its task runs to call ``sync()``), so a
#            receive that finds it inf asks ``try_receive()`` first
# The gates may be stricter than the truth, never looser (a recv_floor
# below ``len(in_flight)`` would let a receive take an item reserved for a
# receiver that has not resumed): a task closes the gate itself before it
# parks, and ``sync()`` reopens a gate only after checking the waiters.  A
# stale closed gate costs one trip through the slow path, which ends with
# ``sync()``.
#
# Grant-then-cancel (asyncio: the task is cancelled after its waiter was
# granted, before it runs; the generic waiter on every backend):
# * a send whose item was taken cannot be undone: it parks with
#   ``give_back=None``, returns normally and the core re-arms the
#   cancellation for its next checkpoint;
# * a receive can be undone, and nothing is reordered: the cancelled
#   receiver leaves ``in_flight``, so each later in-flight receiver moves up
#   to the item reserved before it, and the last reserved item is free
#   again, at the front of the free items, where the next parked receiver
#   is granted it or the next receive takes it.  Granted R1=A, R2=B, then
#   R1 cancelled: R2 gets A, and B is next in line.  A receive that took an
#   item in that window took A, the oldest, and left B reserved for R1:
#   then B is next in line.  An item freed after the last sender closed is
#   still delivered before the end of the stream (I4).  A pinned item freed
#   this way (on Trio, by the generic waiter, which can both resume out of
#   grant order and undo a grant, or by a Ctrl-C at the checkpoint of a
#   receive settled before it slept) goes back to the front of the buffer,
#   next in line although a later item was delivered already: the one case
#   in which the order can differ.
#
# Items a channel can no longer deliver (the last receiver closed) are
# dropped at once.  User code can run inside a release (an item's
# ``__del__``), so every release happens after the state is consistent.
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Generic, Protocol, TypeVar, cast

import anyio

from .._core import Slot, Waiter, WaitQueue

T = TypeVar("T")
P = TypeVar("P")

INF: Final = math.inf


#: ``pinned`` until a receive first resumes out of grant order (``take_granted``
#: makes the real dict); read-only, as NO_IN_FLIGHT.
NO_PINNED: Final = cast("dict[Any, Any]", MappingProxyType({}))

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

    :ivar items_buffered: items in the buffer now, not counting those
        reserved for receivers that were woken and have not run yet
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

    def has_live(self) -> bool: ...

    def pop(self) -> Waiter[P] | None: ...

    def grant_head(self, value: object) -> Waiter[P] | None: ...

    def take_head(self, value: object) -> Waiter[P] | None: ...

    def grant_head_into(self, value: object, into: deque[Any]) -> Waiter[P] | None: ...

    def enqueue(self, payload: P) -> Waiter[P]: ...

    def withdraw(self, waiter: Waiter[P]) -> bool: ...

    def _interrupted(
        self,
        waiter: Waiter[Any],
        exc: BaseException,
        give_back: Callable[[Any], None] | None,
        kept: Callable[[Any], None] | None = None,
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
        "pinned",
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

    #: every item accepted and not delivered, oldest first, the reserved
    #: ones first (I3); one deque for the channel's life (a parked receive
    #: holds it across its wait)
    buffer: deque[T]
    #: an int >= 0, or ``math.inf``
    capacity: float
    #: every send and receive a checkpoint (else budgeted)
    strict: bool
    #: open endpoints; ``open_channel`` counts the first two, and
    #: ``_new_clone()`` each clone
    senders: int
    receivers: int
    #: Where blocked senders and receivers park: a Slot on a single side,
    #: else a WaitQueue, made by the first park on that side (see
    #: ``open_send_waiters``); until then the shared empty NOT_OPENED.
    send_waiters: Waiting[tuple[object, T]]
    recv_waiters: Waiting[object]
    single_sender: bool
    single_receiver: bool
    #: receivers granted an item whose tasks have not resumed, in grant
    #: order; their items are the buffer's first ones (I3); NO_IN_FLIGHT
    #: until a receiver first parks
    in_flight: deque[Waiter[object]]
    #: a single sender's item was taken and its task has not resumed
    send_in_flight: bool
    #: granted receivers that have not resumed, out of ``in_flight``, and
    #: the items only they may take (I5; Trio, see the top of the file);
    #: NO_PINNED until a receive first resumes out of grant order
    pinned: dict[Waiter[object], T]
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
        # Written out, for one case each, in try_send() and
        # SendEndpoint.send() (a handoff) and in ReceiveEndpoint.receive() (a
        # resumed single receiver): keep in step.
        # ``w.parked and w`` is ``bool(w)`` without its call when nothing is
        # parked, the common case here (a Slot is emptied when it is popped).
        recv_waiters = self.recv_waiters
        reserved = len(self.in_flight)
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
            or (self.single_receiver and reserved)
            else reserved
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
            and len(self.buffer) - len(self.in_flight) >= self.capacity
            and not self.recv_waiters.has_live()  # as try_send's grant sees it
        )

    def receive_would_park(self, closed: bool) -> bool:
        """Whether a receive now would park: ``try_receive`` returns NOTHING."""
        # ReceiveEndpoint.receive() tests, before it parks, a cheaper
        # condition that is true whenever this is false (an inf receive gate
        # stands for a parked sender and a granted single receiver): keep
        # the two in step.
        return (
            not closed
            and not (self.single_receiver and (self.recv_waiters or self.in_flight))
            and len(self.buffer) <= len(self.in_flight)
            and not self.send_waiters.has_live()  # as try_receive's grant sees it
            and (self.senders > 0 or bool(self.in_flight) or bool(self.pinned))
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
        # ``w.parked and w``: bool(w) without its call while nothing is
        # parked, which is every spmc handoff (as in sync()).
        if self.single_sender and (
            ((send_waiters := self.send_waiters).parked and send_waiters)
            or self.send_in_flight
        ):
            raise anyio.BusyResourceError("sending")
        recv_waiters = self.recv_waiters
        if recv_waiters.parked:
            # A hand-over to the head receiver.  I1: no item was free, so
            # this one is the head receiver's, the buffer's first after those
            # already reserved (I3).  The item is in place and the receive
            # gate closed before the receiver is granted, and it is in
            # in_flight before it is woken (grant_head_into()): a finalizer
            # that a collection runs in the wake-up (it allocates) finds the
            # item handed over.  Written out in SendEndpoint.send() too, for
            # the ping-pong path: keep in step.
            buffer = self.buffer
            buffer.append(item)
            self.recv_floor = INF
            waiter = recv_waiters.grant_head_into(None, self.in_flight)
            if waiter is not None:
                # What sync() would do, cheaper.  No live sender is parked
                # (I1, I2: it would have been matched with the receiver).
                # ``receivers`` is read too, as sync() does: a finalizer run
                # in the wake-up may have closed the last receiver.  (Only
                # the wake-up can run one here: the appends allocate no
                # object the collector tracks.)
                if (
                    self.receivers
                    and not (recv_waiters.parked and recv_waiters)
                    and not self.send_in_flight
                ):
                    self.send_limit = self.capacity
                if not self.single_receiver:
                    self.recv_floor = len(self.in_flight)
                return True
            buffer.pop()  # nobody took it (nothing ran meanwhile: no wake-up)
        buffer = self.buffer
        if len(buffer) - len(self.in_flight) < self.capacity:
            buffer.append(item)
            self.sync()
            return True
        return False

    def take_sender(self) -> Waiter[tuple[object, T]] | None:
        """Take the head parked sender, whose item is being taken: granted,
        not woken yet (``take_head``); None if none is parked.

        The caller puts the item (``sender.payload[1]``) where it goes, in
        the buffer or the receiver's hands, brings the gates up to date
        (``sync()``), and only then calls ``sender.wake()``: a wake-up
        allocates (a loop callback, Trio's reschedule), so a garbage
        collection may run a finalizer there that uses the channel, and it
        must find the item in its place, not a slot free for one of its own.
        """
        sender = self.send_waiters.take_head(None)
        if sender is not None and self.single_sender:
            self.send_in_flight = True
        return sender

    # -- receiving -------------------------------------------------------

    def try_receive(self, closed: bool) -> T | _Nothing:
        """Receive without blocking; NOTHING if the receiver must wait.

        The slow half of ``receive``/``receive_nowait``: the checks the fast
        path skipped, then a free item or the head sender's.  The item taken
        is the oldest not delivered and not pinned, ``buffer[0]``, even when
        it is reserved (the reservations move up one place).  Keeps I2: room
        freed goes to the head sender's item.
        """
        if closed:
            raise anyio.ClosedResourceError
        in_flight = self.in_flight
        if self.single_receiver and (
            (self.recv_waiters.parked and self.recv_waiters) or in_flight
        ):
            raise anyio.BusyResourceError("receiving")
        buffer = self.buffer
        send_waiters = self.send_waiters
        if len(buffer) > len(in_flight):
            item = buffer.popleft()
            if len(buffer) - len(in_flight) < self.capacity and send_waiters.parked:
                sender = self.take_sender()
                if sender is not None:
                    buffer.append(sender.payload[1])
                    self.sync()
                    sender.wake()  # last: see take_sender()
                    return item
            self.sync()
            return item
        sender = self.take_sender() if send_waiters.parked else None
        if sender is not None:
            item = sender.payload[1]
            if buffer:  # reserved items are older: take the oldest (I3)
                buffer.append(item)
                item = buffer.popleft()
            self.sync()
            sender.wake()  # last: see take_sender()
            return item
        if not self.senders and not in_flight and not self.pinned:  # I4
            raise anyio.EndOfStream
        return NOTHING

    def take_granted(self, waiter: Waiter[object]) -> T:
        """The item of the granted receive that parked on ``waiter`` and has
        resumed out of grant order, or was pinned by one that did (Trio;
        many receivers only).  An out-of-order resume pins the receivers
        granted before it, with their items (I5), and takes ``buffer[i]``
        for ``in_flight[i]`` (I3), now the first."""
        pinned = self.pinned
        if pinned and waiter in pinned:  # Waiter has no __eq__: by identity
            item = pinned.pop(waiter)
        else:
            in_flight = self.in_flight
            buffer = self.buffer
            index = in_flight.index(waiter)
            if pinned is NO_PINNED:
                pinned = self.pinned = {}
            for _ in range(index):
                pinned[in_flight.popleft()] = buffer.popleft()
            in_flight.popleft()
            item = buffer.popleft()
        self.sync()
        if not self.in_flight and not self.senders:
            self.end_of_stream()  # the last item in flight is delivered (I4)
        return item

    def take_more(self, items: list[T], max_items: int) -> None:
        """Append up to ``max_items - len(items)`` more items, without waiting."""
        buffer = self.buffer
        reserved = len(self.in_flight)
        want = max_items - len(items)
        while want and len(buffer) > reserved:
            items.append(buffer.popleft())
            want -= 1
        # The senders whose items are taken are woken once the batch is
        # complete and the gates are up to date (see take_sender()): a
        # finalizer run in a wake-up then sees the whole call done.
        taken: list[Waiter[tuple[object, T]]] = []
        while want:
            sender = self.take_sender()
            if sender is None:
                break
            taken.append(sender)
            if buffer:  # reserved items are older: take the oldest (I3)
                buffer.append(sender.payload[1])
                items.append(buffer.popleft())
            else:
                items.append(sender.payload[1])
            want -= 1
        while len(buffer) - len(self.in_flight) < self.capacity:
            sender = self.take_sender()
            if sender is None:
                break
            taken.append(sender)
            buffer.append(sender.payload[1])
        self.sync()
        for sender in taken:
            sender.wake()

    def give_back(self, waiter: Waiter[object], _item: object = None) -> None:
        """The receive that parked on ``waiter`` was granted, then cancelled:
        free its reservation.

        The core's ``give_back`` callback, bound to ``waiter`` (the core
        passes ``waiter.value``, which a receiver's grant leaves None).  The
        later in-flight receivers move up one place; the last reserved item
        is free again, and goes to the next parked receiver, if any.  A
        pinned receiver's item (I5) goes back to the front of the buffer, so
        the in-flight receivers move up one place to it.
        """
        pinned = self.pinned
        if pinned and waiter in pinned:  # Waiter has no __eq__: by identity
            self.buffer.appendleft(pinned.pop(waiter))
        else:
            self.in_flight.remove(waiter)
        if not self.receivers:
            # Nobody can receive the freed item: release it, after the
            # state is consistent (its __del__ may use the channel).
            released = self.release_free()
            self.sync()
            del released
            return
        head = self.recv_waiters.take_head(None)
        if head is not None:  # I1: the freed item was the only free one
            self.in_flight.append(head)
            self.sync()
            head.wake()  # last, as in try_send()
            return
        self.sync()

    def release_free(self) -> list[T] | None:
        """Drop the free items (no receiver is open); return them, for the
        caller to release once the state is consistent.

        The buffer stays the same object: a receive holds it across its wait.
        """
        buffer = self.buffer
        free = len(buffer) - len(self.in_flight)
        return [buffer.pop() for _ in range(free)] if free > 0 else None

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
        no sender open and no item in flight or pinned (I4).  Each caller
        tests for items in flight before the call, on its own path; tested
        here again, so that the end is never reported early.  Nor while an
        item is buffered: I1 (no free item while receivers are parked) is
        broken for a moment where a finalizer sent inside a receive's
        ``enqueue`` and closed the last sender as the receive took its
        waiter back; that receive takes the item."""
        if (
            not self.senders
            and not self.in_flight
            and not self.pinned
            and not self.buffer
            and self.recv_waiters.parked
            and self.recv_waiters
        ):
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
            # Release the free items only now: their __del__ may use the
            # channel, which must be consistent by then.  Reserved items stay
            # for the receives granted them, which return them (I3).
            released = self.release_free()
            del released

    def statistics(self) -> ChannelStatistics:
        """A snapshot of this channel."""
        return ChannelStatistics(
            items_buffered=len(self.buffer) - len(self.in_flight),
            capacity=self.capacity,
            open_senders=self.senders,
            open_receivers=self.receivers,
            tasks_waiting_send=count_waiting(self.send_waiters),
            tasks_waiting_receive=count_waiting(self.recv_waiters),
        )
