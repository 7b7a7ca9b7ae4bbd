"""Executor and JoinHandle: dispatch, handle states, cancellation, structure."""

from __future__ import annotations

import contextvars
import enum
import functools
import gc
import math
import sys
import weakref
from collections.abc import Awaitable, Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import mpmc
from anyio_prims._core import BUDGET, BUDGET_SIZE, NOT_OPENED, Slot, WaitQueue
from anyio_prims.executor import (
    Executor,
    ExecutorStatistics,
    JobCancelled,
    JoinHandle,
)
from anyio_prims.executor._executor import _NOT_AWAITABLE

from .._tasks import settle
from .._waiter_count import WAITER_STATS

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import (  # type: ignore[import-not-found,unused-ignore]
        BaseExceptionGroup,
        ExceptionGroup,
    )

pytestmark = pytest.mark.anyio


async def double(x: int) -> int:
    return 2 * x


async def sleep_forever() -> None:
    await anyio.sleep(math.inf)


async def fail(message: str) -> None:
    raise ValueError(message)


# -- results and ordering -----------------------------------------------------


async def test_await_handle_returns_result() -> None:
    async with Executor() as ex:
        assert await ex.spawn(double, 21) == 42


async def test_jobs_start_in_spawn_order_on_one_worker() -> None:
    started: list[int] = []

    async def job(i: int) -> None:
        started.append(i)
        await anyio.lowlevel.checkpoint()

    async with Executor(1) as ex:
        for i in range(20):
            ex.spawn(job, i)
    assert started == list(range(20))


async def test_several_workers_take_queued_jobs_in_spawn_order() -> None:
    # Two workers busy, six jobs queued; as the workers free up, each takes
    # the head of the queue, so the queued jobs start in spawn order,
    # whichever worker runs first.
    started: list[int] = []
    release = anyio.Event()

    async def job(i: int) -> None:
        started.append(i)
        if i < 2:
            await release.wait()
        for _ in range(i % 3):
            await anyio.lowlevel.checkpoint()

    async with Executor(2) as ex:
        for i in range(8):
            ex.spawn(job, i)
        await settle()
        assert sorted(started) == [0, 1]
        assert ex.statistics().jobs_queued == 6
        release.set()
    assert started[2:] == list(range(2, 8))


async def test_block_waits_for_every_job() -> None:
    finished: list[int] = []

    async def job(i: int) -> None:
        for _ in range(i):
            await anyio.lowlevel.checkpoint()
        finished.append(i)

    async with Executor() as ex:
        for i in range(10):
            ex.spawn(job, i)
    assert sorted(finished) == list(range(10))


async def test_jobs_spawned_by_jobs_after_body_finished_still_run() -> None:
    ran: list[str] = []

    async def child() -> None:
        await anyio.lowlevel.checkpoint()
        ran.append("child")

    async def parent() -> None:
        await anyio.lowlevel.checkpoint()
        ex.spawn(child)
        ran.append("parent")

    async with Executor() as ex:
        ex.spawn(parent)
    assert ran == ["parent", "child"]


async def test_many_trivial_jobs_use_few_workers() -> None:
    async def nothing() -> None:
        pass

    async with Executor() as ex:
        handles = [ex.spawn(nothing) for _ in range(2000)]
        for handle in handles:
            await handle
        assert ex.statistics().workers < 200


async def test_spawn_many_runs_every_job_in_order() -> None:
    started: list[int] = []

    async def job(i: int, j: int) -> int:
        started.append(i)
        return i + j

    async with Executor(1) as ex:
        handles = ex.spawn_many(job, [(i, 1) for i in range(10)])
        assert [await h for h in handles] == [i + 1 for i in range(10)]
    assert started == list(range(10))


async def test_spawn_many_hands_jobs_to_idle_workers() -> None:
    async with Executor() as ex:
        await ex.spawn_many(double, [(0,)] * 4)[-1]  # start a few workers
        await anyio.wait_all_tasks_blocked()
        idle = ex.statistics().idle_workers
        assert idle >= 1
        handles = ex.spawn_many(double, [(i,) for i in range(idle)])
        assert ex.statistics().jobs_queued == 0
        assert [await h for h in handles] == [2 * i for i in range(idle)]


async def test_spawn_many_of_fewer_jobs_than_idle_workers_starts_no_worker() -> None:
    async with Executor() as ex:
        gate = anyio.Event()
        ex.spawn_many(gate.wait, [()] * 3)  # three workers
        await settle()
        gate.set()
        await settle()
        assert ex.statistics().idle_workers == 3
        handles = ex.spawn_many(double, [(1,), (2,)])
        stats = ex.statistics()
        assert (stats.workers, stats.idle_workers, stats.jobs_queued) == (3, 1, 0)
        assert [await h for h in handles] == [2, 4]


async def test_recursive_spawn_and_await_tree_completes() -> None:
    async def tree(depth: int) -> int:
        if depth == 0:
            return 1
        left = ex.spawn(tree, depth - 1)
        right = ex.spawn(tree, depth - 1)
        return await left + await right

    async with Executor() as ex:
        assert await ex.spawn(tree, 7) == 128


async def test_deep_spawn_and_await_chain_completes() -> None:
    async def chain(depth: int) -> int:
        if depth == 0:
            return 0
        return 1 + await ex.spawn(chain, depth - 1)

    async with Executor() as ex:
        assert await ex.spawn(chain, 200) == 200


# -- handle states ------------------------------------------------------------


async def test_handle_states_from_queued_to_done() -> None:
    release = anyio.Event()

    async def job() -> str:
        await release.wait()
        return "ok"

    async with Executor(1) as ex:
        blocker = ex.spawn(job)
        queued = ex.spawn(job)
        await anyio.wait_all_tasks_blocked()
        assert not blocker.done()
        assert not queued.done()
        assert "queued" in repr(queued)
        assert "running" in repr(blocker)
        release.set()
        assert await queued == "ok"
        assert queued.done()
        assert not queued.cancelled()
        assert queued.result() == "ok"
        assert queued.exception() is None


async def test_result_of_unfinished_job_raises_runtime_error() -> None:
    async with Executor() as ex:
        handle = ex.spawn(sleep_forever)
        with pytest.raises(RuntimeError, match="not finished"):
            handle.result()
        with pytest.raises(RuntimeError, match="not finished"):
            handle.exception()
        handle.cancel()


async def test_await_failed_job_raises_its_exception() -> None:
    async with Executor() as ex:
        handle = ex.spawn(fail, "boom")
        with pytest.raises(ValueError, match="boom"):
            await handle
        assert handle.done()
        assert not handle.cancelled()
        with pytest.raises(ValueError, match="boom"):
            handle.result()


async def test_exception_returns_job_error() -> None:
    async with Executor() as ex:
        handle = ex.spawn(fail, "boom")
        await anyio.wait_all_tasks_blocked()
        exc = handle.exception()
        assert isinstance(exc, ValueError)


def frame_names(exc: BaseException) -> list[str]:
    names = []
    tb = exc.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return names


async def test_a_failed_jobs_traceback_starts_at_its_own_frame_and_does_not_grow() -> (
    None
):
    # No frame of the executor's (the worker's, or on Trio the one-line
    # frame that calls the job) before the job's, and every re-raise starts
    # from the stored traceback.
    async with Executor() as ex:
        handle = ex.spawn(fail, "boom")
        await anyio.wait_all_tasks_blocked()
        exc = handle.exception()
        assert exc is not None
        assert frame_names(exc) == ["fail"]
        depths = []
        for _ in range(3):
            with pytest.raises(ValueError, match="boom") as info:
                await handle
            names = frame_names(info.value)
            assert names[-1] == "fail"
            assert "_run_job" not in names
            assert "_work_in_scope" not in names
            depths.append(len(names))
        assert depths[0] == depths[1] == depths[2]


async def test_several_tasks_await_one_handle() -> None:
    release = anyio.Event()
    results: list[int] = []

    async def job() -> int:
        await release.wait()
        return 7

    async with Executor() as ex:
        handle = ex.spawn(job)

        async def waiter() -> None:
            results.append(await handle)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert results == [7, 7, 7]


async def test_awaiting_done_handle_creates_no_waiter() -> None:
    async with Executor() as ex:
        handle = ex.spawn(double, 1)
        await handle
        before = WAITER_STATS.created
        for _ in range(10):
            assert await handle == 2
        assert WAITER_STATS.created == before


async def test_awaiting_a_done_handle_when_cancelled_stops_within_the_budget() -> None:
    async with Executor() as ex:
        handle = ex.spawn(double, 4)
        assert await handle == 8
        awaits_after_cancel = 0
        with anyio.CancelScope() as scope:
            scope.cancel()
            for _ in range(4 * BUDGET_SIZE):
                awaits_after_cancel += 1  # counts the await that raises
                assert await handle == 8
        assert scope.cancelled_caught
        assert awaits_after_cancel <= BUDGET_SIZE


async def test_cancelled_await_leaves_job_running() -> None:
    release = anyio.Event()

    async def job() -> int:
        await release.wait()
        return 5

    async with Executor() as ex:
        handle = ex.spawn(job)
        with anyio.move_on_after(0):
            await handle
        assert not handle.done()
        release.set()
        assert await handle == 5


async def _gated(gate: anyio.Event, value: int) -> int:
    await gate.wait()
    return value


async def _await(handle: JoinHandle[Any]) -> None:
    await handle


async def test_a_settled_jobs_join_queue_serves_the_next_awaited_job() -> None:
    gates = [anyio.Event(), anyio.Event()]
    async with Executor() as ex:
        first = ex.spawn(_gated, gates[0], 1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_await, first)
            await anyio.wait_all_tasks_blocked()
            queue = first._waiters
            assert queue is not None
            gates[0].set()
        assert first._waiters is None  # settled: the queue went back
        second = ex.spawn(_gated, gates[1], 2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_await, second)
            await anyio.wait_all_tasks_blocked()
            assert second._waiters is queue
            gates[1].set()
        assert await second == 2


async def test_a_join_cancelled_after_its_queue_moved_on_disturbs_nothing(
    anyio_backend: Any,
) -> None:
    # asyncio: the first joiner's task is cancelled, then its job settles
    # before that task runs, so the queue has moved to the next job when the
    # cancelled joiner leaves it.
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio's task.cancel() before the task runs")
    import asyncio

    gates = [anyio.Event(), anyio.Event()]
    async with Executor() as ex:
        first = ex.spawn(_gated, gates[0], 10)
        joiner = asyncio.ensure_future(_await(first))
        await anyio.wait_all_tasks_blocked()
        joiner.cancel()
        gates[0].set()
        await first  # settles; the joiner has not run since its cancel
        second = ex.spawn(_gated, gates[1], 11)
        result = asyncio.ensure_future(_result(second))
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(asyncio.CancelledError):
            await joiner
        assert second._waiters is not None
        assert len(second._waiters) == 1  # the second joiner still waits
        gates[1].set()
        assert await result == 11


async def test_joins_that_time_out_do_not_pile_up_on_a_running_job() -> None:
    # Polling a long job (``with anyio.move_on_after(...): await handle``)
    # leaves no waiter behind per timed-out join: the job's join queue
    # counts none of them and holds at most a bounded number until it is
    # compacted, not one per poll until the job settles.
    gate = anyio.Event()
    async with Executor() as ex:
        job = ex.spawn(_gated, gate, 7)
        for _ in range(200):
            with anyio.move_on_after(0):
                await job
        queue = job._waiters
        assert queue is not None
        assert len(queue) == 0
        assert len(queue.parked) <= 40
        gate.set()
        assert await job == 7


async def _result(handle: JoinHandle[int]) -> int:
    return await handle


# -- per-job cancellation -----------------------------------------------------


async def test_cancel_before_start_means_job_never_runs() -> None:
    ran: list[str] = []
    release = anyio.Event()

    async def blocker() -> None:
        await release.wait()

    async def job() -> None:
        ran.append("job")

    async with Executor(1) as ex:
        ex.spawn(blocker)
        handle = ex.spawn(job)
        assert handle.cancel() is True
        assert handle.cancelled()
        assert handle.done()
        release.set()
    assert ran == []
    with pytest.raises(JobCancelled):
        await handle


async def test_a_job_cancelled_once_handed_to_an_idle_worker_never_runs() -> None:
    # Handed over (the idle worker is woken with it) and cancelled before
    # the worker's task runs: the worker skips it.
    ran: list[str] = []

    async def job() -> None:
        ran.append("job")

    async with Executor(1) as ex:
        await ex.spawn(double, 1)  # the worker is now idle
        await settle()
        assert ex.statistics().idle_workers == 1
        handle = ex.spawn(job)
        assert ex.statistics().idle_workers == 0  # handed over
        assert handle.cancel() is True
        assert handle.cancelled()
        await settle()
        assert ex.statistics().idle_workers == 1
    assert ran == []


async def test_a_worker_running_jobs_that_never_block_lets_other_tasks_run() -> None:
    # A worker takes queued jobs one after another without parking; it
    # reaches a schedule point at least once every BUDGET_SIZE jobs.
    done = 0

    async def job() -> None:
        nonlocal done
        done += 1

    total = 20 * BUDGET_SIZE
    seen: list[int] = []
    async with Executor(1) as ex:
        ex.spawn_many(job, [()] * total)
        while done < total:
            await anyio.lowlevel.checkpoint()
            seen.append(done)
    # Between two turns of this task the worker ran a budget's worth of jobs,
    # or two (Trio runs a batch of tasks in random order: the worker may run
    # last in one batch and first in the next).
    steps = [b - a for a, b in zip([0, *seen], seen, strict=False)]
    assert max(steps) <= 2 * BUDGET_SIZE


async def test_cancel_running_job_raises_job_cancelled() -> None:
    async with Executor() as ex:
        handle = ex.spawn(sleep_forever)
        await anyio.wait_all_tasks_blocked()
        assert handle.cancel() is True
        with pytest.raises(JobCancelled):
            await handle
        assert handle.cancelled()
        with pytest.raises(JobCancelled):
            handle.result()
        with pytest.raises(JobCancelled):
            handle.exception()


async def test_cancel_running_job_leaves_other_jobs_running() -> None:
    async def job() -> str:
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        return "done"

    async with Executor() as ex:
        victim = ex.spawn(sleep_forever)
        others = [ex.spawn(job) for _ in range(5)]
        await anyio.wait_all_tasks_blocked()
        victim.cancel()
        assert [await h for h in others] == ["done"] * 5


async def test_worker_runs_next_job_after_a_cancelled_one() -> None:
    async with Executor(1) as ex:
        victim = ex.spawn(sleep_forever)
        after = ex.spawn(double, 4)
        await anyio.wait_all_tasks_blocked()
        victim.cancel()
        assert await after == 8
        # and the fresh scope is not cancelled: a blocking job still blocks
        event = anyio.Event()

        async def wait_event() -> str:
            await event.wait()
            return "woken"

        waiting = ex.spawn(wait_event)
        await anyio.wait_all_tasks_blocked()
        assert not waiting.done()
        event.set()
        assert await waiting == "woken"


async def test_cancel_done_job_returns_false() -> None:
    async with Executor() as ex:
        handle = ex.spawn(double, 1)
        await handle
        assert handle.cancel() is False
        assert not handle.cancelled()


async def test_cancelled_jobs_are_not_errors_at_exit() -> None:
    async with Executor() as ex:
        handle = ex.spawn(sleep_forever)
        await anyio.wait_all_tasks_blocked()
        handle.cancel()
    assert handle.cancelled()


async def test_job_that_swallows_cancellation_keeps_its_result() -> None:
    async def stubborn() -> str:
        try:
            await anyio.sleep(math.inf)
        except anyio.get_cancelled_exc_class():
            pass
        return "kept"

    async with Executor() as ex:
        handle = ex.spawn(stubborn)
        await anyio.wait_all_tasks_blocked()
        handle.cancel()
        assert await handle == "kept"
        assert not handle.cancelled()


async def test_job_cancelling_itself_is_cancelled() -> None:
    async def selfish() -> None:
        me.cancel()
        await anyio.lowlevel.checkpoint()

    async with Executor() as ex:
        me: JoinHandle[None] = ex.spawn(selfish)
        with pytest.raises(JobCancelled):
            await me


# -- structure: errors, fail_fast, scope cancellation ---------------------------


async def test_unretrieved_error_is_raised_from_the_block() -> None:
    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="lost")):
        async with Executor() as ex:
            ex.spawn(fail, "lost")


async def test_every_unretrieved_error_is_in_the_group() -> None:
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            for i in range(3):
                ex.spawn(fail, str(i))
    assert sorted(str(e) for e in info.value.exceptions) == ["0", "1", "2"]


async def test_retrieved_error_is_not_raised_again() -> None:
    async with Executor() as ex:
        handle = ex.spawn(fail, "seen")
        with pytest.raises(ValueError, match="seen"):
            await handle


async def test_error_does_not_stop_other_jobs_without_fail_fast() -> None:
    results: list[str] = []

    async def job() -> None:
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        results.append("done")

    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            ex.spawn(fail, "x")
            for _ in range(3):
                ex.spawn(job)
    assert results == ["done"] * 3


async def test_fail_fast_cancels_other_jobs_and_raises() -> None:
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            sleeper = ex.spawn(sleep_forever)
            await anyio.wait_all_tasks_blocked()
            ex.spawn(fail, "first")
            await anyio.sleep(math.inf)
    assert [str(e) for e in info.value.exceptions] == ["first"]
    assert sleeper.cancelled()


async def test_fail_fast_reports_the_failure_the_body_awaited() -> None:
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            ex.spawn(sleep_forever)
            await ex.spawn(fail, "awaited")
    assert [str(e) for e in info.value.exceptions] == ["awaited"]


async def test_fail_fast_cancels_queued_jobs() -> None:
    ran: list[str] = []

    async def job() -> None:
        ran.append("job")

    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor(1, fail_fast=True) as ex:
            ex.spawn(fail, "x")
            queued = ex.spawn(job)
    assert ran == []
    assert queued.cancelled()


async def test_a_job_handed_to_an_idle_worker_never_starts_after_fail_fast_fails() -> (
    None
):
    # Two idle workers.  A job hands another to the second worker and then
    # fails, in one step: the failure cancels every other job, and one a
    # worker holds but has not started is no exception: it never runs (as a
    # queued one would not).
    ran: list[str] = []
    handed: list[JoinHandle[str]] = []

    async def quick() -> str:
        ran.append("quick")
        return "result"

    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:

            async def hand_over_then_fail() -> None:
                handed.append(ex.spawn(quick))
                raise ValueError("first")

            ex.spawn_many(anyio.lowlevel.checkpoint, [(), ()])
            await anyio.wait_all_tasks_blocked()
            assert ex.statistics().idle_workers == 2
            ex.spawn(hand_over_then_fail)
            await anyio.sleep(math.inf)
    assert ran == []
    assert handed[0].cancelled()


async def test_a_job_handed_to_an_idle_worker_never_starts_when_the_body_raises() -> (
    None
):
    ran: list[str] = []

    async def job() -> None:
        ran.append("job")

    with pytest.RaisesGroup(pytest.RaisesExc(KeyError)):
        async with Executor() as ex:
            await ex.spawn(double, 1)
            await anyio.wait_all_tasks_blocked()  # the worker is idle now
            handed = ex.spawn(job)
            raise KeyError("the body fails")
    assert ran == []
    assert handed.cancelled()


async def _cancelled_in_a_group() -> None:
    # A job whose cancellation leaves it inside an exception group, as one
    # running a task group or a Trio nursery of its own may raise it.
    try:
        await sleep_forever()
    except anyio.get_cancelled_exc_class() as exc:
        raise BaseExceptionGroup("the job's own tasks", [exc]) from None


@pytest.mark.parametrize("fail_fast", [False, True])
async def test_a_job_cancelled_in_an_exception_group_settles_as_cancelled(
    fail_fast: bool,
) -> None:
    async with Executor(fail_fast=fail_fast) as ex:
        handle = ex.spawn(_cancelled_in_a_group)
        other = ex.spawn(double, 4)
        await anyio.wait_all_tasks_blocked()
        assert handle.cancel()
        with pytest.raises(JobCancelled):
            await handle
    assert handle.cancelled()
    assert other.result() == 8  # not a failure: fail_fast did not fire


async def test_a_job_running_a_trio_nursery_is_cancelled_not_failed(
    anyio_backend_name: str,
) -> None:
    if anyio_backend_name != "trio":
        pytest.skip("a Trio nursery")
    import trio

    async def job() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleep_forever)
            await sleep_forever()

    async with Executor(fail_fast=True) as ex:
        handle = ex.spawn(job)
        await anyio.wait_all_tasks_blocked()
        handle.cancel()
    assert handle.cancelled()


async def _cancelled_with_a_failing_cleanup() -> None:
    # A job whose own task group has a task that fails while it is
    # cancelled: on Trio the job raises the error and its Cancelled in one
    # group, on asyncio anyio's task group leaves the cancellation out.
    async def child() -> None:
        try:
            await sleep_forever()
        finally:
            raise ValueError("cleanup failed")

    async with anyio.create_task_group() as tg:
        tg.start_soon(child)
        await sleep_forever()


async def test_a_cancelled_job_whose_cleanup_fails_fails_alone() -> None:
    # The job failed with the cleanup's error; the other job, the worker and
    # the block go on, and the error, retrieved, is not raised again.
    async with Executor() as ex:
        handle = ex.spawn(_cancelled_with_a_failing_cleanup)
        other = ex.spawn(double, 4)
        await anyio.wait_all_tasks_blocked()
        assert handle.cancel()
        with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="cleanup failed")):
            await handle
        assert await other == 8
        assert await ex.spawn(double, 5) == 10
    assert not handle.cancelled()


async def test_a_job_whose_cleanup_fails_as_the_block_is_cancelled_raises_from_it() -> (
    None
):
    # Cancelled with the whole executor: the error is the job's failure,
    # never retrieved, so the block raises it, and the scope's cancellation
    # stops there.
    with anyio.CancelScope() as scope:
        with pytest.RaisesGroup(
            pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="cleanup failed"))
        ):
            async with Executor() as ex:
                handle = ex.spawn(_cancelled_with_a_failing_cleanup)
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
    assert isinstance(handle.exception(), ExceptionGroup)


class Halt(BaseException):
    pass


async def halt() -> None:
    await anyio.lowlevel.checkpoint()
    raise Halt("from the job")


async def test_a_jobs_base_exception_that_the_body_awaited_is_raised_once() -> None:
    with pytest.raises(BaseExceptionGroup) as info:
        async with Executor() as ex:
            await ex.spawn(halt)
    assert len(info.value.exceptions) == 1
    assert isinstance(info.value.exceptions[0], Halt)


async def test_submit_of_a_non_callable_raises_type_error_before_it_waits() -> None:
    gate = anyio.Event()
    async with Executor(1, max_queued=1) as ex:
        running = ex.spawn(gate.wait)
        queued = ex.spawn(double, 2)
        await anyio.wait_all_tasks_blocked()
        assert ex.statistics().jobs_queued == 1  # the queue is full
        with anyio.fail_after(5), pytest.raises(TypeError, match="fn must be"):
            await ex.submit("not a function")  # type: ignore[arg-type]
        assert ex.statistics().jobs_queued == 1
        gate.set()
    assert running.done()
    assert queued.result() == 4


async def test_an_error_raised_inside_the_args_generator_propagates_unchanged() -> None:
    def rows() -> Any:
        yield (1,)
        raise TypeError("the generator's own bug")

    async with Executor() as ex:
        with pytest.raises(TypeError, match=r"^the generator's own bug$") as info:
            ex.spawn_many(double, rows())
        assert ex.statistics().jobs_pending == 0
    assert info.traceback[-1].name == "rows"


async def test_spawn_many_of_a_value_that_is_not_iterable_names_args_iterable() -> None:
    async with Executor() as ex:
        with pytest.raises(TypeError, match=r"args_iterable .* not int"):
            ex.spawn_many(double, 5)  # type: ignore[arg-type]


async def test_jobs_run_in_their_workers_context_as_docs_say() -> None:
    # docs/executor.md, "Context variables": a worker's context is a copy of
    # its starter's, taken when it started; a job's set() stays for the
    # later jobs of that worker; the body's context is not touched.
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    async def job(tag: str) -> str:
        seen = var.get()
        var.set(tag)
        return seen

    token = var.set("before")
    try:
        async with Executor(1) as ex:
            first = await ex.spawn(job, "first")
            var.set("after")
            second = await ex.spawn(job, "second")
        assert (first, second, var.get()) == ("before", "first", "after")
    finally:
        var.reset(token)


async def test_spawn_and_spawn_many_while_cancelling_return_cancelled_handles() -> None:
    ran: list[int] = []

    async def record(i: int) -> None:
        ran.append(i)

    checked = False
    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            # Shielded: the failure cancels the body too, at its next
            # checkpoint, and the spawns must come after the failure.
            with anyio.CancelScope(shield=True):
                ex.spawn(fail, "x")
                await anyio.wait_all_tasks_blocked()
                late = ex.spawn(record, 1)
                assert late.cancelled()
                many = ex.spawn_many(record, [(2,), (3,)])
                assert [handle.cancelled() for handle in many] == [True, True]
                assert ex.statistics().jobs_pending == 0
                checked = True
    assert checked
    assert ran == []


async def test_cancelling_the_enclosing_scope_cancels_every_job() -> None:
    with anyio.CancelScope() as scope:
        async with Executor(2) as ex:
            running = [ex.spawn(sleep_forever) for _ in range(2)]
            queued = ex.spawn(sleep_forever)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert all(h.cancelled() for h in [*running, queued])


async def test_cancel_while_block_waits_for_jobs_cancels_them() -> None:
    with anyio.move_on_after(0.01) as scope:
        async with Executor() as ex:
            handle = ex.spawn(sleep_forever)
    assert scope.cancelled_caught
    assert handle.cancelled()


async def test_body_exception_cancels_jobs_and_is_raised_in_a_group() -> None:
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            handle = ex.spawn(sleep_forever)
            await anyio.wait_all_tasks_blocked()
            raise KeyError("body")
    assert [type(e) for e in info.value.exceptions] == [KeyError]
    assert handle.cancelled()


async def test_body_exception_and_job_error_are_raised_together() -> None:
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            ex.spawn(fail, "job")
            await anyio.wait_all_tasks_blocked()
            raise KeyError("body")
    assert sorted(type(e).__name__ for e in info.value.exceptions) == [
        "KeyError",
        "ValueError",
    ]


async def test_spawn_on_closed_executor_raises_runtime_error() -> None:
    async with Executor() as ex:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        ex.spawn(double, 1)


def assert_refuses_jobs(ex: Executor) -> None:
    with pytest.raises(RuntimeError, match="closed"):
        ex.spawn(double, 1)
    with pytest.raises(RuntimeError, match="closed"):
        ex.spawn_many(double, [(1,)])
    with pytest.raises(RuntimeError, match="closed"):
        ex.map(double, [1])


# A block left by an exception never closes the normal way (no job settles
# with the body done); its exit closes it, as a task group refuses new tasks.


async def test_spawn_after_a_block_whose_body_raised_raises_runtime_error() -> None:
    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            ex.spawn(sleep_forever)
            await anyio.wait_all_tasks_blocked()
            raise KeyError("body")
    assert_refuses_jobs(ex)


async def test_spawn_after_a_cancelled_block_raises_runtime_error() -> None:
    with anyio.CancelScope() as scope:
        async with Executor() as ex:
            ex.spawn(sleep_forever)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert_refuses_jobs(ex)


async def test_spawn_before_entering_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="entered"):
        Executor().spawn(double, 1)


async def test_executor_cannot_be_entered_twice() -> None:
    ex = Executor()
    async with ex:
        pass
    with pytest.raises(RuntimeError, match="once"):
        await ex.__aenter__()


async def test_a_block_that_runs_no_job_makes_no_wait_structure() -> None:
    # The idle workers' queue, the exit's slot and (without max_queued) the
    # submitters' queue are made only where a task may wait on them.
    async with Executor() as ex:
        assert ex.statistics().idle_workers == 0
    for structure in (ex._idle, ex._exit, ex._submitters):
        assert structure is NOT_OPENED
    bounded = Executor(max_queued=1)
    assert type(bounded._submitters) is WaitQueue


async def test_the_first_worker_and_a_waiting_exit_make_their_own_structures() -> None:
    release = anyio.Event()

    async def wait_for_release() -> None:
        await release.wait()

    first, second = Executor(), Executor()
    async with anyio.create_task_group() as tg:

        async def run(ex: Executor) -> None:
            async with ex:
                await ex.spawn(double, 1)  # its one worker then idles
                # The idle worker takes this job; the exit waits for it.
                ex.spawn(wait_for_release)

        tg.start_soon(run, first)
        tg.start_soon(run, second)
        await settle()
        for ex in (first, second):
            assert type(ex._idle) is WaitQueue
            assert type(ex._exit) is Slot
        assert first._idle is not second._idle
        assert first._exit is not second._exit
        for ex in (first, second):
            stats = ex.statistics()
            assert (stats.workers, stats.idle_workers, stats.jobs_pending) == (1, 0, 1)
        release.set()
    for ex in (first, second):
        stats = ex.statistics()
        assert (stats.workers, stats.idle_workers, stats.jobs_pending) == (0, 0, 0)


# -- bounded workers and backpressure -----------------------------------------


async def test_max_workers_bounds_jobs_running_at_once() -> None:
    running = 0
    peak = 0

    async def job() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        running -= 1

    async with Executor(3) as ex:
        for _ in range(30):
            ex.spawn(job)
    assert peak == 3


async def test_submit_waits_while_queue_is_full() -> None:
    release = anyio.Event()
    submitted: list[int] = []

    async def job() -> None:
        await release.wait()

    async with Executor(1, max_queued=2) as ex:
        ex.spawn(job)  # runs
        await anyio.wait_all_tasks_blocked()

        async def producer() -> None:
            for i in range(5):
                await ex.submit(job)
                submitted.append(i)

        async with anyio.create_task_group() as tg:
            tg.start_soon(producer)
            await anyio.wait_all_tasks_blocked()
            assert submitted == [0, 1]
            assert ex.statistics().jobs_queued == 2
            release.set()
    assert submitted == [0, 1, 2, 3, 4]


async def test_submit_without_limit_never_blocks() -> None:
    async with Executor(1) as ex:
        handles = [await ex.submit(double, i) for i in range(100)]
        assert [await h for h in handles] == [2 * i for i in range(100)]


async def looks_before_it_parks(
    call: Callable[[], Awaitable[None]],
    parked: Callable[[], bool],
    release: Callable[[], None],
) -> int:
    """Run ``call()`` with budget left (a due checkpoint comes first, even
    for a call that must wait: _core/_budget.py), beside a watcher told
    when it starts, and return how often the watcher looked before
    ``parked()`` held (0: it parked at once; a yield first would let others
    queue in between).  The watcher then calls ``release()``."""
    started = False
    early_looks = 0

    async def watcher() -> None:
        nonlocal early_looks
        while not started:
            await anyio.lowlevel.checkpoint()
        while not parked():
            early_looks += 1
            await anyio.lowlevel.checkpoint()
        release()

    async def caller() -> None:
        nonlocal started
        started = True
        BUDGET.left = BUDGET_SIZE  # no checkpoint due
        await call()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher)
            tg.start_soon(caller)
    return early_looks


async def test_a_submit_that_must_wait_parks_without_yielding_first() -> None:
    # Parking is the checkpoint, where the budget's is not due.
    release = anyio.Event()

    async def job() -> None:
        await release.wait()

    async with Executor(1, max_queued=1) as ex:
        ex.spawn(job)  # runs
        ex.spawn(job)  # fills the queue
        await anyio.wait_all_tasks_blocked()

        async def submit() -> None:
            handle = await ex.submit(double, 2)
            assert await handle == 4

        early_looks = await looks_before_it_parks(
            submit, lambda: bool(ex._submitters.parked), release.set
        )
    assert early_looks == 0


async def test_an_await_on_a_running_job_parks_without_yielding_first() -> None:
    # As a submit that must wait, so that joiners queue in the order they
    # call.
    release = anyio.Event()

    async def job() -> int:
        await release.wait()
        return 5

    async with Executor(1) as ex:
        handle = ex.spawn(job)
        await anyio.wait_all_tasks_blocked()

        async def join() -> None:
            assert await handle == 5

        early_looks = await looks_before_it_parks(
            join, lambda: bool(handle._waiters), release.set
        )
    assert early_looks == 0


@pytest.mark.parametrize("max_queued", [None, 1000])
async def test_a_cancelled_loop_of_submits_stops_within_the_budget(
    max_queued: int | None,
) -> None:
    async with Executor(1, max_queued=max_queued) as ex:
        calls_after_cancel = 0
        handles: list[JoinHandle[int]] = []
        with anyio.CancelScope() as scope:
            scope.cancel()
            for _ in range(4 * BUDGET_SIZE):
                calls_after_cancel += 1  # counts the call that raises, too
                handles.append(await ex.submit(double, 1))
        assert scope.cancelled_caught
        assert calls_after_cancel <= BUDGET_SIZE
        # The call that raised spawned nothing; the others' jobs run.
        assert len(handles) == calls_after_cancel - 1
        assert [await h for h in handles] == [2] * len(handles)


async def test_from_a_full_budget_the_last_non_blocking_submit_is_the_checkpoint() -> (
    None
):
    # Pins submit()'s budget test exactly: from a full budget, the
    # BUDGET_SIZE-th non-blocking submit() reaches the checkpoint (and
    # raises the pending cancellation), not the one after it.  (The
    # cancelled loop of submits above cannot tell the two apart unless the
    # budget happens to be full as it starts.)
    async with Executor(1) as ex:
        calls = 0
        with anyio.CancelScope() as scope:
            scope.cancel()
            BUDGET.left = BUDGET_SIZE  # as a checkpoint leaves it
            for _ in range(2 * BUDGET_SIZE):
                calls += 1  # counts the call that raises, too
                await ex.submit(double, 1)
        assert scope.cancelled_caught
        assert calls == BUDGET_SIZE


async def test_cancelled_submit_spawns_nothing() -> None:
    release = anyio.Event()

    async def job() -> None:
        await release.wait()

    async with Executor(1, max_queued=1) as ex:
        ex.spawn(job)
        ex.spawn(job)
        await anyio.wait_all_tasks_blocked()
        with anyio.move_on_after(0) as scope:
            await ex.submit(job)
        assert scope.cancelled_caught
        assert ex.statistics().jobs_pending == 2
        release.set()


async def test_a_job_cancelled_while_queued_frees_its_room_for_submit() -> None:
    # The only worker runs a job that waits for a submit; a queued job is
    # cancelled through its handle.  The queue holds no live job, so the
    # submit must go through at once (it used to count the dead entry and
    # wait for ever).
    submitted = anyio.Event()
    async with Executor(1, max_queued=1) as ex:

        async def waits_for_the_submit() -> None:
            await submitted.wait()

        ex.spawn(waits_for_the_submit)
        queued = ex.spawn(double, 1)
        await anyio.wait_all_tasks_blocked()
        assert queued.cancel()
        assert ex.statistics().jobs_queued == 0
        with anyio.fail_after(5):
            handle = await ex.submit(double, 2)
        submitted.set()
        assert await handle == 4
    assert queued.cancelled()


async def test_cancelling_a_queued_job_admits_a_waiting_submitter() -> None:
    release = anyio.Event()
    admitted: list[int] = []

    async def job() -> None:
        await release.wait()

    async with Executor(1, max_queued=1) as ex:
        ex.spawn(job)  # runs
        queued = ex.spawn(job)
        await anyio.wait_all_tasks_blocked()

        async def submitter() -> None:
            await ex.submit(double, 3)
            admitted.append(3)

        async with anyio.create_task_group() as tg:
            tg.start_soon(submitter)
            await anyio.wait_all_tasks_blocked()
            assert admitted == []
            queued.cancel()
            await anyio.wait_all_tasks_blocked()
            assert admitted == [3]
            assert ex.statistics().jobs_queued == 1
            release.set()


# -- arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"max_workers": 0}, ValueError, "max_workers"),
        ({"max_workers": 1.5}, TypeError, "max_workers"),
        ({"max_queued": 0}, ValueError, "max_queued"),
        ({"fail_fast": 1}, TypeError, "fail_fast"),
        ({"max_per_second": 0}, ValueError, "max_per_second"),
        ({"max_per_second": math.inf}, ValueError, "max_per_second"),
        ({"max_per_second": "1"}, TypeError, "max_per_second"),
        ({"max_per_second": Fraction(1, 2)}, TypeError, "max_per_second"),
        # past the largest float (it raised OverflowError, naming nothing)
        ({"max_per_second": 10**400}, ValueError, "max_per_second"),
        # 1 / max_per_second is inf: the second job would wait for good
        ({"max_per_second": 1e-320}, ValueError, "max_per_second"),
        ({"idle_timeout": Decimal("0.5")}, TypeError, "idle_timeout"),
    ],
)
async def test_bad_constructor_argument_is_named(
    kwargs: dict[str, Any], exc: type[Exception], name: str
) -> None:
    with pytest.raises(exc, match=name):
        Executor(**kwargs)


async def test_an_int_subclass_max_workers_is_kept_as_a_plain_int() -> None:
    async def noop_job(value: int) -> int:
        return value

    class Size(enum.IntEnum):
        TWO = 2

    ex = Executor(max_workers=Size.TWO, max_queued=Size.TWO)
    assert type(ex.max_workers) is int
    assert type(ex.statistics().max_workers) is int
    assert "max_workers=2>" in repr(ex)
    async with ex:
        assert await ex.spawn(noop_job, 7) == 7


def _plain(x: int) -> int:
    return x + 1


async def _two(a: int, b: int) -> int:
    return a + b


async def test_a_plain_function_spawned_fails_its_job_with_a_type_error_naming_it() -> (
    None
):
    async with Executor() as ex:
        handle: JoinHandle[Any] = ex.spawn(_plain, 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError) as info:
            await handle
    message = str(info.value)
    assert message.startswith(f"job {__name__}._plain returned no awaitable: ")
    # CPython's own words after it: 3.10 to 3.13, and newer releases.
    assert any(text in message for text in _NOT_AWAITABLE)
    assert "jobs are async functions" in message
    assert isinstance(info.value.__cause__, TypeError)  # CPython's, kept


async def test_a_plain_callable_without_a_qualname_is_named_by_its_repr() -> None:
    # A functools.partial has no __qualname__: the message names it by repr().
    job = functools.partial(_plain, 1)
    async with Executor() as ex:
        handle: JoinHandle[Any] = ex.spawn(job)  # type: ignore[arg-type]
        with pytest.raises(TypeError) as info:
            await handle
    assert str(info.value).startswith(f"job {job!r} returned no awaitable: ")


async def test_a_job_given_the_wrong_arguments_fails_with_pythons_type_error() -> None:
    # CPython's message names the function already: kept as it is.
    async with Executor() as ex:
        handle = ex.spawn(_two, 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError) as info:
            await handle
    assert str(info.value) == "_two() missing 1 required positional argument: 'b'"


async def test_a_type_error_a_started_job_gets_from_a_future_is_kept_as_it_is(
    anyio_backend_name: str,
) -> None:
    # Set on a future the job awaits, never raised in Python code: no frame
    # of the job's own, like the await of a plain function's result, but
    # the job did start, and the error is its own.
    if anyio_backend_name != "asyncio":
        pytest.skip("an asyncio future")
    import asyncio

    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    error = TypeError("bad payload")
    async with Executor() as ex:
        handle = ex.spawn(lambda: future)
        await settle()  # the job awaits the future
        future.set_exception(error)
        with pytest.raises(TypeError) as info:
            await handle
    assert info.value is error


async def test_a_type_error_raised_inside_a_job_is_kept_as_it_is() -> None:
    error = TypeError("the job's own")

    async def job() -> None:
        raise error

    async with Executor() as ex:
        handle = ex.spawn(job)
        with pytest.raises(TypeError) as info:
            await handle
    assert info.value is error


async def test_spawn_of_non_callable_raises_type_error() -> None:
    async with Executor() as ex:
        with pytest.raises(TypeError, match="fn"):
            ex.spawn(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="fn"):
            ex.spawn_many(42, [(1,)])  # type: ignore[arg-type]
        assert ex.statistics().jobs_pending == 0


# -- asyncio's own cancellation sources -------------------------------------------


async def test_asyncio_grant_then_cancel_raises_cancellation_not_outcome(
    anyio_backend: Any,
) -> None:
    if anyio_backend[0] != "asyncio":
        pytest.skip("the grant-then-cancel race exists on asyncio only")
    import asyncio

    release = anyio.Event()

    async def blocker() -> None:
        await release.wait()

    async with Executor(1) as ex:
        ex.spawn(blocker)
        queued = ex.spawn(double, 1)
        awaiter = asyncio.ensure_future(_await(queued))
        await anyio.wait_all_tasks_blocked()
        # Settle the job (granting the parked awaiter) and cancel the
        # awaiter in the same synchronous step.
        queued.cancel()
        awaiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await awaiter
        with pytest.raises(JobCancelled):
            await queued
        release.set()


async def test_asyncio_timeout_on_await_handle_leaves_job(anyio_backend: Any) -> None:
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio.timeout is asyncio's")
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    import asyncio

    release = anyio.Event()

    async def job() -> int:
        await release.wait()
        return 9

    async with Executor() as ex:
        handle = ex.spawn(job)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):  # type: ignore[attr-defined,unused-ignore]
                await handle
        assert not handle.done()
        release.set()
        assert await handle == 9


# -- regressions found by mutation testing --------------------------------------


async def noop() -> None:
    pass


async def test_spawn_many_to_a_just_cancelled_idle_worker_settles_every_job() -> None:
    # Pins: a grant the cancelled idle worker refuses (native) or gives back
    # (generic) leaves the job queued, so it is settled, never lost HANDED.
    handles: list[JoinHandle[None]] = []
    with anyio.fail_after(10):  # hang guard only
        with anyio.CancelScope() as outer:
            async with Executor() as ex:
                await ex.spawn(noop)  # one worker, idle afterwards
                await settle()
                outer.cancel()  # the idle worker's wait is cancelled now
                handles = ex.spawn_many(noop, [(), ()])
    assert len(handles) == 2
    assert all(h.done() for h in handles)


async def test_spawn_many_never_starts_more_than_max_workers() -> None:
    # Pins: spawn_many queues instead of starting a worker beyond max_workers.
    running = peak = 0
    gate = anyio.Event()

    async def job() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1

    async with Executor(max_workers=1) as ex:
        ex.spawn(job)
        await settle()  # the only worker runs the first job
        ex.spawn_many(job, [(), ()])
        await settle()
        workers = ex.statistics().workers
        gate.set()
    assert peak == 1
    assert workers == 1


async def test_jobs_queued_is_right_after_worker_skips_cancelled_entries() -> None:
    # Pins: skipping a job cancelled while queued counts one dead entry out.
    gate, hold = anyio.Event(), anyio.Event()
    async with Executor(max_workers=1, max_queued=2) as ex:
        ex.spawn(gate.wait)  # the only worker is busy
        await settle()
        a, b = ex.spawn(noop), ex.spawn(noop)
        a.cancel()
        b.cancel()  # dead entries at the head of the queue
        ex.spawn(hold.wait)  # the next job that runs
        ex.spawn(noop)  # stays queued
        gate.set()
        await settle()  # the worker skipped a and b, runs hold.wait
        assert ex.statistics().jobs_queued == 1
        hold.set()


async def test_jobs_cancelled_in_the_queue_do_not_pile_up_and_the_rest_run_once() -> (
    None
):
    # While the workers are busy, jobs cancelled in the queue are dropped
    # from it once they are most of it (and over 32); the others keep their
    # order and run once each.
    gate = anyio.Event()
    started: list[int] = []

    async def job(i: int) -> int:
        started.append(i)
        return i

    async with Executor(max_workers=1) as ex:
        ex.spawn(gate.wait)  # the only worker is busy
        await settle()
        handles = [ex.spawn(job, i) for i in range(100)]
        for i, handle in enumerate(handles):
            if i % 5:
                assert handle.cancel()
        assert ex.statistics().jobs_queued == 20
        assert ex.statistics().jobs_pending == 21
        assert len(ex._queue) - 20 <= 32  # at most 32 cancelled entries kept
        gate.set()
        assert [await handle for handle in handles[::5]] == list(range(0, 100, 5))
    assert started == list(range(0, 100, 5))
    assert all(handle.cancelled() for i, handle in enumerate(handles) if i % 5)


async def test_statistics_count_no_queued_job_after_a_failed_block() -> None:
    # A job cancelled in the queue, then the block failed (fail_fast): the
    # exit cancels the other queued jobs, and nothing counts as queued.
    gate = anyio.Event()

    async def fail_when_let() -> None:
        await gate.wait()
        raise ValueError("job")

    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor(max_workers=1, fail_fast=True) as ex:
            ex.spawn(fail_when_let)  # the only worker is busy
            await settle()
            queued = [ex.spawn(noop) for _ in range(3)]
            assert queued[0].cancel()
            gate.set()
            await anyio.sleep_forever()  # cancelled by the failure
    assert all(handle.cancelled() for handle in queued)
    assert ex.statistics() == ExecutorStatistics(
        workers=0, idle_workers=0, jobs_queued=0, jobs_pending=0, max_workers=1
    )


async def test_statistics_count_no_queued_job_after_a_block_whose_last_job_ran() -> (
    None
):
    # The block closes as its last running job settles, before any worker
    # skips the job cancelled in the queue: nothing counts as queued then.
    gate = anyio.Event()
    async with Executor(max_workers=1) as ex:
        ex.spawn(gate.wait)  # the only worker is busy
        await settle()
        assert ex.spawn(noop).cancel()
        assert ex.statistics().jobs_queued == 0
        gate.set()
    assert ex.statistics() == ExecutorStatistics(
        workers=0, idle_workers=0, jobs_queued=0, jobs_pending=0, max_workers=1
    )


class Payload:
    """An argument or a function a job's handle must let go of."""

    async def __call__(self, arg: object) -> str:
        return "done"


@pytest.mark.parametrize("how", ["succeeded", "cancelled_in_queue"])
async def test_a_settled_jobs_handle_keeps_neither_its_function_nor_its_arguments(
    how: str,
) -> None:
    gate = anyio.Event()
    fn, arg = Payload(), Payload()
    fn_ref, arg_ref = weakref.ref(fn), weakref.ref(arg)
    async with Executor(max_workers=1) as ex:
        ex.spawn(gate.wait)  # the only worker is busy
        await settle()
        handle = ex.spawn(fn, arg)
        del fn, arg
        if how == "cancelled_in_queue":
            assert handle.cancel()
        gate.set()
    assert handle.done()  # the handle is still alive
    gc.collect()
    assert fn_ref() is None
    assert arg_ref() is None


async def test_an_idle_worker_keeps_neither_its_last_job_nor_its_result() -> None:
    # A long-lived block's idle workers must not keep the last job's handle
    # and result alive until they run again: neither the worker's frame nor
    # its recycled idle waiter, which the handed-over job went through.
    async def make() -> Payload:
        return Payload()

    async with Executor() as ex:
        await ex.spawn(make)
        await settle()
        assert ex.statistics().idle_workers == 1
        handle = ex.spawn(make)  # handed to the idle worker
        result = await handle
        handle_ref, result_ref = weakref.ref(handle), weakref.ref(result)
        del handle, result
        await settle()
        assert ex.statistics().idle_workers == 1
        gc.collect()
        assert handle_ref() is None
        assert result_ref() is None


async def test_admitted_submitter_never_takes_the_queue_over_max_queued() -> None:
    # Pins: a waiting submit() is admitted only while the queue is under
    # max_queued, not when it is exactly at it.
    gate1, gate2 = anyio.Event(), anyio.Event()
    admitted: list[bool] = []

    async def submitter() -> None:
        await ex.submit(noop)
        admitted.append(True)

    async with Executor(max_workers=1, max_queued=1) as ex:
        ex.spawn(gate1.wait)  # the only worker is busy
        await settle()
        ex.spawn(gate2.wait)  # spawn ignores max_queued: 2 queued
        ex.spawn(noop)
        async with anyio.create_task_group() as tg:
            tg.start_soon(submitter)
            await settle()  # the submitter waits: the queue is full
            gate1.set()  # the worker takes gate2.wait: 1 queued
            await settle()
            assert admitted == []
            assert ex.statistics().jobs_queued == 1
            gate2.set()
    assert admitted == [True]


async def test_cancelling_the_exit_cancels_queued_jobs_before_they_start() -> None:
    # Pins: a cancellation of the block while its exit waits for the jobs
    # cancels the queued ones; they never start.
    started: list[str] = []

    async def shielded() -> None:
        with anyio.CancelScope(shield=True):
            outer.cancel()  # the exit is waiting for this job now
            await settle()

    async def second() -> None:
        started.append("second")

    with anyio.fail_after(10):  # hang guard only
        with anyio.CancelScope() as outer:
            async with Executor(max_workers=1) as ex:
                ex.spawn(shielded)
                h2 = ex.spawn(second)  # queued behind it on the one worker
    assert h2.cancelled()
    assert started == []


@pytest.mark.parametrize("max_workers", [1, 2, None])
@pytest.mark.parametrize("workers", ["idle", "busy"])
async def test_a_job_spawned_in_a_shielded_cleanup_of_a_cancelled_block_settles(
    max_workers: int | None, workers: str
) -> None:
    # The scope around the executor is cancelled while its workers idle or
    # run jobs, and the body, shielded, spawns a job and awaits it.  The
    # workers still counted against max_workers are about to leave on that
    # cancellation: the first to leave cancels the executor, which settles
    # the job as cancelled, unless a worker took it first (then it runs as
    # a task started in a cancelled scope).  It never waits for a worker
    # that no spawn would start.
    async def cleanup() -> str:
        return "cleaned up"

    outcome: list[str] = []
    with anyio.fail_after(10):  # hang guard only
        with anyio.CancelScope() as outer:
            async with Executor(max_workers=max_workers) as ex:
                if workers == "idle":
                    await ex.spawn(noop)
                else:
                    for _ in range(max_workers or 2):
                        ex.spawn(sleep_forever)
                await settle()
                with anyio.CancelScope(shield=True):
                    outer.cancel()
                    handle = ex.spawn(cleanup)
                    with anyio.move_on_after(5):  # the shield keeps fail_after out
                        try:
                            outcome.append(await handle)
                        except JobCancelled:
                            outcome.append("cancelled")
    assert handle.done()
    assert outcome in (["cancelled"], ["cleaned up"])


async def test_enclosing_cancellation_ends_the_worker_not_just_the_job() -> None:
    # Pins: a job cancelled by an enclosing scope's cancellation ends its
    # worker; the worker does not go on to start the next queued job.
    started: list[str] = []

    async def second() -> None:
        started.append("second")

    with anyio.fail_after(10):  # hang guard only
        with anyio.CancelScope() as outer:
            async with Executor(max_workers=1) as ex:
                ex.spawn(sleep_forever)
                h2 = ex.spawn(second)  # queued behind it
                await settle()
                with anyio.CancelScope(shield=True):
                    outer.cancel()
                    await settle()  # the worker sees the cancellation
    assert started == []
    assert h2.cancelled()


async def test_worker_cancelled_in_rate_limiter_settles_its_job() -> None:
    # Pins: a job whose worker is cancelled while waiting for max_per_second
    # is settled as cancelled, not left HANDED.
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(max_workers=1, max_per_second=0.001) as ex:
            ex.spawn(noop)  # starts at once
            h2 = ex.spawn(noop)  # must wait for the rate limit
            await settle()  # its worker sleeps in the limiter
            raise ValueError("body fails")
    assert [type(e) for e in info.value.exceptions] == [ValueError]
    assert h2.cancelled()


async def test_fail_fast_keeps_a_retrieved_first_failure_in_the_group() -> None:
    # Pins: the fail_fast trigger is raised at the exit even when the body
    # already retrieved it by awaiting the job.
    class First(Exception):
        pass

    async def first() -> None:
        await anyio.lowlevel.checkpoint()
        raise First

    with pytest.raises(BaseExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            handle = ex.spawn(first)
            with pytest.raises(First):
                await handle
            await sleep_forever()  # cancelled by fail_fast
    assert isinstance(info.value.exceptions[0], First)


async def test_fail_fast_puts_a_retrieved_trigger_before_the_errors_it_caused() -> None:
    # Jobs the trigger cancelled fail on their way out; the trigger, which
    # the body retrieved, still comes first in the group.
    release = anyio.Event()

    async def first() -> None:
        await release.wait()
        raise ValueError("trigger")

    async def cleanup_fails(name: str) -> None:
        try:
            await sleep_forever()
        finally:
            raise RuntimeError(name)

    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            ex.spawn(cleanup_fails, "cleanup 1")
            ex.spawn(cleanup_fails, "cleanup 2")
            handle = ex.spawn(first)
            await settle()
            release.set()
            with pytest.raises(ValueError, match="trigger"):
                await handle
    head, *rest = [str(e) for e in info.value.exceptions]
    assert head == "trigger"
    assert sorted(rest) == ["cleanup 1", "cleanup 2"]


class Boom(BaseException):
    pass


async def raise_boom() -> None:
    raise Boom


async def test_job_raising_a_base_exception_fails_it_and_the_block() -> None:
    # Pins: a plain BaseException from a job (not a cancellation) fails the
    # job and is raised from the block.
    with pytest.raises(BaseExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            handle = ex.spawn(raise_boom)
            await settle()
    assert [type(e) for e in info.value.exceptions] == [Boom]
    assert handle.done()
    assert not handle.cancelled()


async def test_job_raising_a_base_exception_group_is_a_failure_not_a_cancellation() -> (
    None
):
    # Pins: a BaseExceptionGroup holding a non-cancellation is the job's
    # failure, raised from the block, not a stray cancellation.
    async def job() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(raise_boom)

    with pytest.raises(BaseExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            handle = ex.spawn(job)
            await settle()
    assert info.value.subgroup(Boom) is not None
    assert not handle.cancelled()


async def test_job_base_exception_leaves_the_block_in_the_task_groups_own_group() -> (
    None
):
    # Pins: a job's BaseException (not a cancellation) propagates out of its
    # worker, so the block raises the group the executor's task group
    # raised, as a task group does for a task; it is not kept as an
    # unretrieved job error and re-wrapped in a new Executor group.
    with pytest.raises(BaseExceptionGroup) as theirs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(raise_boom)
    with pytest.raises(BaseExceptionGroup) as ours:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            ex.spawn(raise_boom)
            await settle()
    assert [type(e) for e in ours.value.exceptions] == [Boom]
    assert ours.value.message == theirs.value.message


async def test_queued_jobs_are_cancelled_in_spawn_order_when_the_block_fails(
    anyio_backend: Any,
) -> None:
    # Pins _cancel_queued's order: the jobs still queued when the executor
    # is cancelled are settled in spawn order, so the tasks awaiting them
    # wake in that order.  asyncio only: Trio runs the tasks woken in one
    # step in an order of its own choosing (forward or reversed at random).
    if anyio_backend[0] != "asyncio":
        pytest.skip("Trio does not keep the wake-up order of tasks woken at once")
    woken: list[int] = []

    async def join(i: int, handle: JoinHandle[None]) -> None:
        with pytest.raises(JobCancelled):
            await handle
        woken.append(i)

    async with anyio.create_task_group() as outside:
        with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="body fails")):
            async with Executor(max_workers=1) as ex:
                ex.spawn(sleep_forever)  # keeps the only worker busy
                for i in range(4):
                    outside.start_soon(join, i, ex.spawn(noop))  # queued
                await anyio.wait_all_tasks_blocked()
                assert ex.statistics().jobs_queued == 4
                raise ValueError("body fails")
    assert woken == [0, 1, 2, 3]


async def test_spawn_many_with_items_that_are_not_tuples_raises_type_error() -> None:
    # Pins: the documented TypeError for bad args_iterable items.
    async def job(*args: object) -> None:
        pass

    async with Executor() as ex:
        with pytest.raises(TypeError, match="args_iterable"):
            ex.spawn_many(job, [1, 2])  # type: ignore[list-item]


async def test_spawn_many_takes_each_items_arguments_when_called() -> None:
    # An item that is a list is copied: the caller may reuse or change it
    # before the job runs, as spawn(fn, *args) would have taken its values.
    seen: list[tuple[object, ...]] = []

    async def job(*args: object) -> None:
        seen.append(args)

    async with Executor() as ex:
        items = [[1, 2], [3]]
        handles = ex.spawn_many(job, items)
        items[0].append(99)
        items[1].clear()
        for handle in handles:
            await handle
    assert seen == [(1, 2), (3,)]


async def test_workers_statistic_is_zero_after_the_block() -> None:
    # Pins: every finished worker is counted out of statistics().workers.
    gate = anyio.Event()
    async with Executor() as ex:
        for _ in range(3):
            ex.spawn(gate.wait)
        await settle()
        assert ex.statistics().workers == 3
        gate.set()
    assert ex.statistics().workers == 0


async def test_handles_awaited_before_settling_do_not_share_a_join_queue() -> None:
    # Pins: a spare join queue goes to one handle only; settling one job
    # wakes only its own joiners.
    gate1, gate2 = anyio.Event(), anyio.Event()
    outcomes: dict[str, object] = {}

    async def join(name: str, handle: JoinHandle[Any]) -> None:
        try:
            outcomes[name] = await handle
        except JobCancelled:
            outcomes[name] = "JobCancelled"

    async with Executor() as ex:
        h0 = ex.spawn(anyio.lowlevel.checkpoint)
        await h0  # its emptied join queue becomes the spare
        h1 = ex.spawn(gate1.wait)
        h2 = ex.spawn(gate2.wait)
        async with anyio.create_task_group() as tg:
            tg.start_soon(join, "h1", h1)
            tg.start_soon(join, "h2", h2)
            await settle()
            gate1.set()  # h1 settles
            await settle()
            assert "h2" not in outcomes
            gate2.set()
    assert outcomes == {"h1": None, "h2": None}


async def test_running_job_that_catches_its_cancel_leaves_the_worker_usable() -> None:
    # Pins: after handle.cancel() of a running job that catches it, the
    # worker runs its next job in a fresh, uncancelled scope.
    async def stubborn() -> str:
        try:
            await sleep_forever()
        except anyio.get_cancelled_exc_class():
            return "caught"
        return "slept"  # pragma: no cover

    async def innocent() -> str:
        await anyio.lowlevel.checkpoint()
        return "ran"

    async with Executor(max_workers=1) as ex:
        h1 = ex.spawn(stubborn)
        h2 = ex.spawn(innocent)  # queued for the same worker
        await settle()
        h1.cancel()
        assert await h1 == "caught"
        assert await h2 == "ran"


@pytest.mark.parametrize("how", ["task.cancel()", "its own CancelledError"])
async def test_a_stray_cancellation_of_a_job_leaves_the_next_job_a_fresh_count(
    anyio_backend: Any, how: str
) -> None:
    # A plain task.cancel() of a worker running a job cancels that job only
    # (docs/executor.md): the next job on that worker starts with the
    # cancelling() count a fresh task has, so asyncio.timeout() inside it
    # still tells its own expiry (3.13: after an asyncio.TaskGroup whose
    # child failed, it raised CancelledError, and the job counted as
    # cancelled).
    if anyio_backend[0] != "asyncio" or sys.version_info < (3, 11):
        pytest.skip("asyncio's Task.cancelling(), 3.11+")
    import asyncio

    async def victim() -> None:
        task = asyncio.current_task()
        assert task is not None
        if how == "task.cancel()":
            task.cancel()  # as a watchdog holding the task would
            await asyncio.sleep(1)
        else:
            raise asyncio.CancelledError

    async def child_fails() -> None:
        raise ValueError

    async def later() -> tuple[int, str]:
        task = asyncio.current_task()
        assert task is not None
        count = task.cancelling()
        with pytest.raises(ExceptionGroup):
            async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined,unused-ignore]
                tg.create_task(child_fails())
        try:
            async with asyncio.timeout(0.01):  # type: ignore[attr-defined,unused-ignore]
                await asyncio.sleep(1)
        except TimeoutError:
            return count, "timed out"
        return count, "slept"  # pragma: no cover

    async with Executor(max_workers=1) as ex:
        first = ex.spawn(victim)
        second = ex.spawn(later)  # the same worker, after the victim
        with pytest.raises(JobCancelled):
            await first
        assert await second == (0, "timed out")


@pytest.mark.parametrize("next_job", ["queued", "none"])
async def test_a_task_cancel_of_a_worker_whose_job_ends_with_a_taken_send_ends_there(
    anyio_backend: Any, next_job: str
) -> None:
    # A plain task.cancel() of a worker comes as its job's last call, a
    # send, is taken: the send returns and the job succeeds.  The request
    # was meant for that job and ends with it, as a stray one that the job
    # raised does (above): the next job on that worker runs, and with none
    # queued the worker waits idle on (it ended the task group before).
    if anyio_backend[0] != "asyncio" or sys.version_info < (3, 11):
        pytest.skip("asyncio's Task.cancelling(), 3.11+")
    import asyncio

    tx, rx = mpmc.channel[str](0)
    workers: list[Any] = []

    async def sends() -> str:
        workers.append(asyncio.current_task())
        await tx.send("x")
        return "sent"

    async def later() -> int:
        await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    outcomes: list[object] = []
    async with Executor(max_workers=1) as ex:
        first = ex.spawn(sends)
        second = ex.spawn(later) if next_job == "queued" else None
        await settle()
        assert rx.receive_nowait() == "x"
        workers[0].cancel()
        outcomes.append(await first)
        await settle()  # (where the block was cancelled before)
        if second is None:
            second = ex.spawn(later)  # the same worker, idle since
        outcomes.append(await second)
        outcomes.append(ex.statistics().workers)
    assert outcomes == ["sent", 0, 1]


async def test_fail_fast_trigger_stays_in_the_group_when_a_later_job_fails() -> None:
    # Pins: only the first failure is the fail_fast trigger; a job failing
    # while being cancelled does not replace a retrieved trigger.
    class First(Exception):
        pass

    class Second(Exception):
        pass

    async def first() -> None:
        await anyio.lowlevel.checkpoint()
        raise First

    async def second() -> None:
        try:
            await sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise Second from None  # fails while cancelled by fail_fast

    with pytest.raises(BaseExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            ex.spawn(second)
            await settle()
            handle = ex.spawn(first)
            with pytest.raises(First):
                await handle
            await sleep_forever()  # cancelled by fail_fast
    kinds = [type(e) for e in info.value.exceptions]
    assert First in kinds
    assert Second in kinds


async def _idle_worker_task(ex: Executor) -> Any:
    """Start one worker, let it go idle, and return its asyncio task."""
    import asyncio

    tasks: list[Any] = []

    async def whoami() -> None:
        tasks.append(asyncio.current_task())

    await ex.spawn(whoami)
    await settle()
    return tasks[0]


async def test_job_given_back_by_a_task_cancelled_worker_is_settled_at_exit(
    anyio_backend: Any,
) -> None:
    # Pins: a job granted to an idle worker that a plain task.cancel() ends
    # before it runs, given back while the executor is cancelling, is still
    # settled by the exit.
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio's task.cancel() before the task runs")
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            worker = await _idle_worker_task(ex)
            handle = ex.spawn(noop)  # granted to the idle worker
            worker.cancel()  # before it runs
            raise ValueError("body fails")
    assert info.value.subgroup(ValueError) is not None
    assert handle.done()
    assert handle.cancelled()


async def test_a_worker_ended_by_task_cancel_cancels_its_given_back_job_and_the_queue(
    anyio_backend: Any,
) -> None:
    # A worker's task ended by a cancellation ends the executor's task group
    # (AnyIO cancels a task group whose task ends so): the executor is being
    # cancelled from then on.  The job the worker gives back and the jobs
    # queued behind it are settled as cancelled; none starts.
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio's task.cancel() before the task runs")
    started: list[int] = []

    async def job(i: int) -> None:
        started.append(i)

    with anyio.fail_after(5):  # hang guard only
        async with Executor() as ex:
            worker = await _idle_worker_task(ex)
            handles = [ex.spawn(job, i) for i in (1, 2, 3)]
            # 1 granted to the idle worker, 2 and 3 queued
            worker.cancel()  # before it runs
    assert started == []
    assert all(handle.cancelled() for handle in handles)
    assert ex.statistics().jobs_pending == 0


@pytest.mark.filterwarnings("ignore:coroutine 'Executor._work' was never awaited")
@pytest.mark.parametrize("wait", ["join", "unordered map", "submit"])
async def test_a_wait_for_a_queued_job_after_its_worker_was_cancelled_unstarted_ends(
    anyio_backend: Any, wait: str
) -> None:
    # A worker task cancelled before its first step (a plain task.cancel()
    # of every task, say) ends without running any of the executor's code,
    # but AnyIO cancels the task group for it.  A call that would then wait
    # for a queued job, in a shielded cleanup, must not wait for a worker
    # that will not come: the executor is cancelled, and so is every
    # queued job.
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio's task.cancel() before the task runs")
    import asyncio

    me = asyncio.current_task()
    outcome: list[object] = []
    with anyio.fail_after(5):  # hang guard only
        async with Executor(max_queued=1 if wait == "submit" else None) as ex:
            before = asyncio.all_tasks()
            first = ex.spawn(noop)  # queued; a worker task is started for it
            (worker,) = asyncio.all_tasks() - before - {me}
            worker.cancel()  # before its first step
            with anyio.CancelScope(shield=True):
                await settle()  # the worker task ends; AnyIO cancels the group
                with anyio.move_on_after(2) as guard:  # the shield keeps fail_after out
                    if wait == "join":
                        with pytest.raises(JobCancelled):
                            await first
                        outcome.append("cancelled")
                    elif wait == "unordered map":
                        results = ex.map(double_it, [1], ordered=False)
                        with pytest.raises(JobCancelled):
                            await results.__anext__()
                        outcome.append("cancelled")
                    else:
                        handle = await ex.submit(noop)  # the queue is full
                        outcome.append(handle.cancelled())
                assert not guard.cancelled_caught, "the call waited for a worker"
    assert outcome in (["cancelled"], [True])
    assert first.cancelled()
    del worker
    gc.collect()  # the worker's coroutine, never started, warns here


@pytest.mark.filterwarnings("ignore:coroutine 'Executor._work' was never awaited")
async def test_a_block_cancelled_for_a_worker_cancelled_unstarted_exits_as_a_task_group(
    anyio_backend: Any,
) -> None:
    # AnyIO cancels the task group when a worker task is cancelled before
    # its first step; the body meets that cancellation, and the block
    # swallows it and exits normally, as AnyIO's task group block does.
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio's task.cancel() before the task runs")
    import asyncio

    me = asyncio.current_task()
    with anyio.fail_after(5):  # hang guard only
        async with Executor() as ex:
            before = asyncio.all_tasks()
            handle = ex.spawn(noop)
            (worker,) = asyncio.all_tasks() - before - {me}
            worker.cancel()  # before its first step
            await anyio.sleep(4)
            pytest.fail("the body was not cancelled")
    assert handle.cancelled()
    del worker
    gc.collect()  # the worker's coroutine, never started, warns here


async def double_it(x: int) -> int:
    return 2 * x


async def test_settled_job_is_not_requeued_by_a_task_cancelled_worker(
    anyio_backend: Any,
) -> None:
    # Pins: a granted job cancelled through its handle stays settled when
    # its worker then gives the grant back; it is counted out once only.
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio's task.cancel() before the task runs")
    async with Executor() as ex:
        worker = await _idle_worker_task(ex)
        handle = ex.spawn(noop)  # granted to the idle worker
        handle.cancel()  # settled at once
        assert handle.cancelled()
        worker.cancel()  # before the worker runs
    assert handle.cancelled()
    assert ex.statistics().jobs_pending == 0
