"""A loop of waits, each granted as it parks, can still be cancelled.

A producer on a full channel and a consumer that yields once per item run
in step: each send parks and is granted by the consumer's next receive
before the loop comes round again, and the same for a consumer against
such a producer, or a submit against a worker.  On asyncio a wait that
is granted before a cancellation lands does not raise it: AnyIO delivers a
scope's cancellation only to a task whose wait is not yet resolved, a loop
iteration later, and a ``task.cancel()`` that meets a send already taken
is re-armed for the next checkpoint, which was the next such wait.  Such a
loop, when every wake refilled the checkpoint budget, met no other
checkpoint and ran on under any deadline.  Now a wake refills nothing and a
call whose checkpoint is due takes it before it parks
(``anyio_prims/_core/_budget.py``): the loop stops within the budget.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import BatchSemaphore, RWLock, oneshot
from anyio_prims._core import BUDGET_SIZE
from anyio_prims.executor import Executor

from .channels._support import CHANNELS

pytestmark = pytest.mark.anyio

#: Calls after the cancellation that prove the loop ran on regardless.
RAN_ON = 20 * BUDGET_SIZE

#: Calls the loop may make after the clock has passed a scope's deadline
#: before the scope is cancelled: the deadline's timer runs, and AnyIO
#: delivers its cancellation, a few event loop iterations later, and each
#: iteration is a call of these loops (a run on uvloop with the generic
#: waiter counted 67 calls in all, against the budget's 64 and one).
DEADLINE_LAG = 8


@pytest.mark.parametrize("side", ["send", "receive"])
@pytest.mark.parametrize("flavour", list(CHANNELS))
async def test_a_channel_loop_in_step_with_its_peer_stops_at_its_deadline(
    flavour: str, side: str
) -> None:
    tx, rx = CHANNELS[flavour](1 if side == "send" else 0)
    calls_after_deadline = 0

    async def peer() -> None:
        # Yields once per item: in step with the loop.
        i = 0
        while True:
            if side == "send":
                await rx.receive()
            else:
                await tx.send(i)
            i += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer)
            with anyio.move_on_after(0.05) as scope:
                i = 0
                while calls_after_deadline <= RAN_ON:
                    if anyio.current_time() >= scope.deadline:
                        calls_after_deadline += 1
                    if side == "send":
                        await tx.send(i)
                    else:
                        await rx.receive()
                    i += 1
            tg.cancel_scope.cancel()
    assert scope.cancelled_caught
    assert calls_after_deadline <= BUDGET_SIZE + 1 + DEADLINE_LAG


@pytest.mark.parametrize("source", ["deadline", "task.cancel()"])
async def test_a_submit_loop_in_step_with_a_worker_stops_when_cancelled(
    source: str, anyio_backend_name: str
) -> None:
    if source == "task.cancel()" and anyio_backend_name != "asyncio":
        pytest.skip("a plain asyncio cancellation")
    calls_after_cancel = 0
    cancelled = False

    async def job() -> None:
        await anyio.lowlevel.checkpoint()  # yields once: in step

    def cancel(task: asyncio.Task[None]) -> None:
        nonlocal cancelled
        cancelled = True
        task.cancel()

    async with Executor(max_workers=1, max_queued=1) as ex:

        async def loop() -> None:
            nonlocal calls_after_cancel
            while calls_after_cancel <= RAN_ON:
                if cancelled:
                    calls_after_cancel += 1
                await ex.submit(job)

        with anyio.fail_after(20):
            if source == "deadline":
                with anyio.move_on_after(0.05) as scope:
                    while calls_after_cancel <= RAN_ON:
                        if anyio.current_time() >= scope.deadline:
                            calls_after_cancel += 1
                        await ex.submit(job)
                assert scope.cancelled_caught
            else:
                producer = asyncio.ensure_future(loop())
                asyncio.get_running_loop().call_later(0.05, cancel, producer)
                with pytest.raises(asyncio.CancelledError):
                    await producer
    lag = DEADLINE_LAG if source == "deadline" else 0  # task.cancel(): exact
    assert calls_after_cancel <= BUDGET_SIZE + 1 + lag


def _more_loops() -> dict[str, Any]:
    """Loop and peer pairs: each turn of the loop waits and is granted by
    the peer, which yields once per turn.  Each returns ``(peer, turn)``."""

    def channel_reads(how: str) -> Any:
        tx, rx = CHANNELS["mpmc"](0)

        async def peer() -> None:
            i = 0
            while True:
                await tx.send(i)
                i += 1
                await anyio.lowlevel.checkpoint()

        if how == "receive_many":

            async def turn() -> None:
                await rx.receive_many(4)

            return peer, turn
        iterator = rx.__aiter__()

        async def turn_for() -> None:
            await iterator.__anext__()

        return peer, turn_for

    def one_shots() -> Any:
        pending: list[Any] = []

        async def peer() -> None:
            while True:
                while pending:
                    pending.pop().send(1)
                await anyio.lowlevel.checkpoint()

        async def turn() -> None:
            tx, rx = oneshot.channel[int]()
            pending.append(tx)
            await rx.receive()

        return peer, turn

    def permits(fair: bool) -> Any:
        sem = BatchSemaphore(0, fair=fair)

        async def peer() -> None:
            while True:
                sem.release()
                await anyio.lowlevel.checkpoint()

        return peer, sem.acquire

    def rwlock(reading: bool) -> Any:
        lock = RWLock()

        async def peer() -> None:
            while True:
                await lock.acquire_write()
                await anyio.lowlevel.checkpoint()
                lock.release_write()

        async def turn() -> None:
            if reading:
                await lock.acquire_read()
                lock.release_read()
            else:
                await lock.acquire_write()
                lock.release_write()

        return peer, turn

    return {
        "receive_many": lambda: channel_reads("receive_many"),
        "async for": lambda: channel_reads("async for"),
        "oneshot receive": one_shots,
        "BatchSemaphore, fair": lambda: permits(True),
        "BatchSemaphore, unfair": lambda: permits(False),
        "RWLock read": lambda: rwlock(True),
        "RWLock write": lambda: rwlock(False),
    }


MORE_LOOPS = _more_loops()


@pytest.mark.parametrize("name", list(MORE_LOOPS))
async def test_a_loop_of_waits_in_step_with_its_peer_stops_at_its_deadline(
    name: str,
) -> None:
    peer, turn = MORE_LOOPS[name]()
    calls_after_deadline = 0
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer)
            with anyio.move_on_after(0.05) as scope:
                while calls_after_deadline <= RAN_ON:
                    if anyio.current_time() >= scope.deadline:
                        calls_after_deadline += 1
                    await turn()
            tg.cancel_scope.cancel()
    assert scope.cancelled_caught
    assert calls_after_deadline <= BUDGET_SIZE + 1 + DEADLINE_LAG
