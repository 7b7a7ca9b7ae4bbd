"""Executor(max_per_second=...): job starts spaced evenly (GCRA)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from anyio_prims.executor import Executor


async def _record_starts(n: int, rate: float, max_workers: int | None) -> list[float]:
    starts: list[float] = []

    async def job() -> None:
        starts.append(anyio.current_time())
        await anyio.lowlevel.checkpoint()

    async with Executor(max_workers, max_per_second=rate) as ex:
        for _ in range(n):
            ex.spawn(job)
    return starts


@pytest.mark.anyio
@pytest.mark.parametrize("max_workers", [None, 2])
async def test_rate_limit_makes_n_starts_span_n_minus_1_intervals(
    max_workers: int | None,
) -> None:
    # A lower bound on the backend's own clock, so this cannot flake on a
    # slow machine: the first slot is reserved no earlier than ``before``,
    # and the last job sleeps until its slot, four intervals after the
    # first, on the same clock.  Measured from the first job's own start it
    # could read short: that job may run a step after its reservation (a
    # budget checkpoint in between), a whole tick later on uvloop's
    # millisecond clock.  (Single gaps can also be shorter than an interval
    # when a wake-up runs late.)
    before = anyio.current_time()
    starts = await _record_starts(5, 100.0, max_workers)
    assert len(starts) == 5
    assert starts == sorted(starts)
    assert starts[0] >= before
    assert starts[-1] - before >= 0.04 - 1e-9


@pytest.mark.parametrize("max_workers", [None, 1, 3])
def test_rate_limit_starts_on_exact_slots_with_trio_fake_clock(
    max_workers: int | None,
) -> None:
    trio = pytest.importorskip("trio")
    from trio.testing import MockClock

    # trio.run, not anyio.run: anyio before 4.14 drops its backend_options
    # on Trio, and the run would sleep on the real clock.
    clock = MockClock(autojump_threshold=0)
    starts = trio.run(_record_starts, 6, 4.0, max_workers, clock=clock)
    first = starts[0]
    assert [round(s - first, 9) for s in starts] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25]


@pytest.mark.anyio
async def test_cancelled_job_waiting_for_its_slot_never_runs() -> None:
    ran: list[int] = []

    async def job(i: int) -> None:
        ran.append(i)

    async with Executor(1, max_per_second=20.0) as ex:
        ex.spawn(job, 0)
        second = ex.spawn(job, 1)
        third = ex.spawn(job, 2)
        second.cancel()
    assert ran == [0, 2]
    assert second.cancelled()
    assert third.done()
