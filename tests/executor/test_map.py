"""Executor.map: lazy input, ordering, windows, early close."""

from __future__ import annotations

import math
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import aclosing

import anyio
import anyio.lowlevel
import pytest

from anyio_prims._core import BUDGET, BUDGET_SIZE
from anyio_prims.executor import Executor, JobCancelled

from .._tasks import settle

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import (  # type: ignore[import-not-found,unused-ignore]
        BaseExceptionGroup,
        ExceptionGroup,
    )

pytestmark = pytest.mark.anyio


async def double(x: int) -> int:
    await anyio.lowlevel.checkpoint()
    return 2 * x


async def test_map_yields_results_in_input_order() -> None:
    async def slow_first(x: int) -> int:
        for _ in range(10 - x):
            await anyio.lowlevel.checkpoint()
        return x

    async with Executor() as ex:
        assert [r async for r in ex.map(slow_first, range(10))] == list(range(10))


async def test_unordered_map_yields_every_result() -> None:
    async with Executor(3) as ex:
        results = [r async for r in ex.map(double, range(20), ordered=False)]
    assert sorted(results) == [2 * i for i in range(20)]


async def test_unordered_map_yields_results_as_jobs_finish() -> None:
    async def slow_first(x: int) -> int:
        for _ in range(20 * (5 - x)):
            await anyio.lowlevel.checkpoint()
        return x

    async with Executor() as ex:
        results = [r async for r in ex.map(slow_first, range(5), ordered=False)]
    assert results[0] != 0
    assert sorted(results) == list(range(5))


async def test_map_accepts_async_iterable() -> None:
    async def numbers() -> AsyncGenerator[int, None]:
        for i in range(5):
            yield i

    async with Executor() as ex:
        assert [r async for r in ex.map(double, numbers())] == [0, 2, 4, 6, 8]


async def test_map_reads_endless_async_generator_lazily() -> None:
    read = 0

    async def endless() -> AsyncGenerator[int, None]:
        nonlocal read
        i = 0
        while True:
            read += 1
            yield i
            i += 1

    async with Executor(4) as ex:
        gen = endless()
        async with aclosing(ex.map(double, gen)) as results:
            got = []
            async for r in results:
                got.append(r)
                if len(got) == 10:
                    break
        await gen.aclose()
    assert got == [2 * i for i in range(10)]
    assert read <= 10 + 4


async def test_map_keeps_at_most_window_jobs_in_flight() -> None:
    running = 0
    peak = 0

    async def job(x: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        running -= 1
        return x

    async with Executor() as ex:
        assert [r async for r in ex.map(job, range(30), window=5)] == list(range(30))
    assert peak <= 5


@pytest.mark.parametrize(("max_workers", "window"), [(None, 64), (3, 3)])
async def test_map_window_defaults_to_max_workers_or_64(
    max_workers: int | None, window: int
) -> None:
    release = anyio.Event()
    read = 0

    def source() -> Iterator[int]:
        nonlocal read
        for x in range(100):
            read += 1
            yield x

    async def job(x: int) -> int:
        await release.wait()
        return x

    async with Executor(max_workers) as ex:
        results = ex.map(job, source())
        async with anyio.create_task_group() as tg:
            tg.start_soon(results.__anext__)
            await settle()
            # window jobs in flight, the first not done: nothing read beyond
            assert read == window
            release.set()
        assert [r async for r in results] == list(range(1, 100))


async def test_closing_map_cancels_jobs_in_flight_and_stops_reading() -> None:
    read: list[int] = []

    def items() -> object:
        for i in range(100):
            read.append(i)
            yield i

    async def job(x: int) -> int:
        if x == 0:
            return 0
        await anyio.sleep(math.inf)
        return x

    async with Executor(4) as ex:
        results = ex.map(job, items())  # type: ignore[arg-type]
        assert await results.__anext__() == 0
        await results.aclose()
        await anyio.wait_all_tasks_blocked()
        assert ex.statistics().jobs_pending == 0
        with pytest.raises(StopAsyncIteration):
            await results.__anext__()
    assert len(read) <= 5


async def test_leaving_map_async_with_cancels_jobs() -> None:
    async def job(x: int) -> int:
        if x == 0:
            return 0
        await anyio.sleep(math.inf)
        return x

    async with Executor(4) as ex:
        async with ex.map(job, range(10)) as results:
            async for r in results:
                assert r == 0
                break
        await anyio.wait_all_tasks_blocked()
        assert ex.statistics().jobs_pending == 0


async def test_abandoned_map_does_not_keep_block_open() -> None:
    async def endless() -> AsyncGenerator[int, None]:
        i = 0
        while True:
            yield i
            i += 1

    gen = endless()
    async with Executor(2) as ex:
        results = ex.map(double, gen)
        assert await results.__anext__() == 0
    await gen.aclose()


async def test_map_job_error_is_raised_at_its_turn() -> None:
    async def job(x: int) -> int:
        if x == 2:
            raise ValueError("two")
        return x

    async with Executor() as ex:
        results = ex.map(job, range(4))
        assert await results.__anext__() == 0
        assert await results.__anext__() == 1
        with pytest.raises(ValueError, match="two"):
            await results.__anext__()
        assert [r async for r in results] == [3]


async def test_undelivered_map_error_is_raised_at_exit() -> None:
    async def job(x: int) -> int:
        if x == 1:
            raise ValueError("never delivered")
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        return x

    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor() as ex:
            results = ex.map(job, range(2))
            assert await results.__anext__() == 0
            await results.aclose()
    assert [str(e) for e in info.value.exceptions] == ["never delivered"]


async def test_map_rejects_non_iterable() -> None:
    async with Executor() as ex:
        with pytest.raises(TypeError, match="iterable"):
            ex.map(double, 5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="window"):
            ex.map(double, [], window=0)


async def test_map_rejects_a_non_callable_fn_and_a_non_bool_ordered() -> None:
    async with Executor() as ex:
        with pytest.raises(TypeError, match="fn"):
            ex.map(42, [1])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="ordered"):
            ex.map(double, [1], ordered=1)  # type: ignore[arg-type]
        assert ex.statistics().jobs_pending == 0


async def _blocked_until(release: anyio.Event, x: int) -> int:
    await release.wait()
    return x


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_second_task_iterating_the_same_map_raises_busy(ordered: bool) -> None:
    # Two consumers of an ordered map would both take its head (each result
    # twice): the second one is refused while the first waits.
    release = anyio.Event()
    got: list[int] = []
    async with Executor(2) as ex:
        results = ex.map(
            lambda x: _blocked_until(release, x), range(4), ordered=ordered
        )

        async def consume() -> None:
            got.extend([r async for r in results])

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(anyio.BusyResourceError):
                await results.__anext__()
            release.set()
    assert sorted(got) == [0, 1, 2, 3]


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_map_closed_by_another_task_ends_its_consumer_s_iteration(
    ordered: bool,
) -> None:
    async def job(x: int) -> int:
        await anyio.sleep(math.inf)
        return x

    outcome: list[object] = []
    async with Executor(2) as ex:
        results = ex.map(job, range(4), ordered=ordered)

        async def consume() -> None:
            outcome.extend([r async for r in results])
            outcome.append("ended")

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()
            await results.aclose()
    assert outcome == ["ended"]


async def test_a_map_closed_as_its_head_job_returns_delivers_nothing_more() -> None:
    # The consumer waits for the head job, which closes the map and then
    # returns (no checkpoint between, so the close cannot cancel it): once
    # closed, the map delivers nothing, that result included.
    async def job(x: int) -> int:
        results.close()
        return x

    outcome: list[object] = []
    async with Executor(1) as ex:
        results = ex.map(job, range(4))
        outcome.extend([r async for r in results])
        outcome.append("ended")
    assert outcome == ["ended"]


async def _fail_with_value_error(ex: Executor) -> int:
    raise ValueError("job 1 failed")


async def _fail_with_job_cancelled(ex: Executor) -> int:
    # A JobCancelled of the job's own (it awaited a cancelled job): the job
    # failed, it was not cancelled.
    child = ex.spawn(anyio.sleep, math.inf)
    child.cancel()
    await child  # raises JobCancelled
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.mark.parametrize(
    ("fail", "error"),
    [
        (_fail_with_value_error, "ValueError('job 1 failed')"),
        (_fail_with_job_cancelled, "JobCancelled('the job was cancelled')"),
    ],
    ids=["ValueError", "JobCancelled"],
)
async def test_an_ordered_map_closed_after_its_head_failed_still_raises_the_error(
    fail: Callable[[Executor], Awaitable[int]], error: str
) -> None:
    # The consumer waits on the head; the head fails, then another task
    # closes the map before the consumer runs.  The error was retrieved by
    # the consumer's await: it must reach the consumer, not vanish.
    release = anyio.Event()

    async def job(x: int) -> int:
        await release.wait()
        if x == 1:
            return await fail(ex)
        return x

    outcome: list[object] = []
    async with Executor(2) as ex:
        results = ex.map(job, [1, 2])

        async def consume() -> None:
            try:
                outcome.append(await results.__anext__())
            except StopAsyncIteration:  # pragma: no cover (the fault)
                outcome.append("StopAsyncIteration")
            except Exception as exc:
                outcome.append(repr(exc))

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()
            release.set()
            while not any(h.done() for h in results._inflight):
                await anyio.lowlevel.checkpoint()
            assert not results._inflight[0].cancelled()  # it failed
            results.close()
    assert outcome == [error]


# -- regressions found by mutation testing --------------------------------------


async def test_item_read_after_another_task_closed_the_map_is_dropped() -> None:
    # Pins: an item that arrives after aclose() (the read was waiting on the
    # async input) gets no job: fn never runs on it.
    calls: list[int] = []
    gate = anyio.Event()

    async def fn(x: int) -> int:
        calls.append(x)
        return x

    async def slow_input() -> AsyncGenerator[int, None]:
        await gate.wait()  # the consumer waits here for the first item
        yield 1
        yield 2

    with anyio.fail_after(10):  # hang guard only
        async with aclosing(slow_input()) as source, Executor() as ex:
            results = ex.map(fn, source)

            async def consume() -> None:
                async for _ in results:
                    pass  # pragma: no cover

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await settle()  # consume() is reading the input
                await results.aclose()
                gate.set()
    assert calls == []


async def test_unordered_map_delivers_an_item_spawned_already_cancelled() -> None:
    # Pins: while the executor is being cancelled, an unordered map still
    # delivers each item (as JobCancelled) instead of dropping it.
    async def failing() -> None:
        raise RuntimeError("boom")

    outcomes: list[object] = []
    with pytest.raises(BaseExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor(fail_fast=True) as ex:
            ex.spawn(failing)
            with anyio.CancelScope(shield=True):
                await settle()  # fail_fast has cancelled the executor
                results = ex.map(double, [1], ordered=False)
                while True:
                    try:
                        outcomes.append(await results.__anext__())
                    except JobCancelled:
                        outcomes.append("JobCancelled")
                    except StopAsyncIteration:
                        break
    assert outcomes == ["JobCancelled"]


async def test_ready_head_result_is_delivered_before_waiting_for_input() -> None:
    # Pins: __anext__ first delivers a result that is ready, before it reads
    # (and waits for) more input.
    gate = anyio.Event()

    async def ident(x: int) -> int:
        return x

    async def items() -> AsyncGenerator[int, None]:
        yield 0
        yield 1
        await gate.wait()  # the input stalls from here on
        yield 2

    got: list[int] = []
    with anyio.fail_after(10):  # hang guard only
        async with aclosing(items()) as source, Executor() as ex:
            results = ex.map(ident, source, window=2)
            assert await results.__anext__() == 0
            await settle()  # job 1 is done by now

            async def take() -> None:
                got.append(await results.__anext__())

            async with anyio.create_task_group() as tg:
                tg.start_soon(take)
                await settle()
                assert got == [1]
            gate.set()
            await results.aclose()


async def test_unordered_map_delivers_finished_jobs_in_finishing_order() -> None:
    # Pins: jobs that finish while nobody waits are delivered in the order
    # they finished, oldest first.
    events = {x: anyio.Event() for x in (1, 2, 3)}

    async def job(x: int) -> int:
        await events[x].wait()
        return x

    async with Executor() as ex:
        results = ex.map(job, [1, 2, 3], ordered=False)

        async def first() -> int:
            return await results.__anext__()

        async with anyio.create_task_group() as tg:
            got: list[int] = []

            async def take() -> None:
                got.append(await first())

            tg.start_soon(take)
            await settle()
            events[1].set()
        assert got == [1]
        events[2].set()
        await settle()
        events[3].set()
        await settle()
        assert [r async for r in results] == [2, 3]


async def instant(x: int) -> int:
    if x == 1:
        raise ValueError("job 1")
    return 2 * x


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_cancellation_at_the_due_checkpoint_loses_no_ready_result(
    ordered: bool,
) -> None:
    # Results are ready (one of them an error) when a call, its budget
    # checkpoint due, is cancelled there: the checkpoint comes before it
    # takes a result, so the next calls deliver every one.
    async with Executor(2) as ex:
        results = ex.map(instant, range(4), ordered=ordered)
        assert await results.__anext__() == 0  # reads the input, runs the jobs
        await anyio.wait_all_tasks_blocked()  # jobs 1 to 3 have settled
        with anyio.CancelScope() as scope:
            scope.cancel()
            BUDGET.left = 1
            await results.__anext__()
        assert scope.cancelled_caught
        rest: list[object] = []
        while True:
            try:
                rest.append(await results.__anext__())
            except ValueError as exc:
                rest.append(str(exc))
            except StopAsyncIteration:
                break
    assert sorted(map(str, rest)) == ["4", "6", "job 1"]
    if ordered:
        assert rest == ["job 1", 4, 6]


# -- the input's errors, jobs' StopAsyncIteration, after the exit ----------------


class _BrokenInput:
    """An iterator that yields 0, 1, 2, then raises ``error``."""

    def __init__(self, error: type[Exception] = ValueError) -> None:
        self.reads = 0
        self.error = error

    def _next(self) -> int:
        self.reads += 1
        if self.reads > 3:
            raise self.error("input broke")
        return self.reads - 1

    def __iter__(self) -> _BrokenInput:
        return self

    def __next__(self) -> int:
        return self._next()


class _BrokenAsyncInput(_BrokenInput):
    """The async iterator of the same."""

    __iter__ = None  # type: ignore[assignment]  # async only

    def __aiter__(self) -> _BrokenAsyncInput:
        return self

    async def __anext__(self) -> int:
        await anyio.lowlevel.checkpoint()
        return self._next()


async def _drain(results: object) -> list[object]:
    # Every outcome, errors as their repr, up to the end of the iteration
    # (at most 50: a map that fails alike on every call makes no checkpoint).
    seen: list[object] = []
    anext_ = results.__anext__  # type: ignore[attr-defined]
    while len(seen) < 50:
        try:
            seen.append(await anext_())
        except StopAsyncIteration:
            return seen
        except Exception as exc:
            seen.append(repr(exc))
    return seen


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_an_input_error_is_raised_after_the_results_read_before_it(
    ordered: bool, is_async: bool
) -> None:
    source = _BrokenAsyncInput() if is_async else _BrokenInput()
    async with Executor(4) as ex:
        seen = await _drain(ex.map(double, source, ordered=ordered, window=4))
    if ordered:
        assert seen == [0, 2, 4, "ValueError('input broke')"]
    else:
        assert sorted(map(str, seen[:3])) == ["0", "2", "4"]
        assert seen[3:] == ["ValueError('input broke')"]
    assert source.reads == 4  # the error ended the input: no read after it


@pytest.mark.parametrize("broken", [False, True], ids=["exhausted", "failed"])
async def test_a_cancelled_loop_over_an_ended_map_stops_within_the_budget(
    broken: bool,
) -> None:
    # Ended by its input's end, or by its input's error.
    source = _BrokenInput() if broken else iter(range(3))
    async with Executor() as ex:
        results = ex.map(double, source)
        seen = await _drain(results)
        assert seen == [0, 2, 4, *(["ValueError('input broke')"] if broken else [])]
        calls = 0
        with anyio.CancelScope() as scope:
            scope.cancel()
            for _ in range(4 * BUDGET_SIZE):
                calls += 1
                with pytest.raises(StopAsyncIteration):
                    await results.__anext__()
        assert scope.cancelled_caught
        assert calls <= BUDGET_SIZE
    # No read after the end.
    assert source.reads == 4 if isinstance(source, _BrokenInput) else not [*source]


async def test_a_sync_input_s_stop_async_iteration_is_raised_as_runtime_error() -> None:
    source = _BrokenInput(StopAsyncIteration)
    async with Executor() as ex:
        results = ex.map(double, source)
        got = []
        error = "input raised StopAsyncIteration"
        with pytest.raises(RuntimeError, match=error) as info:  # noqa: PT012
            async for value in results:
                got.append(value)
    assert got == [0, 2, 4]
    assert isinstance(info.value.__cause__, StopAsyncIteration)


async def _stops(x: int) -> int:
    await anyio.lowlevel.checkpoint()
    if x == 1:
        raise StopAsyncIteration  # a bug in the job: anext() on an exhausted one
    return x


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_job_s_stop_async_iteration_does_not_end_the_map(ordered: bool) -> None:
    async with Executor(1) as ex:
        seen = await _drain(ex.map(_stops, range(3), ordered=ordered))
    assert sorted(map(str, seen)) == [
        "0",
        "2",
        "RuntimeError('a job of the map raised StopAsyncIteration')",
    ]
    if ordered:
        assert seen[1] == "RuntimeError('a job of the map raised StopAsyncIteration')"


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_fail_fast_consumer_going_on_after_the_error_is_cancelled(
    ordered: bool,
) -> None:
    # fail_fast cancels the body; a consumer that catches the failing job's
    # error and iterates on gets the body's cancellation, not JobCancelled
    # for the jobs that fail_fast cancelled (which would end up in the
    # exit's group beside the failure).
    async def job(x: int) -> None:
        if x == 0:
            raise ValueError("zero")
        await anyio.sleep(math.inf)

    caught: list[str] = []
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with (
            Executor(4, fail_fast=True) as ex,
            ex.map(job, range(10), ordered=ordered) as results,
        ):
            while True:
                try:
                    await results.__anext__()
                except ValueError as exc:
                    caught.append(str(exc))
    assert caught == ["zero"]
    assert [repr(e) for e in info.value.exceptions] == ["ValueError('zero')"]


async def _one_fails_the_rest_block(x: int) -> None:
    if x == 1:
        await anyio.lowlevel.checkpoint()  # fails while the consumer waits
        raise ValueError("one")
    await anyio.sleep(math.inf)


async def test_a_fail_fast_consumer_waiting_for_a_queued_job_is_cancelled() -> None:
    # The consumer waits for the map's job, queued behind one that fails:
    # fail_fast settles the queued job as cancelled, waking the consumer,
    # and then cancels the body.  On Trio the consumer is woken before its
    # cancellation arrives; the cancellation still comes out of __anext__,
    # not the job's JobCancelled (which would join the exit's group).
    async def fails_once_all_wait() -> None:
        await anyio.wait_all_tasks_blocked()
        raise ValueError("first")

    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 (the block under test)
        async with Executor(1, fail_fast=True) as ex:
            ex.spawn(fails_once_all_wait)  # the only worker is busy
            async for _ in ex.map(double, [0]):
                pass  # pragma: no cover - the job never runs
    assert [repr(e) for e in info.value.exceptions] == ["ValueError('first')"]


async def test_a_shielded_consumer_gets_each_cancelled_job_once_in_order() -> None:
    # The consumer waits for job 0 when job 1 fails; it is shielded from the
    # body's cancellation that fail_fast makes, so the head job it waited
    # for comes out as JobCancelled, once, and then each later job in input
    # order.
    outcomes: list[str] = []
    with pytest.raises(ExceptionGroup):  # noqa: PT012 (the block under test)
        async with Executor(4, fail_fast=True) as ex:
            with anyio.CancelScope(shield=True):
                results = ex.map(_one_fails_the_rest_block, range(4))
                while True:
                    try:
                        await results.__anext__()
                    except JobCancelled:
                        outcomes.append("cancelled")
                    except ValueError as exc:
                        outcomes.append(str(exc))
                    except StopAsyncIteration:
                        break
    assert outcomes == ["cancelled", "one", "cancelled", "cancelled"]


async def test_a_map_used_after_the_exit_reads_no_item_of_its_input() -> None:
    source = iter(range(10))
    async with Executor() as ex:
        results = ex.map(double, source, window=1)
        assert await results.__anext__() == 0
    with pytest.raises(RuntimeError, match="the Executor is closed"):
        await results.__anext__()
    assert list(source) == list(range(1, 10))


async def test_a_read_waiting_as_the_block_exits_raises_once_its_item_comes() -> None:
    # A consumer outside the block waits in the input as the block exits:
    # the item it then takes cannot be run (no spawn on a closed executor),
    # and the map says so in its own words, not spawn()'s.
    send, receive = anyio.create_memory_object_stream[int](10)
    outcome: list[object] = []

    async def consume(results: object) -> None:
        try:
            async for value in results:  # type: ignore[attr-defined]
                outcome.append(value)
        except RuntimeError as exc:
            outcome.append(str(exc))

    with anyio.fail_after(5), send, receive:
        async with anyio.create_task_group() as tg:
            async with Executor() as ex:
                tg.start_soon(consume, ex.map(double, receive, window=1))
                await send.send(1)
                while not outcome:
                    await anyio.lowlevel.checkpoint()
                await settle()  # the consumer waits in the input again
            await send.send(2)
    assert outcome == [
        2,
        "the Executor closed while this map was reading its input: "
        "the item read then was not run",
    ]


async def test_a_read_waiting_as_another_task_closes_the_map_drops_its_item() -> None:
    # As documented: the consumer's iteration ends, and the item its read
    # then gets is neither run nor left in the input.
    send, receive = anyio.create_memory_object_stream[int](10)
    outcome: list[object] = []
    ran: list[int] = []

    async def record(x: int) -> int:
        ran.append(x)
        return x

    with anyio.fail_after(5), send, receive:
        async with Executor() as ex:
            results = ex.map(record, receive)

            async def consume() -> None:
                async for value in results:
                    outcome.append(value)
                outcome.append("end")

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await settle()  # the consumer waits in the input
                await results.aclose()
                await send.send(21)
        with pytest.raises(anyio.WouldBlock):
            receive.receive_nowait()  # taken by the read, not left
    assert outcome == ["end"]
    assert ran == []


async def test_map_accepts_a_sequence_protocol_iterable() -> None:
    class Squares:
        def __getitem__(self, index: int) -> int:
            if index >= 4:
                raise IndexError(index)
            return index * index

    async with Executor() as ex:
        assert [r async for r in ex.map(double, Squares())] == [0, 2, 8, 18]  # type: ignore[arg-type]
