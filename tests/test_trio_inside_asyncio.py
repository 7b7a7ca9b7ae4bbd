"""Trio running inside asyncio on one thread: the primitives take Trio's path.

Two ways, each run by every shared test (``inside``):

* ``guest``: Trio in guest mode on an asyncio host.  Trio's tasks run
  inside the host loop's callbacks, so an asyncio loop is running while no
  asyncio task is.
* ``nested``: ``trio.run()`` called from an asyncio task, as IPython's
  ``%autoawait trio`` runs a notebook cell in a kernel on asyncio.  While
  the Trio tasks run, the outer loop and the asyncio task blocked in
  ``trio.run()`` still look current, and that task must be left alone.

Either way the waiter core must park a Trio task the Trio way (an asyncio
future or a bare yield awaited from a Trio task makes Trio raise
``TypeError``), and checkpoints and owner lookups must be Trio's.  The
reverse nesting, ``asyncio.run()`` called from a Trio task, is tested at
the end.  These tests start their own loops (asyncio, and uvloop where it
is installed), so they are plain functions, run once per waiter
implementation (the suite runs again with ``ANYIO_PRIMS_WAITER=generic``).
Primitives are made inside the inner run, except where a test says so:
sharing one between an outer run and a run nested in it is not supported
(docs/semantics.md).
"""

from __future__ import annotations

import asyncio
import sys
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
from anyio_prims._core import BUDGET_SIZE, FORCE_GENERIC

trio = pytest.importorskip("trio")
pytest.importorskip("trio.testing")

# uvloop's loop owns the signal wake-up fd, and a Trio run nested in it
# warns that its own signal handling may collide with another library's:
# Trio's concern (Ctrl-C handling), not the primitives'.
pytestmark = pytest.mark.filterwarnings(
    "ignore:It looks like Trio's signal handling:RuntimeWarning"
)

TrioMain = Callable[[], Awaitable[Any]]


@pytest.fixture(params=["asyncio", "uvloop"])
def host(request: pytest.FixtureRequest) -> str:
    """The asyncio loop Trio runs inside (or, at the end, inside Trio)."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
    return str(request.param)


@pytest.fixture(params=["guest", "nested"])
def run_trio(
    request: pytest.FixtureRequest, host: str, task_map: str
) -> Callable[[TrioMain], Any]:
    """Run a Trio main function inside a fresh ``host`` loop, in each way,
    with asyncio's loop -> task map kept and left empty (``task_map``)."""
    if request.param == "guest":
        return lambda trio_main: run_on_host(host, guest_run(trio_main))
    return lambda trio_main: run_on_host(host, nested_run(trio_main))


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


async def guest_run(trio_main: TrioMain) -> Any:
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


async def nested_run(trio_main: TrioMain) -> Any:
    """Run ``trio_main`` with ``trio.run()`` called from this asyncio task;
    check that the task was left alone."""
    task = asyncio.current_task()
    assert task is not None
    result = trio.run(trio_main)
    if sys.version_info >= (3, 11):
        assert task.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation was left for this task
    return result


def test_a_host_reader_releases_after_a_trio_guest_reader_rebound_the_lock(
    host: str, task_map: str
) -> None:
    # A Trio guest task reads the lock an asyncio host task reads too, which
    # points the lock's owner lookup at Trio; the host task's release must
    # find it again, not report that it holds nothing (found by mutation
    # testing).
    lock = RWLock()

    async def trio_main() -> None:
        await lock.acquire_read()  # shares with the host task
        assert lock.statistics().readers == 2
        lock.release_read()

    async def run_host() -> None:
        await lock.acquire_read()
        await guest_run(trio_main)
        lock.release_read()
        assert lock.statistics().readers == 0

    run_on_host(host, run_host())


def test_locks_hand_over_between_trio_tasks(
    run_trio: Callable[[TrioMain], Any],
) -> None:
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

    run_trio(main)
    assert order == ["a", "b", "c"]


def test_a_lock_the_host_loop_contended_hands_over_between_trio_guest_tasks(
    host: str,
) -> None:
    # Asyncio tasks of the host loop contend the lock first, so its queue
    # remembers that loop; the guest's Trio tasks then run on the same loop
    # and thread, but inside its callbacks, and must park the Trio way.
    # (Guest mode only: a nested run may not share a primitive this way.)
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


def test_lock_names_its_trio_owner(run_trio: Callable[[TrioMain], Any]) -> None:
    async def main() -> None:
        lock = Lock()
        await lock.acquire()
        owner = lock.statistics().owner
        assert owner is not None
        assert owner.id == anyio.get_current_task().id
        lock.release()

    run_trio(main)


def test_a_lock_acts_as_trio_s_on_misuse(run_trio: Callable[[TrioMain], Any]) -> None:
    # As AnyIO's Lock on Trio (Trio's own): a re-acquire in a cancelled
    # scope raises the cancellation, and a release by a task that does not
    # hold the lock words its error the Trio way.
    async def main() -> None:
        lock = Lock()
        await lock.acquire()
        with trio.CancelScope() as scope:
            scope.cancel()
            await lock.acquire()
        assert scope.cancelled_caught

        async def release() -> None:
            with pytest.raises(
                RuntimeError, match="can't release a Lock you don't own"
            ):
                lock.release()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(release)
        lock.release()

    run_trio(main)


def test_event_and_condition_wake_trio_tasks(
    run_trio: Callable[[TrioMain], Any],
) -> None:
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

    assert sorted(run_trio(main)) == ["condition", "event"]


@pytest.mark.parametrize("flavour", [mpsc, spmc, mpmc])
@pytest.mark.parametrize("strict", [False, True])
def test_channels_block_and_deliver_between_trio_tasks(
    run_trio: Callable[[TrioMain], Any], flavour: Any, strict: bool
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

    assert run_trio(main) == list(range(100))


def test_drop_in_stream_and_oneshot_deliver_between_trio_tasks(
    run_trio: Callable[[TrioMain], Any],
) -> None:
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

    assert run_trio(main) == [7, 8]


def test_budgeted_calls_take_trio_checkpoints(
    run_trio: Callable[[TrioMain], Any],
) -> None:
    # Calls that never block checkpoint once per budget, the Trio way: a
    # cancelled Trio scope stops the loop within one budget (and, nested,
    # nothing reaches the outer asyncio task: nested_run checks).
    async def main() -> tuple[int, bool]:
        sem = BatchSemaphore(1)
        tx, rx = mpsc.channel[int](1)
        calls = 0
        with trio.CancelScope() as scope:
            scope.cancel()
            while calls < 10 * BUDGET_SIZE:
                await sem.acquire()
                sem.release()
                await tx.send(calls)
                await rx.receive()
                calls += 1
        return calls, scope.cancelled_caught

    calls, cancelled = run_trio(main)
    assert cancelled
    assert calls < BUDGET_SIZE


def test_a_trio_cancel_scope_cancels_a_blocked_receive(
    run_trio: Callable[[TrioMain], Any],
) -> None:
    async def main() -> tuple[bool, int]:
        tx, rx = mpsc.channel[int](1)
        with trio.move_on_after(0.01) as scope:
            await rx.receive()
        tx.send_nowait(5)  # nothing was taken by the cancelled receive
        return scope.cancelled_caught, rx.receive_nowait()

    assert run_trio(main) == (True, 5)


def test_executor_runs_jobs_on_trio_tasks(run_trio: Callable[[TrioMain], Any]) -> None:
    async def double(x: int) -> int:
        await trio.sleep(0)
        return 2 * x

    async def main() -> list[int]:
        async with Executor(max_workers=3) as ex:
            handles = [ex.spawn(double, i) for i in range(10)]
            return [await h for h in handles]

    assert run_trio(main) == [2 * i for i in range(10)]


@pytest.mark.skipif(
    FORCE_GENERIC,
    reason="AnyIO takes Trio's path in an asyncio run nested in a Trio task",
)
def test_primitives_work_in_an_asyncio_run_nested_in_a_trio_task(host: str) -> None:
    # The reverse nesting: asyncio.run() called from a Trio task.  While the
    # asyncio tasks run, the Trio task that called it still looks current.
    # The generic waiter cannot follow: AnyIO asks sniffio, which answers
    # "trio" for the whole of a Trio run's thread.
    order: list[str] = []

    async def inner() -> list[int]:
        lock = Lock()
        batch = BatchSemaphore(1)
        tx, rx = mpmc.channel[int](0)

        async def contend(name: str) -> None:
            async with lock, batch.hold(1):
                order.append(name)
                await asyncio.sleep(0.001)

        async def produce() -> None:
            async with tx:
                for i in range(50):
                    await tx.send(i)  # capacity 0: every send parks

        async def consume() -> list[int]:
            async with rx:
                return [item async for item in rx]

        results = await asyncio.gather(contend("a"), contend("b"), produce(), consume())
        assert lock.statistics().owner is None
        got: list[int] = results[3]
        return got

    async def trio_main() -> list[int]:
        await trio.sleep(0)
        got: list[int] = run_on_host(host, inner())
        await trio.sleep(0)
        return got

    assert trio.run(trio_main) == list(range(50))
    assert order == ["a", "b"]


@pytest.mark.skipif(
    FORCE_GENERIC,
    reason="AnyIO takes Trio's path in an asyncio run nested in a Trio task",
)
def test_a_taken_send_cancelled_in_an_asyncio_run_nested_in_a_trio_task_returns(
    host: str,
) -> None:
    # A rendezvous send whose item a receive_nowait() took, cancelled with
    # task.cancel() before it resumed: it returns, and the cancellation is
    # raised at the task's next checkpoint, as in a plain asyncio run.  The
    # library tells asyncio's cancellation by its own detection: AnyIO's
    # cancelled-exception class is Trio's on this thread.
    async def inner() -> tuple[int, list[str]]:
        tx, rx = mpsc.channel[int](0)
        log: list[str] = []

        async def sender() -> None:
            await tx.send(1)
            log.append("returned")
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                log.append("cancelled at the next checkpoint")
                raise

        task = asyncio.get_running_loop().create_task(sender())
        await asyncio.sleep(0)  # the send parks
        item = rx.receive_nowait()  # and is taken
        task.cancel()  # before it resumes
        with pytest.raises(asyncio.CancelledError):
            await task
        return item, log

    async def trio_main() -> tuple[int, list[str]]:
        result: tuple[int, list[str]] = run_on_host(host, inner())
        return result

    assert trio.run(trio_main) == (1, ["returned", "cancelled at the next checkpoint"])
