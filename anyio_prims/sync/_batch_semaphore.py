# BatchSemaphore: a weighted semaphore on the waiter core; the locks and the
# capacity limiter are built on it.
#
# State:
#   _value    permits available now (may exceed the initial count: release
#             has no ceiling; the capacity limiter may drive it below zero
#             when its total shrinks, and uses math.inf for "no limit")
#   _waiters  WaitQueue of parked acquirers; a waiter's payload is the
#             number of permits it asked for.  The shared empty NOT_OPENED
#             until an acquire first parks (``_open_waiters``): most
#             semaphores and locks are made, used without waiting and
#             dropped, and a queue is about 40% of making one.
#
# Invariants, kept by _grant_waiters() after every change of _value or of the
# queue head:
#   fair:     the head waiter asks for more than _value (or nobody waits);
#             a request is served at once only if nobody is queued.
#   not fair: no waiter asks for <= _value.
# Granted permits are subtracted before the waiter wakes (direct handoff), so
# a woken task never competes again.  If the task is cancelled between the
# grant and running, _give_back() returns the permits and wakes whoever now
# fits: nothing is lost and nothing is applied twice.  A waiter that leaves
# the queue cancelled re-runs _grant_waiters(), because a large request at
# the head may have been holding back smaller ones that fit (the deadlock
# class fixed in anyio 4.14).
from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn

import anyio

from .._core import (
    BUDGET,
    FAILED,
    GRANTED,
    NOT_OPENED,
    PENDING,
    CopiedWhole,
    Unopened,
    Waiter,
    WaitQueue,
    budget_checkpoint,
    check_strict,
    protect_if_trio_imported,
    raise_failure,
    settled_wait,
)


@dataclass(frozen=True)
class BatchSemaphoreStatistics:
    """A snapshot of a :class:`BatchSemaphore`.

    :ivar available_permits: permits that no task holds (in fair mode,
        held back for the queue while any task waits)
    :ivar tasks_waiting: tasks parked in :meth:`BatchSemaphore.acquire`
    :ivar fair: whether waiters are served strictly in arrival order
    :ivar closed: whether :meth:`BatchSemaphore.close` has been called
    """

    available_permits: float
    tasks_waiting: int
    fair: bool
    closed: bool


def check_count(value: object, name: str) -> int:
    """``value`` as a positive permit count, or a TypeError/ValueError naming it."""
    if type(value) is not int and (
        not isinstance(value, int) or isinstance(value, bool)
    ):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


class BatchSemaphore(CopiedWhole):
    """A semaphore whose tasks acquire and release several permits at once.

    :param permits: the permits available at the start (an ``int >= 0``)
    :param fair: serve waiters strictly in arrival order (the default); with
        ``fair=False`` a request that fits proceeds even past queued larger
        requests, which may then starve
    :param strict: make every acquire a checkpoint, as AnyIO does; by
        default an acquire that completes without blocking reaches a
        checkpoint only once every 64 such calls (see :doc:`semantics`)
    :raises TypeError: if ``permits`` is not an int, or ``fair`` or
        ``strict`` is not a bool
    :raises ValueError: if ``permits < 0``

    There is no ceiling: :meth:`release` may raise the count above
    ``permits``, and :meth:`acquire` may ask for more permits than exist now.
    It then waits until enough are released; in fair mode it holds back
    every request queued behind it meanwhile.
    """

    __slots__ = ("__weakref__", "_closed", "_fair", "_strict", "_value", "_waiters")

    def __init__(self, permits: int, *, fair: bool = True, strict: bool = False):
        if type(permits) is not int and (
            not isinstance(permits, int) or isinstance(permits, bool)
        ):
            raise TypeError(f"permits must be an int, not {type(permits).__name__}")
        if permits < 0:
            raise ValueError(f"permits must be >= 0, got {permits}")
        if not isinstance(fair, bool):
            raise TypeError(f"fair must be a bool, not {type(fair).__name__}")
        self._strict = check_strict(strict)
        self._value: float = int(permits)  # an int subclass, as a plain int
        self._fair = fair
        self._closed = False
        self._waiters: WaitQueue[int] | Unopened = NOT_OPENED
        # The queue used to do this: mark the library's code before any call
        # runs on Trio (_core/_ki.py); a budgeted acquire may run 63 times
        # without asking Trio for anything.
        protect_if_trio_imported()

    async def acquire(self, n: int = 1) -> None:
        """Acquire ``n`` permits, blocking until they are granted.

        Blocks while the permits are not available (in fair mode, also while
        any task is queued).  A checkpoint when it blocks; otherwise as the
        checkpoint mode says (every call if ``strict``, else at least once
        every 64 calls).  If cancelled, the call holds nothing: permits
        granted to it in the meantime are given back and the next waiters
        that fit are woken.  It never raises a cancellation while holding
        the permits.

        :raises anyio.ClosedResourceError: if the semaphore is closed, or is
            closed while this call waits
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n < 1``
        """
        budget = BUDGET
        budget.left -= 1
        if (budget.left <= 0 or self._strict) and (self._can_take(n) or self._closed):
            # Only a call that can proceed (or that raises because the
            # semaphore is closed) checkpoints here: one that must wait
            # parks at once, which keeps the order of arrival, and parking
            # is the checkpoint; due, it takes its checkpoint once granted,
            # before it returns (below, and _core/_budget.py).
            await budget_checkpoint()
        if (
            type(n) is int
            and 0 < n <= self._value
            and (not self._waiters.parked or not self._fair)
            and not self._closed
        ):
            self._value -= n
            return
        # More permits than there are: it waits, and _must_wait()'s call is
        # saved (the contended path); anything else, that call decides.
        if (
            type(n) is int and n > self._value and n > 0 and not self._closed
        ) or self._must_wait(n):
            # WaitQueue.park(n, self._give_back) inlined, with the waiters
            # behind let in on the way out (_leave_and_raise, and after a
            # failure): no coroutine frame between this call and the wait.
            waiters = self._waiters
            if waiters is NOT_OPENED:
                waiters = self._open_waiters()
            waiter = waiters.enqueue(n)
            if (
                (self._value >= n or self._closed)
                and waiter.state is PENDING
                and self._recheck(waiter)
            ):
                await self._regranted(waiter, self._strict, self._give_back)
                return
            try:
                if waiter.state is PENDING:
                    await waiter.wait
                    if BUDGET.left <= 0:
                        # Due: the checkpoint once granted (a wake refills
                        # nothing: _core/_budget.py); cancelled there, the
                        # permits go back.
                        await budget_checkpoint()
                else:  # settled before it slept (_core/_waiter.py)
                    await settled_wait(waiter)
            except BaseException as exc:
                self._leave_and_raise(waiter, exc)
            if waiter.state is FAILED:  # closed while waiting
                self._grant_waiters()
                raise_failure(waiter)
            waiters._spare = waiter  # recycled: payload and value are ints

    def _open_waiters(self) -> WaitQueue[int]:
        """Make the queue: an acquire is about to park first.

        Called only while ``_waiters`` is NOT_OPENED (the caller tests it),
        by every place that parks on this semaphore, the drop-in locks'
        included.
        """
        waiters: WaitQueue[int] = WaitQueue()
        self._waiters = waiters
        return waiters

    def _can_take(self, n: object) -> bool:
        """Whether ``acquire(n)`` would proceed without waiting now."""
        return (
            # An int subclass (an IntEnum) is a count too: the slow path
            # takes it, after this due checkpoint.
            (type(n) is int or (isinstance(n, int) and not isinstance(n, bool)))
            and 0 < n <= self._value
            and (not self._fair or not self._waiters)
            and not self._closed
        )

    def _must_wait(self, n: int) -> bool:
        # The slow path's checks: bad input and a closed semaphore raise; a
        # request the exact test grants is taken here (False).
        if type(n) is not int or n < 1:
            check_count(n, "n")
        if self._closed:
            raise anyio.ClosedResourceError
        if n <= self._value and (not self._fair or not self._waiters):
            self._value -= n
            return False
        return True

    def _recheck(self, waiter: Waiter[int]) -> bool:
        """An acquire parked ``waiter`` although the permits it asks for are
        there, or the semaphore is closed: a finalizer that a collection ran
        inside ``enqueue`` (it allocates) released or closed before the
        waiter was there to be granted or failed; or, fair, it counted a
        waiter ahead whose task was cancelled but has not run yet (asyncio),
        which held it back only until a grant drops it.  Do for it what a
        release (or the close) would have done: grant the waiters that now fit,
        in order (in fair mode a larger request ahead may still hold it
        back, as it holds back any acquire), or take ``waiter`` back.
        ``True`` if ``waiter`` was granted or taken back here: the caller
        then finishes with :meth:`_regranted`, not with a wait.
        """
        if self._closed and self._waiters.withdraw(waiter):
            return True  # _regranted raises ClosedResourceError
        self._grant_waiters()
        return waiter.state is GRANTED

    async def _regranted(
        self,
        waiter: Waiter[int],
        strict: bool,
        give_back: Callable[[int], None],
    ) -> None:
        """Finish an acquire whose own ``_recheck`` granted it (or took it
        back from a closed semaphore: the checkpoint it owes, then
        ``ClosedResourceError``).

        The waiter's wait is still awaited: on Trio the grant rescheduled
        the task, which must sleep once to take it (a cancellation is not
        delivered there), and the generic waiter's is a checkpoint.  On
        asyncio it returns at once, without yielding.  So a strict acquire,
        which skipped its checkpoint because it was about to park, takes it
        now, as if the release had come just before the call (a budgeted one
        took its due checkpoint before it parked); if it is cancelled there
        (or in the generic waiter's wait), the permits go back through
        ``give_back`` and the cancellation propagates.  (Not only a
        finalizer's release leads here: a waiter whose task was cancelled
        but has not run yet still counts as queued when the call decides to
        park, and ``_recheck`` drops it.)
        """
        if waiter.state is not GRANTED:
            # Taken back from a semaphore closed meanwhile (_recheck): the
            # checkpoint that a call on a semaphore closed before it takes
            # (first), then the error.
            if strict or BUDGET.left <= 0:
                await budget_checkpoint()
            raise anyio.ClosedResourceError
        payload = waiter.payload
        try:
            await waiter.wait
            if strict or BUDGET.left <= 0:
                await budget_checkpoint()
        except BaseException:
            give_back(payload)
            raise
        waiter.payload = waiter.value = None  # type: ignore[assignment]
        self._waiters._spare = waiter  # granted and awaited: recyclable

    def _leave_and_raise(
        self,
        waiter: Waiter[int],
        exc: BaseException,
        give_back: Callable[[int], None] | None = None,
    ) -> NoReturn:
        # A parked acquire raised ``exc`` (a cancellation): as WaitQueue.park
        # with give_back, permits granted meanwhile go back (through
        # ``give_back``, if given: the drop-in Semaphore's keeps its
        # ceiling), whoever the leaving waiter held back is let in, and
        # ``exc`` propagates.
        self._waiters._interrupted(waiter, exc, give_back or self._give_back)
        self._grant_waiters()
        try:
            raise exc
        finally:
            del exc  # the traceback keeps this frame: no cycle

    def acquire_nowait(self, n: int = 1) -> None:
        """Acquire ``n`` permits without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if the permits are not available now (or, in
            fair mode, another task is queued)
        :raises anyio.ClosedResourceError: if the semaphore is closed
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n < 1``
        """
        check_count(n, "n")
        if self._closed:
            raise anyio.ClosedResourceError
        if n <= self._value and (not self._fair or not self._waiters):
            self._value -= n
            return
        raise anyio.WouldBlock

    def release(self, n: int = 1) -> None:
        """Return ``n`` permits and grant them to the waiters they satisfy.

        Never blocks; not a checkpoint.  Works on a closed semaphore.

        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n < 1``
        """
        if type(n) is not int or n < 1:
            check_count(n, "n")
        self._value += n
        parked = self._waiters.parked
        if parked:
            if self._fair:
                # _grant_waiters()'s first grant, written out: a contended
                # release most often lets in one waiter, which takes every
                # permit (keep in step).  Anything else: that call decides.
                head = parked[0]
                if head.state is PENDING and head.payload <= self._value:
                    # Taken (marked before anything is called) and counted
                    # out before the grant: the wake-up allocates, and a
                    # finalizer that a collection runs there may release and
                    # grant too, or cancel the head's task (so in
                    # _grant_waiters()).
                    head.state = GRANTED
                    parked.popleft()
                    self._value -= head.payload
                    if head.try_grant(head.payload):
                        if self._value < 1 or not self._waiters.parked:
                            return
                    else:
                        self._value += head.payload
                        head._abandon()  # its task was cancelled
            self._grant_waiters()

    def _give_back(self, n: int) -> None:
        self._value += n
        self._grant_waiters()

    def _grant_waiters(self) -> Waiter[int] | None:
        """Grant the waiters the permits now satisfy; the last one granted.

        Returns ``None`` if nobody was granted (``Lock`` names its next owner
        from the waiter returned).
        """
        granted: Waiter[int] | None = None
        waiters = self._waiters
        if self._fair:
            # WaitQueue.peek() inlined: this runs on every contended release
            # (lock_handoff 4-9% faster on asyncio than calling peek()).  The
            # first grant is also written out in release(): keep in step.
            # The deque is read again each time round (a finalizer run by a
            # call below may have compacted it into a new one).
            while parked := waiters.parked:
                head = parked[0]
                if head.state is not PENDING:
                    waiters._drop_head(head)
                    continue
                n = head.payload
                if n > self._value:
                    # A cancelled head must not hold back smaller requests
                    # behind it; with no permit left, none of them fits.
                    if self._value > 0 and head._gone():
                        waiters._drop_head(head)
                        continue
                    break
                head.state = GRANTED  # taken, as in release()
                parked.popleft()
                self._value -= n  # before the wake-up, as in release()
                if head.try_grant(n):  # n is what _give_back() gets back
                    granted = head
                    if self._value < 1:
                        return head  # every request is for at least one permit
                else:
                    self._value += n
                    head._abandon()  # its task was cancelled; it counts nothing
        elif self._value > 0 and waiters:

            def fits(waiter: Any) -> bool:
                # Counted out as it is taken, from the count as it is now,
                # and only if the waiter is still PENDING: a finalizer that
                # a collection runs in take_where() (as this call starts,
                # for one) may have released and granted meanwhile.
                n = waiter.payload
                if waiter.state is PENDING and n <= self._value:
                    self._value -= n
                    return True
                return False

            for waiter in waiters.take_where(fits):
                waiter.grant(waiter.payload)
                granted = waiter
        return granted

    def close(self) -> None:
        """Fail every queued and later :meth:`acquire` with ClosedResourceError.

        Never blocks; not a checkpoint.  Idempotent.  :meth:`release` keeps
        working, so holders can still return permits.
        """
        self._closed = True
        for waiter in self._waiters.drain():
            waiter.fail(anyio.ClosedResourceError())

    @property
    def available_permits(self) -> float:
        """Permits that no task holds.

        In fair mode they can be taken only while no task is queued: while
        one is, they are held back for the head of the queue.
        """
        return self._value

    @property
    def fair(self) -> bool:
        """Whether waiters are served strictly in arrival order."""
        return self._fair

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def statistics(self) -> BatchSemaphoreStatistics:
        """A snapshot of the permits and the queue."""
        return BatchSemaphoreStatistics(
            available_permits=self._value,
            tasks_waiting=len(self._waiters),
            fair=self._fair,
            closed=self._closed,
        )

    def hold(self, n: int = 1) -> Holding:
        """An async context manager that holds ``n`` permits for its block.

        ``async with sem.hold(3):`` acquires 3 permits on entry (as
        :meth:`acquire`: it blocks, is a checkpoint, is cancelled and raises
        :exc:`anyio.ClosedResourceError` alike) and releases them on exit.

        :raises TypeError: if ``n`` is not an int (raised by this call)
        :raises ValueError: if ``n < 1`` (raised by this call)
        """
        if type(n) is not int or n < 1:
            check_count(n, "n")
        # Holding has no __init__: its fields are set here (see the class).
        holding = Holding()
        holding._sem = self
        holding._n = n
        return holding

    def __aenter__(self) -> Awaitable[None]:
        """``async with sem:`` holds one permit for its block (as
        :meth:`acquire`: blocks, is a checkpoint and is cancelled alike)."""
        # acquire()'s coroutine itself: no second coroutine per block.
        return self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        value = "inf" if self._value == math.inf else self._value
        return (
            f"<{type(self).__name__} available={value} "
            f"waiting={len(self._waiters)} fair={self._fair}>"
        )


_new = object.__new__


def fair_semaphore(permits: int) -> BatchSemaphore:
    """A fair, budgeted, open ``BatchSemaphore(permits)``: the drop-in
    ``Lock``'s and ``Semaphore``'s, which check their own arguments.

    Made without ``__init__``'s checks of arguments these callers have
    already checked (or fixed): about 75 ns, a fifth of making a ``Lock``
    on CPython 3.11.  What it makes is what ``__init__`` makes; keep in
    step.
    """
    sem: BatchSemaphore = _new(BatchSemaphore)
    sem._value = permits
    sem._fair = True
    sem._strict = False
    sem._closed = False
    sem._waiters = NOT_OPENED
    protect_if_trio_imported()  # as in __init__
    return sem


class Holding:
    """``async with`` form of :meth:`BatchSemaphore.hold`.

    Made only by ``hold()``, which sets its attributes: the class has no
    ``__init__``, so that making one is a bare class call (about 60 ns less
    than a class call that runs an ``__init__``, on CPython 3.11).
    """

    __slots__ = ("_n", "_sem")

    _sem: BatchSemaphore
    _n: int

    def __aenter__(self) -> Awaitable[None]:
        # As BatchSemaphore.__aenter__: acquire()'s coroutine itself.
        return self._sem.acquire(self._n)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self._sem.release(self._n)
