# The endpoints of mpsc, spmc and mpmc channels (and, through SendEndpoint
# and ReceiveEndpoint, of the anyio drop-in).
#
# An endpoint is a handle on a shared ChannelState plus its own ``_closed``
# flag; closing it changes the state's counts.  The hot calls are flat:
#
#   send:     budget check, then ``len(buffer) < send_limit`` -> append
#   receive:  budget check, then ``len(buffer) > recv_floor`` -> popleft
#
# and the rest (closed endpoints, the single side's checks, a parked sender
# to admit) is the state's slow path; handing an item to a parked receiver
# allocates nothing either.  Only a call that blocks creates a waiter, and
# parks here, in the endpoint, to save a coroutine frame per wait.  The
# budget check is the one every primitive starts with, inlined: with
# ``strict`` every call is a checkpoint (as in AnyIO), otherwise one call in
# BUDGET_SIZE is, blocking or not.  The checkpoint comes first, so a
# cancellation there leaves nothing done; a strict call that is going to
# park skips it, because parking is the checkpoint (a cancellation
# delivered there refills the budget; a wake does not: _core/_budget.py).
# The anyio drop-in sets ``_checkpoint_before_park`` to keep anyio's
# order: a checkpoint, then the park.
#
# A call decides to park on what it saw, and only then makes and parks its
# waiter; making it allocates, so a garbage collection there may run a
# finalizer that uses the channel before the waiter is in place (sends an
# item, receives one, closes an endpoint).  Once parked, the call looks
# again at what decided it (a free item, room, open peers, its own
# endpoint), and if that changed takes the waiter back and starts over: a
# call never waits for something that has already happened.
#
# ``clone()`` exists only on the sides that may have many endpoints; a
# single side (the mpsc receiver, the spmc sender) raises BusyResourceError
# when a second task uses it while one is blocked in it.
from __future__ import annotations

from collections import deque
from functools import partial
from types import TracebackType
from typing import Any, ClassVar, Generic, TypeVar

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from .._core import (
    BUDGET,
    FAILED,
    GRANTED,
    NOT_OPENED,
    PENDING,
    NotCopied,
    Waiter,
    budget_checkpoint,
    raise_failure,
    settled_wait,
)
from ._state import (
    INF,
    NO_IN_FLIGHT,
    NO_PINNED,
    NOTHING,
    ChannelState,
    ChannelStatistics,
    Waiting,
    check_max_items,
)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
E = TypeVar("E", bound="_Endpoint")
S = TypeVar("S", bound="SendEndpoint[Any]")
R = TypeVar("R", bound="ReceiveEndpoint[Any]")


class _Endpoint(NotCopied):
    """What both halves of a channel share: closing, ``with``, ``repr``."""

    __slots__ = ()

    _closed: bool
    _state: ChannelState[Any]
    #: every call a checkpoint (the channel's ``strict``)
    _strict: bool
    #: Checkpoint even when the call is about to park (anyio's order).
    _checkpoint_before_park: ClassVar[bool] = False

    def _new_clone(self: E) -> E:
        """Another endpoint of this class on this channel, counted open.

        The endpoints have no ``__init__``: see :func:`open_channel`.
        """
        state = self._state
        clone = type(self)()
        clone._state = state
        clone._strict = state.strict
        clone._closed = False
        clone._count_open(state)
        return clone

    def _count_open(self, state: ChannelState[Any]) -> None:
        """Count one more open endpoint of this side."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        """As :meth:`close`.  Not a checkpoint (it cannot be cancelled)."""
        self.close()

    @property
    def closed(self) -> bool:
        """Whether this endpoint has been closed."""
        return self._closed

    def __enter__(self: E) -> E:
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
        status = "closed" if self._closed else "open"
        return (
            f"<{type(self).__module__}.{type(self).__qualname__} {status} "
            f"buffered={len(state.buffer) - len(state.in_flight)} "
            f"capacity={state.capacity}>"
        )


class SendEndpoint(_Endpoint, ObjectSendStream[T_contra], Generic[T_contra]):
    """The sending half of a channel (no statistics, no clone)."""

    __slots__ = ("_closed", "_state", "_strict")
    _state: ChannelState[T_contra]

    def _count_open(self, state: ChannelState[Any]) -> None:
        state.senders += 1

    async def send(self, item: T_contra) -> None:
        """Send ``item``, blocking while the buffer is full.

        Blocks until there is room in the buffer or a receiver takes the item
        (with capacity 0, until a receiver takes it).  A checkpoint on every
        call on a channel made with ``strict=True`` and on the drop-in memory
        object streams (there before it blocks, too, as in AnyIO); otherwise a
        checkpoint when it blocks, and at least once every 64 calls, the
        ones that block included (a due one takes it before it parks).
        Blocked senders are served in arrival order (a sender arrives when
        it parks).

        Cancelled before the item was taken: nothing was sent.  Cancelled
        after a receiver took it: the call returns normally and the
        cancellation takes effect at the task's next checkpoint.  (The
        generic waiter learns of a cancellation only when the task runs, so
        an item taken before then counts as taken before the cancellation:
        the call returns normally.)

        :raises anyio.ClosedResourceError: if this endpoint is closed, or is
            closed while the call waits
        :raises anyio.BrokenResourceError: if every receiver is closed, or
            they all close while the call waits
        :raises anyio.BusyResourceError: on a single sender (spmc), if another
            task is blocked sending on it
        """
        budget = BUDGET
        budget.left -= 1
        if budget.left <= 0 or (
            self._strict
            and (
                self._checkpoint_before_park
                or not self._state.send_would_park(self._closed)
            )
        ):
            # Due: first, also for a call about to park (_core/_budget.py).
            await budget_checkpoint()
        state = self._state
        buffer = state.buffer
        if len(buffer) < state.send_limit and not self._closed:
            buffer.append(item)
            return
        recv_waiters = state.recv_waiters
        if (
            recv_waiters.parked
            and not self._closed
            and state.receivers
            and not (
                state.single_sender
                and (state.send_in_flight or state.send_waiters.parked)
            )
        ):
            # A receiver may be parked and none of try_send()'s errors
            # applies: its handoff, written out (the ping-pong path).  Keep
            # in step with try_send().  No live receiver: try_send() below.
            buffer.append(item)
            state.recv_floor = INF
            in_flight = state.in_flight
            if recv_waiters.grant_head_into(None, in_flight) is not None:
                if (
                    state.receivers
                    and not (recv_waiters.parked and recv_waiters)
                    and not state.send_in_flight
                ):
                    state.send_limit = state.capacity
                if not state.single_receiver:
                    state.recv_floor = len(in_flight)
                return
            buffer.pop()
        if state.try_send(self._closed, item):
            return
        # Block until a receiver takes the item.  give_back=None: once taken,
        # the send cannot be undone, so a cancellation arriving then is
        # re-armed for the next checkpoint and the call returns normally.
        # The waiters' park((self, item), None), inlined: one coroutine
        # frame less on every blocking send.
        waiters = state.send_waiters
        if waiters is NOT_OPENED:  # the first send on this channel to park
            waiters = state.open_send_waiters()
        waiter = waiters.enqueue((self, item))
        state.recv_floor = INF  # a sender is parked: its item comes next
        if (
            (
                len(buffer) - len(state.in_flight) < state.capacity
                or not state.receivers
                or self._closed
            )
            and waiter.state is PENDING
            and waiters.withdraw(waiter)
        ):
            # Look again now that the waiter is parked: enqueue() allocates,
            # so a garbage collection may have run a finalizer there that
            # received (making room), closed the last receiver or closed this
            # endpoint, before the waiter was there to be granted or failed.
            # Send again instead (a receiver's grant cannot be missed: the
            # state is the one try_send() saw, but for what the finalizer
            # did).  A waiter settled meanwhile is not withdrawn: it is
            # awaited below, as any.
            state.sync()
            return await self.send(item)
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (_core/_waiter.py)
                await settled_wait(waiter)
        except BaseException as exc:
            if not waiters._interrupted(waiter, exc, None):
                if waiter.state is GRANTED and state.single_sender:
                    # Taken, then interrupted by what is no cancellation and
                    # cannot be re-armed: a Ctrl-C that Trio delivered to the
                    # generic waiter's wait before the grant (the generic
                    # waiter learns of it only as the task runs), or at the
                    # checkpoint after a wait settled before it slept.  The
                    # item is delivered and the call raises; the single
                    # sender's send_in_flight is this call's.
                    state.send_in_flight = False
                # Otherwise not granted, so send_in_flight is not this
                # call's: it may be another task's send, parked after this
                # one was cancelled and taken before this task ran.
                state.sync()
                raise
        if waiter.state is FAILED:
            state.send_in_flight = False
            state.sync()
            if self._closed:
                # Woken by the last receiver's close, then this endpoint was
                # closed before the task ran: a call on a closed endpoint
                # (AnyIO decides when the task runs, too).
                raise anyio.ClosedResourceError
            raise_failure(waiter)  # off the waiter: no cycle through it
        # Recycle the waiter (see _core/_waiter.py); its value is None.
        waiter.payload = None  # type: ignore[assignment]  # never read again
        waiters._spare = waiter
        if state.single_sender:
            state.send_in_flight = False
            state.sync()

    def send_nowait(self, item: T_contra) -> None:
        """Send ``item`` if that can be done without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if the buffer is full and no receiver waits
        :raises anyio.ClosedResourceError: if this endpoint is closed
        :raises anyio.BrokenResourceError: if every receiver is closed
        :raises anyio.BusyResourceError: on a single sender (spmc), if another
            task is blocked sending on it
        """
        state = self._state
        buffer = state.buffer
        if len(buffer) < state.send_limit and not self._closed:
            buffer.append(item)
            return
        if not state.try_send(self._closed, item):
            raise anyio.WouldBlock

    def close(self) -> None:
        """Close this endpoint.  Idempotent; never blocks.

        Tasks blocked sending on this endpoint get ClosedResourceError (their
        items were not sent).  When the last sender closes, receivers get
        what is buffered and then ``anyio.EndOfStream``.
        """
        if not self._closed:
            self._closed = True
            state = self._state
            state.senders -= 1
            if state.send_waiters.parked or (
                not state.senders and state.recv_waiters.parked
            ):
                state.sender_closed(self)


class ReceiveEndpoint(_Endpoint, ObjectReceiveStream[T_co], Generic[T_co]):
    """The receiving half of a channel (no statistics, no clone)."""

    __slots__ = ("_closed", "_state", "_strict")
    _state: ChannelState[T_co]

    def _count_open(self, state: ChannelState[Any]) -> None:
        state.receivers += 1

    async def receive(self) -> T_co:
        """Receive the next item, blocking while there is none.

        Checkpoints as ``send()`` does: on every call on a
        ``strict=True`` channel and on the drop-in memory object streams,
        otherwise when it blocks and at least once every 64 calls (as
        ``send()``).  Blocked receivers are served in arrival order.

        Each call takes the oldest item not yet delivered.  While a
        receiver granted an item has not run yet, a call takes an item only
        if one is free, one that no woken receiver is owed (else it waits,
        as if those receivers had run); it then takes the oldest, the one
        granted, and that receiver's reservation moves on to the next item.
        On Trio, an item granted before one already delivered is not taken:
        it stays for its own receiver, so no task gets a sender's items out
        of order (with the native waiter; docs/semantics.md gives the
        exceptions: a cancellation with the generic waiter, a Ctrl-C).
        Cancelled before an item was granted: nothing was taken.  Cancelled
        after one was granted but before the task ran: the item goes to the
        next receiver, or back to the front of the buffer, and the
        cancellation propagates.  Handed an item before the task slept (by
        code a garbage collection ran inside this call) and cancelled at
        the checkpoint that follows: the call returns the item, and the
        cancellation is raised at the task's next checkpoint.

        :raises anyio.EndOfStream: if the buffer is empty and every sender is
            closed (``async for`` ends); while an item granted to another
            receive may still be given back (that receive has not resumed),
            the call waits for it instead
        :raises anyio.ClosedResourceError: if this endpoint is closed, or is
            closed while the call waits
        :raises anyio.BusyResourceError: on a single receiver (mpsc), if
            another task is blocked receiving on it
        """
        budget = BUDGET
        budget.left -= 1
        if budget.left <= 0 or (
            self._strict
            and (
                self._checkpoint_before_park
                or not self._state.receive_would_park(self._closed)
            )
        ):
            await budget_checkpoint()  # as in send()
        state = self._state
        buffer = state.buffer
        if len(buffer) > state.recv_floor and not self._closed:
            return buffer.popleft()
        # try_receive() returns NOTHING when none of these holds: test them
        # first, to skip its call on the way to parking (the ping-pong path).
        # No free item is one of them: the gate above is exact
        # (len(in_flight)) or inf, and an inf gate, stale or not (a sender
        # parked, a granted single receiver not resumed), asks
        # try_receive().  Another task parked on a single receiver is the
        # one busy case the gate does not show.
        if (
            state.recv_floor == INF
            or not state.senders
            or self._closed
            or (state.single_receiver and state.recv_waiters.parked)
        ):
            taken = state.try_receive(self._closed)
            if taken is not NOTHING:
                return taken  # type: ignore[return-value]  # (no cast(): a call)
        # Block until a sender grants an item.  If the task is cancelled
        # after the grant, the item is freed (``state.give_back``).
        # The waiters' park(self, give_back), inlined as in send().
        waiters = state.recv_waiters
        if waiters is NOT_OPENED:  # the first receive on this channel to park
            waiters = state.open_recv_waiters()
        waiter = waiters.enqueue(self)
        state.send_limit = 0  # a receiver is parked: sends go to it
        if (
            # (an empty buffer, the usual case here, skips the two len())
            (
                (buffer and len(buffer) > len(state.in_flight))
                or not state.senders
                or self._closed
            )
            and waiter.state is PENDING
            and self._unpark(state, waiters, waiter)
        ):
            # Look again (as send() does): a finalizer run inside enqueue()
            # sent, or closed this endpoint, before the waiter was there to
            # be granted or failed.
            return await self.receive()
        if waiter.state is PENDING:
            try:
                await waiter.wait
            except BaseException as exc:
                # The give-back is made whatever the waiter's state: a
                # finalizer may grant it before _interrupted reads it (see
                # there).
                waiters._interrupted(waiter, exc, partial(state.give_back, waiter))
                state.sync()
                raise
        else:  # settled before it slept (_core/_waiter.py)
            await self._settled(state, waiters, waiter)
        if waiter.state is FAILED:
            state.sync()
            if self._closed:  # closed after another close woke it: as in send()
                raise anyio.ClosedResourceError
            raise_failure(waiter)  # as in send()
        # Granted and resumed: the call and its item leave (I3).  in_flight
        # is read again (the first park made it); the buffer is the same
        # object for the channel's life.
        in_flight = state.in_flight
        item: T_co
        if not in_flight or in_flight[0] is not waiter:
            # Resumed out of grant order, or pinned by a receive that did
            # (Trio runs a batch in any order; many receivers only).
            item = state.take_granted(waiter)
        else:
            in_flight.popleft()
            item = buffer.popleft()
            if state.single_receiver:
                # The receiver is free again (in_flight is empty): reopen
                # its fast path.
                state.send_limit = (
                    state.capacity
                    if state.receivers
                    and not (waiters.parked and waiters)
                    and not state.send_in_flight
                    else 0
                )
                send_waiters = state.send_waiters
                state.recv_floor = INF if send_waiters.parked and send_waiters else 0
            else:
                # One item fewer is reserved: the receive gate moves with
                # it, so it stays exact (see _state.py; inf stays inf).
                state.recv_floor -= 1
                if not in_flight and not state.senders:
                    # The last item in flight is delivered and no sender is
                    # open: the receivers that waited for it get the end of
                    # the stream (I4).
                    state.end_of_stream()
        # Recycle the waiter (see _core/_waiter.py); its value is None (a
        # receiver's grant leaves it None), as in send().
        waiter.payload = None
        waiters._spare = waiter
        return item

    async def _settled(
        self,
        state: ChannelState[Any],
        waiters: Waiting[object],
        waiter: Waiter[object],
    ) -> None:
        """Await a receive's waiter settled before its task slept, and the
        checkpoint after it (``settled_wait``).

        An item granted so is kept: cancelled at that checkpoint, the call
        goes on to take it, and the cancellation is re-armed for the task's
        next checkpoint, as for a send whose item was taken.  Given back,
        the item could come after items that other receives took while this
        one was at its checkpoint (pinned: they resumed first), which would
        reorder the channel.  A failure gives way to the cancellation.  What
        is not a cancellation (a Ctrl-C) gives the item back and propagates.
        """
        try:
            await settled_wait(waiter)
        except BaseException as exc:
            kept = partial(state.give_back, waiter)
            if not waiters._interrupted(waiter, exc, None, kept):
                state.sync()
                raise

    def _unpark(
        self,
        state: ChannelState[Any],
        waiters: Waiting[object],
        waiter: Waiter[object],
    ) -> bool:
        """A receive's waiter is parked on a state that no longer calls for
        it (a finalizer re-entered the channel inside ``enqueue``); ``True``
        if the waiter was taken back and the receive must start again.

        A free item, or this endpoint closed: take it back.  The last sender
        closed with no free item: end the stream if it has ended, which
        fails the waiter (with items in flight it waits for them, as a
        receive that parked then would).
        """
        if len(state.buffer) > len(state.in_flight) or self._closed:
            if not waiters.withdraw(waiter):
                return False  # settled meanwhile: the receive awaits it
            state.sync()
            return True
        state.end_of_stream()
        return False

    def receive_nowait(self) -> T_co:
        """Receive the next item if there is one.  Not a checkpoint.

        :raises anyio.WouldBlock: if no item is buffered and no sender waits
        :raises anyio.EndOfStream: if the buffer is empty and every sender is
            closed (``WouldBlock`` while an item granted to another receive
            may still be given back)
        :raises anyio.ClosedResourceError: if this endpoint is closed
        :raises anyio.BusyResourceError: on a single receiver (mpsc), if
            another task is blocked receiving on it
        """
        state = self._state
        buffer = state.buffer
        if len(buffer) > state.recv_floor and not self._closed:
            return buffer.popleft()
        item = state.try_receive(self._closed)
        if item is NOTHING:
            raise anyio.WouldBlock
        return item  # type: ignore[return-value]  # (no cast(): a call)

    async def __anext__(self) -> T_co:
        """``async for``: :meth:`receive`, until the stream ends.

        Blocks, checkpoints and is cancelled as :meth:`receive`;
        ``anyio.EndOfStream`` ends the iteration.
        """
        # receive()'s first return, inlined: an item is free and no
        # checkpoint is due (the budget stays above 0 after this call's
        # unit).  anyio's __anext__ awaits receive() always, a second
        # coroutine per item: about 100 ns of 300 on CPython 3.11.
        budget = BUDGET
        if budget.left > 1 and not self._strict:
            state = self._state
            if len(state.buffer) > state.recv_floor and not self._closed:
                budget.left -= 1
                return state.buffer.popleft()
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Close this endpoint.  Idempotent; never blocks.

        Tasks blocked receiving on this endpoint get ClosedResourceError.
        When the last receiver closes, blocked and later sends get
        ``anyio.BrokenResourceError`` and the buffered items are released.
        """
        if not self._closed:
            self._closed = True
            state = self._state
            state.receivers -= 1
            if state.recv_waiters.parked or state.send_waiters.parked or state.buffer:
                state.receiver_closed(self)
            elif not state.receivers:
                state.send_limit = 0  # what receiver_closed() does here


class Sender(SendEndpoint[T_contra], Generic[T_contra]):
    """The sending endpoint of an mpsc, spmc or mpmc channel.

    An ``anyio.abc.ObjectSendStream``: use it with ``async with`` (closes on
    exit), sync ``with``, and AnyIO's stream helpers.
    """

    __slots__ = ()

    def statistics(self) -> ChannelStatistics:
        """A snapshot of the channel (the same from every endpoint)."""
        return self._state.statistics()


class Receiver(ReceiveEndpoint[T_co], Generic[T_co]):
    """The receiving endpoint of an mpsc, spmc or mpmc channel.

    An ``anyio.abc.ObjectReceiveStream``: ``async for item in receiver``
    receives until every sender is closed and the buffer is drained.
    """

    __slots__ = ()

    async def receive_many(self, max_items: int) -> list[T_co]:
        """Receive at least one and at most ``max_items`` items.

        Blocks (as :meth:`receive`) until one item is available, then takes
        up to ``max_items - 1`` more that are available now, without waiting
        again.  The same checkpoints and cancellation as :meth:`receive`: a
        cancelled call took nothing.  If this endpoint is closed while the
        call waits, after an item was granted to it and before its task
        resumed, it returns that item alone (as :meth:`receive` returns it):
        the items behind it stay for the open endpoints.

        :raises TypeError: if ``max_items`` is not an int
        :raises ValueError: if ``max_items < 1``
        :raises anyio.EndOfStream: as :meth:`receive`, when no item is left
        :raises anyio.ClosedResourceError: as :meth:`receive`, if this
            endpoint is closed
        :raises anyio.BusyResourceError: as :meth:`receive`, on a receiver
            of a single-receiver channel (mpsc) that another task is
            receiving on
        """
        if type(max_items) is not int or max_items < 1:
            check_max_items(max_items)
        items = [await self.receive()]
        if max_items > 1 and not self._closed:
            self._state.take_more(items, max_items)
        return items

    def statistics(self) -> ChannelStatistics:
        """A snapshot of the channel (the same from every endpoint)."""
        return self._state.statistics()


class CloneableSender(Sender[T_contra], Generic[T_contra]):
    """A :class:`Sender` of a side that may have many endpoints."""

    __slots__ = ()

    def clone(self: S) -> S:
        """Another sender on the same channel, closed independently.

        Never blocks; not a checkpoint.

        The channel's sending side is closed when every clone is closed.

        :raises anyio.ClosedResourceError: if this endpoint is closed
        """
        if self._closed:
            raise anyio.ClosedResourceError
        return self._new_clone()


class CloneableReceiver(Receiver[T_co], Generic[T_co]):
    """A :class:`Receiver` of a side that may have many endpoints."""

    __slots__ = ()

    def clone(self: R) -> R:
        """Another receiver on the same channel, closed independently.

        Never blocks; not a checkpoint.

        Clones share the items: each item goes to exactly one of them.  The
        receiving side is closed when every clone is closed.

        :raises anyio.ClosedResourceError: if this endpoint is closed
        """
        if self._closed:
            raise anyio.ClosedResourceError
        return self._new_clone()


def open_channel(
    sender_cls: type[S],
    receiver_cls: type[R],
    capacity: float,
    strict: bool,
    single_sender: bool,
    single_receiver: bool,
) -> tuple[S, R]:
    """A new channel: its state, and its first sender and receiver.

    The channel factories' one call.  ``capacity`` and ``strict`` must be
    checked already.  None of the three classes has an ``__init__``: each is
    made by a bare class call, and its attributes are set here (a clone's
    by ``_new_clone()``; keep the two in step).  A channel is often made for
    one item: three ``__init__`` calls would cost about 110 ns of a 1.3 us
    create, send, receive and close on CPython 3.11, and
    ``object.__new__(cls)``, which skips an ``__init__``, about 25 ns more
    per object than the class call.
    """
    state: ChannelState[Any] = ChannelState()
    state.buffer = deque()
    state.capacity = capacity
    state.strict = strict
    state.senders = state.receivers = 1
    state.send_waiters = state.recv_waiters = NOT_OPENED
    state.single_sender = single_sender
    state.single_receiver = single_receiver
    state.in_flight = NO_IN_FLIGHT
    state.pinned = NO_PINNED
    state.send_in_flight = False
    # The gates (see _state.py) with one sender and one receiver open and
    # nobody parked: sends pass while the buffer holds fewer than the
    # capacity, receives while it holds anything.
    state.send_limit = capacity
    state.recv_floor = 0
    sender = sender_cls()
    sender._state = state
    sender._strict = strict
    sender._closed = False
    receiver = receiver_cls()
    receiver._state = state
    receiver._strict = strict
    receiver._closed = False
    return sender, receiver
