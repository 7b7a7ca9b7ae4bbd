"""Executor(idle_timeout=...): idle workers exit, and no job is lost to it."""

from __future__ import annotations

import itertools
import math
import random
import time

import anyio
import anyio.lowlevel
import pytest

from anyio_prims.executor import Executor

from .._tasks import settle

pytestmark = pytest.mark.anyio


async def _wait_for_workers(ex: Executor, count: int) -> None:
    with anyio.fail_after(5):
        while ex.statistics().workers != count:
            await anyio.sleep(0.005)


async def _blocked_jobs(ex: Executor, n: int) -> anyio.Event:
    """Spawn ``n`` jobs that wait on one event, each on a worker of its own."""
    release = anyio.Event()
    for _ in range(n):
        ex.spawn(release.wait)
    await _wait_for_workers(ex, n)
    return release


async def test_workers_idle_for_idle_timeout_exit() -> None:
    # Long enough that the workers are still there when first counted,
    # however slow the machine (exact ticks: the tests further down).
    async with Executor(idle_timeout=0.5) as ex:
        release = await _blocked_jobs(ex, 3)
        release.set()
        await settle()
        stats = ex.statistics()
        assert (stats.workers, stats.idle_workers) == (3, 3)
        await _wait_for_workers(ex, 0)
        assert ex.statistics().idle_workers == 0


async def test_a_worker_given_a_job_within_idle_timeout_stays() -> None:
    ran_on: list[object] = []

    async def job() -> None:
        ran_on.append(anyio.get_current_task().id)

    async with Executor(idle_timeout=10) as ex:
        await ex.spawn(job)
        await anyio.sleep(0.05)
        await ex.spawn(job)
        assert ex.statistics().workers == 1
    assert len(ran_on) == 2
    assert ran_on[0] == ran_on[1]


async def test_a_job_spawned_after_the_workers_exited_starts_a_new_worker() -> None:
    async def double(x: int) -> int:
        return 2 * x

    async with Executor(idle_timeout=0.02) as ex:
        release = await _blocked_jobs(ex, 2)
        release.set()
        await _wait_for_workers(ex, 0)
        assert await ex.spawn(double, 21) == 42
        assert ex.statistics().jobs_pending == 0


async def test_workers_exit_after_idle_timeout_and_max_workers_still_bounds_them() -> (
    None
):
    async with Executor(max_workers=2, idle_timeout=0.02) as ex:
        release = await _blocked_jobs(ex, 2)
        release.set()
        await _wait_for_workers(ex, 0)
        again = anyio.Event()
        for _ in range(5):
            ex.spawn(again.wait)
        await _wait_for_workers(ex, 2)
        await settle()
        stats = ex.statistics()
        assert (stats.workers, stats.jobs_queued) == (2, 3)
        again.set()


async def test_the_block_exits_at_once_while_workers_wait_out_idle_timeout() -> None:
    start = time.monotonic()
    async with Executor(idle_timeout=30) as ex:
        release = await _blocked_jobs(ex, 3)
        release.set()
    assert time.monotonic() - start < 10
    assert ex.statistics().workers == 0


async def test_a_block_whose_only_job_was_cancelled_before_it_ran_exits_at_once() -> (
    None
):
    # The first spawn starts the sweeper and a worker; the job is cancelled
    # and the block closes before either task has run.
    start = time.monotonic()
    async with Executor(idle_timeout=3600) as ex:
        ex.spawn(anyio.sleep, 3600).cancel()
    assert time.monotonic() - start < 10
    assert ex.statistics().workers == 0


async def test_a_cancelled_block_with_idle_timeout_exits_cleanly() -> None:
    with anyio.move_on_after(0.05) as scope:
        async with Executor(idle_timeout=30) as ex:
            release = await _blocked_jobs(ex, 2)
            release.set()
            await anyio.sleep(math.inf)
    assert scope.cancelled_caught
    assert ex.statistics().workers == 0


async def test_idle_timeout_inf_keeps_idle_workers_and_runs_no_sweeper() -> None:
    # math.inf is the default's twin: no task of the executor's own beside
    # its workers (a finite idle_timeout adds the one sweeper).
    tasks = []
    # An int past the largest float is never too (it raised OverflowError).
    for idle_timeout in (None, math.inf, 10**400, 60):
        async with Executor(idle_timeout=idle_timeout) as ex:
            release = await _blocked_jobs(ex, 2)
            release.set()
            await anyio.sleep(0.05)
            assert ex.statistics().idle_workers == 2
            tasks.append(len(anyio.get_running_tasks()))
    assert tasks[1] == tasks[2] == tasks[0]
    assert tasks[3] == tasks[0] + 1


async def test_jobs_spawned_as_idle_workers_time_out_each_run_once() -> None:
    # Spawns land before, at and after the moment idle workers give up, with
    # the timeout's cancellation and the grant in either order: every job
    # runs, and only once.
    rnd = random.Random(0x1D1E)
    ran: list[int] = []

    async def job(i: int) -> int:
        ran.append(i)
        if rnd.random() < 0.3:
            await anyio.sleep(rnd.choice([0, 0.001, 0.002]))
        return i

    with anyio.fail_after(30):
        async with Executor(idle_timeout=0.002) as ex:
            handles = []
            for i in range(300):
                handles.append(ex.spawn(job, i))
                if rnd.random() < 0.5:
                    await anyio.sleep(rnd.choice([0, 0.001, 0.002, 0.003]))
            results = [await h for h in handles]
    assert results == list(range(300))
    assert sorted(ran) == list(range(300))
    assert ex.statistics().jobs_pending == 0


async def _idle_worker(ex: Executor) -> object:
    """Run one job, let its worker go idle, and return the worker's task id."""

    async def whoami() -> object:
        return anyio.get_current_task().id

    worker = await ex.spawn(whoami)
    await settle()
    assert ex.statistics().idle_workers == 1
    return worker


# The sweeper's ticks, driven by hand below (Executor._retire_idle, one tick
# each), so that where a spawn lands against them does not depend on timing.
# idle_timeout=3600 keeps the sweeper's own ticks out of these tests.


async def test_a_worker_idle_for_less_than_a_whole_period_is_kept() -> None:
    async with Executor(idle_timeout=3600) as ex:
        await _idle_worker(ex)
        ex._retire_idle()  # the first tick since the worker parked
        await settle()
        assert ex.statistics().idle_workers == 1
        ex._retire_idle()  # a whole period has passed since a tick
        await settle()
        assert ex.statistics().workers == 0


async def test_a_worker_sent_away_runs_a_job_spawned_before_it_left() -> None:
    # The sweeper sends the only worker away, and a job is spawned before
    # that worker runs: with max_workers=1 no other worker may start, so
    # the worker, finding the job queued, runs it instead of leaving.
    ran: list[object] = []

    async def job() -> None:
        ran.append(anyio.get_current_task().id)

    async with Executor(max_workers=1, idle_timeout=3600) as ex:
        worker = await _idle_worker(ex)
        ex._retire_idle()
        ex._retire_idle()  # granted its exit; it has not run yet
        handle = ex.spawn(job)
        assert ex.statistics().jobs_queued == 1
        with anyio.fail_after(5):
            await handle
        assert ex.statistics().workers == 1
    assert ran == [worker]


async def test_only_workers_idle_since_before_the_previous_tick_leave() -> None:
    async with Executor(idle_timeout=3600) as ex:
        release = await _blocked_jobs(ex, 3)
        release.set()
        await settle()
        ex._retire_idle()  # tick 1: the three parked at tick 0
        again = anyio.Event()
        ex.spawn(again.wait)  # one of them, busy until...
        await settle()
        ex._retire_idle()  # tick 2: the two still idle since tick 0 leave
        await settle()
        stats = ex.statistics()
        assert (stats.workers, stats.idle_workers) == (1, 0)
        again.set()  # ...now: it parks at tick 2 and stays
        await settle()
        ex._retire_idle()
        await settle()
        assert ex.statistics().idle_workers == 1


@pytest.mark.parametrize(
    ("value", "exc"),
    [
        (0, ValueError),
        (-1.0, ValueError),
        (math.nan, ValueError),
        ("1", TypeError),
        (True, TypeError),
    ],
)
async def test_bad_idle_timeout_is_named(value: object, exc: type[Exception]) -> None:
    with pytest.raises(exc, match="idle_timeout"):
        Executor(idle_timeout=value)  # type: ignore[arg-type]


async def test_under_a_light_steady_load_the_workers_it_does_not_need_leave() -> None:
    # Three workers idle, then one job at a time, three jobs per period:
    # the worker that went idle last takes each, and the other two leave
    # after a whole period.  (Handed from the head instead, each worker
    # would take one job per period, and all three would stay for good.)
    async def job() -> object:
        return anyio.get_current_task().id

    async with Executor(idle_timeout=3600) as ex:
        release = await _blocked_jobs(ex, 3)
        release.set()
        await settle()
        ran_on: set[object] = set()
        for _ in range(3):  # periods
            ex._retire_idle()
            for _ in range(3):
                ran_on.add(await ex.spawn(job))
                await settle()
        assert ex.statistics().workers == 1
    assert len(ran_on) == 1


class _EarlyTimers:
    """The ``anyio`` module as the executor sees it, with timers that fire
    at half their delay (as uvloop's, which count whole milliseconds, fire
    early for a delay below one)."""

    def __getattr__(self, name: str) -> object:
        return getattr(anyio, name)

    @staticmethod
    async def sleep(delay: float) -> None:
        await anyio.sleep(delay / 2)


async def test_the_sweeper_ticks_no_sooner_than_idle_timeout_apart_on_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyio_prims.executor import _executor

    ticks: list[float] = []
    retire_idle = Executor._retire_idle

    def record(ex: Executor) -> None:
        ticks.append(anyio.current_time())
        retire_idle(ex)

    monkeypatch.setattr(_executor, "anyio", _EarlyTimers())
    monkeypatch.setattr(Executor, "_retire_idle", record)
    async with Executor(idle_timeout=0.01) as ex:
        await ex.spawn(anyio.lowlevel.checkpoint)
        with anyio.fail_after(5):
            while len(ticks) < 4:
                await anyio.sleep(0.005)
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert all(gap >= 0.01 - 1e-9 for gap in gaps), gaps


async def test_an_idle_timeout_below_the_clocks_resolution_still_lets_jobs_run() -> (
    None
):
    # 1e-20 s added to the clock's time leaves it unchanged: the sweeper
    # must still sleep between ticks, or it would tick for good without
    # letting any other task run (the whole event loop hangs; pytest's
    # timeout ends the test then, as the fail_after below cannot).
    async def double(x: int) -> int:
        await anyio.lowlevel.checkpoint()
        return 2 * x

    with anyio.fail_after(5):
        async with Executor(idle_timeout=1e-20) as ex:
            assert [await ex.spawn(double, i) for i in range(20)] == [
                2 * i for i in range(20)
            ]
            await anyio.sleep(0.01)
