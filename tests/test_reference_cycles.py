"""No reference cycles and no retention: objects go when their last user does.

A cycle is freed only by the cyclic garbage collector, later: until then
it keeps what it reaches (an item, a channel, a task's frames), and the
more cycles a program makes the more often the collector runs.  Trio and
AnyIO avoid them on purpose (Trio's ``outcome`` deletes the locals a raise
would keep); so does anyio-prims.  A cycle is found by collecting with
``gc.DEBUG_SAVEALL`` and looking in the garbage for a library object or
frame that reaches itself; garbage that AnyIO or the backend makes on its
own is not counted.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import sys
import types
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import anyio_prims
from anyio_prims import (
    BatchSemaphore,
    CapacityLimiter,
    Condition,
    Event,
    Executor,
    JoinHandle,
    Lock,
    RWLock,
    Semaphore,
    mpmc,
    mpsc,
    oneshot,
    spmc,
)
from anyio_prims._core import WaitQueue
from anyio_prims._core import current_task as current_task_object

from ._tasks import cancel_as_slot_sleep_ends, settle

if sys.version_info < (3, 11):
    from exceptiongroup import (  # type: ignore[import-not-found,unused-ignore]
        ExceptionGroup,
    )

pytestmark = pytest.mark.anyio

LIBRARY = os.path.dirname(anyio_prims.__file__) + os.sep


def _in_library(obj: object) -> bool:
    if isinstance(obj, types.FrameType):
        return obj.f_code.co_filename.startswith(LIBRARY)
    return type(obj).__module__.startswith("anyio_prims")


def _label(obj: object) -> str:
    if isinstance(obj, types.FrameType):
        where = os.path.relpath(obj.f_code.co_filename, LIBRARY)
        return f"frame {where}:{obj.f_code.co_name}"
    return type(obj).__qualname__


def _on_a_cycle(start: object, garbage: dict[int, object]) -> bool:
    """Whether ``start`` reaches itself through ``garbage``."""
    seen: set[int] = set()
    todo = [r for r in gc.get_referents(start) if id(r) in garbage]
    while todo:
        obj = todo.pop()
        if obj is start:
            return True
        if id(obj) not in seen:
            seen.add(id(obj))
            todo.extend(r for r in gc.get_referents(obj) if id(r) in garbage)
    return False


@contextmanager
def library_cycles() -> Iterator[list[str]]:
    """Yield a list that, after the block, names the library objects and
    frames that the block left on reference cycles."""
    found: list[str] = []
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
    finally:
        try:
            gc.collect()
            garbage = {id(obj): obj for obj in gc.garbage}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        found.extend(
            sorted(
                {
                    _label(obj)
                    for obj in garbage.values()
                    if _in_library(obj) and _on_a_cycle(obj, garbage)
                }
            )
        )
        del garbage


async def _all_parked(count: Callable[[], int], expected: int = 1) -> None:
    while count() < expected:
        await anyio.lowlevel.checkpoint()


# -- waits that the other side fails -----------------------------------------


async def _receive_ended_by_close(module: types.ModuleType) -> None:
    tx, rx = module.channel(1)
    received: list[object] = []

    async def consume() -> None:
        async for item in rx:
            received.append(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await _all_parked(lambda: rx.statistics().tasks_waiting_receive)
        tx.close()  # the parked receive gets EndOfStream
    rx.close()
    assert received == []


async def _send_broken_by_close(module: types.ModuleType) -> None:
    tx, rx = module.channel(0)

    async def produce() -> None:
        with pytest.raises(anyio.BrokenResourceError):
            await tx.send("item")

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await _all_parked(lambda: tx.statistics().tasks_waiting_send)
        rx.close()
    tx.close()


async def _oneshot_sender_closed() -> None:
    tx, rx = oneshot.channel[int]()

    async def receive() -> None:
        with pytest.raises(anyio.EndOfStream):
            await rx.receive()

    async with anyio.create_task_group() as tg:
        tg.start_soon(receive)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        tx.close()


async def _semaphore_closed() -> None:
    semaphore = BatchSemaphore(0)

    async def acquire() -> None:
        with pytest.raises(anyio.ClosedResourceError):
            await semaphore.acquire()

    async with anyio.create_task_group() as tg:
        tg.start_soon(acquire)
        await _all_parked(lambda: semaphore.statistics().tasks_waiting)
        semaphore.close()


FAILED_WAITS: dict[str, Callable[[], Awaitable[None]]] = {
    **{
        f"{m.__name__.rsplit('.', 1)[1]} receive ended": partial(
            _receive_ended_by_close, m
        )
        for m in (mpsc, spmc, mpmc)
    },
    **{
        f"{m.__name__.rsplit('.', 1)[1]} send broken": partial(_send_broken_by_close, m)
        for m in (mpsc, spmc, mpmc)
    },
    "oneshot sender closed": _oneshot_sender_closed,
    "BatchSemaphore closed": _semaphore_closed,
}


@pytest.mark.parametrize("scenario", list(FAILED_WAITS))
async def test_a_wait_the_other_side_fails_leaves_no_reference_cycle(
    scenario: str,
) -> None:
    run = FAILED_WAITS[scenario]
    await run()  # warm-up: first-use caches are not garbage
    with library_cycles() as cycles:
        for _ in range(5):
            await run()
    assert cycles == []


# -- cancelled waits -----------------------------------------------------------


class _WriteLock:
    """An RWLock's write side as a lock that ``async with`` can take again."""

    def __init__(self) -> None:
        self._rwlock = RWLock()

    async def __aenter__(self) -> None:
        await self._rwlock.acquire_write()

    async def __aexit__(self, *exc_info: object) -> None:
        self._rwlock.release_write()


def _locks() -> dict[str, Callable[[], Any]]:
    return {
        "Lock": Lock,
        "Lock(fast_acquire=True)": lambda: Lock(fast_acquire=True),
        "Semaphore": lambda: Semaphore(1),
        "CapacityLimiter": lambda: CapacityLimiter(1),
        "BatchSemaphore": lambda: BatchSemaphore(1),
        "RWLock write": _WriteLock,
    }


@pytest.mark.parametrize("kind", list(_locks()))
async def test_a_cancelled_contended_acquire_leaves_no_reference_cycle(
    kind: str,
) -> None:
    make = _locks()[kind]

    async def run() -> None:
        lock = make()
        async with lock, anyio.create_task_group() as tg:

            async def contend() -> None:
                with anyio.CancelScope() as scope:
                    scopes.append(scope)
                    async with lock:
                        pytest.fail("acquired a held lock")

            scopes: list[anyio.CancelScope] = []
            tg.start_soon(contend)
            while not scopes:
                await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()  # parked on the lock
            scopes[0].cancel()

    await run()
    with library_cycles() as cycles:
        for _ in range(5):
            await run()
    assert cycles == []


async def test_condition_wait_cancelled_while_reacquiring_leaves_no_reference_cycle(
    anyio_backend_name: str,
) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("task.cancel(): AnyIO's shield keeps a scope's cancellation out")

    async def run() -> None:
        condition = Condition()
        held: list[bool] = []

        async def wait() -> None:
            async with condition:
                try:
                    await condition.wait()
                except asyncio.CancelledError:
                    held.append(condition.locked())

        task = asyncio.ensure_future(wait())
        await _all_parked(lambda: condition.statistics().tasks_waiting)
        async with condition:
            condition.notify()
            await asyncio.sleep(0)  # the waiter now waits for the lock
            task.cancel()
            await asyncio.sleep(0)
        await task
        assert held == [True]

    await run()
    with library_cycles() as cycles:
        for _ in range(5):
            await run()
    assert cycles == []


# -- what a primitive keeps after use -----------------------------------------


async def _contend_lock(lock: Any) -> list[weakref.ref[object]]:
    tasks: list[weakref.ref[object]] = []

    async def worker() -> None:
        tasks.append(weakref.ref(current_task_object()))
        async with lock:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(worker)
    return tasks


async def _contend_channel(channel: Any) -> list[weakref.ref[object]]:
    tx, rx = channel
    tasks: list[weakref.ref[object]] = []

    async def receive() -> None:
        tasks.append(weakref.ref(current_task_object()))
        assert await rx.receive() == "item"

    async with anyio.create_task_group() as tg:
        tg.start_soon(receive)
        await _all_parked(lambda: rx.statistics().tasks_waiting_receive)
        await tx.send("item")
    return tasks


async def _contend_event(event: Event) -> list[weakref.ref[object]]:
    tasks: list[weakref.ref[object]] = []

    async def wait() -> None:
        tasks.append(weakref.ref(current_task_object()))
        await event.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await _all_parked(lambda: event.statistics().tasks_waiting)
        event.set()
    return tasks


def _contended() -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]:
    return {
        "Lock": (Lock, _contend_lock),
        "Semaphore": (lambda: Semaphore(1), _contend_lock),
        "RWLock": (_WriteLock, _contend_lock),
        "Event": (Event, _contend_event),
        "mpsc": (lambda: mpsc.channel(1), _contend_channel),
        "spmc": (lambda: spmc.channel(1), _contend_channel),
        "mpmc": (lambda: mpmc.channel(math.inf), _contend_channel),
    }


@pytest.mark.parametrize("kind", list(_contended()))
async def test_a_contended_primitive_dropped_leaves_no_reference_cycle(
    kind: str,
) -> None:
    make, use = _contended()[kind]
    await use(make())
    with library_cycles() as cycles:
        for _ in range(5):
            await use(make())
    assert cycles == []


@pytest.mark.parametrize("kind", list(_contended()))
async def test_a_primitive_keeps_no_task_that_waited_in_it(kind: str) -> None:
    make, use = _contended()[kind]
    primitive = make()
    tasks = await use(primitive)
    gc.collect()
    assert tasks
    assert [ref() for ref in tasks] == [None] * len(tasks)
    del primitive


async def test_a_cancelled_waiter_still_in_its_queue_keeps_no_task() -> None:
    # Cancelled behind a live waiter, it stays in the queue until it reaches
    # the head or the queue is compacted (lazy removal): its task, done by
    # then, must not be kept alive by it.
    queue: WaitQueue[str] = WaitQueue()
    tasks: list[weakref.ref[object]] = []
    # The scope is made in the task and let go before the check: an entered
    # CancelScope keeps its task (anyio 4.6 after the exit too).
    scopes: list[anyio.CancelScope] = []

    async def park_then_cancelled() -> None:
        tasks.append(weakref.ref(current_task_object()))
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await queue.park("cancelled")

    async with anyio.create_task_group() as tg:
        tg.start_soon(queue.park, "head")
        await _all_parked(lambda: len(queue))
        tg.start_soon(park_then_cancelled)
        await _all_parked(lambda: len(queue), 2)
        scopes.pop().cancel()
        await settle()
        assert len(queue.parked) == 2  # still queued, abandoned
        assert len(queue) == 1
        gc.collect()
        assert [ref() for ref in tasks] == [None]
        head = queue.pop()
        assert head is not None
        head.grant()


# -- the executor ---------------------------------------------------------------


async def _fail(value: int) -> None:
    await anyio.lowlevel.checkpoint()
    raise ValueError(value)


async def _retrieve(handle: JoinHandle[None], how: str) -> None:
    """Retrieve a failed job's error: ``await``, ``result()`` or ``exception()``.

    The error's traceback keeps this frame, which must not keep the handle
    (a cycle of the test's own making): it is deleted on the way out.
    """
    while how != "await" and not handle.done():
        await anyio.lowlevel.checkpoint()
    try:
        if how == "exception":
            assert isinstance(handle.exception(), ValueError)
            return
        try:
            await handle if how == "await" else handle.result()
        except ValueError:
            return
        raise AssertionError("the job's error was not raised")
    finally:
        del handle


RETRIEVALS = ["await", "result", "exception"]


@pytest.mark.parametrize("how", RETRIEVALS)
async def test_a_failed_job_retrieved_leaves_no_reference_cycle(how: str) -> None:
    async def run() -> None:
        async with Executor() as executor:
            await _retrieve(executor.spawn(_fail, 1), how)

    await run()
    with library_cycles() as cycles:
        for _ in range(5):
            await run()
    assert cycles == []


async def _assert_failing_block_leaves_no_cycle(
    block: Callable[[], Awaitable[None]],
) -> None:
    """Run ``block``, which must raise ``ValueError(1)`` in a group: once to
    warm up, then five times, checking that they leave no library cycle."""

    async def run() -> None:
        with pytest.raises(ExceptionGroup) as caught:
            await block()
        assert caught.group_contains(ValueError, match="1")
        del caught

    await run()
    with library_cycles() as cycles:
        for _ in range(5):
            await run()
    assert cycles == []


async def test_a_failed_job_raised_at_the_exit_leaves_no_reference_cycle() -> None:
    async def block() -> None:
        async with Executor() as executor:
            executor.spawn(_fail, 1)

    await _assert_failing_block_leaves_no_cycle(block)


async def _turn_the_cancellation_into_an_error(started: anyio.Event) -> None:
    started.set()
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        raise ValueError("gave up") from None


async def test_a_job_that_fails_once_cancelled_through_its_handle_leaves_no_cycle() -> (
    None
):
    # The worker leaves its scope for a fresh one (its `return True` path),
    # and on Trio the job's Cancelled is made inside handle.cancel(): neither
    # frame may keep the handle, which keeps the error.
    async def run() -> None:
        async with Executor() as executor:
            started = anyio.Event()
            handle = executor.spawn(_turn_the_cancellation_into_an_error, started)
            await started.wait()
            handle.cancel()
            with pytest.raises(ValueError, match="gave up"):
                await handle
            del handle

    await run()
    with library_cycles() as cycles:
        for _ in range(5):
            await run()
    assert cycles == []


async def test_a_fail_fast_executor_leaves_no_reference_cycle() -> None:
    # The failure that triggered fail_fast keeps a worker's frame through
    # its traceback (f_back, 3.12+): the executor must not keep it after
    # its exit.  On 3.10 with AnyIO 4.6.0 the worker cancelled by the failure
    # keeps one too (its task keeps its CancelledError, and AnyIO 4.6.0's
    # cancel scope keeps its task), so the frame must not keep that scope.
    async def block() -> None:
        async with Executor(fail_fast=True) as executor:
            executor.spawn(anyio.sleep_forever)
            executor.spawn(_fail, 1)

    await _assert_failing_block_leaves_no_cycle(block)


async def test_fail_fast_cancelling_rate_limited_workers_leaves_no_cycle() -> None:
    # As above, with a cancelled worker asleep for its job's start slot
    # (max_per_second; one at a time waits): the rate limiter's frame, in
    # its CancelledError's traceback, keeps the job, which must then not keep
    # the worker's cancel scope (on 3.10 with AnyIO 4.6.0 the scope keeps
    # the task, which keeps that traceback).
    async def block() -> None:
        async with Executor(fail_fast=True, max_per_second=5) as executor:
            executor.spawn(_fail, 1)
            executor.spawn(anyio.sleep_forever)
            executor.spawn(anyio.sleep_forever)
            await anyio.sleep_forever()

    await _assert_failing_block_leaves_no_cycle(block)


async def test_a_failed_job_keeps_its_traceback_however_often_it_is_awaited() -> None:
    def depth(exc: BaseException) -> int:
        count, tb = 0, exc.__traceback__
        while tb is not None:
            count, tb = count + 1, tb.tb_next
        return count

    async with Executor() as executor:
        handle = executor.spawn(_fail, 1)
        depths = []
        for _ in range(20):
            with pytest.raises(ValueError, match="1") as caught:
                await handle
            depths.append(depth(caught.value))
            with pytest.raises(ValueError, match="1") as caught:
                handle.result()
            depths.append(depth(caught.value))
        del caught
    assert len(set(depths[2:])) == 1, depths


@pytest.mark.parametrize("how", RETRIEVALS)
async def test_an_executor_keeps_no_failed_job_whose_error_was_retrieved(
    how: str,
) -> None:
    async with Executor() as executor:
        handles: list[weakref.ref[JoinHandle[None]]] = []
        for i in range(50):
            handle = executor.spawn(_fail, i)
            handles.append(weakref.ref(handle))
            await _retrieve(handle, how)
            del handle
        gc.collect()
        assert [ref() for ref in handles] == [None] * 50


async def test_jobs_cancelled_while_queued_are_let_go_while_the_workers_are_busy() -> (
    None
):
    async with Executor(max_workers=1) as executor:
        busy = executor.spawn(anyio.sleep_forever)
        await settle()  # the one worker runs it
        handles: list[weakref.ref[JoinHandle[None]]] = []
        for _ in range(1000):
            handle = executor.spawn(anyio.sleep, 0)
            handle.cancel()
            handles.append(weakref.ref(handle))
            del handle
        gc.collect()
        kept = sum(1 for ref in handles if ref() is not None)
        assert kept <= 64, kept  # dead entries are dropped, not piled up
        assert executor.statistics().jobs_queued == 0
        busy.cancel()


async def _parked(x: int) -> int:
    await anyio.sleep(0.01 if x else 0)
    return x


async def test_an_unordered_map_s_finished_jobs_leave_no_reference_cycle() -> None:
    # A job of an unordered map calls the map back when it settles (its
    # handle's _on_done): the handle must drop that callback then, or the
    # map, its undelivered handles and its input stay on a cycle.
    async def run() -> None:
        async with Executor() as executor:
            results = executor.map(_parked, range(3), ordered=False)
            assert await results.__anext__() == 0
            del results  # abandoned with results undelivered

    await run()
    with library_cycles() as cycles:
        for _ in range(3):
            await run()
    assert cycles == []


def _input_failing_at_2() -> Iterator[int]:
    yield 0
    yield 1
    raise KeyError(2)


@pytest.mark.parametrize("ready", [True, False], ids=["ready", "awaited"])
async def test_a_map_raising_a_job_s_or_the_input_s_error_leaves_no_reference_cycle(
    ready: bool,
) -> None:
    # __anext__ raises a job's error (a result ready, or one it waited for)
    # and then the input's: the traceback keeps its frame, which must hold
    # no handle and no error by then.
    async def fail_at_1(x: int) -> int:
        if x == 1:
            if ready:
                await anyio.lowlevel.checkpoint()
            else:  # fails once the consumer waits for it
                await anyio.wait_all_tasks_blocked()
            raise ValueError(x)
        return x

    async def run() -> None:
        async with Executor() as executor:
            results = executor.map(fail_at_1, _input_failing_at_2())
            assert await results.__anext__() == 0
            if ready:
                await anyio.wait_all_tasks_blocked()  # job 1 has failed
            with pytest.raises(ValueError, match="1"):
                await results.__anext__()
            with pytest.raises(KeyError, match="2"):
                await results.__anext__()

    await run()
    with library_cycles() as cycles:
        for _ in range(3):
            await run()
    assert cycles == []


async def _worker_keeps(
    cancel_second: Callable[[JoinHandle[None]], Awaitable[None]],
    max_per_second: float | None = None,
) -> tuple[BaseException | None, weakref.ref[JoinHandle[None]]]:
    """Run a failing job, then one cancelled by ``cancel_second``, on one worker.

    Returns the first job's error, whose traceback keeps the worker's frame
    (its ``f_back``, on 3.12+), and a reference to the second job's handle,
    which the worker leaves its scope with: the frame must not keep it.
    """

    async def job() -> None:
        await anyio.sleep_forever()

    async with Executor(1, max_per_second=max_per_second) as executor:
        failed = executor.spawn(_fail, 1)
        second = executor.spawn(job)
        await cancel_second(second)
        error = await _error_of(failed)
        while not second.done():
            await anyio.lowlevel.checkpoint()
        assert second.cancelled()
        ref = weakref.ref(second)
        del failed, second
    return error, ref


async def _error_of(handle: JoinHandle[None]) -> BaseException | None:
    while not handle.done():
        await anyio.lowlevel.checkpoint()
    return handle.exception()


async def test_a_worker_left_by_a_job_s_cancellation_keeps_no_handle() -> None:
    async def cancel_while_it_runs(second: JoinHandle[None]) -> None:
        await anyio.wait_all_tasks_blocked()
        assert second.cancel()

    error, ref = await _worker_keeps(cancel_while_it_runs)
    gc.collect()
    assert isinstance(error, ValueError)
    assert ref() is None


async def test_a_worker_whose_job_is_cancelled_as_its_slot_sleep_ends_keeps_no_handle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The cancel lands after the sleep for the second job's start slot has
    # ended, before the worker resumes (the limiter's wait does it).
    to_cancel: list[JoinHandle[None]] = []
    waits = cancel_as_slot_sleep_ends(monkeypatch, 2, lambda: to_cancel.pop().cancel())

    async def cancel_at_its_slot(second: JoinHandle[None]) -> None:
        to_cancel.append(second)

    error, ref = await _worker_keeps(cancel_at_its_slot, max_per_second=1000.0)
    gc.collect()
    assert waits() == 2
    assert isinstance(error, ValueError)
    assert ref() is None


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
async def test_a_closed_map_keeps_no_result_of_its_undelivered_jobs(
    ordered: bool,
) -> None:
    # Jobs 1 and 2 finish while the consumer holds job 0's result; the map
    # is closed with them undelivered and kept by its user: it must let go
    # of their handles, which keep the results.
    class Result:
        pass

    refs: list[weakref.ref[Result]] = []

    async def job(x: int) -> Result:
        result = Result()
        refs.append(weakref.ref(result))
        return result

    async with Executor() as executor:
        results = executor.map(job, range(3), window=3, ordered=ordered)
        first = await results.__anext__()
        await anyio.wait_all_tasks_blocked()
        assert len(refs) == 3
        del first
        await results.aclose()
        gc.collect()
        assert [ref() for ref in refs] == [None, None, None]
        del results


async def test_a_closed_map_keeps_no_result_of_a_job_that_outlived_its_cancel() -> None:
    # An unordered map closed while its job runs cancels the job, which
    # shields itself and returns a result after the close: nothing is left
    # to deliver it to, so the map must not keep the job's handle.
    class Result:
        pass

    refs: list[weakref.ref[Result]] = []
    release = anyio.Event()

    async def job(x: int) -> Result:
        with anyio.CancelScope(shield=True):
            await release.wait()
        result = Result()
        refs.append(weakref.ref(result))
        return result

    async with Executor() as executor:
        results = executor.map(job, range(1), ordered=False)
        with anyio.move_on_after(0.01):
            await results.__anext__()  # reads the input, spawns the job
        await results.aclose()
        release.set()
        while not refs:
            await anyio.lowlevel.checkpoint()
        await anyio.wait_all_tasks_blocked()
        gc.collect()
        assert refs[0]() is None
        del results


class _InputBroke(ValueError):
    """An input's error that a weak reference can follow (a subclass:
    built-in exceptions take none)."""


async def test_a_closed_map_keeps_no_input_error_it_did_not_raise() -> None:
    # The consumer's call reads the item, then the input's error, and
    # waits for the job in flight; the map is closed before that error's
    # turn and kept by its user: it must let go of the error (whose
    # traceback keeps the input's frames).
    errors: list[weakref.ref[BaseException]] = []
    release = anyio.Event()

    def items() -> Iterator[int]:
        yield 0
        error = _InputBroke("input broke")
        errors.append(weakref.ref(error))
        raise error

    async def job(x: int) -> int:
        await release.wait()
        return x

    async with Executor() as executor:
        results = executor.map(job, items())
        with anyio.move_on_after(0.01):
            await results.__anext__()  # reads the item and the error, waits
        assert len(errors) == 1
        await results.aclose()
        release.set()
        gc.collect()
        assert errors[0]() is None
        del results


async def test_an_open_rate_limited_executor_keeps_no_job_that_slept_for_its_slot() -> (
    None
):
    # A block kept open (a server's lifetime): each job whose worker slept
    # for its start slot is let go once it has finished and its handle is
    # dropped, with the result it returned.
    class Result:
        pass

    refs: list[weakref.ref[Result]] = []

    async def job() -> Result:
        result = Result()
        refs.append(weakref.ref(result))
        return result

    async with Executor(max_per_second=200.0) as ex:
        handles = [ex.spawn(job) for _ in range(3)]  # the last two sleep
        for handle in handles:
            await handle
        del handles, handle
        gc.collect()
        assert len(refs) == 3
        assert [ref() for ref in refs] == [None, None, None]


async def test_a_busy_worker_keeps_no_result_of_its_previous_job() -> None:
    class Result:
        pass

    async def job(x: int) -> Result | None:
        if x == 0:
            return Result()
        await anyio.sleep_forever()
        return None  # pragma: no cover

    async with Executor(1) as executor:
        handle = executor.spawn(job, 0)
        # Queued: the one worker takes it straight after job 0, and waits.
        second = executor.spawn(job, 1)
        first = await handle
        del handle  # (it keeps the result too)
        await anyio.wait_all_tasks_blocked()
        ref = weakref.ref(first)
        del first
        gc.collect()
        assert ref() is None
        second.cancel()


async def test_a_park_failed_by_the_other_side_leaves_no_reference_cycle() -> None:
    # park() raises the failure it was woken with; neither its frame (kept
    # by the traceback) nor anything else may keep the exception, which
    # would make a cycle through that traceback.
    q: WaitQueue[str] = WaitQueue()

    async def failed_park() -> None:
        async def park() -> None:
            with pytest.raises(anyio.ClosedResourceError):
                await q.park("p")

        async with anyio.create_task_group() as tg:
            tg.start_soon(park)
            await settle()
            waiter = q.pop()
            assert waiter is not None
            waiter.fail(anyio.ClosedResourceError())

    await failed_park()  # warm-up: first-use caches are not garbage
    with library_cycles() as cycles:
        for _ in range(5):
            await failed_park()
    assert cycles == []
