"""A wait whose waiter is settled after it is parked and before its task
sleeps is still a checkpoint.

A garbage collection can run a finalizer inside the call, after
``enqueue`` parked the waiter: it may release, send, set or close, and
grant or fail that waiter before the task awaits it.  Awaiting it then is
no schedule point on asyncio (a done future returns at once) and no
cancellation point on Trio (the task is rescheduled already).  The call
must still be what the checkpoint policy says, as if that code had run
just before it: in strict mode a checkpoint, so that in a cancelled scope
it raises the cancellation and gives back what it was granted; or, where
what it was granted cannot be given back in order (an item taken from a
send, an item handed to a receive), it returns and the cancellation is
raised at the task's next checkpoint.

The other code runs as ``enqueue`` returns (``tests/_reentry.py``,
"after"), where it meets the call's waiter parked.  The generic waiter's
wait is a checkpoint of its own, so there these tests hold without the
core's help.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import (
    BatchSemaphore,
    CapacityLimiter,
    Event,
    Lock,
    RWLock,
    Semaphore,
    oneshot,
)
from anyio_prims.executor import Executor, JobCancelled

from ._reentry import arm_inside_enqueue
from ._tasks import assert_schedule_point
from .channels._support import CHANNELS

pytestmark = pytest.mark.anyio

#: What a call that raised left as its result.
RAISED: Any = object()

#: A case: what to make, the call that parks, the code run as its waiter
#: is parked, and the check, on what the call returned (or ``RAISED``), that
#: nothing was lost once the cancellation was raised.
Case = tuple[
    Callable[[], Awaitable[Any]],  # the call
    Callable[[], None],  # the other code
    Callable[[Any], None],  # the check
]


def batch_semaphore() -> Case:
    sem = BatchSemaphore(0, strict=True)

    def check(result: Any) -> None:
        assert result is RAISED
        assert sem.available_permits == 1  # the permit granted went back
        assert sem.statistics().tasks_waiting == 0

    return sem.acquire, sem.release, check


def semaphore(method: str) -> Callable[[], Case]:
    # The drop-in: AnyIO's rule, every call a checkpoint.  ``acquire`` and
    # ``__aenter__`` are written out separately.
    def case() -> Case:
        sem = Semaphore(0)

        def check(result: Any) -> None:
            assert result is RAISED
            assert sem.value == 1
            assert sem.statistics().tasks_waiting == 0

        return getattr(sem, method), sem.release, check

    return case


def limiter() -> Case:
    limiter = CapacityLimiter(1)
    other = object()
    limiter.acquire_on_behalf_of_nowait(other)

    def check(result: Any) -> None:
        assert result is RAISED
        assert limiter.available_tokens == 1  # the token granted went back
        assert limiter.statistics().tasks_waiting == 0

    return limiter.acquire, lambda: limiter.release_on_behalf_of(other), check


def event() -> Case:
    ev = Event()  # AnyIO's rule: wait() on a set event is a checkpoint

    def check(result: Any) -> None:
        assert result is RAISED
        assert ev.is_set()
        assert ev.statistics().tasks_waiting == 0

    return ev.wait, ev.set, check


def receive_sent(flavour: str) -> Callable[[], Case]:
    # A rendezvous: the send grants the parked receive its item.  Kept: the
    # receive returns it, and the cancellation comes at the next checkpoint.
    def case() -> Case:
        tx, rx = CHANNELS[flavour](0, strict=True)

        def check(result: Any) -> None:
            assert result == "sent"
            with pytest.raises(anyio.WouldBlock):
                rx.receive_nowait()
            assert rx.statistics().tasks_waiting_receive == 0

        return rx.receive, lambda: tx.send_nowait("sent"), check

    return case


def send_taken(flavour: str) -> Callable[[], Case]:
    # A rendezvous: the receive takes the parked send's item.  The send
    # returns, and the cancellation comes at the next checkpoint.
    def case() -> Case:
        tx, rx = CHANNELS[flavour](0, strict=True)
        got: list[str] = []

        def check(result: Any) -> None:
            assert result is None
            assert got == ["sent"]
            assert tx.statistics().tasks_waiting_send == 0

        return (
            lambda: tx.send("sent"),
            lambda: got.append(rx.receive_nowait()),
            check,
        )

    return case


def receive_ended(flavour: str) -> Callable[[], Case]:
    # The waiter is failed with EndOfStream: the cancellation comes first,
    # as in AnyIO, whose receive checks for it before it looks.
    def case() -> Case:
        tx, rx = CHANNELS[flavour](math.inf, strict=True)

        def check(result: Any) -> None:
            assert result is RAISED
            with pytest.raises(anyio.EndOfStream):
                rx.receive_nowait()

        return rx.receive, tx.close, check

    return case


def send_broken(flavour: str) -> Callable[[], Case]:
    # The waiter is failed with BrokenResourceError: as above.
    def case() -> Case:
        tx, rx = CHANNELS[flavour](0, strict=True)

        def check(result: Any) -> None:
            assert result is RAISED
            with pytest.raises(anyio.BrokenResourceError):
                tx.send_nowait("again")

        return lambda: tx.send("lost"), rx.close, check

    return case


def oneshot_receive() -> Case:
    tx, rx = oneshot.channel[str](strict=True)

    def check(result: Any) -> None:
        assert result is RAISED
        assert rx.receive_nowait() == "sent"  # given back

    return rx.receive, lambda: tx.send("sent"), check


CASES: dict[str, Callable[[], Case]] = {
    "BatchSemaphore.acquire": batch_semaphore,
    "Semaphore.acquire": semaphore("acquire"),
    "Semaphore.__aenter__": semaphore("__aenter__"),
    "CapacityLimiter.acquire": limiter,
    "Event.wait": event,
    "oneshot receive": oneshot_receive,
    **{f"{f} receive, item sent": receive_sent(f) for f in CHANNELS},
    **{f"{f} send, item taken": send_taken(f) for f in CHANNELS},
    **{f"{f} receive, last sender closed": receive_ended(f) for f in CHANNELS},
    **{f"{f} send, last receiver closed": send_broken(f) for f in CHANNELS},
}


@pytest.mark.parametrize("name", list(CASES))
async def test_a_strict_wait_settled_before_its_task_sleeps_is_cancelled_losing_nothing(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    call, other, check = CASES[name]()
    armed = arm_inside_enqueue(monkeypatch, "after")
    armed.append(other)
    result = RAISED
    with anyio.fail_after(5):
        with anyio.CancelScope() as scope:
            scope.cancel()
            result = await call()
            # Where the call keeps what it was granted, the cancellation
            # is raised here.
            await anyio.lowlevel.checkpoint()
        assert scope.cancelled_caught
    if armed:
        # The call checked for cancellation before it parked (the drop-in
        # Semaphore on Trio, as Trio's own; the limiter, as AnyIO's):
        # nothing was parked to settle.
        armed.pop()()
    check(result)


@pytest.mark.parametrize("name", list(CASES))
async def test_a_wait_settled_before_its_task_sleeps_is_a_checkpoint(
    name: str, monkeypatch: pytest.MonkeyPatch, anyio_backend_name: str
) -> None:
    # Outside a cancelled scope: a schedule point (on Trio, Trio's count of
    # checkpoints: a schedule point and a cancellation point), also where
    # the call checks for cancellation before it parks, as AnyIO's.
    call, other, _ = CASES[name]()
    armed = arm_inside_enqueue(monkeypatch, "after")
    armed.append(other)

    async def settled() -> None:
        try:
            await call()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass  # the failure it was settled with

    with anyio.fail_after(5):
        await assert_schedule_point(anyio_backend_name, settled)
    assert not armed, "the call did not park"


async def test_a_join_settled_before_its_task_sleeps_is_a_checkpoint(
    monkeypatch: pytest.MonkeyPatch, anyio_backend_name: str
) -> None:
    # A join that waits parks at once (parking is its checkpoint); a queued
    # job cancelled as the join's waiter is parked settles it first.
    async with Executor(max_workers=1) as executor:
        busy = executor.spawn(anyio.sleep_forever)  # the one worker's
        handle = executor.spawn(anyio.sleep_forever)  # queued
        armed = arm_inside_enqueue(monkeypatch, "after")
        armed.append(handle.cancel)

        async def join() -> None:
            with pytest.raises(JobCancelled):
                await handle

        with anyio.fail_after(5):
            await assert_schedule_point(anyio_backend_name, join)
        assert not armed, "the join did not park"
        busy.cancel()


@pytest.mark.parametrize("flavour", list(CHANNELS))
async def test_a_receive_handed_its_item_as_it_parks_keeps_a_task_cancel(
    flavour: str, monkeypatch: pytest.MonkeyPatch, anyio_backend_name: str
) -> None:
    # Plain asyncio: task.cancel() as the item is handed over lands at the
    # checkpoint after the wait.  The receive keeps its item (given back,
    # it could come after later items), so it must make that cancellation
    # again for the next checkpoint: swallowed, the task would run on.
    if anyio_backend_name != "asyncio":
        pytest.skip("task.cancel(): asyncio only")
    import asyncio

    tx, rx = CHANNELS[flavour](0, strict=True)
    armed = arm_inside_enqueue(monkeypatch, "after")
    got: list[str] = []

    async def receive() -> None:
        task = asyncio.current_task()
        assert task is not None
        armed.append(lambda: (tx.send_nowait("sent"), task.cancel()))
        got.append(await rx.receive())
        await asyncio.sleep(0)  # the cancellation is raised here
        got.append("ran on")

    task = asyncio.ensure_future(receive())
    with anyio.fail_after(5), pytest.raises(asyncio.CancelledError):
        await task
    assert not armed
    assert got == ["sent"]
    with pytest.raises(anyio.WouldBlock):
        rx.receive_nowait()


#: The locks: what makes one, how to hold it alone and let go, the acquire
#: a dropped coroutine is granted, and the acquire that parks then and its
#: release.
LOCKS: dict[str, tuple[Any, str, str, str, str, str]] = {
    "Lock": (Lock, "acquire", "release", "acquire", "acquire", "release"),
    **{
        f"RWLock {first}, {second}": (
            RWLock,
            "acquire_write",
            "release_write",
            f"acquire_{first}",
            f"acquire_{second}",
            f"release_{second}",
        )
        for first, second in [("write", "write"), ("write", "read"), ("read", "write")]
    },
}


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("kind", list(LOCKS))
async def test_a_lock_given_back_as_an_acquire_parks_is_handed_to_it(
    kind: str, where: str, monkeypatch: pytest.MonkeyPatch, anyio_backend_name: str
) -> None:
    # A coroutine that was handed the lock and then dropped is closed by
    # its finalizer as another acquire parks, and gives the lock back.
    # After the acquire's waiter is parked ("after"), the give-back hands
    # the lock to it before it named its task (a Lock raised AttributeError
    # in the finalizer and left the acquire waiting for good); before
    # ("before"), it hands it to nobody, and the acquire parked on a free
    # lock for good.  asyncio only: the dropped coroutine is driven by
    # hand, which Trio's waits do not allow.
    if anyio_backend_name != "asyncio":
        pytest.skip("drives a coroutine by hand: asyncio only")
    import asyncio

    make, hold, let_go, first, second, release = LOCKS[kind]
    lock = make()
    await getattr(lock, hold)()
    dropped: list[Any] = []

    async def park_and_drop() -> None:
        coro = getattr(lock, first)()
        coro.send(None)  # parked for this task, never resumed
        dropped.append(coro)

    await asyncio.ensure_future(park_and_drop())
    getattr(lock, let_go)()  # the dropped acquire is granted the lock
    armed = arm_inside_enqueue(monkeypatch, where)
    armed.append(lambda: dropped.pop().close())

    async def acquire_release() -> None:
        with anyio.fail_after(5):
            await getattr(lock, second)()
        if kind == "Lock":
            assert lock.statistics().owner == anyio.get_current_task()
        getattr(lock, release)()

    await asyncio.ensure_future(acquire_release())
    assert not armed
    stats = lock.statistics()
    if kind == "Lock":
        assert not stats.locked
        assert stats.tasks_waiting == 0
    else:
        assert stats.writer is None
        assert stats.readers == 0
        assert stats.tasks_waiting_read == stats.tasks_waiting_write == 0


async def test_a_worker_handed_a_job_as_it_parks_idle_checkpoints_first(
    monkeypatch: pytest.MonkeyPatch, anyio_backend_name: str
) -> None:
    # A job spawned as a worker's idle wait is parked (a finalizer run
    # there) is handed to that worker at once; the worker must still pass a
    # schedule point before it runs the job, as if the job had come just
    # before it went idle (it ran the job in the same step).  asyncio only:
    # a loop callback queued at the spawn tells the schedule point; on Trio
    # the rescheduled worker yields as it takes the grant, fix or not.
    if anyio_backend_name != "asyncio":
        pytest.skip("tells a schedule point by a loop callback: asyncio only")
    import asyncio

    callback_ran: list[bool] = []
    job_saw: list[bool] = []

    async def job() -> None:
        job_saw.append(bool(callback_ran))

    async with Executor(max_workers=1) as executor:

        async def first() -> None:
            # In the worker: its next wait is its idle park.
            def spawn() -> None:
                asyncio.get_running_loop().call_soon(callback_ran.append, True)
                executor.spawn(job)

            armed.append(spawn)

        armed = arm_inside_enqueue(monkeypatch, "after")
        with anyio.fail_after(5):
            await executor.spawn(first)
    assert not armed
    assert job_saw == [True], "the worker ran the job without a schedule point"
