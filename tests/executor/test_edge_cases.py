"""Executor and rate-limiter behaviours the other tests left unpinned,
found by mutation testing."""

from __future__ import annotations

import math
import sys
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims.executor import Executor, JoinHandle
from anyio_prims.executor._ratelimit import RateLimiter

from .._tasks import settle

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import (  # type: ignore[import-not-found,unused-ignore]
        BaseExceptionGroup,
    )

pytestmark = pytest.mark.anyio


class BodyError(Exception):
    pass


def assert_body_error(exc: BaseException) -> None:
    if isinstance(exc, BaseExceptionGroup):
        match, rest = exc.split(BodyError)
        assert match is not None, exc
        assert rest is None, exc
    else:
        assert isinstance(exc, BodyError), exc


async def noop() -> None:
    pass


async def test_queued_jobs_are_cancelled_before_running_jobs_see_the_cancellation() -> (
    None
):
    # "after _cancelling is set ... queued jobs are settled as cancelled at
    # once": when the body raises, a running job's cleanup already finds the
    # queued job cancelled and counted out of the queue.
    seen: dict[str, object] = {}
    started = anyio.Event()

    with anyio.fail_after(5):
        try:
            async with Executor(1) as ex:

                async def first() -> None:
                    started.set()
                    try:
                        await anyio.sleep(math.inf)
                    finally:
                        seen["cancelled"] = queued.cancelled()
                        seen["jobs_queued"] = ex.statistics().jobs_queued

                ex.spawn(first)
                queued = ex.spawn(noop)
                await started.wait()
                raise BodyError
        except BaseException as exc:
            assert_body_error(exc)
    assert seen == {"cancelled": True, "jobs_queued": 0}
    assert queued.cancelled()


@pytest.mark.parametrize("cancelled_by", ["body", "fail_fast_at_exit"])
async def test_a_submitter_outside_the_block_gets_a_cancelled_handle_on_error(
    cancelled_by: str,
) -> None:
    # A task outside the executor's task group waits in submit() for room;
    # when the body raises, or when a job fails under fail_fast while the
    # exit waits for the jobs, every job is cancelled and the waiting submit
    # returns a handle that is already cancelled instead of waiting forever.
    # At the exit the queued job is the last one pending: settling it used
    # to close the executor first, and the submit got RuntimeError("the
    # Executor is closed").
    got: list[object] = []
    errors: list[BaseException] = []
    started = anyio.Event()
    fail = anyio.Event()

    async def blocker() -> None:
        started.set()
        if cancelled_by == "body":
            await anyio.sleep(math.inf)
        await fail.wait()
        raise BodyError

    async def fail_once_all_wait() -> None:
        await anyio.wait_all_tasks_blocked()  # the body waits at its exit
        fail.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as others:
            try:
                async with Executor(
                    1, max_queued=1, fail_fast=cancelled_by != "body"
                ) as ex:
                    ex.spawn(blocker)
                    await started.wait()
                    queued = ex.spawn(noop)  # the queue is full now

                    async def submitter() -> None:
                        got.append(await ex.submit(noop))

                    others.start_soon(submitter)
                    await settle()
                    assert ex.statistics().jobs_queued == 1
                    assert not got  # it waits for room
                    if cancelled_by == "body":
                        raise BodyError
                    others.start_soon(fail_once_all_wait)
            except BaseException as exc:
                errors.append(exc)
    assert len(errors) == 1
    assert_body_error(errors[0])
    assert queued.cancelled()
    assert len(got) == 1
    assert got[0].cancelled()  # type: ignore[attr-defined]


async def test_cancelling_the_last_queued_job_at_the_exit_admits_a_submitter(
    anyio_backend: Any,
) -> None:
    # The body is done and the exit waits for its one job, queued, when a
    # task outside the block cancels it before the worker that the spawn
    # started runs: the submit waiting for room gets that room, and its job
    # runs before the block exits.  Settling the last pending job used to
    # close the executor first and fail the submit with RuntimeError("the
    # Executor is closed").  asyncio only: the two tasks run before the
    # worker because asyncio runs tasks in the order they were woken, where
    # Trio runs the tasks of one step forward or reversed at random.
    if anyio_backend[0] != "asyncio":
        pytest.skip("Trio does not keep the order of tasks woken at once")
    ran: list[str] = []
    go = anyio.Event()
    box: dict[str, object] = {}

    async def job(name: str) -> str:
        ran.append(name)
        return name

    async def submitter() -> None:
        await go.wait()
        ex = box["ex"]
        assert isinstance(ex, Executor)
        handle = await ex.submit(job, "submitted")
        box["result"] = await handle

    async def canceller() -> None:
        await go.wait()
        queued = box["queued"]
        assert isinstance(queued, JoinHandle)
        queued.cancel()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as others:
            others.start_soon(submitter)
            others.start_soon(canceller)
            await settle()
            async with Executor(1, max_queued=1) as ex:
                box["ex"] = ex
                go.set()  # both run before the worker the spawn starts
                box["queued"] = ex.spawn(job, "queued")
            assert "submitted" in ran  # the block waited for the admitted job
    assert box["result"] == "submitted"


async def test_spawn_many_queues_only_the_jobs_no_idle_worker_took() -> None:
    gate = anyio.Event()

    async def wait_for_gate() -> None:
        await gate.wait()

    with anyio.fail_after(5):
        async with Executor() as ex:
            first = [ex.spawn(noop), ex.spawn(noop)]
            for handle in first:
                await handle
            await settle()
            assert ex.statistics().idle_workers == 2
            handles = ex.spawn_many(wait_for_gate, [()] * 5)
            stats = ex.statistics()
            assert stats.idle_workers == 0
            assert stats.jobs_queued == 3  # two went straight to the idle workers
            assert stats.jobs_pending == 5
            gate.set()
            for handle in handles:
                await handle
            await settle()
            assert ex.statistics().jobs_queued == 0


async def test_rate_limiter_sleeps_again_when_a_timer_fires_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # uvloop's millisecond clock can wake a sleep a little before its time;
    # simulated here by a sleep that always wakes after half the delay.  The
    # limiter must still not let the second start through before its slot.
    real_sleep = anyio.sleep

    async def early_sleep(delay: float) -> None:
        await real_sleep(delay / 2)

    monkeypatch.setattr(anyio, "sleep", early_sleep)
    limiter = RateLimiter(10.0)  # one start every 0.1 s
    with anyio.fail_after(5):
        await limiter.wait("first")  # the first start is due at once
        first = anyio.current_time()
        await limiter.wait("second")
        second = anyio.current_time()
    assert second - first >= 0.1 - 1e-3
