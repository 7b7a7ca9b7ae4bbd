"""A finalizer that settles a job, makes room or spawns while an executor
call parks (see tests/test_sync_reentry.py for the sync primitives).

Making the waiter allocates, so a garbage collection there may run a
``__del__`` that cancels a queued job or spawns one, before the waiter is
parked where that change can wake it.  The call must not wait for what has
already happened: it goes on as if that code had run just before it.  The
code runs inside the wait structure's ``enqueue``, before or after the
waiter is parked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import Event, Executor, JobCancelled, JoinHandle
from anyio_prims._core import BUDGET

from .._reentry import Arm, arm_inside_enqueue
from .._tasks import settle

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["before", "after"])
def inside_enqueue(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Arm]:
    armed = arm_inside_enqueue(monkeypatch, request.param)
    yield armed.append
    assert not armed, "the action never ran: the call did not park"


def cancelling(handle: JoinHandle[Any]) -> Callable[[], None]:
    def cancel() -> None:
        handle.cancel()

    return cancel


async def test_a_join_returns_when_its_job_is_cancelled_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    release = anyio.Event()
    async with Executor(max_workers=1) as executor:
        executor.spawn(release.wait)
        await settle()
        queued = executor.spawn(anyio.sleep, 0)
        inside_enqueue(cancelling(queued))
        with anyio.fail_after(5), pytest.raises(JobCancelled):
            await queued
        release.set()


async def test_a_submit_takes_the_room_made_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    release = anyio.Event()
    async with Executor(max_workers=1, max_queued=1) as executor:
        executor.spawn(release.wait)
        await settle()
        queued = executor.spawn(anyio.sleep, 0)
        inside_enqueue(cancelling(queued))
        with anyio.fail_after(5):
            handle = await executor.submit(anyio.sleep, 0)
        assert executor.statistics().jobs_queued == 1
        release.set()
        await handle


async def test_a_submit_leaves_the_room_made_while_it_parks_to_an_earlier_one(
    inside_enqueue: Arm,
) -> None:
    # One submitter waits already; the room made while a second one parks
    # is the first one's (it is admitted), and the second keeps waiting.
    release = anyio.Event()
    order: list[str] = []

    async def submit(name: str) -> None:
        handle = await executor.submit(anyio.sleep, 0)
        order.append(name)
        await handle

    async with Executor(max_workers=1, max_queued=1) as executor:
        executor.spawn(release.wait)
        await settle()
        queued = executor.spawn(anyio.sleep, 0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(submit, "first")
            await settle()
            inside_enqueue(cancelling(queued))
            tg.start_soon(submit, "second")
            await settle()
            assert order == ["first"]
            assert executor.statistics().jobs_queued == 1
            release.set()
        assert order == ["first", "second"]


async def test_a_submit_given_room_while_it_parks_looks_again_after_its_checkpoint(
    inside_enqueue: Arm,
) -> None:
    # The submit's budget checkpoint is due, so it parks (the queue is full)
    # without taking it.  A finalizer makes room and wakes another task,
    # which submits during the checkpoint the first submit owes after its
    # recheck: that task takes the room, and the first submit must wait
    # again, not overfill the queue.  (On Trio the other task runs first
    # in about half the runs; on asyncio always.)
    release = anyio.Event()
    go = Event()
    queued_counts: list[int] = []

    async def other_submitter() -> None:
        await go.wait()
        await executor.submit(anyio.sleep, 0)
        queued_counts.append(executor.statistics().jobs_queued)

    async with Executor(max_workers=1, max_queued=1) as executor:
        executor.spawn(release.wait)
        await settle()
        queued = executor.spawn(anyio.sleep, 0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_submitter)
            await settle()

            def make_room() -> None:
                queued.cancel()
                go.set()

            inside_enqueue(make_room)
            BUDGET.left = 1
            with anyio.fail_after(5):  # a submit that missed the room hangs
                async with anyio.create_task_group() as inner:
                    inner.start_soon(executor.submit, anyio.sleep, 0)
                    await settle()
                    queued_counts.append(executor.statistics().jobs_queued)
                    release.set()
    assert queued_counts
    assert max(queued_counts) == 1


async def test_an_exit_returns_when_the_last_job_is_cancelled_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    # The second job waits for its start slot (one job a day): handed to a
    # worker, not started, so that a cancel() settles it at once.
    with anyio.fail_after(5):
        async with Executor(max_per_second=1 / 86400) as executor:
            await executor.spawn(anyio.sleep, 0)
            waiting = executor.spawn(anyio.sleep, 0)
            await settle()
            assert not waiting.done()
            inside_enqueue(cancelling(waiting))
    assert waiting.cancelled()


async def test_an_idle_worker_runs_the_job_spawned_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    # The worker finishes the first job and parks idle; the job spawned
    # inside that park must run, not wait for the next spawn.
    async with Executor(max_workers=1) as executor:
        spawned = []
        inside_enqueue(lambda: spawned.append(executor.spawn(anyio.sleep, 0)))
        first = executor.spawn(anyio.sleep, 0)
        await settle()
        assert first.done()
        with anyio.fail_after(5):
            await spawned[0]


async def test_a_worker_going_idle_leaves_when_the_executor_closes_while_it_parks(
    inside_enqueue: Arm,
) -> None:
    # The body is done and the exit waits for two jobs: the first runs,
    # the second waits for its start slot (one job a day).  As the first
    # job's worker parks idle, a finalizer cancels the second, the last
    # pending job: the executor closes, and that worker must leave too.
    release = anyio.Event()
    jobs: list[JoinHandle[Any]] = []

    async def at_the_exit() -> None:
        await settle()  # the body waits in the exit
        inside_enqueue(cancelling(jobs[1]))
        release.set()

    async with anyio.create_task_group() as outer:
        with anyio.fail_after(5):
            async with Executor(max_per_second=1 / 86400) as executor:
                jobs.append(executor.spawn(release.wait))
                jobs.append(executor.spawn(anyio.sleep, 0))
                await settle()
                assert executor.statistics().workers == 2
                outer.start_soon(at_the_exit)
    assert jobs[0].done()
    assert jobs[1].cancelled()


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_map_call_ends_when_the_map_is_closed_while_it_parks(
    inside_enqueue: Arm, ordered: bool
) -> None:
    # Ordered, the call waits on the head job's handle; unordered, on the
    # map's own wakeup.
    release = anyio.Event()
    async with Executor(max_workers=1) as executor:
        executor.spawn(release.wait)  # the only worker is busy
        await settle()
        results = executor.map(anyio.sleep, [0, 0], ordered=ordered)
        inside_enqueue(results.close)
        with anyio.fail_after(5), pytest.raises(StopAsyncIteration):
            await results.__anext__()
        release.set()


async def test_a_job_spawned_inside_a_wake_of_spawn_many_comes_after_the_batch(
    inside_wake: Arm,
) -> None:
    # spawn_many() hands its first jobs to the idle workers and queues the
    # rest; a spawn() run as the first worker is woken finds every idle
    # worker taken, and its job is queued after the batch (it took the
    # second idle worker, ahead of the batch's second job).
    started: list[str] = []

    async def job(name: str) -> None:
        started.append(name)
        await anyio.lowlevel.checkpoint()

    async with Executor(max_workers=2) as executor:
        for name in ("w1", "w2"):
            executor.spawn(job, name)
        await settle()  # both workers idle
        started.clear()

        def spawn_x() -> None:
            executor.spawn(job, "X")

        inside_wake(spawn_x)
        executor.spawn_many(job, [("a",), ("b",), ("c",)])
    assert sorted(started[:2]) == ["a", "b"]
    assert started[2:] == ["c", "X"]
