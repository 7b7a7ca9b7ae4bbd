# JoinHandle: the job record and the caller's handle on it, in one object.
#
# A job is the only allocation on the executor's spawn path, so the record a
# worker runs and the handle the caller awaits are the same ``__slots__``
# object.  It holds the function and its arguments until the job settles,
# then the outcome.
#
# States (``_state``), each change made once, in this order:
#
#     QUEUED --a worker takes it--> HANDED --worker starts it--> RUNNING
#        |                             |                           |
#        '--cancel() before it ran-----+--> CANCELLED              |
#                                                                  v
#                          SUCCEEDED (returned), FAILED (raised), CANCELLED
#
# QUEUED means "in the executor's queue", HANDED "out of it, with a worker
# that has not started it yet" (granted to an idle worker, or taken off the
# queue by one): a QUEUED job cancelled is a dead entry the queue still
# holds, which the executor counts so that ``max_queued`` counts live jobs
# only.  The one step back: a worker granted a job and cancelled before it
# ran requeues it (HANDED -> QUEUED, ``Executor._give_back``).
#
# Invariants:
# * ``_state >= SUCCEEDED`` ("settled") implies ``_fn is None`` and
#   ``_args == ()``: a settled job keeps no references to its inputs;
# * ``_waiters`` is set only when a task awaits a job that has not settled
#   (to the executor's spare queue, or a new one); settling drains it, gives
#   it back to the executor and clears it, so a settled job has none;
# * ``_retrieved`` is set when the job's error (or cancellation) has been
#   delivered to a caller through ``await``, ``result()`` or ``exception()``;
#   the executor raises, at the exit of its block, the errors of failed jobs
#   that were never retrieved.
#
# Settling is done by the executor (``Executor._settle``), which also counts
# the job out of its pending total; the handle only reads the outcome.
from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from .._core import (
    BUDGET,
    PENDING,
    WaitQueue,
    budget_checkpoint,
    settled_wait,
)

if TYPE_CHECKING:
    from ._executor import Executor

T = TypeVar("T")

QUEUED: Final = 0
HANDED: Final = 1
RUNNING: Final = 2
SUCCEEDED: Final = 3
FAILED: Final = 4
CANCELLED: Final = 5

#: For ``repr``: a HANDED job has not started either.
_STATE_NAMES: Final = (
    "queued",
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
)


class JobCancelled(Exception):
    """The job was cancelled before it finished.

    Raised by ``await handle``, :meth:`JoinHandle.result` and
    :meth:`JoinHandle.exception` for a cancelled job.  An ordinary
    exception, never the backend's cancellation exception: awaiting a
    cancelled job does not cancel the awaiting task.
    """


async def _budget_checkpoint() -> None:
    # budget_checkpoint() as a coroutine, for JoinHandle.__await__ to
    # ``yield from``: the backend's checkpoint may be a bare generator.
    await budget_checkpoint()


def _ignore(value: object) -> None:
    # give_back for a join: being woken gives nothing away (the outcome stays
    # on the handle), so a grant followed by a cancellation needs no undo.
    pass


class JoinHandle(Generic[T]):
    """The handle of one job spawned on an :class:`Executor`.

    ``await handle`` waits for the job and returns its result, or raises its
    exception, or :class:`JobCancelled`.  It blocks while the job has not
    settled and is then a cancellation point: it parks at once, so tasks
    that await one job queue in the order they called (but for a join
    whose budget checkpoint is due, once in 64 calls, which takes it
    first).  Cancelling the
    awaiting task leaves the job running.  On a settled job it returns at
    once and, like every non-blocking call of anyio-prims, reaches a
    checkpoint at least once every 64 calls.  Any number of tasks may await
    the same handle.
    """

    __slots__ = (
        "__weakref__",
        "_args",
        "_cancel_requested",
        "_executor",
        "_fn",
        "_on_done",
        "_retrieved",
        "_scope",
        "_state",
        "_tb",
        "_value",
        "_waiters",
    )

    # No __init__: ``new_job`` makes a handle by a bare class call and sets
    # these (see there).
    _executor: Executor
    _fn: Callable[..., Any] | None
    _args: tuple[Any, ...]
    _state: int
    _value: Any
    #: A failed job's traceback as it settled: every re-raise starts
    #: from it, so re-raising does not make it grow (as asyncio.Future).
    _tb: Any
    _waiters: WaitQueue[None] | None
    _retrieved: bool
    _cancel_requested: bool
    #: The worker's CancelScope, from when the worker waits for the
    #: job's start slot or runs it.
    _scope: Any
    _on_done: Callable[[JoinHandle[Any]], None] | None

    def __await__(self) -> Generator[Any, Any, T]:
        # A generator, not a coroutine: ``await handle`` makes no coroutine
        # and no wrapper, and a waiting join has one frame less.  Every
        # join spends the budget, and takes its due checkpoint first, also
        # one about to wait (_core/_budget.py); a join that must wait parks
        # at once otherwise (parking is its checkpoint, and it keeps the
        # joiners in the order they called).
        budget = BUDGET
        budget.left -= 1
        if budget.left <= 0:
            yield from _budget_checkpoint().__await__()
        if self._state == QUEUED and self._executor._starting:
            # Queued while the worker started for it has not run: if that
            # task ended first, the job is cancelled here, not waited for.
            self._executor._workers_gone()
        if self._state < SUCCEEDED:
            waiters = self._waiters
            if waiters is None:
                # The first join that waits: the executor's spare queue (a
                # settled job's, emptied), else a new one.
                executor = self._executor
                waiters = executor._spare_joins
                if waiters is None:
                    waiters = WaitQueue()
                else:
                    executor._spare_joins = None
                self._waiters = waiters
            # waiters.park(None, _ignore), written out: one frame less on
            # every join that waits.  Settling only grants.
            waiter = waiters.enqueue(None)
            # Unless settled inside enqueue, before the waiter was in place
            # (a finalizer that a collection ran there cancelled the job;
            # see WaitQueue.withdraw): then as if settled before this call.
            if not (
                waiter.state is PENDING
                and self._state >= SUCCEEDED
                and waiters.withdraw(waiter)
            ):
                try:
                    if waiter.state is PENDING:
                        yield from waiter.wait.__await__()
                    else:  # settled before it slept (_core/_waiter.py)
                        yield from settled_wait(waiter).__await__()
                except BaseException as exc:
                    waiters._interrupted(waiter, exc, _ignore)
                    raise
                # Granted (value None): recycle the waiter (see
                # _core/_waiter.py) on the queue, wherever that has gone since.
                waiters._spare = waiter
        if self._state == SUCCEEDED:  # _outcome()'s common case, no call
            value: T = self._value
            return value
        try:
            return self._outcome()
        finally:
            # A raise keeps this frame in the stored exception's traceback:
            # no local may lead back to the handle (a cycle).
            self = executor = None  # type: ignore[assignment]

    def _outcome(self) -> T:
        state = self._state
        if state == SUCCEEDED:
            value: T = self._value
            return value
        self._retrieved = True
        self._executor._failed.pop(self, None)
        if state == FAILED:
            exc: BaseException = self._value
            try:
                raise exc.with_traceback(self._tb)
            finally:
                # The traceback keeps this frame: no cycle through it.
                del exc, self
        raise JobCancelled("the job was cancelled")

    def cancel(self) -> bool:
        """Cancel this job alone.  Never blocks; not a checkpoint.

        A job that has not started is settled as cancelled at once and never
        runs.  A running job is cancelled at its next checkpoint (its
        worker's cancel scope is cancelled); it is settled as cancelled when
        the cancellation propagates out of it.  A job that catches the
        cancellation and returns (or raises) keeps that outcome, as a task
        does.  Returns ``False`` if the job had already settled (nothing
        done), else ``True``.
        """
        state = self._state
        if state == QUEUED:
            self._executor._cancel_in_queue(self)
            return True
        if state == HANDED:
            scope = self._scope
            self._executor._settle(self, CANCELLED, None)  # its worker skips it
            if scope is not None:
                # Its worker sleeps for the job's start slot (max_per_second),
                # or its sleep has just ended and it has not run since: free
                # the slot now, for the next job, which that worker takes
                # when it runs (no other worker takes a job before then; past
                # a due budget checkpoint of that worker's, another may), and
                # wake the worker, for the next job or the block's exit.
                limiter = self._executor._limiter
                if limiter is not None:
                    limiter.give_back(self)
                del self
                scope.cancel()
            return True
        if state == RUNNING:
            if not self._cancel_requested:
                self._cancel_requested = True
                scope = self._scope
                # Trio makes the job's Cancelled inside this call, so the
                # exception's traceback reaches this frame: it must not keep
                # the handle, which a job that turns the cancellation into
                # an error stores that error on (a cycle).
                del self
                scope.cancel()
            return True
        return False

    def done(self) -> bool:
        """Whether the job has settled: returned, raised or been cancelled."""
        return self._state >= SUCCEEDED

    def cancelled(self) -> bool:
        """Whether the job was settled as cancelled."""
        return self._state == CANCELLED

    def result(self) -> T:
        """The job's result, without waiting.

        :raises RuntimeError: if the job has not settled yet
        :raises JobCancelled: if the job was cancelled
        :raises BaseException: the job's own exception, if it raised one (an
            Exception, or a KeyboardInterrupt or SystemExit that the
            executor's block raised too)
        """
        if self._state < SUCCEEDED:
            raise RuntimeError("the job has not finished: await the handle first")
        try:
            return self._outcome()
        finally:
            self = None  # type: ignore[assignment]  # as in __await__

    def exception(self) -> BaseException | None:
        """The job's exception, or ``None`` if it returned, without waiting.

        Counts as retrieving the error: it is not raised again at the
        executor's exit.

        :raises RuntimeError: if the job has not settled yet
        :raises JobCancelled: if the job was cancelled
        """
        state = self._state
        if state < SUCCEEDED:
            raise RuntimeError("the job has not finished: await the handle first")
        if state == SUCCEEDED:
            return None
        self._retrieved = True
        self._executor._failed.pop(self, None)
        if state == CANCELLED:
            raise JobCancelled("the job was cancelled")
        exc: BaseException = self._value
        return exc

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {_STATE_NAMES[self._state]}>"


def new_job(
    executor: Executor, fn: Callable[..., Any] | None, args: tuple[Any, ...]
) -> JoinHandle[Any]:
    """A new QUEUED job of ``executor``: ``fn(*args)``, not yet queued.

    The executor's spawn paths' one way to make a job.  ``JoinHandle`` has
    no ``__init__``: a bare class call and the fields set here, in a plain
    function, cost about 55 ns less per job than a class call that runs an
    ``__init__`` (CPython 3.11).
    """
    job: JoinHandle[Any] = JoinHandle()
    job._executor = executor
    job._fn = fn
    job._args = args
    job._state = QUEUED
    job._value = None
    job._tb = None
    job._waiters = None
    job._retrieved = False
    job._cancel_requested = False
    job._scope = None
    job._on_done = None
    return job
