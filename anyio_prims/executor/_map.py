# Executor.map: results of one function over lazily read input, as jobs.
#
# No task of its own: the input is read in the consuming task, inside
# ``__anext__``, so an abandoned iterator holds nothing open (its jobs in
# flight run to the end like any job, and the executor's block can exit).
# The cost is that input is read only between results: ``__anext__`` first
# delivers a result that is ready, then reads input while fewer than
# ``window`` jobs are in flight, and only then waits for a job.
#
# Ordered: ``_inflight`` is a deque of handles in input order; the head is
# delivered when done.  Unordered: each job's handle calls back ``_job_done``
# when it settles, which moves it to ``_done`` and wakes the consumer parked
# in ``_wakeup`` (a Slot: one consumer at a time).
#
# An error raised by a read of the input (an ``Exception``) ends the input,
# as its end does: it is kept in ``_input_error`` and raised once every job
# spawned before it has been delivered, so it never overtakes their results.
# A cancellation raised there propagates at once.
#
# Invariant: ``len(_inflight)`` (ordered) or ``_running`` plus ``len(_done)``
# (unordered) is the number of jobs spawned and not yet delivered, and is at
# most ``_window``.  After ``aclose()`` no input is read and every job in
# flight has been cancelled.  No item is read while the executor is closed
# (it could not be spawned).
from __future__ import annotations

from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
)
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from .._core import (
    BUDGET,
    MARKING,
    Slot,
    Waiter,
    budget_checkpoint,
    checkpoint_if_cancelled,
    on_trio,
    runs_user_code,
)
from ._handle import JoinHandle, _ignore

if TYPE_CHECKING:
    from ._executor import Executor

T = TypeVar("T")


# The input's opening and reads, in functions of their own that are left interruptible
# by Ctrl-C on Trio (``runs_user_code``); the bookkeeping around them stays
# protected (_core/_ki.py).


@runs_user_code  # the input's async iterator
async def _next_async(items: AsyncIterator[Any]) -> Any:
    return await items.__anext__()


@runs_user_code  # the input's iterator
def _next(items: Iterator[Any]) -> Any:
    return next(items)


@runs_user_code  # the input's __aiter__
def _aiter_of(iterable: AsyncIterable[Any]) -> AsyncIterator[Any]:
    return iterable.__aiter__()


@runs_user_code  # the input's __iter__
def _iter_of(iterable: Iterable[Any]) -> Iterator[Any]:
    return iter(iterable)


def _job_stopped() -> RuntimeError:
    # A job's StopAsyncIteration would end the consumer's ``async for``
    # (as PEP 479 guards generators against StopIteration).
    return RuntimeError("a job of the map raised StopAsyncIteration")


class MapIterator(Generic[T]):
    """The async iterator of results returned by :meth:`Executor.map`.

    ``async for result in ex.map(fn, items):`` runs ``fn(item)`` for each
    item as a job of the executor, with at most ``window`` jobs in flight,
    and yields the results in input order (``ordered=True``) or as the jobs
    finish.  The input (a sync or async iterable) is read lazily, in the
    consuming task, between results.  A job's exception is raised from
    ``__anext__`` when its turn comes; iteration may go on after it (a job's
    ``StopAsyncIteration`` is raised as a ``RuntimeError`` from it, so that
    it does not end the iteration).  An exception raised by the input ends
    the input: it is raised after the results of every item read before it.

    ``__anext__`` blocks while no result is ready and is then a cancellation
    point; cancelling it while it waits for a job loses nothing (the job
    stays in flight and its result is delivered by the next call).  A call
    that returns a ready result or raises at once (a job's error, the end)
    reaches a checkpoint at least once every 64 calls, before it takes
    anything: a cancellation there loses no result either.  Before it
    raises ``JobCancelled`` for a job that was cancelled (``fail_fast``, the
    executor's cancellation), it checks for the task's own cancellation,
    which takes precedence and leaves that outcome in place.  While
    it reads an async input, the cancellation goes into the input: an async
    generator ends there (Python closes it), and with it the input.  One
    task iterates at a time: another calling ``__anext__`` meanwhile gets
    ``anyio.BusyResourceError``.

    Closing it (``aclose()``, ``contextlib.aclosing``, or leaving its
    ``async with`` block) cancels the jobs still in flight and stops reading
    the input (an input error not yet raised is dropped with it, and so is
    the item a read that was waiting meanwhile, in another task, gets).  Errors
    of jobs that had already failed and were never delivered are still
    raised at the executor's exit.  Once the executor is closed, a call that
    would read the input raises ``RuntimeError`` and reads nothing; a read
    that was already waiting when the block exited (a consumer outside the
    block) takes its item and then raises ``RuntimeError``: that item is
    not run.
    """

    __slots__ = (
        "_aiter",
        "_busy",
        "_closed",
        "_done",
        "_executor",
        "_exhausted",
        "_fn",
        "_inflight",
        "_input_error",
        "_iter",
        "_ordered",
        "_own_frame",
        "_running",
        "_wakeup",
        "_window",
    )

    def __init__(
        self,
        executor: Executor,
        fn: Callable[[Any], Awaitable[T]],
        iterable: Iterable[Any] | AsyncIterable[Any],
        ordered: bool,
        window: int,
    ) -> None:
        self._aiter: AsyncIterator[Any] | None = None
        self._iter: Any = None
        if isinstance(iterable, AsyncIterable):
            self._aiter = _aiter_of(iterable)
        elif isinstance(iterable, Iterable) or hasattr(type(iterable), "__getitem__"):
            # (Also the sequence protocol, which iter() accepts.)
            self._iter = _iter_of(iterable)
        else:
            raise TypeError(
                "iterable must be an iterable or an async iterable, not "
                f"{type(iterable).__name__}"
            )
        self._executor = executor
        self._fn = fn
        self._ordered = ordered
        self._window = window
        self._exhausted = False
        self._input_error: Exception | None = None
        self._closed = False
        self._busy = False  # a task is in __anext__
        self._inflight: deque[JoinHandle[T]] = deque()  # ordered only
        self._running: set[JoinHandle[T]] = set()  # unordered only
        self._done: deque[JoinHandle[T]] = deque()  # unordered only
        self._wakeup: Slot[None] = Slot()
        #: Read the input through _next/_next_async, frames of their own,
        #: only where that frame is needed: on Trio, with the library's code
        #: marked (made in a task, after the executor's block was entered).
        self._own_frame = MARKING.done and on_trio()

    def __aiter__(self) -> MapIterator[T]:
        return self

    async def __anext__(self) -> T:
        if self._busy:
            # Two consumers would both take the ordered head (each result
            # twice) and read the input at once.
            raise anyio.BusyResourceError("iterating over")
        self._busy = True
        try:
            # Every call spends the budget, and its due checkpoint comes
            # before it takes anything (a cancellation there loses no
            # result), also for a call about to wait (_core/_budget.py); one
            # that waits parks at once otherwise: parking is its checkpoint.
            budget = BUDGET
            budget.left -= 1
            if budget.left <= 0:
                await budget_checkpoint()
            while True:
                if self._closed:
                    raise StopAsyncIteration
                if self._ready_cancelled():
                    # The task's own cancellation (the body's, with
                    # fail_fast) before JobCancelled: the outcome stays.
                    await checkpoint_if_cancelled()
                ready = self._take_ready()
                if ready is not None:
                    try:
                        return ready._outcome()  # settled: no wait, no checkpoint
                    except StopAsyncIteration as exc:
                        raise _job_stopped() from exc
                    finally:
                        del ready  # a raise keeps this frame (see _handle)
                if not self._exhausted and self._in_flight() < self._window:
                    if self._executor._closed:
                        raise RuntimeError("the Executor is closed")
                    await self._read_one()
                    continue
                if self._in_flight() == 0:
                    error = self._input_error
                    if error is not None:
                        self._input_error = None
                        try:
                            raise error
                        finally:
                            del error  # a raise keeps this frame
                    raise StopAsyncIteration
                if self._ordered:
                    head = self._inflight[0]
                    try:
                        value = await head
                    except Exception as exc:
                        if not head.cancelled():
                            # The job's own error, retrieved by this await:
                            # it is delivered even if the map was closed
                            # meanwhile.
                            self._pop_head(head)
                            del head  # a raise keeps this frame (see _handle)
                            if isinstance(exc, StopAsyncIteration):
                                raise _job_stopped() from exc
                            raise
                        del exc
                        if self._closed:  # closed by another task meanwhile
                            self._pop_head(head)
                            raise StopAsyncIteration from None
                        await checkpoint_if_cancelled()  # as for a ready one
                        self._pop_head(head)
                        raise
                    self._pop_head(head)
                    if self._closed:
                        raise StopAsyncIteration
                    return value
                executor = self._executor
                if executor._starting and executor._queue and executor._workers_gone():
                    # The worker started for the queued jobs ended before
                    # it ran: they are settled as cancelled now (see
                    # JoinHandle.__await__).  Deliver them.
                    continue
                # The recheck: the map closed inside enqueue (by a
                # finalizer), before the waiter was in place to be woken.
                await self._wakeup.park(None, _ignore, self._completes_now_of)
        finally:
            self._busy = False

    def _in_flight(self) -> int:
        if self._ordered:
            return len(self._inflight)
        return len(self._running) + len(self._done)

    def _completes_now_of(self, waiter: Waiter[None]) -> bool:
        # park()'s recheck: look again instead of waiting.
        return self._completes_now()

    def _completes_now(self) -> bool:
        # Whether __anext__ returns or raises without waiting: closed, a
        # result ready, or nothing left to read or deliver.
        return (
            self._closed
            or self._has_ready()
            or (self._exhausted and self._in_flight() == 0)
            # Closed, the executor has no job in flight: the call raises.
            or self._executor._closed
        )

    def _has_ready(self) -> bool:
        if self._ordered:
            inflight = self._inflight
            return bool(inflight) and inflight[0].done()
        return bool(self._done)

    def _ready_cancelled(self) -> bool:
        # Whether the next result to deliver is that of a cancelled job.
        ready = self._inflight if self._ordered else self._done
        return bool(ready) and ready[0].cancelled()

    def _take_ready(self) -> JoinHandle[T] | None:
        if not self._has_ready():
            return None
        return (self._inflight if self._ordered else self._done).popleft()

    def _pop_head(self, head: JoinHandle[T]) -> None:
        # The head may already be gone if the iterator was closed meanwhile.
        if self._inflight and self._inflight[0] is head:
            self._inflight.popleft()

    async def _read_one(self) -> None:
        try:
            if self._aiter is not None:
                aiter = self._aiter
                try:
                    item = await (
                        _next_async(aiter) if self._own_frame else anext(aiter)
                    )
                except StopAsyncIteration:
                    self._exhausted = True
                    return
            else:
                try:
                    item = _next(self._iter) if self._own_frame else next(self._iter)
                except StopIteration:
                    self._exhausted = True
                    return
        except Exception as exc:
            # The input's own error ends it; raised after what came before.
            self._exhausted = True
            if not self._closed:
                if isinstance(exc, StopAsyncIteration):  # a sync input's
                    # Raised as it is, it would end the consumer's loop.
                    error = RuntimeError("the input raised StopAsyncIteration")
                    error.__cause__ = exc
                    self._input_error = error
                else:
                    self._input_error = exc
            return
        if self._closed:
            # Closed by another task while this read was waiting: the item
            # goes with the jobs the close cancelled (documented).
            return
        if self._executor._closed:
            # The block exited while this read waited (the consumer is a
            # task outside it): the item is taken and no job can run it.
            raise RuntimeError(
                "the Executor closed while this map was reading its input: "
                "the item read then was not run"
            )
        handle = self._executor.spawn(self._fn, item)
        if self._ordered:
            self._inflight.append(handle)
        elif handle.done():
            self._done.append(handle)
        else:
            self._running.add(handle)
            handle._on_done = self._job_done

    def _job_done(self, handle: JoinHandle[Any]) -> None:
        self._running.discard(handle)
        if self._closed:
            return
        self._done.append(handle)
        waiter = self._wakeup.pop()
        if waiter is not None:
            waiter.grant()

    async def aclose(self) -> None:
        """Cancel the jobs in flight and stop reading the input.

        Never blocks; not a checkpoint (as a channel endpoint's ``aclose()``
        and AnyIO's memory streams'), nor is leaving an ``async with``
        block.  Idempotent.
        """
        self.close()

    def close(self) -> None:
        """The synchronous form of :meth:`aclose`."""
        if self._closed:
            return
        self._closed = True
        self._exhausted = True
        self._input_error = None
        for handle in self._inflight:
            handle.cancel()
        for handle in list(self._running):
            handle._on_done = None  # nothing more to deliver
            handle.cancel()
        self._inflight.clear()
        self._running.clear()
        self._done.clear()
        waiter = self._wakeup.pop()
        if waiter is not None:
            waiter.grant()

    async def __aenter__(self) -> MapIterator[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()
