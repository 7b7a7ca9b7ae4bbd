# RWLock: a task-fair readers-writer lock on the waiter core.
#
# Policy (tokio's RwLock): the lock behaves as a fair BatchSemaphore of MAX
# permits where a reader takes 1 and a writer takes MAX.  FIFO service of
# that semaphore is exactly the fairness wanted here:
#   * readers share: a reader is admitted at once while no writer holds and
#     nobody is queued;
#   * a queued writer blocks every reader that arrives after it, so a stream
#     of overlapping readers cannot starve it;
#   * when a writer releases, the run of readers at the head of the queue is
#     admitted together, up to the next queued writer, so a stream of
#     writers cannot starve readers either.
#
# The semaphore itself is not used: the lock must know its holders by task
# (ownership checks on release, the non-reentrancy check, the writer in
# statistics()), and once the holders are recorded the permit count is a
# second copy of the same fact.  Keeping only the holders gives one source
# of truth, recorded at grant time, so statistics() never shows a granted
# task that has not run yet as "free".  The queue and its grant loop are the
# BatchSemaphore ones specialised to two request sizes (~15 lines).
#
# State:
#   _readers  set of tasks holding the lock for reading
#   _writer   the task holding it for writing, or None
#   _waiters  WaitQueue of parked acquirers; payload (task, writing); the
#             shared empty NOT_OPENED until an acquire first parks
#
# Invariants:
#   * _writer is None or not _readers (a writer holds alone);
#   * a task appears at most once among _readers, _writer and the queue
#     (non-reentrant: an acquire by a holder raises RuntimeError, and a
#     queued task is parked and cannot call again);
#   * after every change, the head waiter cannot be admitted (kept by
#     _grant_waiters()): it is a writer while anyone holds, or anything
#     while a writer holds.  Hence an arrival is admitted at once only if
#     nobody is queued, and a live reader is never at the head while no
#     writer holds.  (A waiter whose task was cancelled on asyncio stays
#     in the queue until that task runs and re-runs _grant_waiters(); an
#     arrival looks past it meanwhile, _queued_live(), and admits the
#     readers it held back.)
#
# Holders are recorded by the granting side before the waiter wakes (direct
# handoff).  Every blocking acquire that ends in an exception re-runs
# _grant_waiters() on its way out, because a cancelled writer at the head
# may have been holding back the readers behind it.  If the task was
# granted the lock and then cancelled before it ran (asyncio only),
# WaitQueue.park first hands the grant to _give_back(), which removes the
# task from the holders; that same re-run then admits whoever can proceed.
#
# Fast paths: an uncontended acquire is the checkpoint-mode check, one
# owner lookup ``self._tasks.get(self._task_key)`` (bound on first use by
# task_finder(); on asyncio a dict lookup keyed by the loop) and a few
# attribute tests; it creates no waiter; an uncontended release is one
# lookup and a set removal.  The context managers inline the acquire fast
# path (no nested coroutine) and release through release_read() and
# release_write().
from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

import anyio

from .._core import (
    BUDGET,
    NO_TASKS,
    NOT_OPENED,
    CopiedWhole,
    TaskMap,
    Unopened,
    Waiter,
    WaitQueue,
    budget_checkpoint,
    check_strict,
    task_finder,
)
from .._core import task_info as _task_info


@dataclass(frozen=True)
class RWLockStatistics:
    """A snapshot of an :class:`RWLock`.

    :ivar readers: the number of tasks holding the lock for reading
    :ivar writer: the task holding the lock for writing, or ``None``
    :ivar tasks_waiting_read: tasks parked in :meth:`RWLock.acquire_read`
    :ivar tasks_waiting_write: tasks parked in :meth:`RWLock.acquire_write`

    A task woken with the lock counts as holding it from the moment it is
    granted, before it resumes.
    """

    readers: int
    writer: anyio.TaskInfo | None
    tasks_waiting_read: int
    tasks_waiting_write: int


class RWLock(CopiedWhole):
    """A task-fair readers-writer lock: many readers or one writer.

    :param strict: make every acquire a checkpoint, as AnyIO does; by
        default an acquire that completes without blocking reaches a
        checkpoint only once every 64 such calls (see :doc:`semantics`)

    Fairness: tasks are served in arrival order.  A reader is admitted at
    once only while no writer holds the lock and nobody is queued; a queued
    writer therefore blocks readers that arrive after it, and consecutive
    queued readers are admitted together when the lock allows.  Neither
    readers nor writers can starve.

    Ownership: the lock is held by tasks.  Only the task that acquired it
    may release it, and the lock is not reentrant: a task that holds it
    (for reading or writing) and acquires it again, either way, gets
    :exc:`RuntimeError` instead of a deadlock.  To upgrade, release the read
    lock and acquire the write lock (another writer may run in between).

    Cancellation: an acquire cancelled while it waits holds nothing, and the
    tasks its departure lets through are admitted (a cancelled queued writer
    lets the readers behind it in).  An acquire never raises a cancellation
    while holding the lock.
    """

    __slots__ = (
        "__weakref__",
        "_readers",
        "_strict",
        "_task_key",
        "_tasks",
        "_waiters",
        "_writer",
    )

    def __init__(self, *, strict: bool = False) -> None:
        self._strict = check_strict(strict)
        # The owner lookup, bound on first use (see task_finder()).
        self._tasks: TaskMap = NO_TASKS
        self._task_key: object = None
        self._readers: set[object] = set()
        self._writer: object | None = None
        self._waiters: WaitQueue[tuple[object, bool]] | Unopened = NOT_OPENED

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # copy and pickle, as Lock's: the owner lookup starts unbound again,
        # and a lock that a task holds is not copied.
        if self._writer is not None or self._readers:
            raise TypeError(f"cannot copy an {type(self).__name__} that a task holds")
        return None, {
            "_strict": self._strict,
            "_tasks": NO_TASKS,
            "_task_key": None,
            "_readers": self._readers,
            "_writer": self._writer,
            "_waiters": self._waiters,
        }

    # -- reading ---------------------------------------------------------

    async def acquire_read(self) -> None:
        """Acquire the lock for reading, blocking while it is not available.

        Blocks while a writer holds the lock or any task is queued.  A
        checkpoint when it blocks; otherwise as the checkpoint mode says
        (every call if ``strict``, else at least once every 64 calls).  If
        cancelled, the call holds nothing (a grant that raced with the
        cancellation is given back and passed on).

        :raises RuntimeError: if the current task already holds the lock
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        budget = BUDGET
        budget.left -= 1
        if (budget.left <= 0 or self._strict) and not self._read_parks(task):
            # One that must wait parks below instead: parking is the
            # checkpoint, and it keeps the order of arrival; due, it takes
            # its checkpoint once granted (_acquire_blocking).
            await budget_checkpoint()
        readers = self._readers
        if self._writer is None and not self._waiters.parked and task not in readers:
            readers.add(task)
            return
        await self._acquire_read_blocking(task)

    def _read_parks(self, task: object) -> bool:
        # Whether a read acquire by ``task`` is about to park: it cannot
        # proceed now (exactly: a queue of cancelled waiters lets it in,
        # has_live(), as _acquire_read_blocking decides) and does not hold
        # the lock already (that raises, after the checkpoint that is due,
        # as every call that does not park).
        waiters = self._waiters
        writer = self._writer
        return (
            (writer is not None or bool(waiters.parked and self._queued_live()))
            and task is not writer
            and task not in self._readers
        )

    def _write_parks(self, task: object) -> bool:
        # The same for a write acquire.
        waiters = self._waiters
        writer = self._writer
        readers = self._readers
        return (
            (
                writer is not None
                or bool(readers)
                or bool(waiters.parked and self._queued_live())
            )
            and task is not writer
            and task not in readers
        )

    async def _acquire_read_blocking(self, task: object) -> None:
        self._check_not_holding(task)
        # has_live(), not bool(): a waiter whose task was cancelled on
        # asyncio and has not run yet holds nobody back (statistics() no
        # longer counts it either).
        if self._writer is None and not (self._waiters.parked and self._queued_live()):
            self._readers.add(task)
            return
        await self._acquire_blocking(task, False)

    def acquire_read_nowait(self) -> None:
        """Acquire the lock for reading without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if a writer holds the lock or any task is
            queued
        :raises RuntimeError: if the current task already holds the lock
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        self._check_not_holding(task)
        if self._writer is None and not (self._waiters.parked and self._queued_live()):
            self._readers.add(task)
            return
        raise anyio.WouldBlock

    def release_read(self) -> None:
        """Release the current task's read lock.  Never blocks; not a checkpoint.

        If this was the last reader, a queued writer is admitted.

        :raises RuntimeError: if the current task does not hold the lock for
            reading
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        readers = self._readers
        try:
            readers.remove(task)
        except KeyError:
            raise RuntimeError(
                "the current task does not hold this RWLock for reading"
            ) from None
        if not readers and self._waiters.parked:
            self._grant_waiters()

    # -- writing ---------------------------------------------------------

    async def acquire_write(self) -> None:
        """Acquire the lock for writing, blocking while it is not available.

        Blocks while any task holds the lock or is queued.  A checkpoint
        when it blocks; otherwise as the checkpoint mode says (every call if
        ``strict``, else at least once every 64 calls).  If cancelled, the
        call holds nothing, and the readers queued behind it that can now
        proceed are admitted.

        :raises RuntimeError: if the current task already holds the lock
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        budget = BUDGET
        budget.left -= 1
        if (budget.left <= 0 or self._strict) and not self._write_parks(task):
            await budget_checkpoint()  # as in acquire_read()
        if self._writer is None and not self._readers and not self._waiters.parked:
            self._writer = task
            return
        await self._acquire_write_blocking(task)

    async def _acquire_write_blocking(self, task: object) -> None:
        self._check_not_holding(task)
        if (
            self._writer is None
            and not self._readers
            and not (self._waiters.parked and self._queued_live())
        ):
            self._writer = task
            return
        await self._acquire_blocking(task, True)

    async def _acquire_blocking(self, task: object, writing: bool) -> None:
        # Park until admitted; then, if the budget is due (a wake refills
        # nothing: _core/_budget.py), the checkpoint, before the call
        # returns holding the lock: parking first keeps the order of
        # arrival.  Cancelled in either, the task holds nothing, and
        # whoever can now proceed is admitted.
        try:
            await self._opened_waiters().park(
                (task, writing), self._give_back, self._admit_parked
            )
        except BaseException:
            self._grant_waiters()
            raise
        if BUDGET.left <= 0:
            try:
                await budget_checkpoint()
            except BaseException:
                self._give_back(task)
                self._grant_waiters()
                raise

    def acquire_write_nowait(self) -> None:
        """Acquire the lock for writing without blocking.  Not a checkpoint.

        :raises anyio.WouldBlock: if any task holds the lock or is queued
        :raises RuntimeError: if the current task already holds the lock
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        self._check_not_holding(task)
        if (
            self._writer is None
            and not self._readers
            and not (self._waiters.parked and self._queued_live())
        ):
            self._writer = task
            return
        raise anyio.WouldBlock

    def release_write(self) -> None:
        """Release the current task's write lock.  Never blocks; not a checkpoint.

        The next queued writer, or the run of readers at the head of the
        queue, is admitted.

        :raises RuntimeError: if the current task does not hold the lock for
            writing
        """
        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()
        if self._writer is not task:
            raise RuntimeError("the current task does not hold this RWLock for writing")
        self._writer = None
        if self._waiters.parked:
            self._grant_waiters()

    # -- the queue -------------------------------------------------------

    def _queued_live(self) -> bool:
        # A dead head may have been holding back the readers behind it:
        # admit them as its task would, then tell whether anyone still waits.
        if self._writer is None:
            self._grant_waiters()
        return self._waiters.has_live()

    def _check_not_holding(self, task: object) -> None:
        if task is self._writer:
            raise RuntimeError(
                "RWLock is not reentrant: the current task holds it for writing"
            )
        if task in self._readers:
            raise RuntimeError(
                "RWLock is not reentrant: the current task holds it for reading"
            )

    def _opened_waiters(self) -> WaitQueue[tuple[object, bool]]:
        # The queue, made by the first acquire to park.
        waiters = self._waiters
        if isinstance(waiters, Unopened):
            waiters = self._waiters = WaitQueue()
        return waiters

    def _grant_waiters(self) -> None:
        # Admit from the head while it can be admitted: a run of readers
        # while no writer holds, or one writer when nobody holds.
        # take() looks again at the head peek() found: a finalizer run in a
        # call between them may have taken it.
        waiters = self._waiters
        while self._writer is None and (head := waiters.peek()) is not None:
            task, writing = head.payload
            if writing:
                if self._readers:
                    return
                if not waiters.take(head):
                    continue
                self._writer = task
                head.grant(task)
                return
            if waiters.take(head):
                self._readers.add(task)
                head.grant(task)

    def _admit_parked(self, waiter: Waiter[tuple[object, bool]]) -> bool:
        # park()'s recheck, once the waiter is parked: the lock may have
        # come free inside enqueue, before the waiter was there to be
        # admitted (an acquire granted the lock and closed unfinished by a
        # finalizer run there gave it back, and admitted nobody).  Admit
        # the head as that give-back would have, this waiter included; it
        # is never taken back (granted, park awaits it, a checkpoint).
        if self._writer is None:
            self._grant_waiters()
        return False

    def _give_back(self, task: object) -> None:
        # ``task`` was granted the lock, then cancelled before it ran.  The
        # cancellation then propagates through the ``except`` of the
        # blocking acquire, which admits whoever can now proceed.
        if self._writer is task:
            self._writer = None
        else:
            self._readers.discard(task)

    # -- context managers and introspection -------------------------------

    def read(self) -> Reading:
        """An async context manager that holds the lock for reading.

        ``async with lock.read():`` acquires as :meth:`acquire_read` and
        releases on exit.  Each call returns a new context manager; use it
        for one ``async with`` at a time: entering it again while it is
        entered raises ``RuntimeError``.
        """
        # Reading has no __init__: its fields are set here (see the class).
        cm = Reading()
        cm._lock = self
        cm._entered = False  # entered and not yet exited
        return cm

    def write(self) -> Writing:
        """An async context manager that holds the lock for writing.

        ``async with lock.write():`` acquires as :meth:`acquire_write` and
        releases on exit.  Each call returns a new context manager; use it
        for one ``async with`` at a time: entering it again while it is
        entered raises ``RuntimeError``.
        """
        # Writing has no __init__: its fields are set here (see the class).
        cm = Writing()
        cm._lock = self
        cm._entered = False  # entered and not yet exited
        return cm

    def statistics(self) -> RWLockStatistics:
        """A snapshot of the holders and the queue."""
        waiting_read = waiting_write = 0
        for waiter in self._waiters:
            if waiter.payload[1]:
                waiting_write += 1
            else:
                waiting_read += 1
        writer = self._writer
        return RWLockStatistics(
            readers=len(self._readers),
            writer=None if writer is None else _task_info(writer),
            tasks_waiting_read=waiting_read,
            tasks_waiting_write=waiting_write,
        )

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} readers={len(self._readers)} "
            f"writer={self._writer is not None} waiting={len(self._waiters)}>"
        )


class Reading:
    """``async with`` form of :meth:`RWLock.read`.

    Made only by ``read()``, which sets its attributes: the class has no
    ``__init__``, so that making one is a bare class call (about 60 ns less
    than a class call that runs an ``__init__``, on CPython 3.11).
    """

    __slots__ = ("_entered", "_lock")

    _lock: RWLock
    #: entered and not yet exited
    _entered: bool

    async def __aenter__(self) -> None:
        # RWLock.acquire_read, inlined: no nested coroutine on the fast path.
        lock = self._lock
        task = lock._tasks.get(lock._task_key)
        if task is None:
            task, lock._tasks, lock._task_key = task_finder()
        budget = BUDGET
        budget.left -= 1
        if (budget.left <= 0 or lock._strict) and (
            self._entered or not lock._read_parks(task)
        ):
            await budget_checkpoint()
        if self._entered:
            raise RuntimeError("this RWLock.read() context manager is already in use")
        self._entered = True
        readers = lock._readers
        if lock._writer is None and not lock._waiters.parked and task not in readers:
            readers.add(task)
            return
        try:
            await lock._acquire_read_blocking(task)
        except BaseException:
            self._entered = False
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        # An ``async with`` exits in the task that entered it, so
        # release_read() finds the task that acquired.
        entered, self._entered = self._entered, False
        if not entered:
            raise RuntimeError("this RWLock.read() context manager was not entered")
        self._lock.release_read()


class Writing:
    """``async with`` form of :meth:`RWLock.write`.

    Made only by ``write()``, which sets its attributes: the class has no
    ``__init__``, so that making one is a bare class call (about 60 ns less
    than a class call that runs an ``__init__``, on CPython 3.11).
    """

    __slots__ = ("_entered", "_lock")

    _lock: RWLock
    #: entered and not yet exited
    _entered: bool

    async def __aenter__(self) -> None:
        # RWLock.acquire_write, inlined: no nested coroutine on the fast path.
        lock = self._lock
        task = lock._tasks.get(lock._task_key)
        if task is None:
            task, lock._tasks, lock._task_key = task_finder()
        budget = BUDGET
        budget.left -= 1
        if (budget.left <= 0 or lock._strict) and (
            self._entered or not lock._write_parks(task)
        ):
            await budget_checkpoint()
        if self._entered:
            raise RuntimeError("this RWLock.write() context manager is already in use")
        self._entered = True
        if lock._writer is None and not lock._readers and not lock._waiters.parked:
            lock._writer = task
            return
        try:
            await lock._acquire_write_blocking(task)
        except BaseException:
            self._entered = False
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        entered, self._entered = self._entered, False
        if not entered:
            raise RuntimeError("this RWLock.write() context manager was not entered")
        self._lock.release_write()
