"""Trio in guest mode on an asyncio host: the primitives take Trio's path.

In guest mode Trio's tasks run inside the host loop's callbacks, so an
asyncio loop is running while no asyncio task is.  The waiter core must
still park a Trio task the Trio way (an asyncio future awaited from a Trio
task makes Trio raise ``TypeError``), and checkpoints and owner lookups
must be Trio's.  These tests start their own host loop (asyncio, and uvloop
where it is installed), so they are plain functions, run once per waiter
implementation (the suite runs again with ``ANYIO_PRIMS_WAITER=generic``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import pytest

from anyio_prims import (
    BatchSemaphore,
    CapacityLimiter,
    Condition,
    Event,
    Executor,
    Lock,
    RWLock,
    Semaphore,
    create_memory_object_stream,
    mpmc,
    mpsc,
    oneshot,
    spmc,
)

trio = pytest.importorskip("trio")
pytest.importorskip("trio.testing")


@pytest.fixture(params=["asyncio", "uvloop"])
def host(request: pytest.FixtureRequest) -> str:
    """The host loop Trio runs as a guest of."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
    return str(request.param)


async def guest_run(trio_main: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``trio_main`` with Trio as a guest of the running asyncio loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    trio.lowlevel.start_guest_run(
        trio_main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        done_callback=done.set_result,
        host_uses_signal_set_wakeup_fd=True,
    )
    return (await done).unwrap()


def run_as_guest(host: str, trio_main: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``trio_main`` with Trio as a guest of a fresh ``host`` loop."""
    return run_on_host(host, guest_run(trio_main))


def run_on_host(host: str, main: Coroutine[Any, Any, Any]) -> Any:
    """Run ``main`` on a fresh ``host`` loop."""
    loop: asyncio.AbstractEventLoop
    if host == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


def test_locks_hand_over_between_trio_guest_tasks(host: str) -> None:
    order: list[str] = []

    async def main() -> None:
        lock = Lock()
        sem = Semaphore(1)
        batch = BatchSemaphore(2)
        rw = RWLock()
        limiter = CapacityLimiter(1)

        async def contend(name: str) -> None:
            async with lock, sem, limiter:
                await batch.acquire(2)
                async with rw.write():
                    order.append(name)
                    await trio.sleep(0.001)
                batch.release(2)

        async with trio.open_nursery() as nursery:
            for name in "abc":
                nursery.start_soon(contend, name)
                await trio.testing.wait_all_tasks_blocked()
        assert not lock.locked()
        assert lock.statistics().owner is None
        assert sem.value == 1
        assert batch.available_permits == 2

    run_as_guest(host, main)
    assert order == ["a", "b", "c"]


def test_a_lock_the_host_loop_contended_hands_over_between_trio_guest_tasks(
    host: str,
) -> None:
    # Asyncio tasks of the host loop contend the lock first, so its queue
    # remembers that loop; the guest's Trio tasks then run on the same loop
    # and thread, but inside its callbacks, and must park the Trio way.
    lock = Lock()
    order: list[str] = []

    async def contend(name: str) -> None:
        async with lock:
            order.append(name)
            await anyio.sleep(0.001)

    async def trio_main() -> None:
        async with trio.open_nursery() as nursery:
            for name in ("trio-a", "trio-b"):
                nursery.start_soon(contend, name)
                await trio.testing.wait_all_tasks_blocked()

    async def run_host() -> None:
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(contend(name)) for name in ("host-a", "host-b")]
        await asyncio.gather(*tasks)
        await guest_run(trio_main)
        await asyncio.gather(
            *[loop.create_task(contend(name)) for name in ("host-c", "host-d")]
        )

    run_on_host(host, run_host())
    assert order == ["host-a", "host-b", "trio-a", "trio-b", "host-c", "host-d"]
    assert not lock.locked()


def test_lock_names_its_trio_guest_owner(host: str) -> None:
    async def main() -> None:
        lock = Lock()
        await lock.acquire()
        owner = lock.statistics().owner
        assert owner is not None
        assert owner.id == anyio.get_current_task().id
        lock.release()

    run_as_guest(host, main)


def test_event_and_condition_wake_trio_guest_tasks(host: str) -> None:
    async def main() -> list[str]:
        woke: list[str] = []
        event = Event()
        cond = Condition()

        async def wait_event() -> None:
            await event.wait()
            woke.append("event")

        async def wait_cond() -> None:
            async with cond:
                await cond.wait()
                woke.append("condition")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_event)
            nursery.start_soon(wait_cond)
            # Both parked before the wake-ups: a notify that reached
            # wait_cond before its wait() would be lost, and it would hang.
            await trio.testing.wait_all_tasks_blocked()
            assert event.statistics().tasks_waiting == 1
            assert cond.statistics().tasks_waiting == 1
            event.set()
            async with cond:
                cond.notify_all()
        return woke

    assert sorted(run_as_guest(host, main)) == ["condition", "event"]


@pytest.mark.parametrize("flavour", [mpsc, spmc, mpmc])
@pytest.mark.parametrize("strict", [False, True])
def test_channels_block_and_deliver_in_trio_guest_mode(
    host: str, flavour: Any, strict: bool
) -> None:
    async def main() -> list[int]:
        tx, rx = flavour.channel(0, strict=strict)
        got: list[int] = []

        async def consume() -> None:
            async with rx:
                async for item in rx:
                    got.append(item)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            async with tx:
                for i in range(100):
                    await tx.send(i)  # capacity 0: every send parks
        return got

    assert run_as_guest(host, main) == list(range(100))


def test_drop_in_stream_and_oneshot_in_trio_guest_mode(host: str) -> None:
    async def main() -> list[int]:
        tx, rx = create_memory_object_stream[int](0)
        one_tx, one_rx = oneshot.channel[int]()
        got: list[int] = []

        async def receive_both() -> None:
            got.append(await rx.receive())
            got.append(await one_rx.receive())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive_both)
            await trio.testing.wait_all_tasks_blocked()  # parked in receive()
            await tx.send(7)
            await trio.testing.wait_all_tasks_blocked()  # parked on the oneshot
            one_tx.send(8)
        tx.close()
        rx.close()
        return got

    assert run_as_guest(host, main) == [7, 8]


def test_a_trio_cancel_scope_cancels_a_blocked_receive_in_guest_mode(host: str) -> None:
    async def main() -> tuple[bool, int]:
        tx, rx = mpsc.channel[int](1)
        with trio.move_on_after(0.01) as scope:
            await rx.receive()
        tx.send_nowait(5)  # nothing was taken by the cancelled receive
        return scope.cancelled_caught, rx.receive_nowait()

    assert run_as_guest(host, main) == (True, 5)


def test_executor_runs_jobs_in_trio_guest_mode(host: str) -> None:
    async def double(x: int) -> int:
        await trio.sleep(0)
        return 2 * x

    async def main() -> list[int]:
        async with Executor(max_workers=3) as ex:
            handles = [ex.spawn(double, i) for i in range(10)]
            return [await h for h in handles]

    assert run_as_guest(host, main) == [2 * i for i in range(10)]
