# Event and Condition: drop-in replacements for anyio.Event and
# anyio.Condition, each parked directly on a WaitQueue of its own.
#
# Event: a flag that goes from unset to set once.  set() grants every parked
# waiter in one pass (drain); no per-wait anyio.Event is allocated, unlike
# AnyIO's Condition.  The queue is made by the first wait that parks (until
# then the shared empty NOT_OPENED).  Invariant: ``_flag`` implies the queue
# is empty (set() drains it, and wait() on a set event never parks).
# wait() on a set event is a checkpoint, as in AnyIO; on an unset one it
# parks, which is one.  A waiter granted by set() and cancelled before it
# runs raises the cancellation (the no-op ``give_back`` makes park()
# propagate it), as AnyIO's asyncio Event does: nothing was consumed, the
# event stays set.
#
# Condition: a WaitQueue of notification waiters beside a Lock from _lock.py,
# or beside an anyio.Lock (one not migrated yet), as anyio's Condition takes.
# The anyio lock is wrapped once, in __init__, in an _AnyioLock that offers
# what Condition uses of ours: the lock's own bound methods, and an ``_owner``
# that answers "does the current task hold it?" from its public statistics(),
# as anyio's Condition does.  So no call tests which kind of lock it has, and
# with our Lock the paths are unchanged.
# wait() releases the lock, parks, and re-acquires the lock shielded before
# it returns or raises, so the caller always holds the lock afterwards.  A
# waiter notified and then cancelled before it runs passes its notification
# to the next waiter (``give_back``), so notify(n) wakes n tasks that act on
# it whenever n tasks wait.  Deviation from AnyIO, in the caller's favour: a
# plain asyncio ``task.cancel()`` goes through AnyIO's shield, so while
# re-acquiring, wait() catches such a cancellation, finishes re-acquiring and
# only then raises it; AnyIO's Condition raises it without the lock.
from __future__ import annotations

from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio

from .._core import (
    NOT_OPENED,
    WITHDRAWN,
    CopiedWhole,
    Unopened,
    Waiter,
    WaitQueue,
    checkpoint,
    checkpoint_if_cancelled,
    current_task,
    runs_user_code,
)
from ._lock import Lock

T = TypeVar("T")


def _nothing_to_give_back(value: object) -> None:
    """``give_back`` of a wait that consumed nothing: let the cancellation through."""


class Event(CopiedWhole):
    """A one-shot flag tasks can wait for: a drop-in for :class:`anyio.Event`.

    Can be created outside a running event loop.
    """

    __slots__ = ("__weakref__", "_flag", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        # NOT_OPENED until a wait first parks: many events are set, or
        # waited for only once set, and never need a queue (its making is
        # about 60% of an Event()).
        self._waiters: WaitQueue[None] | Unopened = NOT_OPENED

    def set(self) -> None:
        """Set the flag and wake every waiting task.  Idempotent.

        Never blocks; not a checkpoint.
        """
        if self._flag:
            return
        self._flag = True
        if self._waiters.parked:
            for waiter in self._waiters.drain():
                waiter.grant()

    def is_set(self) -> bool:
        """Whether :meth:`set` has been called."""
        return self._flag

    async def wait(self) -> None:
        """Wait until the flag is set.

        Blocks while the flag is unset.  Always a checkpoint, also when the
        flag is already set (as in AnyIO).  If cancelled, the cancellation
        propagates; the event is unaffected.
        """
        if self._flag:
            await checkpoint()
            return
        waiters = self._waiters
        if waiters is NOT_OPENED:
            waiters = self._waiters = WaitQueue()
        if (
            await waiters.park(None, _nothing_to_give_back, self._set_meanwhile)
            is WITHDRAWN
        ):
            await checkpoint()

    def _set_meanwhile(self, waiter: Waiter[None]) -> bool:
        # park()'s recheck: a finalizer that a collection ran as the waiter
        # was made set the flag before the waiter was there to be woken.
        return self._flag

    def statistics(self) -> anyio.EventStatistics:
        """A snapshot: ``tasks_waiting``."""
        return anyio.EventStatistics(len(self._waiters))

    def __repr__(self) -> str:
        state = "set" if self._flag else "unset"
        return f"<{type(self).__name__} {state} waiting={len(self._waiters)}>"


#: The methods of a lock that AnyIO's Condition calls, as it calls them.
_LOCK_API: Final = ("acquire", "acquire_nowait", "release", "locked", "statistics")


class _AnyioLock:
    """An :class:`anyio.Lock`, or any object with its methods (a wrapper of
    one, say), as Condition uses a Lock: by that public API, as AnyIO's
    Condition does.

    The methods are the lock's own, bound (no extra frame per call).
    """

    __slots__ = _LOCK_API

    def __init__(self, lock: anyio.Lock) -> None:
        self.acquire: Callable[[], Coroutine[Any, Any, None]] = lock.acquire
        self.acquire_nowait: Callable[[], None] = lock.acquire_nowait
        self.release: Callable[[], None] = lock.release
        self.locked: Callable[[], bool] = lock.locked
        self.statistics: Callable[[], anyio.LockStatistics] = lock.statistics

    @property
    def _owner(self) -> object | None:
        # Condition only asks whether the current task holds the lock.  anyio
        # names the owner by a TaskInfo, equal to get_current_task() for the
        # same task: the current task object if it holds the lock, else None.
        owner = self.statistics().owner
        if owner is not None and owner == anyio.get_current_task():
            return current_task()
        return None


class Condition(CopiedWhole):
    """A condition variable: a drop-in for :class:`anyio.Condition`.

    :param lock: the lock to use: an anyio_prims :class:`Lock`, or an
        :class:`anyio.Lock` (used through its public API only, so it keeps
        its own speed and checkpoints), or, as AnyIO's Condition takes, any
        object with that API (``acquire``, ``acquire_nowait``, ``release``,
        ``locked``, and ``statistics`` with the owner); a new anyio_prims
        Lock if ``None``
    :raises TypeError: if ``lock`` is none of these

    ``async with cond:`` acquires the lock for the block.  Waiters are
    notified in arrival order; on Trio, tasks that one ``notify_all()`` (or
    ``notify(n)``) woke together run in any order, and return from
    :meth:`wait` in the order they re-acquire the lock, as with AnyIO's
    Condition.  In a subclass that overrides :meth:`acquire` or
    :meth:`release`, ``async with`` and :meth:`wait` call the overrides,
    as AnyIO's Condition does (decided from the class when the Condition
    is made: a method patched onto ``Condition`` itself, before or after,
    is not called there).
    """

    __slots__ = ("__weakref__", "_lock", "_through_methods", "_waiters")

    def __init__(self, lock: Lock | anyio.Lock | None = None) -> None:
        #: Whether ``async with`` and :meth:`wait` go through :meth:`acquire`
        #: and :meth:`release`, as AnyIO's Condition always does: only in a
        #: subclass that overrides either.  This class calls the lock's own,
        #: one coroutine frame less per block.  (A slot: read on every
        #: block, faster than a class attribute.)
        cls = type(self)
        self._through_methods = cls is not Condition and (
            cls.acquire is not Condition.acquire or cls.release is not Condition.release
        )
        self._lock: Lock | _AnyioLock
        if lock is None:
            self._lock = Lock()
        elif isinstance(lock, Lock):
            self._lock = lock
        elif isinstance(lock, anyio.Lock) or all(
            callable(getattr(lock, name, None)) for name in _LOCK_API
        ):
            self._lock = _AnyioLock(lock)
        else:
            raise TypeError(
                "lock must be an anyio_prims Lock, an anyio.Lock, or an object "
                "with their acquire, acquire_nowait, release, locked and "
                f"statistics methods, not {type(lock).__name__}"
            )
        # NOT_OPENED until a wait first parks, as the Event's.
        self._waiters: WaitQueue[None] | Unopened = NOT_OPENED

    def _check_acquired(self) -> None:
        if self._lock._owner is not current_task():
            raise RuntimeError("The current task is not holding the underlying lock")

    async def acquire(self) -> None:
        """Acquire the underlying lock, blocking until it is free.

        Blocks while another task holds the lock or waits for it (FIFO).  A
        checkpoint on every call, as in AnyIO (unless the lock is ours, made
        with ``fast_acquire=True``: then when it blocks, and otherwise at
        least once every 64 calls; an :class:`anyio.Lock` keeps AnyIO's
        rule).  If cancelled, the call holds nothing: a lock handed to it
        meanwhile goes to the next waiter.

        :raises RuntimeError: if the current task already holds the lock
        """
        await self._lock.acquire()

    def acquire_nowait(self) -> None:
        """Acquire the underlying lock without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if the lock is held or has waiters
        :raises RuntimeError: if the current task already holds it
        """
        self._lock.acquire_nowait()

    def release(self) -> None:
        """Release the underlying lock.  Not a checkpoint.

        :raises RuntimeError: if the current task does not hold it
        """
        self._lock.release()

    def locked(self) -> bool:
        """Whether the underlying lock is held."""
        return self._lock.locked()

    def notify(self, n: int = 1) -> None:
        """Wake the first ``n`` waiting tasks (fewer if fewer wait).

        Never blocks; not a checkpoint.  A woken task runs once it has
        re-acquired the lock.

        :raises RuntimeError: if the current task does not hold the lock
        """
        self._check_acquired()
        waiters = self._waiters
        for _ in range(n):
            waiter = waiters.pop()
            if waiter is None:
                break
            waiter.grant()

    def notify_all(self) -> None:
        """Wake every waiting task.  Never blocks; not a checkpoint.

        :raises RuntimeError: if the current task does not hold the lock
        """
        self._check_acquired()
        for waiter in self._waiters.drain():
            waiter.grant()

    def _pass_on(self, value: object) -> None:
        # A notified waiter was cancelled before it ran: wake the next one.
        waiter = self._waiters.pop()
        if waiter is not None:
            waiter.grant()

    async def wait(self) -> None:
        """Release the lock, wait for a notification, re-acquire the lock.

        Blocks until :meth:`notify` or :meth:`notify_all` wakes this task
        and the lock is free again.  Always a checkpoint.  Whether it returns
        or raises, the task holds the lock afterwards: the re-acquisition is
        shielded from cancellation.  If cancelled before it releases the
        lock, nothing happens; if cancelled while waiting, the cancellation
        propagates once the lock is re-acquired; if notified and cancelled
        before it runs, or while it re-acquires the lock (a plain asyncio
        cancellation; elsewhere the re-acquisition is shielded), the
        notification passes to the next waiter.  A Ctrl-C that Trio delivers
        while it re-acquires is raised once it holds the lock, too.

        :raises RuntimeError: if the current task does not hold the lock
        """
        await checkpoint_if_cancelled()
        self._check_acquired()
        if self._through_methods:
            self.release()
        else:
            self._lock.release()
        waiters = self._waiters
        if waiters is NOT_OPENED:
            waiters = self._waiters = WaitQueue()
        try:
            await waiters.park(None, self._pass_on)
        except BaseException:
            interrupted = await self._reacquire()
            if isinstance(interrupted, KeyboardInterrupt):
                try:
                    # A Ctrl-C during the re-acquire wins; the first
                    # exception is its __context__.
                    raise interrupted
                finally:
                    del interrupted  # the traceback keeps this frame: no cycle
            raise
        cancelled = await self._reacquire()
        if cancelled is not None:
            # Notified, then cancelled while it re-acquired (a plain asyncio
            # cancellation gets through the shield): this task will not act
            # on the notification, so the next waiter gets it (at worst a
            # spurious wake-up, as CPython's Condition gives).
            self._pass_on(None)
            try:
                raise cancelled
            finally:
                del cancelled  # the traceback keeps this frame: no cycle

    async def _reacquire(self) -> BaseException | None:
        """Acquire the lock whatever cancellation or Ctrl-C arrives meanwhile.

        Returns what it caught on the way, if anything, for the caller to
        raise once it holds the lock: a cancellation (only a plain asyncio
        ``task.cancel()`` gets through the shield), or a KeyboardInterrupt
        (Trio delivers one to a parked main task, shield or not), which
        wins over a cancellation.
        """
        caught: BaseException | None = None
        while True:
            try:
                with anyio.CancelScope(shield=True):
                    if self._through_methods:
                        await self.acquire()
                    else:
                        await self._lock.acquire()
            except (anyio.get_cancelled_exc_class(), KeyboardInterrupt) as exc:
                if not isinstance(caught, KeyboardInterrupt):
                    caught = exc
                if not (self._through_methods and self._lock._owner is current_task()):
                    continue  # holds nothing: acquire again
                # A subclass's acquire() raised holding the lock (an await of
                # its own after the lock's): held, as AnyIO's one call leaves
                # it, so not acquired again.
            try:
                return caught
            finally:
                # ``caught``'s traceback keeps this frame: no cycle.
                del caught

    @runs_user_code  # the predicate
    async def wait_for(self, predicate: Callable[[], T]) -> T:
        """Wait until ``predicate()`` is true; return its value.

        Calls ``predicate`` with the lock held, first at once and then after
        each notification; as :meth:`wait` otherwise (a checkpoint only when
        it waits: a predicate already true returns at once).

        :raises RuntimeError: if the current task does not hold the lock
            (when it has to wait)
        """
        while not (result := predicate()):
            await self.wait()
        return result

    def statistics(self) -> anyio.ConditionStatistics:
        """A snapshot: ``tasks_waiting`` and the lock's statistics."""
        return anyio.ConditionStatistics(len(self._waiters), self._lock.statistics())

    async def __aenter__(self) -> None:
        """``async with cond:`` holds the lock for its block: as
        :meth:`acquire` (blocks, is a checkpoint and is cancelled alike)."""
        # A coroutine function, as AnyIO's, not a plain one returning the
        # lock's acquire() (one frame less per block): what inspects the
        # method (an autospec mock, a framework) sees AnyIO's kind.
        if self._through_methods:
            await self.acquire()
        else:
            await self._lock.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        if self._through_methods:
            self.release()
        else:
            self._lock.release()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} locked={self._lock.locked()} "
            f"waiting={len(self._waiters)}>"
        )
