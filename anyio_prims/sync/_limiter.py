# CapacityLimiter: a drop-in replacement for anyio.CapacityLimiter, parked on
# a WaitQueue whose waiters carry their borrower.
#
# Same constructor (an int or math.inf), writable total_tokens, borrower
# rules, statistics class, exception types and messages as AnyIO 4, and
# creatable outside a running event loop.  Every acquire is a checkpoint
# (strict), as in AnyIO, and in AnyIO's order: one that can proceed borrows
# the token first and then reaches its checkpoint (``take_checkpoints()``'s,
# as in Lock: on Trio a cancellation test before the take and a shielded
# yield after it; elsewhere a plain checkpoint, which gives the token back
# if cancelled there); one that must wait tests for cancellation, as AnyIO
# does, and parks (parking is the checkpoint).
#
# Why not a BatchSemaphore underneath, as Lock and Semaphore have: a limiter
# must record the *borrower* at the moment it grants a token, before the
# woken task runs (AnyIO does; statistics(), a later release_on_behalf_of()
# and total_tokens changes all see it), while BatchSemaphore's waiters carry
# only a permit count.  Tokens here are one at a time, so the batch logic
# would buy nothing; the waiters carry the borrower instead.
#
# State and invariants:
#   _total_tokens  an int >= 0 or math.inf, as set
#   _borrowers     the borrowers holding a token (including those granted one
#                  whose task has not run yet); the tokens in use are
#                  len(_borrowers), which may exceed _total_tokens after the
#                  total shrinks (nobody is granted until it drops below)
#   _waiters       FIFO of parked acquirers; a waiter's payload is its borrower
#   live waiters exist  =>  len(_borrowers) >= _total_tokens
#   a borrower holds at most one token: a waiter whose borrower holds one
#                  when its turn comes (two tasks queued on behalf of one
#                  borrower) is failed with the RuntimeError a call would get
# kept by _grant_waiters() after every release, total_tokens increase and
# grant given back.  A waiter granted and then cancelled before it runs
# (asyncio ``task.cancel()``) gives its token back through ``_give_back``:
# its borrower leaves _borrowers and the next waiter is granted.
from __future__ import annotations

import math
import numbers
from types import TracebackType

import anyio

from .._core import (
    FAILED,
    GRANTED,
    NOT_OPENED,
    PENDING,
    CopiedWhole,
    Unopened,
    WaitQueue,
    checkpoint,
    checkpoint_if_cancelled,
    current_task,
    raise_failure,
    settled_wait,
    take_checkpoints,
)

_ALREADY_HOLDING = (
    "this borrower is already holding one of this CapacityLimiter's tokens"
)
_NOT_HOLDING = "this borrower isn't holding any of this CapacityLimiter's tokens"


class CapacityLimiter(CopiedWhole):
    """A pool of tokens, at most one per borrower: a drop-in for
    :class:`anyio.CapacityLimiter`.

    :param total_tokens: the number of tokens (an ``int >= 0`` or
        ``math.inf``); writable later through :attr:`total_tokens`
    :raises TypeError: if ``total_tokens`` is neither an int nor ``math.inf``
    :raises ValueError: if ``total_tokens < 0``

    A borrower is the current task (:meth:`acquire`, :meth:`release`) or any
    hashable object (the ``*_on_behalf_of`` methods).  ``async with limiter:``
    borrows a token for the current task for the block.  Waiters are served
    in arrival order.
    """

    __slots__ = ("__weakref__", "_borrowers", "_total_tokens", "_waiters")

    def __init__(self, total_tokens: float) -> None:
        self._total_tokens: float = 0
        self._borrowers: set[object] = set()
        # NOT_OPENED until an acquire first parks (as BatchSemaphore's).
        self._waiters: WaitQueue[object] | Unopened = NOT_OPENED
        self.total_tokens = total_tokens

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # copy, deepcopy and pickle: an idle limiter copies (its wait queue
        # copies empty, or refuses if tasks are parked in it).  One whose
        # tokens are borrowed does not: a copy cannot hold a token for a
        # task, nor take over a borrower of the caller's, and a task is not
        # walked into (on Trio, a half-copied task leaves noise behind).
        if self._borrowers:
            raise TypeError(
                f"cannot copy a {type(self).__name__} whose tokens are borrowed"
            )
        return None, {
            "_borrowers": set(),
            "_total_tokens": self._total_tokens,
            "_waiters": self._waiters,
        }

    @property
    def total_tokens(self) -> float:
        """The total number of tokens (an int or ``math.inf``); writable.

        Raising it grants tokens to as many waiting tasks as now fit, in
        order.  Lowering it below the tokens in use takes nothing back: new
        borrowers wait until enough are released.

        :raises TypeError: if set to neither an int nor ``math.inf``
        :raises ValueError: if set below 0
        """
        return self._total_tokens

    @total_tokens.setter
    def total_tokens(self, value: float) -> None:
        if not isinstance(value, int) and not (
            # Any real infinity, as AnyIO's math.isinf() takes (a NumPy
            # float32 too); Decimal is no numbers.Real.
            isinstance(value, numbers.Real) and math.isinf(value)
        ):
            raise TypeError("total_tokens must be an int or math.inf")
        if value < 0:
            raise ValueError("total_tokens must be >= 0")
        self._total_tokens = value
        if self._waiters.parked:
            self._grant_waiters()

    @property
    def borrowed_tokens(self) -> int:
        """The number of tokens borrowed now."""
        return len(self._borrowers)

    @property
    def available_tokens(self) -> float:
        """The number of tokens that can be borrowed now (negative while the
        total is below the tokens in use)."""
        return self._total_tokens - len(self._borrowers)

    async def acquire(self) -> None:
        """Borrow a token for the current task, blocking until one is free.

        Blocks while no token is free or other tasks wait (FIFO).  Always a
        checkpoint.  If cancelled, the call holds nothing: a token handed to
        it meanwhile goes to the next waiter, or back to the pool.  On Trio,
        as AnyIO's, a cancellation that arrives while a call that could
        borrow at once is at its checkpoint is raised at the next checkpoint
        instead, and the call returns holding the token.

        :raises RuntimeError: if the current task already holds a token
        """
        borrower = current_task()
        borrowers = self._borrowers
        if (
            len(borrowers) < self._total_tokens
            and not self._waiters.parked
            and borrower not in borrowers
        ):
            # acquire_on_behalf_of(), written out: no extra coroutine frame.
            check, after = take_checkpoints()
            if check is not None:
                await check()
            borrowers.add(borrower)
            try:
                await after()
            except BaseException:
                self._give_back(borrower)
                raise
            return
        await self._acquire_blocking(borrower)

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        """Borrow a token for ``borrower``, blocking until one is free.

        As :meth:`acquire`, for any hashable ``borrower``.

        :raises RuntimeError: if ``borrower`` already holds a token, or holds
            one (through another task's wait) when this call's turn comes
        :raises TypeError: if ``borrower`` is not hashable (in a cancelled
            scope, the cancellation is raised instead, as AnyIO does)
        """
        borrowers = self._borrowers
        try:
            new_borrower = borrower not in borrowers
        except TypeError:
            # AnyIO tests for cancellation before it looks at the borrower.
            await checkpoint_if_cancelled()
            raise
        if (
            new_borrower
            and len(borrowers) < self._total_tokens
            and not self._waiters.parked
        ):
            # AnyIO's order (see the module comment): on Trio a cancellation
            # test first, which returns only without yielding; taken; then
            # the checkpoint, so the tasks that run meanwhile see the token
            # borrowed.  Cancelled there (not on Trio, where that yield is
            # shielded), it is given back (to whoever queued meanwhile).
            check, after = take_checkpoints()
            if check is not None:
                await check()
            borrowers.add(borrower)
            try:
                await after()
            except BaseException:
                self._give_back(borrower)
                raise
            return
        await self._acquire_blocking(borrower)

    async def _acquire_blocking(self, borrower: object) -> None:
        if borrower in self._borrowers:
            # AnyIO checks for cancellation before it looks at the borrower:
            # in a cancelled scope the cancellation is raised instead.
            await checkpoint_if_cancelled()
            raise RuntimeError(_ALREADY_HOLDING)
        if len(self._borrowers) < self._total_tokens and not self._waiters:
            self._borrowers.add(borrower)
            return
        # AnyIO raises a cancellation pending in a scope of the caller before
        # it queues.  Parking alone would not do it on asyncio, where AnyIO
        # delivers it a loop iteration later: a token released meanwhile
        # would be granted, and the acquire would return inside the
        # cancelled scope.
        await checkpoint_if_cancelled()
        waiters = self._waiters
        if waiters is NOT_OPENED:
            waiters = self._waiters = WaitQueue()
        # waiters.park(borrower, self._give_back), written out to look again
        # once the waiter is parked: a finalizer that a collection ran as
        # the waiter was made (it allocates) may have released a token, or
        # raised total_tokens, before the waiter was there to be granted it.
        waiter = waiters.enqueue(borrower)
        if len(self._borrowers) < self._total_tokens and waiter.state is PENDING:
            # Grant as that release would have: the waiters that now fit, in
            # order.  Granted so, the wait is still awaited (on Trio the task
            # was rescheduled and must sleep once to take it), and then the
            # checkpoint every acquire takes, as if the release had come
            # just before the call; cancelled there, the token goes on.
            self._grant_waiters()
            # Granted, or failed: its borrower may be granted through an
            # earlier waiter of its own (the loop above).
            state: int = waiter.state
            if state is GRANTED:
                try:
                    await waiter.wait
                    await checkpoint()
                except BaseException:
                    self._give_back(borrower)
                    raise
                return
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (_core/_waiter.py)
                await settled_wait(waiter)
        except BaseException as exc:
            waiters._interrupted(waiter, exc, self._give_back)
            raise
        if waiter.state is FAILED:  # its borrower got a token meanwhile
            raise_failure(waiter)
        # Recycle the waiter (see _core/_waiter.py).
        waiter.payload = waiter.value = None
        waiters._spare = waiter

    def acquire_nowait(self) -> None:
        """Borrow a token for the current task without blocking.

        Not a checkpoint.

        :raises anyio.WouldBlock: if no token is free or other tasks wait
        :raises RuntimeError: if the current task already holds a token
        """
        self.acquire_on_behalf_of_nowait(current_task())

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        """Borrow a token for ``borrower`` without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if no token is free or other tasks wait
        :raises RuntimeError: if ``borrower`` already holds a token
        """
        borrowers = self._borrowers
        if borrower in borrowers:
            raise RuntimeError(_ALREADY_HOLDING)
        if self._waiters or len(borrowers) >= self._total_tokens:
            raise anyio.WouldBlock
        borrowers.add(borrower)

    def release(self) -> None:
        """Return the current task's token; the first waiter gets it.

        Never blocks; not a checkpoint.

        :raises RuntimeError: if the current task holds no token
        """
        self.release_on_behalf_of(current_task())

    def release_on_behalf_of(self, borrower: object) -> None:
        """Return ``borrower``'s token; the first waiter gets it.

        Never blocks; not a checkpoint.

        :raises RuntimeError: if ``borrower`` holds no token
        """
        try:
            self._borrowers.remove(borrower)
        except KeyError:
            raise RuntimeError(_NOT_HOLDING) from None
        if self._waiters.parked:
            self._grant_waiters()

    def _give_back(self, borrower: object) -> None:
        # Granted, then cancelled before it ran: the token goes on.  Also a
        # token taken for the checkpoint of an uncontended acquire that was
        # cancelled there, which a release_on_behalf_of() by another task may
        # have returned meanwhile (AnyIO, taking it after the checkpoint,
        # would have refused that release): the acquire then raises its
        # cancellation, not that release's RuntimeError.
        self._borrowers.discard(borrower)
        self._grant_waiters()

    def _grant_waiters(self) -> None:
        borrowers = self._borrowers
        waiters = self._waiters
        while len(borrowers) < self._total_tokens:
            waiter = waiters.pop()
            if waiter is None:
                return
            borrower = waiter.payload
            if borrower in borrowers:
                # Queued twice for one borrower (two tasks in
                # acquire_on_behalf_of()), and granted the first time: this
                # wait is refused as a call made now would be, and the token
                # goes on.
                waiter.fail(RuntimeError(_ALREADY_HOLDING))
                continue
            borrowers.add(borrower)
            waiter.grant(borrower)  # what _give_back receives

    def statistics(self) -> anyio.CapacityLimiterStatistics:
        """A snapshot: ``borrowed_tokens``, ``total_tokens``, ``borrowers``
        (the borrower objects: tasks for :meth:`acquire`), ``tasks_waiting``."""
        return anyio.CapacityLimiterStatistics(
            borrowed_tokens=len(self._borrowers),
            total_tokens=self._total_tokens,
            borrowers=tuple(self._borrowers),
            tasks_waiting=len(self._waiters),
        )

    # ``async with limiter:`` runs acquire() itself: no extra coroutine frame.
    __aenter__ = acquire

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {len(self._borrowers)}/{self._total_tokens} "
            f"waiting={len(self._waiters)}>"
        )
