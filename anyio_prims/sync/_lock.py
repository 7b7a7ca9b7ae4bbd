# Lock and Semaphore: drop-in replacements for anyio.Lock and anyio.Semaphore,
# each a thin shell around a fair BatchSemaphore.
#
# Same constructors, methods, properties, statistics classes, exception types
# and messages as AnyIO 4 (its asyncio backend's wording where the backends
# differ), and creatable outside a running event loop; switching is a change
# of import.
#
# Composition, not inheritance: BatchSemaphore's API (acquire(n), hold(),
# close(), its statistics) is not a lock's, and overriding it with narrower
# signatures would break substitutability.  The fast paths still add no
# coroutine frame: they test and update the semaphore's ``_value`` and
# ``_waiters.parked`` inline, exactly as BatchSemaphore.acquire does, and the
# contended path waits on its queue directly, as BatchSemaphore.acquire does:
# ``enqueue`` (on the queue ``_open_waiters`` makes, if nobody has waited
# yet) and an await of the waiter, no ``park`` frame in between, and
# ``_leave_and_raise`` if that raises (a grant that met the cancellation goes to
# the next waiter).  The semaphore is never closed, so no waiter is FAILED.
# It is made by ``fair_semaphore``, without BatchSemaphore.__init__'s checks.
#
# Checkpoints: strict by default, as AnyIO: every acquire() is a checkpoint.
# One that can proceed takes the lock (or unit) first and then reaches its
# checkpoint, in AnyIO's order, so the tasks that run meanwhile see it taken.
# The checkpoints are ``take_checkpoints()``'s.  On Trio they are AnyIO's
# (Trio's): a cancellation test before the take, which returns only without
# yielding, and a shielded yield after it.  Elsewhere there is no test, and
# the yield is a plain checkpoint: a cancellation delivered there gives the
# lock back (``release()``, which hands it to whoever queued meanwhile) and
# propagates, so a cancelled acquire holds nothing (AnyIO's yield is
# shielded, and the cancellation lands at the next checkpoint instead).
# One that must wait parks, and parking is the checkpoint, as in AnyIO; on
# Trio it makes the same cancellation test first, as AnyIO's (Trio's) does.
# ``fast_acquire=True`` selects the budgeted mode: a checkpoint at least once
# every 64 calls instead of AnyIO's per-call cancellation check (a
# deliberate deviation, see docs/semantics.md).
#
# Lock invariants:
#   _sem._value == 1  iff  nobody holds the lock and nobody has been handed it;
#   _owner            the task holding the lock, or the task it has been
#                     handed to and that has not run yet; None when free.
# release() hands the lock straight to the first waiter (``_value`` stays 0)
# and names that waiter's task as ``_owner`` at once, as AnyIO and Trio do:
# a contended acquire records its task on its waiter (``waiter.task``).
# Every request here is for one unit, so release() (Lock's and Semaphore's)
# does BatchSemaphore._grant_waiters' work with the queue's ``grant_head``:
# the first live waiter takes the unit; a waiter whose task was cancelled
# before the grant is skipped.  The handed-over lock cannot
# be lost: a waiter cancelled after the grant gives
# it back (``_give_back``), which clears ``_owner`` and hands the lock to the
# next waiter, naming it in turn.
#
# The owner is found by a lookup bound on first use: ``self._tasks.get(
# self._task_key)``, where ``task_finder()`` supplies the map and key (on
# asyncio, asyncio's own loop -> task dict and the loop: about a tenth of the
# cost of asking asyncio for the current task on CPython 3.11).  It answers
# None on another loop or backend, and the lock binds a new one.
from __future__ import annotations

from types import TracebackType
from typing import NoReturn

import anyio

from .._core import (
    BUDGET,
    NO_TASKS,
    NOT_OPENED,
    PENDING,
    CopiedWhole,
    TaskMap,
    Waiter,
    budget_checkpoint,
    checkpoint_if_cancelled,
    on_trio,
    settled_wait,
    take_checkpoints,
    task_finder,
    task_info,
    trio_task_runs,
)
from ._batch_semaphore import fair_semaphore


class Lock(CopiedWhole):
    """A mutual exclusion lock owned by the task that acquires it.

    A drop-in replacement for :class:`anyio.Lock`; ``async with lock:``
    acquires it for the block.  Waiters are served in arrival order.

    :param fast_acquire: if ``True``, an uncontended :meth:`acquire` reaches
        a checkpoint only once every 64 calls (AnyIO checks for cancellation
        on every call without yielding); by default every acquire is a
        checkpoint, as in AnyIO
    """

    __slots__ = ("__weakref__", "_owner", "_sem", "_strict", "_task_key", "_tasks")

    def __init__(self, *, fast_acquire: bool = False) -> None:
        self._strict = not fast_acquire
        self._owner: object | None = None
        self._tasks: TaskMap = NO_TASKS
        self._task_key: object = None
        self._sem = fair_semaphore(1)

    async def acquire(self) -> None:
        """Acquire the lock, blocking until it is free.

        Blocks while another task holds the lock or waits for it (FIFO).  A
        checkpoint on every call (with ``fast_acquire=True``: when it blocks,
        and otherwise at least once every 64 calls).  If cancelled, the call
        holds nothing: a lock handed to it meanwhile goes to the next waiter,
        or becomes free.  On Trio, as AnyIO's, a cancellation that arrives
        while a call that could take the lock at once is at its checkpoint
        is raised at the next checkpoint instead, and the call returns
        holding the lock.

        :raises RuntimeError: if the current task already holds the lock
        """
        sem = self._sem
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        if sem._value > 0 and not sem._waiters.parked:
            if self._strict:
                # AnyIO's order (see the module comment): on Trio a
                # cancellation test first; taken; then the checkpoint.  A
                # call that must wait parks below instead, and parking is
                # the checkpoint (as in AnyIO).
                check, after = take_checkpoints()
                if check is not None:
                    await check()  # returns only without yielding
                sem._value = 0
                self._owner = task
                try:
                    await after()
                except BaseException:
                    self.release()
                    raise
                return
            sem._value = 0
            self._owner = task
            budget = BUDGET
            budget.left -= 1
            if budget.left <= 0:
                try:
                    await budget_checkpoint()
                except BaseException:
                    self.release()
                    raise
            return
        if self._owner is task:
            if on_trio():
                # Trio's Lock, which AnyIO's wraps there, checks for
                # cancellation first: in a cancelled scope the re-acquire
                # raises the cancellation instead (AnyIO's asyncio Lock
                # raises at once).
                await checkpoint_if_cancelled()
            raise RuntimeError("Attempted to acquire an already held Lock")
        # BatchSemaphore.acquire(1)'s wait, inlined (see the module comment);
        # the grant names this task the owner.
        waiters = sem._waiters
        if waiters is NOT_OPENED:
            waiters = sem._open_waiters()
        if self._strict and waiters._loop is None:
            # Not parked on by an asyncio task last (``Parking._loop``): on
            # Trio, AnyIO's (Trio's) acquire checks for cancellation before
            # it parks, and raises it a schedule point later than a park.
            check = take_checkpoints()[0]
            if check is not None:
                await check()  # returns only without yielding
        waiter = waiters.enqueue(1)
        waiter.task = task
        if sem._value > 0 and waiter.state is PENDING:
            # The lock came free inside enqueue, before the waiter was there
            # to be handed it: an acquire granted it and closed unfinished
            # by a finalizer run there gave it back to nobody.  Hand it over
            # as that give-back would have (to this waiter, or one ahead).
            self._hand_over()
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (_core/_waiter.py)
                if self._owner is None:
                    # Granted inside enqueue, before its task was named
                    # (release()): this task holds the lock.
                    self._owner = task
                await settled_wait(waiter)
        except BaseException as exc:
            self._leave_and_raise(waiter, exc)
        # Recycle the waiter (see _core/_waiter.py); payload, value are ints.
        waiter.task = None
        waiters._spare = waiter

    def acquire_nowait(self) -> None:
        """Acquire the lock without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if the lock is held or has waiters
        :raises RuntimeError: if the current task already holds the lock
        """
        sem = self._sem
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        if sem._value > 0 and not sem._waiters:
            sem._value = 0
            self._owner = task
            return
        if self._owner is task:
            raise RuntimeError("Attempted to acquire an already held Lock")
        raise anyio.WouldBlock

    def release(self) -> None:
        """Release the lock, handing it to the first waiter if there is one.

        Never blocks; not a checkpoint.

        :raises RuntimeError: if the current task does not hold the lock
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        if self._owner is not task:
            raise RuntimeError(
                # AnyIO passes Trio's own wording through on Trio.
                "can't release a Lock you don't own"
                if on_trio()
                else "The current task is not holding this lock"
            )
        # _hand_over() for one unit (see the module comment).  This task is
        # no owner from here on: a finalizer that a collection runs in the
        # wake-up (it allocates) must not find it the owner, free to release
        # again.  No owner is named until the grant returns (the head
        # waiter's task, read here, cost a hand-over 5 times the store).
        waiters = self._sem._waiters
        if waiters.parked:
            self._owner = None
            granted = waiters.grant_head(1)
            if granted is not None:
                try:
                    self._owner = granted.task
                except AttributeError:
                    # A new waiter granted inside its acquire's enqueue (a
                    # finalizer run there), before that acquire named its
                    # task; a recycled one's is None.  The acquire names
                    # itself the owner.
                    self._owner = None
                return
        self._owner = None
        self._sem._value = 1

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # copy, deepcopy and pickle: as AnyIO's Lock, an idle lock copies;
        # the owner lookup starts unbound again (it may hold an event loop).
        # A held lock does not: its owner task cannot be copied, and is not
        # walked into (on Trio, a half-copied task leaves noise behind).
        # Held is ``_value < 1``: inside a hand-over's wake-up the lock is
        # held with no owner named yet (release()), and a copy made there
        # would be held by nobody, for good.
        if self._owner is not None or self._sem._value < 1:
            raise TypeError(f"cannot copy a {type(self).__name__} that a task holds")
        return None, {
            "_strict": self._strict,
            "_owner": self._owner,
            "_tasks": NO_TASKS,
            "_task_key": None,
            "_sem": self._sem,
        }

    def _hand_over(self) -> None:
        # Grant whoever the semaphore now lets in, and name it the owner:
        # _grant_waiters() for a fair semaphore of one unit, whose requests
        # are all for one, with the owner named before the wake-up, as in
        # release().
        sem = self._sem
        if sem._value >= 1 and sem._waiters.parked:
            granted = sem._waiters.take_head(1)
            if granted is not None:
                sem._value -= 1
                try:
                    self._owner = granted.task
                except AttributeError:  # as in release()
                    self._owner = None
                granted.wake()

    def _leave_and_raise(self, waiter: Waiter[int], exc: BaseException) -> NoReturn:
        # A parked acquire raised ``exc`` (a cancellation): as
        # BatchSemaphore._leave_and_raise, with the owner kept up to date.  A
        # lock granted meanwhile goes to the next waiter through _give_back.
        self._sem._waiters._interrupted(waiter, exc, self._give_back)
        self._hand_over()
        waiter.task = None  # a waiter left in the queue keeps no task
        try:
            raise exc
        finally:
            del exc  # the traceback keeps this frame: no cycle

    def _give_back(self, n: int) -> None:
        # The lock was handed to a task cancelled before it ran: pass it on.
        self._owner = None
        self._sem._value += n
        self._hand_over()

    def locked(self) -> bool:
        """Whether the lock is held (or has been handed to a waiter)."""
        return self._sem._value < 1

    def statistics(self) -> anyio.LockStatistics:
        """A snapshot: ``locked``, the ``owner`` task's info, ``tasks_waiting``."""
        owner = self._owner
        return anyio.LockStatistics(
            self._sem._value < 1,
            task_info(owner) if owner is not None else None,
            len(self._sem._waiters),
        )

    # ``async with lock:`` runs acquire() itself: no extra coroutine frame.
    __aenter__ = acquire

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "locked" if self._sem._value < 1 else "unlocked"
        return f"<{type(self).__name__} {state} waiting={len(self._sem._waiters)}>"


class Semaphore(CopiedWhole):
    """A counting semaphore: a drop-in replacement for :class:`anyio.Semaphore`.

    :param initial_value: the starting value (an ``int >= 0``)
    :param max_value: if given, :meth:`release` raises ``ValueError`` rather
        than raise the value above it
    :param fast_acquire: if ``True``, an uncontended :meth:`acquire` reaches
        a checkpoint only once every 64 calls; by default every acquire is a
        checkpoint, as in AnyIO
    :raises TypeError: if ``initial_value`` is not an int, or ``max_value``
        neither an int nor ``None``
    :raises ValueError: if ``initial_value < 0`` or ``max_value <
        initial_value``

    Waiters are served in arrival order; :meth:`release` hands its unit
    straight to the first waiter, so :attr:`value` stays 0 while any task
    waits.
    """

    __slots__ = ("__weakref__", "_max_value", "_sem", "_strict")

    def __init__(
        self,
        initial_value: int,
        *,
        max_value: int | None = None,
        fast_acquire: bool = False,
    ) -> None:
        if not isinstance(initial_value, int):
            raise TypeError("initial_value must be an integer")
        if initial_value < 0:
            raise ValueError("initial_value must be >= 0")
        if max_value is not None:
            if not isinstance(max_value, int):
                raise TypeError("max_value must be an integer or None")
            if max_value < initial_value:
                raise ValueError(
                    "max_value must be equal to or higher than initial_value"
                )
        self._max_value = max_value
        self._strict = not fast_acquire
        self._sem = fair_semaphore(int(initial_value))

    async def acquire(self) -> None:
        """Decrement the value, blocking while it is 0 or other tasks wait.

        A checkpoint on every call (with ``fast_acquire=True``: when it
        blocks, and otherwise at least once every 64 calls).  If cancelled,
        the call holds nothing: a unit handed to it meanwhile goes to the
        next waiter, or back to the value.  On Trio, as AnyIO's, a
        cancellation that arrives while a call that could take a unit at
        once is at its checkpoint is raised at the next checkpoint instead,
        and the call returns holding the unit.
        """
        sem = self._sem
        if sem._value > 0 and not sem._waiters.parked:
            if self._strict:
                # As in Lock.acquire.
                check, after = take_checkpoints()
                if check is not None:
                    await check()
                sem._value -= 1
                try:
                    await after()
                except BaseException:
                    self._give_back_unit()
                    raise
                return
            sem._value -= 1
            budget = BUDGET
            budget.left -= 1
            if budget.left <= 0:
                try:
                    await budget_checkpoint()
                except BaseException:
                    self._give_back_unit()
                    raise
            return
        # BatchSemaphore.acquire(1)'s wait, inlined (see the module comment).
        waiters = sem._waiters
        if waiters is NOT_OPENED:
            waiters = sem._open_waiters()
        if self._strict and waiters._loop is None:  # as in Lock.acquire()
            check = take_checkpoints()[0]
            if check is not None:
                await check()
        waiter = waiters.enqueue(1)
        if sem._value > 0 and waiter.state is PENDING and sem._recheck(waiter):
            # A finalizer released meanwhile: see BatchSemaphore._recheck.
            await sem._regranted(waiter, self._strict, self._give_back_unit)
            return
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (_core/_waiter.py)
                await settled_wait(waiter)
        except BaseException as exc:
            sem._leave_and_raise(waiter, exc, self._give_back_unit)
        waiters._spare = waiter  # recycled: payload and value are ints

    def acquire_nowait(self) -> None:
        """Decrement the value without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if the value is 0 (or other tasks wait)
        """
        self._sem.acquire_nowait()

    def release(self) -> None:
        """Increment the value, or hand the unit to the first waiter.

        Never blocks; not a checkpoint.

        :raises ValueError: if the value would exceed ``max_value``.  On
            Trio, as with AnyIO's (Trio's) ``Semaphore``, a task that waits
            (possible only with ``max_value=0``) takes the unit instead.
        """
        sem = self._sem
        if self._max_value is not None and sem._value >= self._max_value:
            self._at_ceiling()
            return
        # BatchSemaphore._grant_waiters() for one unit: every request here is
        # for one unit, so the first live waiter takes it.
        waiters = sem._waiters
        if waiters.parked and waiters.grant_head(1) is not None:
            return
        sem._value += 1

    def _at_ceiling(self) -> None:
        # A release with the value at max_value.  Tasks wait only while the
        # value is 0, so only max_value=0 reaches this with tasks waiting.
        # AnyIO's asyncio Semaphore tests the ceiling first and raises; on
        # Trio, AnyIO's Semaphore is Trio's, which hands the unit to a
        # waiting task first (the value stays at the ceiling) and raises
        # only if none waits.
        waiters = self._sem._waiters
        if not (
            waiters.parked and trio_task_runs() and waiters.grant_head(1) is not None
        ):
            raise ValueError("semaphore released too many times")

    def _give_back_unit(self, _n: int = 1) -> None:
        # The unit taken for the checkpoint of an uncontended acquire that
        # was cancelled there, or granted to a parked acquire cancelled
        # before it ran.  A release() by another task meanwhile may have
        # brought the value to max_value (one release too many, which AnyIO,
        # taking the unit after the checkpoint, would have refused; while a
        # grant was pending the value did not show the unit): the unit is
        # then not put back above the ceiling, and the acquire raises its
        # cancellation, not that release's ValueError.  On Trio it still goes
        # to a task that waits, as release() hands it there (_at_ceiling).
        if self._max_value is None or self._sem._value < self._max_value:
            self.release()
        elif self._sem._waiters.parked and trio_task_runs():
            self._sem._waiters.grant_head(1)

    @property
    def value(self) -> int:
        """The current value: units that can be acquired without blocking."""
        return int(self._sem._value)

    @property
    def max_value(self) -> int | None:
        """The ceiling :meth:`release` enforces, or ``None``."""
        return self._max_value

    def statistics(self) -> anyio.SemaphoreStatistics:
        """A snapshot: ``tasks_waiting``."""
        return anyio.SemaphoreStatistics(len(self._sem._waiters))

    async def __aenter__(self) -> Semaphore:
        """``async with sem:`` holds one unit for its block (as
        :meth:`acquire`: blocks, is a checkpoint and is cancelled alike)."""
        # acquire() inlined: ``async with sem:`` costs no extra frame.
        sem = self._sem
        if sem._value > 0 and not sem._waiters.parked:
            if self._strict:
                check, after = take_checkpoints()
                if check is not None:
                    await check()
                sem._value -= 1
                try:
                    await after()
                except BaseException:
                    self._give_back_unit()
                    raise
                return self
            sem._value -= 1
            budget = BUDGET
            budget.left -= 1
            if budget.left <= 0:
                try:
                    await budget_checkpoint()
                except BaseException:
                    self._give_back_unit()
                    raise
            return self
        waiters = sem._waiters  # as in acquire()
        if waiters is NOT_OPENED:
            waiters = sem._open_waiters()
        if self._strict and waiters._loop is None:  # as in Lock.acquire()
            check = take_checkpoints()[0]
            if check is not None:
                await check()
        waiter = waiters.enqueue(1)
        if sem._value > 0 and waiter.state is PENDING and sem._recheck(waiter):
            # A finalizer released meanwhile: see BatchSemaphore._recheck.
            await sem._regranted(waiter, self._strict, self._give_back_unit)
            return self
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (_core/_waiter.py)
                await settled_wait(waiter)
        except BaseException as exc:
            sem._leave_and_raise(waiter, exc, self._give_back_unit)
        waiters._spare = waiter
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} value={int(self._sem._value)} "
            f"max_value={self._max_value} waiting={len(self._sem._waiters)}>"
        )
