# Executor: structured job spawning on long-lived worker tasks.
#
# Why: starting a task through anyio's TaskGroup costs 26-33 us (a cancel
# scope, an event and a wrapper coroutine per task; per job of the benchmarks'
# spawn_many, run included); handing a job to a task that is already running
# and parked costs about 1 us.  So the executor owns ONE anyio task group
# (entered in ``__aenter__``) and runs jobs on worker tasks started in it,
# each of which runs job after job.  A job that blocks holds its worker, so
# as many jobs blocked at once need as many workers, each a task start.
#
# Dispatch (direct schedule).  Idle workers park in ``_idle``, a WaitQueue
# (made when the first worker starts; the shared empty NOT_OPENED until then).
# ``spawn`` takes the idle worker that parked last (the tail: a stack, see
# below) and grants it the job: one handoff, no queue hop, no extra
# wake-up.  With no idle worker the job goes to the tail of ``_queue``, a
# FIFO deque; a worker that settles a job takes the next queued one without
# parking.  The job record (a JoinHandle) is the only
# allocation per job: no task, cancel scope or event.
#
# Growth.  Starting a worker costs a task start, so workers are not started
# one per queued job.  A worker is started when a job is queued, no worker is
# idle and no start is pending (``_starting``); a worker that starts a job
# while jobs are still queued starts one more first (if none is pending).  A
# burst of trivial jobs is then drained by a few workers, while jobs that
# block each end up with a worker of their own, so a spawn-and-await tree of
# any depth completes.  ``max_workers`` caps ``_nworkers``.
#
# Rate limit (``max_per_second``).  A worker takes its job off the queue and
# then sleeps for the job's start slot, reserved as it takes it, so the
# slots go in queue order.  One worker at a time does (``_slot_waits`` is 0
# or 1): while one does, no worker is started, none is handed a job, and
# none takes one (a worker that finishes its job, or that the sweeper sends
# away, goes idle or leaves); the waiting one sees to the queue when its job
# starts.  Else each start would add a worker to sleep for the slot after,
# and the workers would grow by one per slot, and each idle or finishing
# worker would take a job too, each held outside the queue, where
# max_queued no longer counts it.  So under a rate limit a spawn always
# queues its job, and with no worker waiting for a slot (or starting),
# sends the idle worker that parked last to take the queue's head
# (``_TAKE_NEXT``, granted in place of a job), or failing that starts one.
#
# Idle workers leave (``idle_timeout``).  Without it a worker stays until the
# block exits.  With it, one sweeper task (started with the first worker)
# ticks every ``idle_timeout`` seconds and counts the ticks in ``_tick``; an
# idle worker parks with the tick it parked at as its payload.  Workers park
# at the tail and are given jobs from the tail, so the longest idle are at
# the head, and under a light load the same few workers take every job
# while the rest stay idle and leave (given jobs from the head, every worker
# would take one in turn, and a job per worker per period would keep them
# all).  Each tick, at least ``idle_timeout`` after the last on the clock,
# the sweeper grants ``None`` (what the close grants) to the head workers
# that parked before the previous tick, idle for at least one whole period,
# and they exit.
# A worker woken with ``None`` that finds a job queued (spawned between the
# grant and its run, when no other worker may start; or, under a rate limit,
# queued behind a job whose slot came) runs it instead, unless another
# worker waits for a slot.  No
# timer per idle wait: parking costs what it costs without the sweeper.
#
# Per-job cancellation.  Each worker runs its jobs inside one long-lived
# anyio CancelScope; ``handle.cancel()`` on a running job cancels that scope,
# and only then does the worker leave it and enter a fresh one for its next
# job.  A job that has not started is settled as cancelled and skipped by
# whichever worker meets it (lazy removal from the deque).
#
# Invariants:
# * without a rate limit, ``_queue`` non-empty implies no live waiter in
#   ``_idle`` (spawn grants an idle worker before it queues, and a worker
#   parks only when the queue is empty); with one, idle workers may wait
#   while jobs are queued behind the one whose worker waits for its slot;
# * ``_pending`` counts the jobs spawned and not yet settled; when it drops to
#   0 while ``_closing`` (the block's body is done), the executor closes:
#   idle workers are released and the exit waiting in ``__aexit__`` is woken;
# * after ``_cancelling`` is set (fail_fast, an error or a cancellation of
#   the block, met at its exit or by a worker that leaves on it) no job
#   starts: queued jobs are settled as cancelled at once,
#   new spawns return handles that are already cancelled, and a worker
#   settles the job it holds as cancelled instead of starting it;
# * ``_queue_dead`` counts the entries of ``_queue`` whose job was cancelled
#   while queued (``JoinHandle.cancel``), which stay until a worker skips
#   them, or until they are more than half of the queue (and over 32): then
#   the cancel drops them all in place, so busy workers let no pile of
#   cancelled jobs build up.  ``len(_queue) - _queue_dead`` jobs are queued,
#   and that is what ``max_queued`` and the statistics count;
# * ``_nworkers <= max_workers`` when a bound is set.
#
# Errors.  A job's exception is stored on its handle, with the traceback it
# had when the job raised it, from the job's own frame (without the worker's
# frame or _run_job's), and every re-raise starts from that traceback, as an
# asyncio.Future's does.  ``_failed`` lists the failed jobs whose error
# nobody has retrieved yet; retrieving it removes the job, so a long-lived
# block keeps none.  Those never retrieved (by ``await``, ``result()`` or
# ``exception()``) when the block exits are raised from it in an
# ExceptionGroup, with the body's own exception, as anyio's TaskGroup does.
# Cancelled jobs are not errors.  With ``fail_fast=True`` the first failure
# cancels the task group (every job and the body) and is always part of the
# group raised at the exit.
from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio
import anyio.abc

from .._core import (
    BUDGET,
    MARKING,
    NOT_OPENED,
    PENDING,
    REARMS_QUEUED,
    WITHDRAWN,
    Slot,
    Unopened,
    Waiter,
    WaitQueue,
    asyncio_cancelling,
    budget_checkpoint,
    on_trio,
    protect_if_trio_imported,
    runs_user_code,
    settled_wait,
    uncancel_to,
    withdraw_rearmed,
)
from ._handle import (
    CANCELLED,
    FAILED,
    HANDED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    JoinHandle,
    _ignore,
    new_job,
)
from ._map import MapIterator
from ._ratelimit import RateLimiter

if sys.version_info >= (3, 11):
    from typing import TypeVarTuple, Unpack
else:  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]
    from typing_extensions import TypeVarTuple, Unpack

T = TypeVar("T")
A = TypeVar("A")
Ts = TypeVarTuple("Ts")


class _TakeNext:
    # What an idle worker is granted when it is sent to take the queue's
    # head (Executor._send_idle), in place of a job.  Its ``_state`` is no
    # job's: the worker's check of a granted job's state finds it, at no
    # cost to a job's wake-up.
    __slots__ = ()
    _state = -1


_TAKE_NEXT: Final = _TakeNext()


@dataclass(frozen=True)
class ExecutorStatistics:
    """A snapshot of an :class:`Executor`.

    :ivar workers: worker tasks started and not yet finished
    :ivar idle_workers: workers parked waiting for a job
    :ivar jobs_queued: jobs waiting in the queue for a worker
    :ivar jobs_pending: jobs spawned and not yet settled (queued or running)
    :ivar max_workers: the bound on workers, or ``None``
    """

    workers: int
    idle_workers: int
    jobs_queued: int
    jobs_pending: int
    max_workers: int | None


def _withdraw_unstarted(job: JoinHandle[Any]) -> None:
    # ``kept`` for a waiting submit: its job was spawned, and the submit
    # raises a Ctrl-C all the same, which cannot be re-armed as a
    # cancellation is (only the generic waiter on Trio gets here).  Nobody
    # will have its handle: a job that has not started is cancelled, so
    # that the submit spawned nothing; one that has started runs on.
    if job._state < RUNNING:
        job.cancel()


def _split_cancellation(
    exc: BaseException,
) -> tuple[BaseException | None, BaseException | None]:
    """``exc`` split into the backend's cancellations and everything else.

    A job cancelled while it runs a task group or a Trio nursery of its own
    raises the cancellations of its tasks in a group, with the errors its
    tasks raised on the way out, if any.
    """
    cancelled = anyio.get_cancelled_exc_class()
    if isinstance(exc, cancelled):
        return exc, None
    if isinstance(exc, BaseExceptionGroup):
        cancels, errors = exc.split(cancelled)
        return cancels, errors
    return None, exc


def _from_job_frame(exc: BaseException, own_frame: bool) -> BaseException:
    # A job's error is stored without the worker's frame, as Trio stores a
    # task's error: that frame holds the executor and the job, which hold the
    # exception (a cycle), and shows nothing useful.  Nor _run_job's: the
    # traceback starts at the job's own.
    tb = exc.__traceback__
    if tb is not None:
        tb = tb.tb_next
        if own_frame and tb is not None:
            tb = tb.tb_next
    return exc.with_traceback(tb)


def _job_error(exc: Exception, own_frame: bool, fn: object) -> BaseException:
    # A job's error as stored (_from_job_frame).  One exception is replaced:
    # the worker's await of what a plain function returned, which names no
    # function.  Told by CPython's message and by having no frame of the
    # job's own, which a job that started always adds, except for an error
    # never raised in Python code (set on a future it awaits): such an
    # error is kept as it is unless its message is that one.  Arguments
    # that do not fit are kept too: CPython's message names the function.
    error = _from_job_frame(exc, own_frame)
    if (
        type(error) is not TypeError
        or error.__traceback__ is not None
        or not any(text in str(error) for text in _NOT_AWAITABLE)
    ):
        return error
    wrapped = TypeError(
        f"job {_callable_name(fn)} returned no awaitable: {error} (jobs are"
        " async functions, or callables that return an awaitable)"
    )
    wrapped.__cause__ = error  # frameless (_from_job_frame): no cycle
    return wrapped


#: CPython's message for ``await`` of a value that is not awaitable: 3.10
#: to 3.13, and the wording of newer releases.
_NOT_AWAITABLE = ("can't be used in 'await' expression", "can't be awaited")


def _callable_name(fn: object) -> str:
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str):
        return repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{qualname}" if isinstance(module, str) else qualname


# The user code the executor calls, each in a function of its own that is
# left interruptible by Ctrl-C on Trio (``runs_user_code``), while the
# bookkeeping around it, in the callers, stays protected (_core/_ki.py).


@runs_user_code  # the job
async def _run_job(fn: Callable[..., Awaitable[T]], args: tuple[Any, ...]) -> T:
    # Only on Trio once the library's code is marked (MARKING.done): the
    # frame Trio's walk stops at.  Elsewhere the worker awaits the job
    # itself, one coroutine frame less per job.
    return await fn(*args)


@runs_user_code  # iterates args_iterable, and each item
def _handles_for(
    executor: Executor, fn: Callable[..., Awaitable[T]], args_iterable: Iterable[Any]
) -> list[JoinHandle[T]]:
    # Only a value that is not iterable is reported as bad input; an error
    # raised while iterating (a generator's own bug) propagates unchanged.
    try:
        items = iter(args_iterable)
    except TypeError:
        raise TypeError(
            "args_iterable must be an iterable of argument tuples, not "
            f"{type(args_iterable).__name__}"
        ) from None
    jobs: list[JoinHandle[T]] = []
    for args in items:
        if type(args) is not tuple:
            try:
                arg_items = iter(args)
            except TypeError:
                raise TypeError(
                    "args_iterable must be an iterable of argument tuples: "
                    f"an item is a {type(args).__name__}"
                ) from None
            args = tuple(arg_items)
        jobs.append(new_job(executor, fn, args))
    return jobs


def _check_positive_int(value: object, name: str) -> int:
    # Returns a plain int: an int subclass (an IntEnum member) would show in
    # statistics() and repr as itself.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _check_number(value: object, name: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be an int, a float or None, not {type(value).__name__}"
        )
    return value


class Executor:
    """Run async jobs on a pool of long-lived worker tasks, structured.

    :param max_workers: the most jobs that run at once (``None``: workers are
        added on demand and reused, never more than the jobs that need one)
    :param fail_fast: at the first job that raises, cancel every other job
        and the block's body, as a task group does
    :param max_per_second: space job starts evenly, at most this many per
        second (``None``: no limit; after a late timer the starts catch up,
        by 2 ms of slots at most: see the guide's "Rate limit")
    :param max_queued: how many jobs may wait in the queue before
        :meth:`submit` blocks (``None``: it never blocks); :meth:`spawn`
        ignores it
    :param idle_timeout: a worker idle for between this many seconds and
        twice that exits, and a later job starts a new one (``None`` or
        ``math.inf``: workers stay until the block exits)
    :raises TypeError: if ``max_workers`` or ``max_queued`` is neither an
        int nor ``None``, ``max_per_second`` or ``idle_timeout`` none of an
        int, a float and ``None`` (a ``Fraction`` or ``Decimal`` too), or
        ``fail_fast`` not a bool
    :raises ValueError: if ``max_workers`` or ``max_queued`` is below 1,
        ``max_per_second`` is not above 0 and finite (or so small or large
        that ``1 / max_per_second`` or itself is no finite float), or
        ``idle_timeout`` is not above 0

    Use as ``async with Executor() as ex:``.  The block does not exit until
    every job has settled (finished or been cancelled); jobs may spawn jobs
    until then.  If the body raises or the block is cancelled, every job is
    cancelled.  Job errors that nobody retrieved are raised from the block in
    an ``ExceptionGroup``.
    """

    __slots__ = (
        "_cancelling",
        "_closed",
        "_closing",
        "_entered",
        "_exit",
        "_fail_fast",
        "_failed",
        "_idle",
        "_idle_timeout",
        "_limiter",
        "_max_queued",
        "_max_workers",
        "_nworkers",
        "_pending",
        "_queue",
        "_queue_dead",
        "_slot_waits",
        "_spare_joins",
        "_starting",
        "_submitters",
        "_sweeper",
        "_tg",
        "_tick",
        "_trigger",
    )

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        fail_fast: bool = False,
        max_per_second: float | None = None,
        max_queued: int | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        if max_workers is not None:
            max_workers = _check_positive_int(max_workers, "max_workers")
        if max_queued is not None:
            max_queued = _check_positive_int(max_queued, "max_queued")
        if not isinstance(fail_fast, bool):
            raise TypeError(f"fail_fast must be a bool, not {type(fail_fast).__name__}")
        limiter = None
        if max_per_second is not None:
            max_per_second = _check_number(max_per_second, "max_per_second")
            if not (0 < max_per_second < math.inf):
                raise ValueError(
                    f"max_per_second must be > 0 and finite, got {max_per_second}"
                )
            # The limiter spaces starts 1 / max_per_second seconds apart: a
            # float, finite (a rate below about 1e-308 would make it inf,
            # and the second job would wait for good).
            try:
                interval = 1.0 / float(max_per_second)
            except OverflowError:  # an int past the largest float
                raise ValueError("max_per_second must fit in a float") from None
            if interval == math.inf:
                raise ValueError(
                    "max_per_second must be large enough for 1 / max_per_second"
                    f" to be a finite float, got {max_per_second}"
                )
            limiter = RateLimiter(max_per_second)
        if idle_timeout is not None:
            idle_timeout = _check_number(idle_timeout, "idle_timeout")
            if not idle_timeout > 0:  # also NaN
                raise ValueError(f"idle_timeout must be > 0, got {idle_timeout}")
            # math.inf, or an int past the largest float: never, so no
            # sweeper.
            try:
                idle_timeout = float(idle_timeout)
            except OverflowError:
                idle_timeout = math.inf
            if idle_timeout == math.inf:
                idle_timeout = None
        self._idle_timeout = idle_timeout
        #: The sweeper's cancel scope (idle_timeout only), once it runs.
        self._sweeper: anyio.CancelScope | None = None
        #: The sweeper's ticks so far; an idle worker parks with it.
        self._tick = 0
        self._max_workers = max_workers
        self._max_queued = max_queued
        self._fail_fast = fail_fast
        self._limiter = limiter
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._closing = False  # the body is done; close when _pending is 0
        self._closed = True  # no spawn accepted (until entered)
        self._cancelling = False  # every job is being cancelled
        self._queue: deque[JoinHandle[Any]] = deque()
        self._queue_dead = 0  # entries of _queue cancelled while queued
        # The three wait structures are made where a task first needs them
        # (about 0.45 us of an empty block's 10 us on CPython 3.11): the
        # idle workers' queue by the first worker started, the exit's slot
        # by an exit that waits for jobs, the submitters' queue here, and
        # only with a bound on the queue (without one, submit never waits).
        # Until then each holds the shared empty stand-in NOT_OPENED.
        # Idle workers park with the sweeper's tick; each is granted a job,
        # or None to exit (the close, the sweeper).
        self._idle: WaitQueue[int] | Unopened = NOT_OPENED
        #: The join queue of a settled job, emptied, for the next handle that
        #: is awaited before it settles (see JoinHandle.__await__).
        self._spare_joins: WaitQueue[None] | None = None
        self._submitters: (
            WaitQueue[tuple[Callable[..., Any], tuple[Any, ...]]] | Unopened
        ) = NOT_OPENED if max_queued is None else WaitQueue()
        self._exit: Slot[None] | Unopened = NOT_OPENED
        self._nworkers = 0
        self._starting = False
        #: 1 while a worker waits for a rate limit slot, else 0 (always 0
        #: without max_per_second): from when it takes a job off the queue
        #: until it runs again after the wait; and for a worker sent for
        #: the queue's head (_send_idle), from the send until it runs (it
        #: is counted again as it takes the head, past a due budget
        #: checkpoint, where another worker may take it instead).  One at a
        #: time: see "Rate limit".
        self._slot_waits = 0
        self._pending = 0
        #: Failed jobs whose error nobody has retrieved yet (in failure
        #: order); retrieving it (JoinHandle._outcome, .exception()) removes
        #: the job, so a long-lived block keeps no retrieved errors.
        self._failed: dict[JoinHandle[Any], None] = {}
        self._trigger: BaseException | None = None

    # -- the block ---------------------------------------------------------

    async def __aenter__(self) -> Executor:
        if self._entered:
            raise RuntimeError("an Executor can be entered only once")
        self._entered = True
        # An executor made before Trio was imported: its first spawn may
        # come before any wait or checkpoint (the other first uses on Trio).
        protect_if_trio_imported()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._closed = False
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        assert tg is not None
        if exc_val is None:
            # The body is done: wait for the jobs (which may spawn more).
            self._closing = True
            if self._pending:
                exit_slot: Slot[None] = Slot()
                self._exit = exit_slot
                try:
                    # The recheck: the last job settled inside enqueue (by a
                    # finalizer), which closed the executor before the
                    # waiter was in place for the close to grant it.
                    await exit_slot.park(None, _ignore, self._closed_meanwhile)
                except BaseException as exc:
                    exc_val = exc
                    exc_type = type(exc)
                    exc_tb = exc.__traceback__
            else:
                self._close()
        if exc_val is not None:
            self._cancel_all()
        try:
            try:
                suppress = await tg.__aexit__(exc_type, exc_val, exc_tb)
            finally:
                self._closed = True
                if self._queue:
                    self._cancel_queued()
        except BaseException as raised:
            errors = self._errors()
            # A job's KeyboardInterrupt (or other BaseException) that the
            # body also raised, from ``await handle``, is in the task group's
            # group twice: that group goes through _group, which keeps it once.
            twice = isinstance(raised, BaseExceptionGroup) and len(
                {id(e) for e in raised.exceptions}
            ) < len(raised.exceptions)
            if not errors and not twice:
                raise
            if isinstance(raised, BaseExceptionGroup):
                others: list[BaseException] = list(raised.exceptions)
            elif isinstance(raised, anyio.get_cancelled_exc_class()):
                others = []
            else:
                others = [raised]
            raise self._group(others, errors) from None
        finally:
            del exc_val, exc_tb
        if self._failed or self._trigger is not None:
            errors = self._errors()
            if errors:
                raise self._group([], errors) from None
        return suppress

    def _errors(self) -> list[BaseException]:
        errors = [job._value for job in self._failed if not job._retrieved]
        self._failed.clear()  # job -> executor -> job: no cycle left behind
        trigger = self._trigger
        self._trigger = None  # its traceback may keep a worker's frame, and self
        if trigger is not None and not any(e is trigger for e in errors):
            errors.insert(0, trigger)
        return errors

    @staticmethod
    def _group(
        others: list[BaseException], errors: list[BaseException]
    ) -> BaseExceptionGroup[BaseException]:
        merged: list[BaseException] = []
        for e in others + errors:
            if not any(e is m for m in merged):
                merged.append(e)
        return BaseExceptionGroup("unhandled errors in an Executor", merged)

    def _closed_meanwhile(self, waiter: Waiter[Any]) -> bool:
        return self._closed

    def _close(self) -> None:
        # Every job has settled and the body is done: no more spawns.
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._queue.clear()  # only cancelled entries can be left
        self._queue_dead = 0
        if self._idle.parked:  # (a block that ran no job has no worker)
            for waiter in self._idle.drain():
                waiter.grant(None)
        if self._submitters.parked:  # pragma: no cover
            # A submitter waits only while jobs are queued, which keeps the
            # executor open, and a queued job's cancellation (one at a time,
            # or all by _cancel_all) admits or grants the submitters before
            # it settles the job: none is left to fail here.
            for submitter in self._submitters.drain():
                submitter.fail(RuntimeError("the Executor is closed"))
        exit_waiter = self._exit.pop()
        if exit_waiter is not None:
            exit_waiter.grant()

    def _cancel_all(self) -> None:
        if self._cancelling:
            return
        self._cancelling = True
        # The waiting submitters first: settling the queued jobs may settle
        # the last pending one and close the executor (the body done), and
        # the close fails whoever still waits.
        for waiter in self._submitters.drain():
            fn, args = waiter.payload
            waiter.grant(self.spawn(fn, *args))  # born cancelled
        self._cancel_queued()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()

    def _cancel_queued(self) -> None:
        queue = self._queue
        self._queue_dead = 0
        while queue:
            job = queue.popleft()
            if job._state == QUEUED:
                self._settle(job, CANCELLED, None)

    def _cancel_in_queue(self, job: JoinHandle[Any]) -> None:
        # JoinHandle.cancel() of a job still in the queue: settle it and
        # leave the entry for a worker to skip, counted as dead, so that a
        # submitter waiting for room gets the room it frees.  The submitter
        # is admitted before the settle: settling the last pending job
        # closes the executor (the body done), and the close fails whoever
        # still waits; an admitted submitter's job keeps it open.
        self._queue_dead += 1  # first: the room the admission counts
        if self._submitters.parked:
            self._admit_submitter()
        self._settle(job, CANCELLED, None)  # may close: resets _queue_dead
        queue = self._queue
        if self._queue_dead > 32 and self._queue_dead * 2 > len(queue):
            # Mostly dead while no worker takes from it (all busy): drop the
            # dead entries in place (workers hold this deque), in order.
            live = [j for j in queue if j._state == QUEUED]
            queue.clear()
            queue.extend(live)
            self._queue_dead = 0

    def _settle(self, job: JoinHandle[Any], state: int, value: object) -> None:
        job._state = state
        job._value = value
        if state == FAILED:
            job._tb = value.__traceback__  # type: ignore[attr-defined]
        job._fn = None
        job._args = ()
        # Read only before the job settles (JoinHandle.cancel).  A settled
        # job may be kept by a frame in its worker's traceback (the rate
        # limiter's wait) or by its user: it must not keep the worker's
        # scope, which keeps its task on AnyIO 4.6.0 (a cycle on 3.10).
        job._scope = None
        waiters = job._waiters
        if waiters is not None:
            job._waiters = None
            # Wake every joiner (drain() without its list).
            while waiters.grant_head(None) is not None:
                pass
            # Emptied: the next handle awaited before it settles reuses it,
            # with the spare waiter and the loop it remembers.
            self._spare_joins = waiters
        on_done = job._on_done
        if on_done is not None:
            job._on_done = None  # (a map's bound method: no cycle left behind)
            on_done(job)
        self._pending -= 1
        if self._pending == 0 and self._closing and not self._closed:
            self._close()

    def _failed_with(self, job: JoinHandle[Any], exc: BaseException) -> None:
        self._settle(job, FAILED, exc)
        self._failed[job] = None
        if self._fail_fast and not self._cancelling:
            self._trigger = exc
            self._cancel_all()

    # -- spawning ----------------------------------------------------------

    def spawn(
        self, fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: Unpack[Ts]
    ) -> JoinHandle[T]:
        """Schedule ``fn(*args)`` as a job and return its handle.

        Never blocks; not a checkpoint.  The job goes straight to an idle
        worker, or to the tail of the queue: jobs are handed out in spawn
        order, but a job handed to a worker starts when that worker's task
        runs, so a queued job taken by a busy worker meanwhile can start
        first (as tasks started in a task group start as the scheduler runs
        them).  With ``max_per_second`` every job is queued (and an idle
        worker sent for it, if no worker waits for a start slot or is
        starting), and jobs take their start slots in spawn order.  While
        the executor is being cancelled the handle returned is already
        cancelled and the job never runs.

        :raises RuntimeError: if the executor has not been entered or is closed
        :raises TypeError: if ``fn`` is not callable
        """
        if self._closed:
            raise RuntimeError(
                "the Executor is closed"
                if self._entered
                else "the Executor has not been entered: use 'async with'"
            )
        if not callable(fn):
            raise TypeError(f"fn must be an async callable, not {type(fn).__name__}")
        job: JoinHandle[T] = new_job(self, fn, args)
        self._pending += 1
        if self._cancelling:
            self._settle(job, CANCELLED, None)
            return job
        idle = self._idle
        if idle.parked and self._limiter is None:
            # The worker that parked last: see "Idle workers leave" above.
            worker = idle.take_tail(job)
            if worker is not None:
                job._state = HANDED
                worker.wake()
                return job
        self._queue.append(job)
        if not self._starting and not self._slot_waits:
            # self._serve_queue(), written out: once per job queued.
            if self._limiter is not None and idle.parked and self._send_idle():
                pass
            elif self._max_workers is None or self._nworkers < self._max_workers:
                self._start_worker()
        return job

    def spawn_many(
        self,
        fn: Callable[..., Awaitable[T]],
        args_iterable: Iterable[Iterable[Any]],
    ) -> list[JoinHandle[T]]:
        """Schedule ``fn(*args)`` for each ``args`` and return the handles.

        Never blocks; not a checkpoint.  One grant per idle worker, the rest
        queued in order (with ``max_per_second``, all queued, as
        :meth:`spawn` does); at most one worker start.

        :raises RuntimeError: if the executor has not been entered or is closed
        :raises TypeError: if ``fn`` is not callable, ``args_iterable`` is not
            iterable, or an item of it is not iterable
        """
        if self._closed:
            raise RuntimeError("the Executor is closed or has not been entered")
        if not callable(fn):
            raise TypeError(f"fn must be an async callable, not {type(fn).__name__}")
        jobs = _handles_for(self, fn, args_iterable)
        self._pending += len(jobs)
        if self._cancelling:
            for job in jobs:
                self._settle(job, CANCELLED, None)
            return jobs
        idle = self._idle
        # The idle workers are woken once every job is handed out or queued:
        # a finalizer that a collection runs in a wake-up (it allocates) then
        # sees the whole call done, and a job it spawns comes after these.
        handed: list[Waiter[Any]] = []
        while len(handed) < len(jobs) and idle.parked and self._limiter is None:
            worker = idle.take_tail(jobs[len(handed)])
            if worker is None:
                break
            jobs[len(handed)]._state = HANDED
            handed.append(worker)
        i = len(handed)
        if i < len(jobs):
            self._queue.extend(jobs[i:] if i else jobs)
            self._serve_queue()
        for worker in handed:
            worker.wake()
        return jobs

    async def submit(
        self, fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: Unpack[Ts]
    ) -> JoinHandle[T]:
        """Spawn ``fn(*args)``, first waiting while the queue is full.

        Blocks while ``max_queued`` jobs are queued (or other submitters
        wait before this one; they are served in order) and is then a
        cancellation point; it parks at once, without yielding first,
        unless its checkpoint is due.  Reaches a checkpoint at least once
        every 64 calls, the calls that
        wait included: on asyncio a wait granted before a cancellation
        lands does not raise it, and a producer loop whose submits are each
        granted as they park could not be cancelled otherwise.  A
        submit cancelled while it waits spawned nothing; one whose job was
        spawned just as it was cancelled returns the handle and the
        cancellation is raised at the task's next checkpoint.  A submit
        that raises ``KeyboardInterrupt`` (Trio) spawned nothing, except,
        with the generic waiter, a job that a worker started before the
        interrupted task ran (that job runs on).

        :raises RuntimeError: if the executor has not been entered or is closed
        :raises TypeError: if ``fn`` is not callable (before any wait)
        """
        if not callable(fn):
            # Checked here, not only by the spawn() that may come later on
            # behalf of this call, in whichever task makes room.
            raise TypeError(f"fn must be an async callable, not {type(fn).__name__}")
        budget = BUDGET
        budget.left -= 1
        if budget.left <= 0:
            # Due: the checkpoint first, also for a submit that must wait
            # (which otherwise parks at once: parking is its checkpoint).  A
            # producer loop whose submits are each granted as they park, by
            # a worker that takes a job in the same loop iteration, meets
            # no other (_core/_budget.py).
            await budget_checkpoint()
        if (
            self._max_queued is not None
            and self._submit_waits()
            # Unless no worker will come to make room (JoinHandle.__await__):
            # the executor is cancelled now, and the job is born cancelled.
            and not (self._starting and self._workers_gone())
        ):
            granted = await self._submitters.park(
                (fn, args), None, self._submit_room_made, _withdraw_unstarted
            )
            if granted is not WITHDRAWN:
                handle: JoinHandle[T] = granted
                return handle
            # Room was made inside the park's enqueue (its recheck), as if
            # before this call, whose due checkpoint is taken already.  No
            # other task has run: the room is this call's.
        return self.spawn(fn, *args)

    def _submit_waits(self) -> bool:
        # Whether a submit must wait now: the queue holds max_queued live
        # jobs, or other submitters wait before it.  A closed or cancelling
        # executor never makes it wait (spawn() raises or cancels at once).
        limit = self._max_queued
        return not (
            limit is None
            or self._closed
            or self._cancelling
            or (
                len(self._queue) - self._queue_dead < limit
                and not self._submitters.parked
            )
        )

    def _submit_room_made(self, waiter: Waiter[Any]) -> bool:
        # park()'s recheck for a submit: whether, with its waiter parked (the
        # last), the submit need not wait after all, as room was made inside
        # enqueue (by a finalizer), before the waiter was in place to be
        # admitted.  Room left over means that no submitter waits before
        # this one: making room admits the head at once.  (A close or a
        # cancellation leaves no live job queued either.)
        limit = self._max_queued
        assert limit is not None
        return len(self._queue) - self._queue_dead < limit

    def _admit_submitter(self) -> None:
        # Called when a worker took a job off the queue, or a queued job was
        # cancelled: room for one more.
        limit = self._max_queued
        assert limit is not None
        if len(self._queue) - self._queue_dead < limit:
            waiter = self._submitters.pop()
            if waiter is not None:
                fn, args = waiter.payload
                waiter.grant(self.spawn(fn, *args))

    def map(
        self,
        fn: Callable[[A], Awaitable[T]],
        iterable: Iterable[A] | AsyncIterable[A],
        *,
        ordered: bool = True,
        window: int | None = None,
    ) -> MapIterator[T]:
        """Run ``fn`` on each item of ``iterable`` as jobs; iterate the results.

        See :class:`MapIterator`.  ``window`` is the most jobs in flight
        (default: ``max_workers``, or 64 without a bound).  Never blocks;
        not a checkpoint: the input is read and jobs start as the iterator
        is consumed.

        :raises RuntimeError: if the executor has not been entered or is
            closed
        :raises TypeError: if ``fn`` is not callable, ``iterable`` is neither
            an iterable nor an async iterable, ``ordered`` is not a bool or
            ``window`` not an int
        :raises ValueError: if ``window < 1``
        """
        if self._closed:
            raise RuntimeError("the Executor is closed or has not been entered")
        if not callable(fn):
            raise TypeError(f"fn must be an async callable, not {type(fn).__name__}")
        if not isinstance(ordered, bool):
            raise TypeError(f"ordered must be a bool, not {type(ordered).__name__}")
        if window is None:
            window = self._max_workers if self._max_workers is not None else 64
        else:
            window = _check_positive_int(window, "window")
        return MapIterator(self, fn, iterable, ordered, window)

    # -- workers -----------------------------------------------------------

    def _serve_queue(self) -> None:
        # Jobs are queued (by a spawn, or behind a job that starts now): see
        # that a worker comes for them.  None while a start is pending (the
        # new worker takes them) or a worker waits for a rate limit slot.
        # Such a worker sees to it when its own job starts, and takes the
        # next job itself if its job is cancelled as it waits: one more
        # worker now would only take another job off the queue to sleep
        # with it, for a later slot, and so would the worker after it, so
        # that the workers grew by one per slot, each holding a job that
        # max_queued does not count.  A worker whose job was cancelled
        # counts until it runs again, not only while its job is in the
        # limiter's ``_sleeping``: a spawn in between would start a worker
        # for a job that worker is about to take.  Else, under a rate limit,
        # an idle worker is sent for the queue's head (_send_idle), and
        # failing that, a worker is started if the bound allows.
        if not self._starting and not self._slot_waits:
            if self._limiter is not None and self._idle.parked and self._send_idle():
                return
            if self._max_workers is None or self._nworkers < self._max_workers:
                self._start_worker()

    def _start_worker(self) -> None:
        if self._idle is NOT_OPENED:
            # The first worker: make the queue it will idle in (read once
            # per _work_in_scope call, so made before any worker runs).
            self._idle = WaitQueue()
            if self._idle_timeout is not None:
                assert self._tg is not None
                self._tg.start_soon(self._sweep)
        self._starting = True
        self._nworkers += 1
        assert self._tg is not None
        self._tg.start_soon(self._work)

    async def _work(self) -> None:
        self._starting = False
        try:
            while await self._work_in_scope():
                pass
        except BaseException:
            self._nworkers -= 1
            # What a worker raises (a job's own cancellations stay in
            # _work_in_scope) is a cancellation of the scope around the
            # executor, which the body may not meet before the block's exit
            # (shielded in a cleanup, say), or a job's KeyboardInterrupt that
            # the task group will cancel everything for: either way the
            # executor is being cancelled now.  Jobs queued behind this
            # worker, which it still counted against max_workers, are
            # settled as cancelled, not left waiting for a worker that no
            # spawn would start.
            self._cancel_all()
            raise
        self._nworkers -= 1

    def _workers_gone(self) -> bool:
        # Whether the task group was cancelled behind the executor's back:
        # AnyIO cancels it when a task of it ends with an exception, and a
        # worker task cancelled before its first step (a plain task.cancel()
        # of every task, say) ends so without running any of _work, which
        # would have cancelled the executor; ``_starting`` then stays set,
        # and no worker will ever come for the queued jobs.  If so, cancel
        # the executor, which settles them.  Asked by a join of a queued job
        # while a start is pending (JoinHandle.__await__): not per spawn.
        assert self._tg is not None
        if self._cancelling or not self._tg.cancel_scope.cancel_called:
            return False
        self._cancel_all()
        return True

    async def _sweep(self) -> None:
        # Every idle_timeout seconds, send away the workers idle since
        # before the previous tick (see the module's comment).
        if self._closed:  # closed before this task ran
            return
        period = self._idle_timeout
        assert period is not None
        with anyio.CancelScope() as self._sweeper:
            while True:
                # Each tick a whole period after the previous one, on the
                # clock: a timer may fire early (uvloop's clock counts whole
                # milliseconds), and an early tick would send away a worker
                # idle for less than idle_timeout, so the sweeper sleeps
                # again until the tick's time.  Always once first (a period
                # below the clock's float step leaves ``tick`` equal to the
                # time read), and only to within a nanosecond (uvloop's
                # clock may land a float step short, and a sleep of that
                # step spins until its millisecond has passed).
                tick = anyio.current_time() + period
                await anyio.sleep(period)
                while (now := anyio.current_time()) < tick - 1e-9:
                    await anyio.sleep(tick - now)
                self._retire_idle()

    def _retire_idle(self) -> None:
        # One tick of the sweeper.
        self._tick = tick = self._tick + 1
        idle = self._idle
        while True:
            head = idle.peek()
            if head is None or head.payload >= tick - 1:
                return
            # take() looks again: a finalizer run in a call since peek()
            # may have handed that worker a job.
            if idle.take(head):
                head.grant(None)

    async def _work_in_scope(self) -> bool:
        # Run jobs in one cancel scope until a job is cancelled through its
        # handle (return True: call again with a fresh scope), the executor
        # closes, or the sweeper sends the idle worker away (return False:
        # the worker exits).
        queue = self._queue
        idle = self._idle
        submitters = self._submitters
        limiter = self._limiter
        # A job runs in a frame of its own only where that frame is needed:
        # on Trio, with the library's code marked (see _run_job).
        own_frame = MARKING.done and on_trio()
        # The task's cancellation requests before any job of this scope ran
        # (asyncio 3.11+; None elsewhere): a stray cancellation of a job is
        # withdrawn down to it (below).
        cancelling = asyncio_cancelling()
        try:
            with anyio.CancelScope() as scope:
                while True:
                    budget = BUDGET
                    budget.left -= 1
                    if budget.left <= 0:
                        await budget_checkpoint()
                    if queue and (limiter is None or not self._slot_waits):
                        # Under a rate limit, not while another worker waits
                        # for a slot: that one sees to the queue when its job
                        # starts, and this one goes idle.
                        job = queue.popleft()
                        if job._state != QUEUED:
                            self._queue_dead -= 1  # cancelled while queued
                            continue
                        job._state = HANDED
                        if limiter is not None:
                            # Counted before a submitter is admitted: its
                            # spawn queues, and sends no idle worker.
                            self._slot_waits += 1
                        if submitters.parked:
                            self._admit_submitter()
                    elif self._closed:
                        return False
                    else:
                        # An idle worker keeps neither its last job nor its
                        # result: they go with their last user.
                        job = value = None  # type: ignore[assignment]
                        # idle.park(self._tick, self._give_back), written out:
                        # one coroutine frame less per idle wait.  Idle workers
                        # are only ever granted: a job, or None (the close, the
                        # sweeper).  The payload is read by the sweeper only.
                        waiter = idle.enqueue(self._tick)
                        if (
                            waiter.state is PENDING
                            and (
                                (queue and (limiter is None or not self._slot_waits))
                                or self._closed
                            )
                            and idle.withdraw(waiter)
                        ):
                            # A job spawned, or the executor closed, inside
                            # enqueue (by a finalizer), before the waiter was
                            # in place to be granted: look again (unless it
                            # was granted since: then it is awaited).
                            continue
                        try:
                            if waiter.state is PENDING:
                                await waiter.wait
                            else:  # settled before it slept (_core/_waiter.py)
                                await settled_wait(waiter)
                        except BaseException as exc:
                            idle._interrupted(waiter, exc, self._give_back)
                            raise
                        job = waiter.value
                        # Recycle the waiter (see _core/_waiter.py).
                        waiter.value = None
                        idle._spare = waiter
                        if job is None:  # the close, or the sweeper
                            if (
                                queue
                                and not self._closed
                                and (limiter is None or not self._slot_waits)
                            ):
                                # Sent away by the sweeper, and a job was
                                # spawned before this task ran (or, under a
                                # rate limit, queued behind the job whose
                                # slot came last), and no other worker will
                                # see to it: stay for it.
                                continue
                            return False
                        if job._state != HANDED:
                            if job is _TAKE_NEXT:
                                # Sent for the queue's head (_send_idle): it
                                # waits for a slot no more, and takes it above.
                                self._slot_waits -= 1
                            continue
                    if limiter is not None:
                        # A cancel() of the job while its worker sleeps for its
                        # slot cancels this scope (JoinHandle.cancel), so the
                        # worker does not sleep on for a job that is gone.
                        # _slot_waits counts it since it took the job.
                        job._scope = scope
                        try:
                            await limiter.wait(job)
                        except BaseException:
                            if job._state == HANDED:
                                self._settle(job, CANCELLED, None)
                            raise
                        finally:
                            self._slot_waits -= 1
                        if job._state != HANDED:
                            if scope.cancel_called:
                                # Cancelled as its sleep ended: a fresh scope
                                # for the next job.
                                return True
                            continue
                    if self._cancelling:
                        # fail_fast, or the block's body raised, after this job
                        # was handed over: it never starts, as a queued one.
                        self._settle(job, CANCELLED, None)
                        continue
                    if queue and not self._starting and not self._slot_waits:
                        # self._serve_queue(), written out: once per job.
                        if limiter is not None and idle.parked and self._send_idle():
                            pass
                        elif (
                            self._max_workers is None
                            or self._nworkers < self._max_workers
                        ):
                            self._start_worker()
                    job._state = RUNNING
                    job._scope = scope
                    try:
                        if own_frame:
                            value = await _run_job(job._fn, job._args)  # type: ignore[arg-type]
                        else:
                            value = await job._fn(*job._args)  # type: ignore[misc]
                    except Exception as exc:
                        self._failed_with(job, _job_error(exc, own_frame, job._fn))
                    except BaseException as exc:
                        cancels, errors = _split_cancellation(exc)
                        # Out of this frame's locals as they leave: the traceback
                        # keeps the frame (a cycle otherwise).
                        try:
                            if errors is None:
                                self._settle(job, CANCELLED, None)
                            elif isinstance(errors, Exception):
                                # Cancelled, and its cleanup failed (a task group of
                                # the job's own, on Trio, raises both in a group):
                                # the job failed with the errors alone.
                                self._failed_with(
                                    job, _from_job_frame(errors, own_frame)
                                )
                            else:
                                # KeyboardInterrupt, SystemExit...: the task group
                                # raises it, as it would a task's.
                                job._retrieved = True
                                self._failed_with(job, exc)
                                raise
                            if cancels is not None and (
                                job._cancel_requested
                                or anyio.current_effective_deadline() == -math.inf
                            ):
                                # Ours (the scope swallows it) or the executor's.
                                if cancels is exc:
                                    raise
                                raise cancels from None
                            # Else a stray cancellation exception raised by the
                            # job itself: the job counts as cancelled (or failed),
                            # the worker goes on.  A plain task.cancel() of this
                            # worker that raised it was meant for the job and
                            # ends with it: the next job starts with the count a
                            # fresh task has (asyncio.timeout() compares to it).
                            if cancelling is not None and cancels is not None:
                                uncancel_to(cancelling)
                        finally:
                            del cancels, errors
                    else:
                        self._settle(job, SUCCEEDED, value)
                        # Not kept while the next job runs: it goes with its
                        # last user.
                        value = None
                        if REARMS_QUEUED.count and cancelling is not None:
                            # The job's last call may have been a send taken
                            # as a plain task.cancel() of this worker came:
                            # the send returned, with the request re-armed.
                            # Meant for the job, it ends with it, as above.
                            withdraw_rearmed(cancelling)
                    if job._cancel_requested:
                        return True
            return True  # left by a cancellation of this scope alone
        finally:
            # However the worker leaves (a return, a cancellation, a job's
            # KeyboardInterrupt or SystemExit re-raised), its frame lets go
            # of its last job, that job's result and its cancel scope: a
            # traceback may keep the frame (its f_back on 3.12+, or a
            # cancelled task's error on 3.10), and the job and the scope
            # lead back to it (the scope through its task on AnyIO 4.6.0),
            # a cycle otherwise.
            job = value = scope = None  # type: ignore[assignment]

    def _send_idle(self) -> bool:
        # Under a rate limit, with jobs queued and no worker waiting for a
        # slot: wake the idle worker that parked last to take the queue's
        # head and wait for its slot.  It is sent, not handed a job: it takes
        # the head when it runs, and reserves that job's slot as it takes it,
        # so the slots go in the order the jobs leave the queue.  It counts
        # as waiting for a slot from now, so a busy worker that finishes its
        # job meanwhile goes idle rather than take one (but while the sent
        # worker takes a due budget checkpoint on its way, once in 64 runs:
        # then either may take the head, and the other goes idle).  False
        # if no idle worker is live after all.
        worker = self._idle.take_tail(_TAKE_NEXT)
        if worker is None:
            return False
        self._slot_waits += 1
        worker.wake()
        return True

    def _give_back(self, job: JoinHandle[Any] | _TakeNext | None) -> None:
        # A worker was granted ``job`` and cancelled before it ran (the
        # whole executor is being cancelled, or the scope around it is, which
        # the worker's exit turns into the same, _work): requeue it at the
        # head, where _cancel_queued settles it (unless it was cancelled
        # through its handle meanwhile: then it is settled already).  A
        # worker sent for the queue's head waits for a slot no more.
        if isinstance(job, _TakeNext):
            self._slot_waits -= 1
        elif job is not None and job._state == HANDED:
            job._state = QUEUED
            self._queue.appendleft(job)

    # -- introspection -----------------------------------------------------

    @property
    def max_workers(self) -> int | None:
        """The most jobs that run at once, or ``None``."""
        return self._max_workers

    def statistics(self) -> ExecutorStatistics:
        """A snapshot of the workers and jobs."""
        return ExecutorStatistics(
            workers=self._nworkers,
            idle_workers=len(self._idle),
            jobs_queued=len(self._queue) - self._queue_dead,
            jobs_pending=self._pending,
            max_workers=self._max_workers,
        )

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} workers={self._nworkers} "
            f"pending={self._pending} max_workers={self._max_workers}>"
        )
