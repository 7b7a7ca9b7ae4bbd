"""Calls from another thread, made through the event loop with
``anyio.from_thread`` as docs/semantics.md ("Threads") says: the primitives
are not thread-safe, and this is how a worker thread uses them."""

from __future__ import annotations

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from anyio_prims import BatchSemaphore, Event, oneshot

from .channels._support import WITH_MEMORY, make

pytestmark = pytest.mark.anyio

ITEMS = 20
#: mpsc, spmc, mpmc and the drop-in memory object streams.
FLAVOUR_PARAMS = pytest.mark.parametrize("flavour", WITH_MEMORY)


@FLAVOUR_PARAMS
async def test_a_thread_sends_in_order_and_waits_while_the_channel_is_full(
    flavour: str,
) -> None:
    tx, rx = make(flavour, 1)

    def produce() -> None:
        for i in range(ITEMS):
            anyio.from_thread.run(tx.send, i)
        anyio.from_thread.run_sync(tx.close)

    got: list[int] = []
    with tx, rx, anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, produce)
            # The thread's second send finds the buffer full and waits in
            # the loop, in a task of its own, until the receive below.
            while rx.statistics().tasks_waiting_send == 0:
                await anyio.sleep(0.001)
            async for item in rx:
                got.append(item)
    assert got == list(range(ITEMS))


@FLAVOUR_PARAMS
async def test_a_thread_receives_in_order_what_the_loop_sends(
    flavour: str,
) -> None:
    tx, rx = make(flavour, 0)
    got: list[int] = []

    def consume() -> None:
        for _ in range(ITEMS):
            got.append(anyio.from_thread.run(rx.receive))

    with tx, rx, anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, consume)
            for i in range(ITEMS):
                await tx.send(i)
    assert got == list(range(ITEMS))


async def test_a_thread_sets_an_event_and_releases_permits_for_waiting_tasks() -> None:
    event = Event()
    permits = BatchSemaphore(0)
    woken: list[str] = []

    async def wait_event() -> None:
        await event.wait()
        woken.append("event")

    async def take_permits() -> None:
        await permits.acquire(3)
        woken.append("permits")

    def release() -> None:
        anyio.from_thread.run_sync(permits.release, 2)
        anyio.from_thread.run_sync(event.set)
        anyio.from_thread.run_sync(permits.release, 1)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_event)
            tg.start_soon(take_permits)
            await anyio.wait_all_tasks_blocked()
            await anyio.to_thread.run_sync(release)
    # In either order: on Trio the two wake-ups may run in one batch.
    assert sorted(woken) == ["event", "permits"]
    assert permits.available_permits == 0


async def test_a_thread_sends_a_oneshot_value_to_a_waiting_task() -> None:
    tx, rx = oneshot.channel[str]()

    def finish() -> None:
        anyio.from_thread.run_sync(tx.send, "done")  # a synchronous send

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, finish)
            assert await rx == "done"
