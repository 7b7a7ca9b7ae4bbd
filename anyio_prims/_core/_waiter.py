# The waiter core: one-shot waiters and the FIFO queue they park in.
#
# Modelled on Trio's ParkingLot, which sits under every Trio sync object.  A
# *waiter* is a one-shot slot a task parks on.  The releasing side takes it
# out of its queue and *grants* it a value (an item, a number of permits) or
# *fails* it with an exception, and the task wakes with that outcome: direct
# handoff, the woken task never competes again for what it was granted.
#
# Waiter states (``Waiter.state``), each change made once:
#
#     PENDING --grant()--> GRANTED
#     PENDING --fail()---> FAILED
#     PENDING --cancel---> ABANDONED
#
# Three implementations share this class and differ only in how a task
# sleeps and is woken:
#
# * asyncio (also uvloop): a future of the loop; ``grant`` sets its result.
#   From CPython 3.12 a stock loop's futures are made with
#   ``asyncio.Future()``, which finds the running loop cheaply there, and
#   not with ``loop.create_future()`` (``_backend.future_factory``).
# * Trio: ``wait_task_rescheduled`` / ``reschedule``; no future at all.
# * generic: an ``anyio.Event``; AnyIO's public API only.  Slow, but it is
#   the proof that the primitives above are written once.
#
# Choosing the kind is the slow path's only backend dispatch
# (``Parking._new_waiter``).  A WaitQueue or Slot remembers the asyncio loop
# its last waiter was made for, and ``enqueue`` skips the dispatch while a
# task of that loop is running: asyncio's loop -> running task map holds the
# loop then (a dict membership test, where asking for the running loop costs
# a ``getpid()`` system call on CPython 3.11).  That task is the caller,
# since no primitive is shared between threads; a Trio task in guest mode on
# that loop runs inside its callbacks, with no asyncio task running, and
# takes the dispatch.  The structure keeps the loop referenced until it is
# used elsewhere.  On Trio it remembers, in the same way, the Trio
# run-context dict of the thread its last waiter was made on (where Trio
# keeps the running task: ``_backend.trio_task_dict``), and ``enqueue``
# skips the dispatch while that dict names a running task and no asyncio
# task runs (in any thread: the test is one dict's emptiness), so that the
# Trio task is the caller; between runs, and between task steps, it names
# none.  From CPython 3.14 asyncio's C tasks keep the running task on the
# thread state and leave that map empty (``_backend.TASK_MAP_KEPT``): there
# the asyncio test asks instead whether the remembered loop is the running
# loop and has a current task (two C calls that read the thread state),
# and the Trio test whether an asyncio task runs on this thread.
#
# A wait is ``park(payload, give_back)``, or, on the hottest paths, its two
# halves written out: ``enqueue(payload)`` (make the waiter for the running
# backend and queue it) and an await of ``waiter.wait``, settled as ``park``
# settles it (``_interrupted`` on an exception, which refills the budget:
# the loop delivers an exception to a parked task only by running it
# again, and code that throws into the coroutine itself is no loop; after
# waking, ``FAILED`` handled).  The halves save ``park``'s coroutine frame
# on every wait.  A wake refills nothing: a wait granted before a
# cancellation lands is no cancellation point on asyncio (_budget.py).
#
# Settled before it slept: code run inside the call after ``enqueue``
# parked the waiter (a finalizer that a collection ran there, or the
# call's own look again) may grant or fail it before the task awaits it.
# That await is no schedule point on asyncio (a done future returns at
# once) and no cancellation point on Trio (the task is rescheduled
# already), so every wait tests the state first and awaits such a waiter
# through ``settled_wait``, which adds a checkpoint: the call is one, as
# if what settled the waiter had come just before it.
#
# Recycling: a task whose wait ended normally (granted or failed) hands its
# waiter back to the structure (written out at each wait: clear ``payload``
# and ``value``, store the waiter in ``_spare``), and the next ``enqueue``
# there of the same kind reinitialises it with a new future or Trio sleep
# instead of making an object (about 130 ns of a wait on CPython 3.11).
# Safe because a waiter that ended normally is out of every queue and list
# (granted and failed waiters are removed before they are woken; a channel
# receiver leaves ``in_flight`` before it recycles) and nobody else keeps
# it; a waiter whose wait raised is never recycled, since it may still sit
# in a queue, ABANDONED.  Cleared fields keep no item or task alive.
#
# WaitQueue is a deque with lazy removal.  Invariants:
#
# * every waiter in ``parked`` is PENDING, or dead: ABANDONED, or taken
#   (below) by ``take_where``/``drain`` and not yet compacted away; a
#   PENDING one may be ``_gone()`` (asyncio future cancelled, task not yet
#   run): it is not live, and it counts itself in ``_dead`` when its task
#   runs;
# * a PENDING waiter is parked: it is in ``parked`` (Trio's abort callback
#   relies on it, as it marks and counts a cancelled waiter there);
# * ``_dead`` counts the dead waiters still in ``parked``, so
#   ``len(queue) == len(parked) - _dead`` is the number of live waiters and
#   ``bool(queue)`` is O(1);
# * a cancelled waiter is marked, not searched for (O(1)); ``pop`` drops
#   marked waiters it meets at the head, and the deque is compacted when more
#   than half of it is dead, so push, pop and removal are O(1) amortised.
#
# Taking.  A grant or a failure wakes a task, and a wake-up allocates, so
# a garbage collection may run a finalizer there that uses the primitive
# (sends, releases, cancels a scope).  So every removal of a live waiter
# marks it at once, before any call: GRANTED (``grant_head``, ``take_head``)
# or "taken" (``pop``, ``take``, ``take_where``, ``drain``: marked GRANTED,
# and the caller grants or fails it next, before it yields).  A finalizer
# meets a taken waiter as settled: it grants nothing twice, and on Trio the
# abort callback refuses the cancellation, which the task then meets at its
# next checkpoint; on asyncio the task resumes as granted, then cancelled
# (the race below).  And whatever looks at the head, calls something, and
# acts on the head looks again after the call (``pop``, ``_drop_head``,
# ``take``), reads ``parked`` again (a compaction replaces the deque), and
# iterates over a copy.
#
# The race every primitive must survive: a waiter is granted, then its task
# is cancelled before it runs (possible on asyncio, where ``task.cancel()``
# lands on a task whose future is already resolved; Trio cannot deliver a
# cancellation to a task that has been rescheduled).  ``WaitQueue.park``
# resolves it in one place: the grant is handed to ``give_back`` (which
# passes it on to the next waiter or returns it where it came from) and the
# cancellation propagates; or, where the operation cannot be undone (an item
# already taken from a sender), the call returns normally and the
# cancellation is re-armed for the task's next checkpoint.
#
# A task that was abandoned in the queue may also be granted in the window
# between its asyncio future being cancelled and the task running; ``pop``
# recognises such waiters (``_gone()``) and skips them, so a grant always
# reaches a task that will act on it.
from __future__ import annotations

import sys
from asyncio import AbstractEventLoop, Future, InvalidStateError, _get_running_loop
from asyncio import current_task as _asyncio_current_task
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, Generic, NoReturn, TypeVar

from anyio import Event as AnyIOEvent

from . import _ki
from ._backend import (
    FORCE_GENERIC,
    FUTURE_FROM_RUNNING_LOOP,
    TASK_MAP_KEPT,
    _tasks_by_loop,
    asyncio_cancelling,
    asyncio_loop,
    checkpoint,
    future_factory,
    is_cancellation,
    rearm_cancellation,
    trio_lowlevel,
    trio_nested,
    trio_task_dict,
)
from ._budget import BUDGET, BUDGET_SIZE
from ._ki import protect_if_trio_imported

P = TypeVar("P")  # what a parked task offers: an item, a number of permits

_modules: Final = sys.modules

PENDING: Final = 0
GRANTED: Final = 1
FAILED: Final = 2
ABANDONED: Final = 3


# trio.lowlevel's reschedule, current_task and wait_task_rescheduled, bound
# when the first TrioWaiter is made (``_bind_trio``; Trio is an optional
# extra): the Trio hot paths call them without trio_lowlevel()'s call.  The
# first Trio waiter of every wait structure is made by ``_new_waiter``,
# which binds them first.
_trio_reschedule: Any = None
_trio_current_task: Any = None
_trio_wait: Any = None


class Waiter(Generic[P]):
    """A one-shot slot one task parks on.

    ``payload`` is what the parked task offers or asks for (an item to send,
    a number of permits); ``value`` is what it was granted, or the exception
    it was failed with; ``wait`` is what the task awaits to sleep until then,
    made with the waiter (a loop future, a Trio sleep, an event's wait).
    ``task`` is unset unless the primitive records the parked task there
    (``Lock`` does, to name its next owner when it grants the lock).
    """

    __slots__ = ("payload", "state", "task", "value", "wait")

    payload: P
    state: int
    task: object
    value: Any
    wait: Awaitable[Any]

    # No __init__ here or in the asyncio and Trio waiters: the structures
    # make those by a bare class call and set ``payload``, ``state``
    # (PENDING), ``value`` (None) and ``wait`` themselves (``_new_waiter``
    # and the ``enqueue`` fast paths), about 25 ns less than
    # ``object.__new__(cls)`` and a Python call less than an ``__init__``.

    def grant(self, value: object = None) -> None:
        """Wake the parked task with ``value``.  The waiter must be taken
        out of its queue (``pop``, ``take``, ``take_where``, ``drain``)."""
        self.value = value
        self.state = GRANTED
        self._wake()

    def try_grant(self, value: object = None) -> bool:
        """Grant ``value`` if the task can still take it; ``False`` if gone.

        For a waiter that is PENDING but may be ``_gone()``: one call instead
        of ``_gone()`` then ``grant()``.  The caller must have removed it from
        its queue; on ``False`` it must ``_abandon()`` it (its task, already
        cancelled, will find it out of the queue and count nothing).
        """
        if self._gone():
            return False
        self.grant(value)
        return True

    def fail(self, exc: BaseException) -> None:
        """Wake the parked task with ``exc`` raised.  The waiter must be
        taken out of its queue, as for :meth:`grant`."""
        self.value = exc
        self.state = FAILED
        self._wake()

    def _abandon(self) -> None:
        """Mark the waiter ABANDONED and let go of its payload at once.

        An abandoned waiter may stay in its queue until it reaches the head
        or the queue is compacted; it must not keep the item of a cancelled
        send (or anything else it carried) alive that long.
        """
        self.state = ABANDONED
        self.payload = None  # type: ignore[assignment]  # never read again

    def _wake(self) -> None:
        raise NotImplementedError

    def wake(self) -> None:
        """Wake the task of a waiter that ``take_head`` granted.

        Call it once the primitive's state is what the grant makes it: a
        wake-up allocates, and a finalizer that a garbage collection runs
        there sees that state.
        """
        self._wake()

    def _gone(self) -> bool:
        """Whether the task was cancelled and must not be granted."""
        return False


class AsyncioWaiter(Waiter[P]):
    __slots__ = ("_fut",)

    #: The loop future ``wait`` is.
    _fut: Future[Any]

    def grant(self, value: object = None) -> None:
        # Waiter.grant with _wake inlined.  A taken waiter's task may have
        # been cancelled since it was taken (by a finalizer, in a call of the
        # caller's): the future is then cancelled and refuses the result,
        # and the task resumes as granted, then cancelled (wake()).
        self.value = value
        self.state = GRANTED
        try:
            self._fut.set_result(None)
        except InvalidStateError:
            if not self._fut.cancelled():
                raise  # woken twice: a fault of the library's

    def try_grant(self, value: object = None) -> bool:
        # A cancelled future refuses its result: no separate _gone() call.
        # Written out in WaitQueue.grant_head and Slot.grant_head: keep in step.
        try:
            self._fut.set_result(None)
        except InvalidStateError:
            return False
        self.value = value
        self.state = GRANTED
        return True

    def wake(self) -> None:
        # Its task may have been cancelled since its waiter was taken (by a
        # finalizer, in a call of the caller's): the future is then
        # cancelled, and the task resumes as granted (or failed), then
        # cancelled.
        try:
            self._fut.set_result(None)
        except InvalidStateError:
            if not self._fut.cancelled():
                raise  # woken twice: a fault of the library's

    _wake = wake

    def _gone(self) -> bool:
        # ``task.cancel()`` cancels the future at once; the task learns of it
        # only when it next runs.
        return self._fut.cancelled()


class TrioWaiter(Waiter[P]):
    # ``owner`` is where the waiter is parked: Trio's abort callback, not the
    # task, learns of a cancellation, and tells it.
    __slots__ = ("_task", "owner")

    #: Where it is parked; None once settled (set again when it is reused).
    owner: Parking[Any]
    #: The parked Trio task; None once settled.
    _task: Any

    # A settled waiter lets go of its task and its wait structure: it may be
    # kept as that structure's ``_spare`` (a structure -> waiter -> structure
    # cycle, and the task's Runner kept alive after trio.run() returns) or
    # stay in a deque, abandoned.  ``enqueue`` sets both again.

    def grant(self, value: object = None) -> None:
        # Waiter.grant with _wake inlined, as in AsyncioWaiter.
        self.value = value
        self.state = GRANTED
        self._wake()

    def try_grant(self, value: object = None) -> bool:
        # Never refused: Trio's abort callback takes a cancelled waiter out
        # of its queue before anyone could grant it, so it is never _gone().
        # Written out in WaitQueue.grant_head and Slot.grant_head.
        self.value = value
        self.state = GRANTED
        self._wake()
        return True

    def _wake(self) -> None:
        task = self._task
        self._task = self.owner = None  # type: ignore[assignment]
        _trio_reschedule(task)

    # A Trio task granted by take_head() is still asleep: a cancellation
    # that comes meanwhile is refused by _abort() (not PENDING any more).
    wake = _wake

    def _abort(self, raise_cancel: object) -> Any:
        # Called by Trio while the task sleeps, so the waiter is PENDING and
        # still parked; except where it was settled in its own task's step,
        # after ``enqueue`` and before the task went to sleep (a finalizer
        # of the caller's that a garbage collection ran there, sending on a
        # channel): Trio has that task rescheduled already, and a
        # cancellation it would deliver now waits for its next checkpoint.
        if self.state is not PENDING or not self.owner._cancelled_parked(self):
            return trio_lowlevel().Abort.FAILED
        self._task = self.owner = None  # type: ignore[assignment]
        return trio_lowlevel().Abort.SUCCEEDED


def _bind_trio() -> Any:
    """Bind trio.lowlevel's calls for the Trio hot paths (see above), and
    return ``_trio_wait``."""
    global _trio_reschedule, _trio_current_task, _trio_wait
    lowlevel = trio_lowlevel()
    _trio_reschedule = lowlevel.reschedule
    _trio_current_task = lowlevel.current_task
    _trio_wait = lowlevel.wait_task_rescheduled
    return _trio_wait


class GenericWaiter(Waiter[P]):
    __slots__ = ("_cancelling", "_event")

    def __init__(self, payload: P) -> None:
        self.payload = payload
        self.state = PENDING
        self.value = None
        protect_if_trio_imported()  # on Trio, this may not ask Trio for anything
        # Bound at import: code that puts anyio_prims.Event under the name
        # anyio.Event (a migration shortcut; nox -s conformance does it) must
        # not make this wait on itself.
        self._event = AnyIOEvent()
        self.wait = self._event.wait()
        #: The parked asyncio task's ``cancelling()`` count when it parked
        #: (3.11+), or None: how ``rearm_cancellation`` tells the requests
        #: that arrived during this wait.
        self._cancelling = asyncio_cancelling()

    def _wake(self) -> None:
        self._event.set()


def _no_loop() -> Future[Any]:  # pragma: no cover - never called
    # ``Parking._new_future`` until an asyncio waiter is made there.
    raise RuntimeError("no asyncio loop has parked a task here")


class _Withdrawn:
    """The type of :data:`WITHDRAWN`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WITHDRAWN"


#: What ``park`` returns when its ``recheck`` found that the task need not
#: wait after all.
WITHDRAWN: Final = _Withdrawn()


def raise_failure(waiter: Waiter[Any]) -> NoReturn:
    """Raise what ``waiter`` was failed with (its state is FAILED).

    The exception is taken off the waiter, with its payload, and out of
    this frame's locals as it leaves: the traceback keeps this frame and
    the caller's, and a reference from either to the exception would be a
    cycle.  The caller must not keep the exception in a local either.
    """
    failure = waiter.value
    waiter.value = waiter.payload = None
    try:
        raise failure
    finally:
        del failure


async def settled_wait(waiter: Waiter[Any]) -> None:
    """Await the wait of a waiter granted or failed before its task slept,
    then take a checkpoint (a schedule point and a cancellation point).

    For every wait whose waiter is no longer PENDING when the call is
    about to await it (see "Settled before it slept" above): on asyncio
    the wait is a done future, which returns without yielding; on Trio the
    grant rescheduled the task, which sleeps once to take it and meets no
    cancellation there; the generic waiter's wait is a checkpoint already.
    A cancellation raised here meets the settled waiter in the caller's
    ``except`` clause, as in the grant-then-cancel race: a grant goes back
    through the caller's ``give_back`` (or the cancellation is re-armed
    for the next checkpoint where nothing can be given back), and a
    failure gives way to the cancellation.
    """
    await waiter.wait
    await checkpoint()


def _drop_unawaited(waiter: Waiter[Any]) -> None:
    """Abandon a waiter whose task never awaited it, and close its sleep."""
    waiter._abandon()
    if type(waiter) is TrioWaiter:
        waiter._task = waiter.owner = None  # type: ignore[assignment]
    close = getattr(waiter.wait, "close", None)
    if close is not None:  # a coroutine (Trio's sleep, an event's wait)
        close()


class Parking(Generic[P]):
    """What a waiter is parked in: a WaitQueue or a single Slot."""

    __slots__ = ("_loop", "_new_future", "_spare", "_trio")

    #: The asyncio loop the last waiter made here belongs to, or None (set
    #: by the subclasses that park waiters).
    _loop: AbstractEventLoop | None
    #: What makes that loop's futures (``_backend.future_factory``), set
    #: with ``_loop`` and read only while ``_loop`` is set (``_no_loop``
    #: before that).
    _new_future: Callable[[], Future[Any]]
    #: If the last waiter made here was a Trio waiter: the Trio run-context
    #: dict of its thread, whose ``"task"`` is the running Trio task there
    #: (``_backend.trio_task_dict``); else None.
    _trio: dict[str, object] | None
    #: A settled waiter, handed back by the task that waited on it, for
    #: ``enqueue`` to reuse; or None (see "Recycling" in the module comment).
    _spare: Waiter[Any] | None

    def _new_waiter(self, payload: P) -> Waiter[P]:
        """A waiter of the running backend's kind: the slow path's dispatch.

        Remembers the asyncio loop in ``_loop``, so that ``enqueue`` can skip
        this while the same loop runs the caller.  The waiter's ``wait`` must
        be awaited at once: on Trio and with the generic waiter it is a
        coroutine, made here.
        """
        if not FORCE_GENERIC:
            loop = _get_running_loop()  # _backend.asyncio_loop() written out
            if (
                loop is not None
                and (loop in _tasks_by_loop or _asyncio_current_task(loop) is not None)
                and ("trio" not in sys.modules or not trio_nested())
            ):
                if loop is not self._loop:
                    self._loop = loop
                    self._new_future = future_factory(loop)
                self._trio = None
                new: AsyncioWaiter[P] = AsyncioWaiter()
                new.payload = payload
                new.state = PENDING
                new.value = None
                new.wait = new._fut = self._new_future()
                return new
            self._loop = None
            if "trio" in sys.modules:
                waiter: Waiter[Any] | None = self._spare
                if waiter is not None and type(waiter) is TrioWaiter:
                    # A recycled waiter: a new sleep, no new object.
                    self._spare = None
                    waiter.payload = payload
                    waiter.owner = self  # cleared when it was settled
                    waiter.state = PENDING
                    waiter._task = _trio_current_task()
                    waiter.wait = _trio_wait(waiter._abort)
                else:
                    trio_wait = _trio_wait
                    if trio_wait is None:
                        trio_wait = _bind_trio()
                    waiter = TrioWaiter()
                    waiter.payload = payload
                    waiter.owner = self
                    waiter.state = PENDING
                    waiter.value = None
                    waiter._task = _trio_current_task()
                    waiter.wait = trio_wait(waiter._abort)
                # For enqueue's Trio branch: this thread's task dict, checked
                # against the task just found (another thread's is replaced).
                tasks = self._trio
                if tasks is None or tasks.get("task") is not waiter._task:
                    self._trio = trio_task_dict()
                return waiter
        return GenericWaiter(payload)

    def enqueue(self, payload: P) -> Waiter[P]:
        """Put a new waiter for the current task here; ``park``'s first half."""
        raise NotImplementedError

    async def park(
        self,
        payload: P,
        give_back: Callable[[Any], None] | None = None,
        recheck: Callable[[Waiter[P]], bool] | None = None,
        kept: Callable[[Any], None] | None = None,
    ) -> Any:
        """Park the current task here until it is granted or failed.

        Blocks; a cancellation point.  Returns the granted value, or raises
        the exception the waiter was failed with.  If cancelled while parked,
        the waiter leaves the queue and the cancellation propagates.  If
        granted and then cancelled before it runs, ``give_back(value)`` is
        called and the cancellation propagates; with ``give_back=None`` the
        grant stands, ``park`` returns it, and the cancellation is re-armed
        for the task's next checkpoint.  A Slot must be empty.

        ``recheck(waiter)``, if given, is called once the waiter is parked
        and still pending, before the task sleeps: the caller looks again
        at what made it wait, which a finalizer that a collection ran in
        ``enqueue`` may have changed (see :meth:`WaitQueue.withdraw`).  If
        it returns ``True``, the waiter is withdrawn and ``park`` returns
        :data:`WITHDRAWN` without sleeping, and the caller starts over (and
        takes its checkpoint); unless it was granted or failed meanwhile
        (see :meth:`WaitQueue.withdraw`).  A waiter settled before the
        task slept, so, or by other code run after ``enqueue``, is awaited
        through :func:`settled_wait`, with a checkpoint after it.  (The
        semaphores and the limiter, whose rechecks grant, write their
        waits out for that case: ``BatchSemaphore._regranted``.)

        ``kept(value)``, if given with ``give_back=None``, is called when a
        grant stands but ``park`` raises all the same: an exception that is
        not a cancellation cannot be re-armed.  Only a Ctrl-C on Trio gets
        there: one that the generic waiter learns of as its task runs (the
        native waiters leave the queue as it is delivered), or one raised
        at the checkpoint after a wait settled before it slept
        (:func:`settled_wait`); the caller undoes what it still can.
        """
        waiter = self.enqueue(payload)
        if (
            recheck is not None
            and waiter.state is PENDING
            and recheck(waiter)
            and self.withdraw(waiter)
        ):
            return WITHDRAWN
        try:
            if waiter.state is PENDING:
                await waiter.wait
            else:  # settled before it slept (module comment)
                await settled_wait(waiter)
        except BaseException as exc:
            if self._interrupted(waiter, exc, give_back, kept):
                return waiter.value
            raise
        value = waiter.value
        # Recycle the waiter (see the module comment).
        waiter.payload = waiter.value = None  # type: ignore[assignment]
        self._spare = waiter
        if waiter.state is FAILED:
            try:
                raise value
            finally:
                del value  # the traceback keeps this frame: no cycle
        return value

    def _abandoned(self, waiter: Waiter[Any]) -> None:
        """``waiter`` became ABANDONED while still parked here."""
        raise NotImplementedError

    def _cancelled_parked(self, waiter: Waiter[Any]) -> bool:
        """Mark ``waiter`` ABANDONED where it is parked here, if it is still
        PENDING (its task was cancelled); ``False`` if it was settled.

        ``waiter._abandon()`` and ``_abandoned()`` in one frame, with no
        call in between, and the state read in that frame: a call between
        them could run a finalizer (above) that meets the waiter marked and
        not counted, or pending and about to be marked, and grants or drops
        it.
        """
        raise NotImplementedError

    def withdraw(self, waiter: Waiter[P]) -> bool:
        """Take back a waiter ``enqueue`` just parked (see the subclasses);
        ``False`` if it was settled meanwhile, and the caller awaits it."""
        raise NotImplementedError

    def _interrupted(
        self,
        waiter: Waiter[Any],
        exc: BaseException,
        give_back: Callable[[Any], None] | None,
        kept: Callable[[Any], None] | None = None,
    ) -> bool:
        """Settle a park that raised ``exc``; ``True`` if the grant stands.

        Called from the ``except`` clause of ``park``; on ``False`` the
        caller re-raises ``exc``.

        Refills the budget, as a wake-up does: the loop delivers an exception
        to a parked task (a cancellation, or a Ctrl-C that Trio delivers)
        only by running it again, so the task has been through a schedule
        point.  Not for ``GeneratorExit``: a coroutine closed where it waits
        was not run by the loop.  (Code that drives the coroutine itself and
        throws into it is no loop: each throw refills the budget.)

        The waiter's state is first read in ``_cancelled_parked``, once its
        frame is made: a call's frame may allocate (3.10), and 3.12+ may
        run a collection as a call starts, so a finalizer may grant a waiter
        still PENDING (a generic one, which a cancellation does not mark)
        before this reads it.  Read there as settled, it stays settled.  A
        caller must pass its ``give_back`` whatever the state looks like
        before the call.
        """
        if type(exc) is not GeneratorExit:
            BUDGET.left = BUDGET_SIZE
        if self._cancelled_parked(waiter):
            # Cancelled while parked: nothing was granted.
            return False
        if waiter.state is GRANTED:
            # Granted, then cancelled before the task ran.
            if give_back is not None:
                give_back(waiter.value)
            elif is_cancellation(exc):
                rearm_cancellation(
                    exc,
                    waiter._cancelling if type(waiter) is GenericWaiter else None,
                )
                # The cancellation is due at the next checkpoint: spend the
                # budget, so that the next budgeted call takes one first,
                # before it could park and be granted again (_budget.py).
                BUDGET.left = 0
                return True
            elif kept is not None:
                kept(waiter.value)
        return False


class WaitQueue(Parking[P]):
    """FIFO of parked waiters: O(1) push, pop and removal of a cancelled one."""

    __slots__ = ("_dead", "parked")

    def __init__(self) -> None:
        #: The waiters, live and dead.  Empty means nobody waits; non-empty
        #: means somebody may (a one-attribute check for fast paths, which
        #: fall back to ``bool(queue)`` for the exact answer).
        self.parked: deque[Waiter[P]] = deque()
        self._dead = 0
        self._loop = None
        self._new_future = _no_loop
        self._spare = None
        self._trio = None
        if _ki._marked is None and "trio" in _modules:
            # The first primitive made once Trio is imported: mark the
            # library's code before any of its calls runs (_ki.py).
            _ki.protect_from_keyboard_interrupt()

    def __len__(self) -> int:
        return len(self.parked) - self._dead

    def __bool__(self) -> bool:
        return len(self.parked) > self._dead

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # copy, deepcopy and pickle of an idle primitive: an empty queue that
        # remembers no event loop.  Parked tasks cannot be copied.
        if self:
            raise TypeError(f"cannot copy a {type(self).__name__} with parked tasks")
        return None, {
            "parked": deque(),
            "_dead": 0,
            "_loop": None,
            "_new_future": _no_loop,
            "_spare": None,
            "_trio": None,
        }

    def enqueue(self, payload: P) -> Waiter[P]:
        """A new waiter for the current task, at the tail: ``park``'s first half.

        For the hottest blocking paths, which save ``park``'s coroutine frame
        by doing its second half themselves: the caller must await
        ``waiter.wait`` at once (through :func:`settled_wait` if the waiter
        is no longer PENDING) and settle the outcome as ``park`` does
        (``_interrupted`` on an exception; after waking, ``FAILED``
        handled).
        """
        loop = self._loop
        if loop is not None and (
            loop in _tasks_by_loop
            or (
                not TASK_MAP_KEPT
                and loop is _get_running_loop()
                and _asyncio_current_task(loop) is not None
            )
        ):
            # A task of the loop the last waiter here was made for is
            # running, so it is the caller (no primitive is shared between
            # threads): skip the dispatch.  See the module comment.  Where
            # asyncio's tasks leave the map empty (CPython 3.14), the
            # running loop and its current task, both read off the thread
            # state there, tell the same.
            waiter = self._spare
            if waiter is not None and type(waiter) is AsyncioWaiter:
                self._spare = None  # a recycled waiter: ``value`` is None
            else:
                waiter = AsyncioWaiter()
                waiter.value = None
            waiter.payload = payload
            waiter.state = PENDING
            # _backend.future_factory(loop), stored by _new_waiter; before
            # 3.12 that is always loop.create_future, called here without
            # its bound method (0.4-0.6% fewer instructions a wait on 3.11).
            waiter.wait = waiter._fut = (
                self._new_future() if FUTURE_FROM_RUNNING_LOOP else loop.create_future()
            )
        elif (
            (tasks := self._trio) is not None
            and (task := tasks.get("task")) is not None
            and (
                not _tasks_by_loop
                if TASK_MAP_KEPT
                else _get_running_loop() is None or asyncio_loop() is None
            )
        ):
            # A Trio task runs on the thread the last waiter here was made
            # on, and no asyncio task runs (one would be the caller: an
            # asyncio loop run inside a Trio task), so the Trio task is the
            # caller: skip the dispatch, as above.  Where asyncio's tasks
            # leave the map empty (CPython 3.14), asyncio_loop() tells
            # whether one runs on this thread; with no loop running there,
            # none does, and its call is saved.
            waiter = self._spare
            if waiter is not None and type(waiter) is TrioWaiter:
                self._spare = None  # a recycled waiter: ``value`` is None
            else:
                waiter = TrioWaiter()
                waiter.value = None
            waiter.owner = self  # cleared when the waiter is settled
            waiter.payload = payload
            waiter.state = PENDING
            waiter._task = task
            waiter.wait = _trio_wait(waiter._abort)
        else:
            waiter = self._new_waiter(payload)
        self.parked.append(waiter)
        return waiter

    def has_live(self) -> bool:
        """Whether a grant now would reach a waiter parked here.

        ``bool()`` still counts a waiter whose task was cancelled on asyncio
        and has not run yet (as ``statistics()`` does, until it runs); this
        drops such waiters from the head, as a grant would.  For the tests
        of whether a call would park, which must agree with the grant.
        """
        return self.peek() is not None

    def peek(self) -> Waiter[P] | None:
        """The live waiter at the head, without removing it.

        A call made after this may change the queue (a finalizer): to take
        the waiter returned, use :meth:`take`, which looks again.
        """
        while q := self.parked:
            waiter = q[0]
            # _gone() is a call (a finalizer may settle the waiter, or on
            # Trio cancel it): the state is read again after it.
            if (
                waiter.state is PENDING
                and not waiter._gone()
                and waiter.state is PENDING
            ):
                return waiter
            self._drop_head(waiter)
        return None

    def pop(self) -> Waiter[P] | None:
        """Take the live waiter at the head and return it, or ``None``.

        The waiter is taken (see "Taking" in the module comment): marked
        GRANTED as it leaves, so the caller must grant or fail it before it
        yields.
        """
        while q := self.parked:
            waiter = q[0]
            if waiter.state is PENDING and not waiter._gone():
                # _gone() is a call: look again (no call from here on).
                if (
                    q is self.parked
                    and q
                    and q[0] is waiter
                    and waiter.state is PENDING
                ):
                    waiter.state = GRANTED  # taken
                    q.popleft()
                    return waiter
                continue
            self._drop_head(waiter)
        return None

    def take(self, waiter: Waiter[P]) -> bool:
        """Take ``waiter``, which :meth:`peek` returned, if it is still the
        live head; ``False`` if a finalizer took or dropped it meanwhile.

        Taken as by :meth:`pop`: the caller must grant or fail it next.
        """
        q = self.parked
        if q and q[0] is waiter and waiter.state is PENDING:
            waiter.state = GRANTED  # taken
            q.popleft()
            return True
        return False

    def grant_head(self, value: object) -> Waiter[P] | None:
        """Pop the live waiter at the head and grant it ``value``.

        Returns that waiter, or ``None`` if nobody waits.  ``pop()`` then
        ``grant()`` in one call, with the cancelled-waiter test folded into
        the grant (``try_grant``): the hand-over of a one-unit release.
        """
        # The queue is read again each time round: a finalizer that a call
        # below runs may have compacted it into a new deque.
        while q := self.parked:
            waiter = q.popleft()
            if waiter.state is not PENDING:
                # ABANDONED, and counted in ``_dead`` (_drop_head() inlined:
                # a PENDING waiter whose task was cancelled is met below).
                self._dead -= 1
                continue
            # try_grant() written out for the two native kinds: one Python
            # call less on every handoff.  Keep in step with try_grant().
            if type(waiter) is AsyncioWaiter:
                try:
                    waiter._fut.set_result(None)
                except InvalidStateError:  # its task was cancelled
                    waiter._abandon()
                    continue
                waiter.value = value
                waiter.state = GRANTED
                return waiter
            if type(waiter) is TrioWaiter:  # never refused, as try_grant()
                waiter.value = value
                waiter.state = GRANTED
                task = waiter._task
                waiter._task = waiter.owner = None  # type: ignore[assignment]
                _trio_reschedule(task)
                return waiter
            if waiter.try_grant(value):
                return waiter
            waiter._abandon()  # its task was cancelled; it counts nothing
        return None

    def grant_head_into(self, value: object, into: deque[Any]) -> Waiter[P] | None:
        """Pop the live waiter at the head, grant it ``value``, append it to
        ``into``, and only then wake its task; None if nobody waits.

        ``grant_head()`` for a hand-over that records the waiter it granted
        (a channel's receivers in flight): the record is there before the
        wake-up, which allocates, so that a finalizer a collection runs
        there sees it (``take_head()`` and ``wake()`` do the same in two
        calls).  A task cancelled once granted is the grant-then-cancel
        race, which the waiting side settles.
        """
        while q := self.parked:  # read again each time, as in grant_head()
            waiter = q.popleft()
            if waiter.state is not PENDING:
                self._dead -= 1  # ABANDONED, as in grant_head()
                continue
            if type(waiter) is AsyncioWaiter:
                fut = waiter._fut
                # Its task was cancelled: tested before anything is changed
                # (set_result() would refuse it, but the error it raises
                # allocates, and a finalizer run there would find the
                # waiter recorded and the caller's state half changed).
                if fut.cancelled():
                    waiter._abandon()
                    continue
                waiter.value = value
                waiter.state = GRANTED
                into.append(waiter)
                fut.set_result(None)  # nothing ran since the test above
                return waiter
            if type(waiter) is TrioWaiter:  # never refused, as try_grant()
                waiter.value = value
                waiter.state = GRANTED
                into.append(waiter)
                task = waiter._task
                waiter._task = waiter.owner = None  # type: ignore[assignment]
                _trio_reschedule(task)
                return waiter
            # A generic waiter: never _gone() (its task learns of a
            # cancellation as it runs, and settles it then).
            waiter.value = value
            waiter.state = GRANTED
            into.append(waiter)
            waiter.wake()
            return waiter
        return None

    def take_head(self, value: object) -> Waiter[P] | None:
        """Pop the live waiter at the head and grant it ``value``, without
        waking its task; the caller calls ``waiter.wake()`` next.

        For a release that must finish changing its state before the task is
        woken: a wake-up allocates, so a garbage collection may run a
        finalizer inside it, which must find the state as the release leaves
        it (a channel's item in its place, a lock's new owner named).  Marked
        granted at once, so a cancellation meanwhile is the grant-then-cancel
        race that the waiting side settles.  Returns None if nobody waits.
        """
        while q := self.parked:  # read again each time, as in grant_head()
            waiter = q.popleft()
            if waiter.state is not PENDING:
                self._dead -= 1  # ABANDONED, as in grant_head()
                continue
            # Only an asyncio waiter can be _gone(), and only its test is a
            # call: nothing runs before a Trio waiter is marked, which Trio's
            # abort callback would otherwise find PENDING out of the queue.
            if type(waiter) is AsyncioWaiter and waiter._fut.cancelled():
                waiter._abandon()  # its task was cancelled; it counts nothing
                continue
            waiter.value = value
            waiter.state = GRANTED
            return waiter
        return None

    def take_tail(self, value: object) -> Waiter[P] | None:
        """:meth:`take_head` from the other end: take the live waiter
        parked last, grant it ``value`` without waking its task, and return
        it; ``None`` if nobody waits.  The caller calls ``waiter.wake()``
        next.

        For waiters that are interchangeable (an executor's idle workers):
        the one that parked last gets the work, so that those parked longest
        stay parked, still in arrival order from the head, and can be let go
        there (a stack of idle workers, as connection pools keep idle
        connections).
        """
        while q := self.parked:  # read again each time, as in grant_head()
            waiter = q.pop()
            if waiter.state is not PENDING:
                self._dead -= 1  # ABANDONED, as in grant_head()
                continue
            if type(waiter) is AsyncioWaiter and waiter._fut.cancelled():
                waiter._abandon()  # as in take_head()
                continue
            waiter.value = value
            waiter.state = GRANTED
            return waiter
        return None

    def _drop_head(self, waiter: Waiter[P]) -> None:
        """Drop ``waiter``, which the caller found dead at the head, if it is
        still there: the caller's test may have been a call, and a finalizer
        run there may have changed the head."""
        q = self.parked
        if q and q[0] is waiter:
            if waiter.state is PENDING:
                # Its task was cancelled but has not run yet; it will find
                # the waiter ABANDONED and out of the queue, and count
                # nothing.
                waiter.state = ABANDONED
                waiter.payload = None  # type: ignore[assignment]  # as _abandon()
            else:
                self._dead -= 1
            q.popleft()

    def take_where(self, fits: Callable[[Waiter[P]], bool]) -> list[Waiter[P]]:
        """Take, in queue order, every live waiter for which ``fits`` holds.

        ``fits`` is called on live waiters only, in order, and may keep state
        (the permits left, for example).  It is a call, where a finalizer may
        settle the waiter it is given: one that keeps state must check that
        ``waiter.state`` is still PENDING before it counts anything.  A
        waiter is taken (as by :meth:`pop`) as ``fits`` returns true, with
        nothing run in between.  The caller must grant or fail every waiter
        returned before it yields.  O(n); for non-FIFO policies.
        """
        taken: list[Waiter[P]] = []
        # A copy, made in C: the calls below may run a finalizer that
        # changes the queue.  A taken waiter stays in the deque, marked and
        # counted dead, until the compaction at the end, which is tried
        # again until it succeeds (_compact_taken).
        for waiter in list(self.parked):
            if waiter.state is not PENDING:
                continue
            if waiter._gone():
                self._drop_gone(waiter)
            elif (
                waiter.state is PENDING  # _gone() is a call: look again
                and fits(waiter)
                and waiter.state is PENDING
            ):
                waiter.state = GRANTED  # taken
                self._dead += 1
                taken.append(waiter)
        self._compact_taken()
        return taken

    def drain(self) -> list[Waiter[P]]:
        """Take every live waiter, in order (as :meth:`take_where`)."""
        taken: list[Waiter[P]] = []
        for waiter in list(self.parked):  # a copy, as in take_where()
            if waiter.state is not PENDING:
                continue
            if waiter._gone():
                self._drop_gone(waiter)
            elif waiter.state is PENDING:  # _gone() is a call: look again
                waiter.state = GRANTED  # taken
                self._dead += 1
                taken.append(waiter)
        self._compact_taken()
        return taken

    def _compact_taken(self) -> None:
        """Compact until the deque holds no dead waiter: none that
        ``take_where`` or ``drain`` took may stay.  A taken waiter is
        granted and then recycled (its task hands it back for reuse, and it
        may be parked again): in the deque still, it would be there twice.
        A compaction gives up only where a finalizer changed the queue as
        it filtered, which cannot go on for ever."""
        while self._dead and not self._compact():
            pass

    def _drop_gone(self, waiter: Waiter[P]) -> None:
        """Mark ``waiter``, found ``_gone()`` in the deque, dead there: its
        task, cancelled, will find it ABANDONED and count nothing."""
        if waiter.state is PENDING:  # the test was a call: look again
            waiter.state = ABANDONED
            waiter.payload = None  # type: ignore[assignment]  # as _abandon()
            self._dead += 1

    def __iter__(self) -> Any:
        # Over a copy: the generator's calls may run a finalizer that
        # changes the queue.
        return (w for w in list(self.parked) if w.state is PENDING and not w._gone())

    def withdraw(self, waiter: Waiter[P]) -> bool:
        """Take back ``waiter``, which ``enqueue`` just parked here, before
        its task awaits it: the task found that it need not wait after all.

        For a wait decided on a state that changed under it: a finalizer
        that a garbage collection ran inside ``enqueue`` (which allocates)
        used the primitive before the waiter was in place for it to see.
        The caller looks again once the waiter is parked, and withdraws it
        if the reason to wait is gone.  No task can park in between, so the
        waiter is the last one here.  It is dropped (its sleep closed, never
        awaited), not kept for reuse.

        Returns ``False``, and changes nothing, if the waiter was settled
        since the caller looked (a finalizer run as this call starts may
        grant or fail it): the caller must then await it as any wait, and
        take what it was granted.
        """
        if waiter.state is not PENDING:
            return False
        # PENDING, so parked here, and last: marked before anything is
        # called, then dropped.
        waiter.state = ABANDONED
        parked = self.parked
        if parked and parked[-1] is waiter:
            parked.pop()
        else:  # pragma: no cover - nobody parks between enqueue and this
            self._dead += 1
        _drop_unawaited(waiter)
        return True

    def _abandoned(self, waiter: Waiter[Any]) -> None:
        self._dead += 1
        self._compact_if_sparse()

    def _cancelled_parked(self, waiter: Waiter[Any]) -> bool:
        if waiter.state is not PENDING:
            return False
        waiter.state = ABANDONED
        waiter.payload = None  # as _abandon()
        self._dead += 1
        self._compact_if_sparse()  # the state is consistent again
        return True

    def _compact_if_sparse(self) -> None:
        dead = self._dead
        if dead > 16 and dead * 2 > len(self.parked):
            self._compact()

    def _compact(self) -> bool:
        """Drop the dead waiters (abandoned or taken) from the deque;
        ``False`` if it gave up (see below)."""
        old = self.parked
        dead = self._dead
        # Only the dead go; a PENDING waiter whose future was cancelled
        # stays until its task runs and counts itself.  The filter runs
        # Python code, where a collection may run a finalizer that uses the
        # primitive (see _cancelled_parked): it reads a copy (made in C, no
        # code runs while it copies), and the queue is replaced only if
        # nothing changed it meanwhile (waiters leave at the head and arrive
        # at the tail, and a waiter marked counts in _dead); else compaction
        # waits for the next time.
        snapshot = list(old)
        live = deque([w for w in snapshot if w.state is PENDING])
        if (
            self.parked is old
            and self._dead == dead
            and len(old) == len(snapshot)
            and old[0] is snapshot[0]
            and old[-1] is snapshot[-1]
        ):
            self.parked = live
            self._dead = 0
            return True
        return False


class Slot(Parking[P]):
    """At most one parked waiter: for a side that only one task may use."""

    __slots__ = ("parked",)

    def __init__(self) -> None:
        #: The parked waiter, live or not, or None: as ``WaitQueue.parked``,
        #: empty (falsy) means nobody waits, a waiter means somebody may.
        self.parked: Waiter[P] | None = None
        self._loop = None
        self._new_future = _no_loop
        self._spare = None
        self._trio = None
        if _ki._marked is None and "trio" in _modules:  # as in WaitQueue
            _ki.protect_from_keyboard_interrupt()

    def __bool__(self) -> bool:
        waiter = self.parked
        return waiter is not None and not waiter._gone()

    #: As :meth:`WaitQueue.has_live`: ``bool()`` is exact here.
    has_live = __bool__

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # As WaitQueue.__getstate__.
        if self:
            raise TypeError(f"cannot copy a {type(self).__name__} with a parked task")
        return None, {
            "parked": None,
            "_loop": None,
            "_new_future": _no_loop,
            "_spare": None,
            "_trio": None,
        }

    def enqueue(self, payload: P) -> Waiter[P]:
        """As :meth:`WaitQueue.enqueue`; the slot must be empty."""
        # WaitQueue.enqueue's asyncio and Trio branches, written out here
        # too (keep them in step): a shared helper would add a call (about
        # 40 ns) to every wait.
        loop = self._loop
        if loop is not None and (
            loop in _tasks_by_loop
            or (
                not TASK_MAP_KEPT
                and loop is _get_running_loop()
                and _asyncio_current_task(loop) is not None
            )
        ):
            waiter = self._spare
            if waiter is not None and type(waiter) is AsyncioWaiter:
                self._spare = None  # a recycled waiter: ``value`` is None
            else:
                waiter = AsyncioWaiter()
                waiter.value = None
            waiter.payload = payload
            waiter.state = PENDING
            # As in WaitQueue.enqueue.
            waiter.wait = waiter._fut = (
                self._new_future() if FUTURE_FROM_RUNNING_LOOP else loop.create_future()
            )
        elif (
            (tasks := self._trio) is not None
            and (task := tasks.get("task")) is not None
            and (
                not _tasks_by_loop
                if TASK_MAP_KEPT
                else _get_running_loop() is None or asyncio_loop() is None
            )
        ):
            waiter = self._spare
            if waiter is not None and type(waiter) is TrioWaiter:
                self._spare = None
            else:
                waiter = TrioWaiter()
                waiter.value = None
            waiter.owner = self  # cleared when the waiter is settled
            waiter.payload = payload
            waiter.state = PENDING
            waiter._task = task
            waiter.wait = _trio_wait(waiter._abort)
        else:
            waiter = self._new_waiter(payload)
        self.parked = waiter
        return waiter

    def pop(self) -> Waiter[P] | None:
        """Take the parked waiter if it is live, as :meth:`WaitQueue.pop`."""
        waiter = self.parked
        if waiter is None:
            return None
        self.parked = None
        # As in WaitQueue.take_head(): only an asyncio waiter's test is a call.
        if type(waiter) is AsyncioWaiter and waiter._fut.cancelled():
            waiter._abandon()
            return None
        waiter.state = GRANTED  # taken
        return waiter

    def withdraw(self, waiter: Waiter[P]) -> bool:
        """As :meth:`WaitQueue.withdraw`."""
        if waiter.state is not PENDING:
            return False  # settled since the caller looked: it awaits it
        waiter.state = ABANDONED
        self.parked = None
        _drop_unawaited(waiter)
        return True

    def grant_head(self, value: object) -> Waiter[P] | None:
        """Take the parked waiter if it is live and grant it ``value``.

        Returns that waiter, or ``None`` if nobody waits: ``pop()`` then
        ``grant()`` in one call, as :meth:`WaitQueue.grant_head`.
        """
        waiter = self.parked
        if waiter is None:
            return None
        self.parked = None
        # try_grant() written out, as in WaitQueue.grant_head.
        if type(waiter) is AsyncioWaiter:
            try:
                waiter._fut.set_result(None)
            except InvalidStateError:  # its task was cancelled
                waiter._abandon()
                return None
            waiter.value = value
            waiter.state = GRANTED
            return waiter
        if type(waiter) is TrioWaiter:  # never refused, as try_grant()
            waiter.value = value
            waiter.state = GRANTED
            task = waiter._task
            waiter._task = waiter.owner = None  # type: ignore[assignment]
            _trio_reschedule(task)
            return waiter
        if waiter.try_grant(value):
            return waiter
        waiter._abandon()  # its task was cancelled; it counts nothing
        return None

    def grant_head_into(self, value: object, into: deque[Any]) -> Waiter[P] | None:
        """As :meth:`WaitQueue.grant_head_into`: grant the parked waiter if
        it is live, append it to ``into``, then wake it."""
        waiter = self.parked
        if waiter is None:
            return None
        self.parked = None
        if type(waiter) is AsyncioWaiter:
            fut = waiter._fut
            if fut.cancelled():  # tested first, as in WaitQueue's
                waiter._abandon()
                return None
            waiter.value = value
            waiter.state = GRANTED
            into.append(waiter)
            fut.set_result(None)  # nothing ran since the test above
            return waiter
        if type(waiter) is TrioWaiter:  # never refused, as try_grant()
            waiter.value = value
            waiter.state = GRANTED
            into.append(waiter)
            task = waiter._task
            waiter._task = waiter.owner = None  # type: ignore[assignment]
            _trio_reschedule(task)
            return waiter
        waiter.value = value  # a generic waiter, never _gone()
        waiter.state = GRANTED
        into.append(waiter)
        waiter.wake()
        return waiter

    def take_head(self, value: object) -> Waiter[P] | None:
        """As :meth:`WaitQueue.take_head`: grant the parked waiter if it is
        live, without waking it."""
        waiter = self.parked
        if waiter is None:
            return None
        self.parked = None
        # As in WaitQueue.take_head(): only an asyncio waiter's test is a call.
        if type(waiter) is AsyncioWaiter and waiter._fut.cancelled():
            waiter._abandon()  # its task was cancelled; it counts nothing
            return None
        waiter.value = value
        waiter.state = GRANTED
        return waiter

    def _abandoned(self, waiter: Waiter[Any]) -> None:
        if self.parked is waiter:
            self.parked = None

    def _cancelled_parked(self, waiter: Waiter[Any]) -> bool:
        if waiter.state is not PENDING:
            return False
        waiter.state = ABANDONED
        waiter.payload = None  # as _abandon()
        if self.parked is waiter:
            self.parked = None
        return True


class Unopened(Parking[Any]):
    """The stand-in for a wait structure nobody has parked in yet.

    A primitive that is often made and dropped without ever blocking (a
    channel, a lock, an event) starts with :data:`NOT_OPENED` and makes its
    real ``WaitQueue`` or ``Slot`` on the first park.  Every read sees an
    empty structure (``parked`` falsy, ``bool()`` false, ``pop()`` and
    ``peek()`` None, nothing to iterate, drain or take); parking here is a
    bug in the primitive, and raises.
    """

    __slots__ = ("parked",)

    def __init__(self) -> None:
        #: As ``WaitQueue.parked`` and ``Slot.parked``: falsy, nobody waits.
        self.parked: None = None

    def __bool__(self) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    has_live = __bool__  # nobody is parked here: always False

    def peek(self) -> None:
        """Nobody is parked here: always ``None``."""
        return None

    pop = peek  # nobody is parked here: always None

    def grant_head(self, value: object) -> None:
        """Nobody is parked here: grants nothing, always ``None``."""
        return None

    def take_head(self, value: object) -> None:
        """Nobody is parked here: takes nothing, always ``None``."""
        return None

    def grant_head_into(self, value: object, into: deque[Any]) -> None:
        """Nobody is parked here: grants nothing, always ``None``."""
        return None

    def take_tail(self, value: object) -> None:
        """Nobody is parked here: takes nothing, always ``None``."""
        return None

    def drain(self) -> list[Waiter[Any]]:
        """Nobody is parked here: always an empty list."""
        return []

    def take_where(self, fits: Callable[[Waiter[Any]], bool]) -> list[Waiter[Any]]:
        """Nobody is parked here: takes nothing, always an empty list."""
        return []

    def __iter__(self) -> Iterator[Waiter[Any]]:
        return iter(())

    def take(self, waiter: Waiter[Any]) -> bool:  # pragma: no cover
        raise RuntimeError("no waiter is ever parked on an unopened structure")

    def _drop_head(self, waiter: Waiter[Any]) -> None:  # pragma: no cover
        raise RuntimeError("no waiter is ever parked on an unopened structure")

    def __reduce__(self) -> str:
        return "NOT_OPENED"  # copied and pickled as the one stand-in

    def enqueue(self, payload: Any) -> Waiter[Any]:
        raise RuntimeError("parked on a wait structure that was never opened")

    def withdraw(self, waiter: Waiter[Any]) -> bool:  # pragma: no cover
        raise RuntimeError("no waiter is ever parked on an unopened structure")

    def _abandoned(self, waiter: Waiter[Any]) -> None:  # pragma: no cover
        raise RuntimeError("no waiter is ever parked on an unopened structure")


#: The one :class:`Unopened` stand-in; every primitive may share it, since
#: nothing is ever stored in it.
NOT_OPENED: Final = Unopened()
