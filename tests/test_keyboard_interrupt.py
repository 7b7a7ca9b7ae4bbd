"""KeyboardInterrupt protection on Trio (anyio_prims/_core/_ki.py).

Trio defers a Ctrl-C that arrives while protected code runs to the main
task's next checkpoint, so that it cannot leave a primitive half-updated.
The library's code is marked protected, as Trio's own primitives are,
except where it calls user code that may run long (an executor's jobs, the
map's input, ``spawn_many``'s argument), which stays interruptible.  These
tests run Trio directly (``trio.run``), once per waiter implementation (the
suite runs again with ``ANYIO_PRIMS_WAITER=generic``).  Trio before 0.28
marks protection with a wrapper per call; the library marks nothing there
and these tests skip.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import signal
import subprocess
import sys
import types
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest

import anyio_prims
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
from anyio_prims._core import FORCE_GENERIC, protect_from_keyboard_interrupt

trio = pytest.importorskip("trio")
pytest.importorskip("trio.testing")

ROOT = os.path.dirname(anyio_prims.__file__)

#: The functions that call user code, left interruptible on purpose: each
#: makes the call and nothing else (the bookkeeping around it is protected).
RUNS_USER_CODE = {
    ("executor/_executor.py", "_run_job"),
    ("executor/_executor.py", "_handles_for"),
    ("executor/_map.py", "_next_async"),
    ("executor/_map.py", "_next"),
    ("executor/_map.py", "_iter_of"),
    ("executor/_map.py", "_aiter_of"),
    ("sync/_event.py", "wait_for"),
}


def _trio_marks_code() -> bool:
    """Whether this Trio's ``enable_ki_protection`` marks a function's code
    (0.28 on) rather than wrapping it: asked of Trio itself, so that a
    library that wrongly thinks it cannot mark fails here, not skips."""

    def probe() -> None:  # pragma: no cover - never called
        pass

    return trio.lowlevel.enable_ki_protection(probe) is probe


@pytest.fixture(autouse=True)
def _marked() -> None:
    if not _trio_marks_code():
        assert protect_from_keyboard_interrupt() is False
        pytest.skip("this Trio marks KeyboardInterrupt protection with a wrapper")
    assert protect_from_keyboard_interrupt() is True


def run_trio(main: Callable[[], Awaitable[object]], **options: Any) -> None:
    """``trio.run(main)``; a KeyboardInterrupt that escapes fails the test
    (pytest would otherwise stop the whole session)."""
    try:
        trio.run(main, **options)
    except KeyboardInterrupt as exc:
        pytest.fail(f"a KeyboardInterrupt escaped: {exc!r}")


class LineWatch:
    """A trace function that records, for every line of the library run
    while it is installed, whether Trio deems it protected."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.unprotected: Counter[tuple[str, str, int]] = Counter()

    def _local(self, frame: types.FrameType, event: str, arg: object) -> Any:
        if event == "line":
            where = os.path.relpath(frame.f_code.co_filename, ROOT)
            self.seen[where] += 1
            # The trace function's caller frame is the traced one, so
            # Trio's walk starts at the library's line.
            if not trio.lowlevel.currently_ki_protected():
                # Named after the function a comprehension runs in (its own
                # code object on 3.11 and older).
                named: types.FrameType | None = frame
                while named is not None and named.f_code.co_name.startswith("<"):
                    named = named.f_back
                name = named.f_code.co_name if named is not None else "?"
                self.unprotected[(where, name, frame.f_lineno)] += 1
        return self._local

    def _global(self, frame: types.FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename.startswith(ROOT + os.sep):
            return self._local
        return None

    def __enter__(self) -> LineWatch:
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.settrace(self._previous)


async def parked() -> None:
    """Until every other task is blocked (parked on a primitive)."""
    await trio.testing.wait_all_tasks_blocked()


async def _exercise_channels() -> None:
    """Fast, parked, handed-off, cancelled and closed paths of every channel."""
    for module in (mpsc, spmc, mpmc):
        for capacity in (0, 1, float("inf")):
            tx, rx = module.channel(capacity)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tx.send, "parked")  # parks unless unbounded
                await parked()
                assert await rx.receive() == "parked"
            async with trio.open_nursery() as nursery:
                for i in range(70):  # past the budget: a budget checkpoint
                    if capacity:
                        await tx.send(i)
                        assert await rx.receive() == i
                nursery.start_soon(rx.receive)  # parks: the handoff below
                await parked()
                await tx.send("handed")
            with trio.move_on_after(0):
                await rx.receive()
            if capacity == 1:
                tx.send_nowait("full")
                with trio.move_on_after(0):
                    await tx.send("cancelled")
                assert await rx.receive() == "full"
            assert rx.statistics().tasks_waiting_receive == 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_expect_end, rx)
                await parked()
                tx.close()
            await rx.aclose()
    send, receive = create_memory_object_stream[int](1)
    await send.send(1)
    assert await receive.receive() == 1
    clone = send.clone()
    clone.close()
    send.close()
    with pytest.raises(anyio.EndOfStream):
        await receive.receive()
    receive.close()
    one_tx, one_rx = oneshot.channel[int]()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(one_rx.receive)
        await parked()
        one_tx.send(1)


async def _expect_end(rx: Any) -> None:
    with pytest.raises(anyio.EndOfStream):
        await rx.receive_many(4)


async def _exercise_sync() -> None:
    """Uncontended, contended, cancelled and closed paths of every lock."""
    locks: list[Any] = [Lock(), Semaphore(1), CapacityLimiter(1)]
    for lock in locks:
        async with trio.open_nursery() as nursery:
            async with lock:
                nursery.start_soon(_hold_once, lock)  # parks, then gets it
                await parked()
            with trio.move_on_after(0):
                await lock.acquire()  # taken by the task above: cancelled
    limiter = CapacityLimiter(1)
    async with trio.open_nursery() as nursery, limiter:
        nursery.start_soon(_hold_once, limiter)
        await parked()
        limiter.total_tokens = 2  # a property's setter grants the task
        assert (limiter.borrowed_tokens, limiter.available_tokens) == (2, 0)
    semaphore = BatchSemaphore(1)
    async with semaphore:
        with trio.move_on_after(0):
            await semaphore.acquire(2)
    semaphore.close()
    assert (semaphore.available_permits, semaphore.fair, semaphore.closed) == (
        1,
        True,
        True,
    )
    event = Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(event.wait)
        await parked()
        event.set()
    condition = Condition()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wait_on, condition)
        await parked()
        async with condition:
            condition.notify_all()
    rwlock = RWLock()
    async with trio.open_nursery() as nursery, rwlock.read():
        nursery.start_soon(_write_once, rwlock)  # a queued writer
        await parked()
    async with rwlock.write():
        pass


async def _hold_once(lock: Any) -> None:
    async with lock:
        await trio.sleep(0)


async def _wait_on(condition: Condition) -> None:
    async with condition:
        await condition.wait()


async def _write_once(rwlock: RWLock) -> None:
    async with rwlock.write():
        pass


async def _exercise_executor() -> None:
    async with Executor(max_workers=2, max_queued=1) as executor:
        handle = executor.spawn(trio.sleep, 0)
        await handle
        await executor.submit(trio.sleep, 0)
        executor.spawn_many(trio.sleep, [(0,), (0,)])
        results = [r async for r in executor.map(_double, [1, 2, 3])]
        assert results == [2, 4, 6]
        executor.spawn(trio.sleep_forever).cancel()


async def _double(x: int) -> int:
    await trio.sleep(0)
    return 2 * x


def test_the_library_runs_protected_from_keyboard_interrupt_on_trio() -> None:
    watch = LineWatch()

    async def main() -> None:
        with watch:
            await _exercise_channels()
            await _exercise_sync()
            await _exercise_executor()

    run_trio(main)
    unprotected = {
        where: count
        for where, count in watch.unprotected.items()
        if where[:2] not in RUNS_USER_CODE
    }
    assert unprotected == {}
    # Not vacuous: the scenario ran the code of every module with any.
    modules = {
        os.path.relpath(os.path.join(path, name), ROOT)
        for path, _, names in os.walk(ROOT)
        for name in names
        if name.endswith(".py")
    }
    unused = {"__init__.py", "_core/_ki.py", "_core/_copying.py"}
    unused |= {"_core/_budget.py", "executor/_ratelimit.py", "streams.py"}
    unused |= {m for m in modules if m.endswith("/__init__.py")}
    assert modules - unused - set(watch.seen) == set()


def test_user_code_the_library_calls_stays_interruptible_on_trio() -> None:
    protected: dict[str, bool] = {}

    def note(where: str) -> None:
        protected[where] = trio.lowlevel.currently_ki_protected()

    async def job() -> None:
        note("job")

    async def mapped(x: int) -> int:
        return x

    def inputs() -> Iterator[int]:
        note("map input")
        yield 1

    async def async_inputs() -> AsyncIterator[int]:
        note("async map input")
        yield 1

    class Inputs:
        def __iter__(self) -> Iterator[int]:
            note("map input's __iter__")
            return iter([1])

    class AsyncInputs:
        def __aiter__(self) -> AsyncIterator[int]:
            note("async map input's __aiter__")
            return async_inputs()

    def arguments() -> Iterator[tuple[()]]:
        note("spawn_many argument")
        yield ()

    def predicate() -> bool:
        note("wait_for predicate")
        return True

    async def main() -> None:
        condition = Condition()
        async with condition:
            assert await condition.wait_for(predicate)
        async with Executor() as executor:
            await executor.spawn(job)
            assert [r async for r in executor.map(mapped, inputs())] == [1]
            assert [r async for r in executor.map(mapped, async_inputs())] == [1]
            assert [r async for r in executor.map(mapped, Inputs())] == [1]
            assert [r async for r in executor.map(mapped, AsyncInputs())] == [1]
            await executor.spawn_many(job, arguments())[0]
        note("the caller, after")

    run_trio(main)
    assert protected == {
        "job": False,
        "map input": False,
        "async map input": False,
        "map input's __iter__": False,
        "async map input's __aiter__": False,
        "spawn_many argument": False,
        "wait_for predicate": False,
        "the caller, after": False,
    }


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Python's own SIGINT handler for the test, which is when ``trio.run``
    installs Trio's (a process started in the background may ignore SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def checkpoints(count: int) -> None:
    for _ in range(count):
        await trio.sleep(0)


class SignalsWhenHashed:
    """A borrower whose hashing sends this process SIGINT: a Ctrl-C that
    arrives while the limiter records it."""

    def __init__(self) -> None:
        self.sent = False

    def __hash__(self) -> int:
        if not self.sent:
            self.sent = True
            signal.raise_signal(signal.SIGINT)
        return 1


@pytest.mark.usefixtures("default_sigint")
def test_a_ctrl_c_inside_a_primitive_waits_for_the_next_checkpoint_on_trio() -> None:
    borrower = SignalsWhenHashed()
    outcome: list[str] = []

    async def main() -> None:
        limiter = CapacityLimiter(1)
        limiter.acquire_on_behalf_of_nowait(borrower)  # not interrupted
        assert borrower.sent
        outcome.append(f"borrowed {limiter.borrowed_tokens}")
        with pytest.raises(KeyboardInterrupt):
            await checkpoints(100)
        outcome.append("interrupted at a checkpoint")
        limiter.release_on_behalf_of(borrower)
        assert limiter.borrowed_tokens == 0

    run_trio(main)
    assert outcome == ["borrowed 1", "interrupted at a checkpoint"]


@pytest.mark.usefixtures("default_sigint")
@pytest.mark.parametrize("flavour", [mpsc, spmc, mpmc])
def test_a_ctrl_c_delivered_to_a_parked_receive_takes_nothing_on_trio(
    flavour: types.ModuleType,
) -> None:

    async def main() -> None:
        tx, rx = flavour.channel(1)

        async def interrupt_once_parked() -> None:
            while rx.statistics().tasks_waiting_receive == 0:
                await trio.sleep(0)
            signal.raise_signal(signal.SIGINT)  # delivered to the main task

        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupt_once_parked)
            with pytest.raises(KeyboardInterrupt):
                await rx.receive()
        assert rx.statistics().tasks_waiting_receive == 0
        await tx.send("after")
        assert await rx.receive() == "after"

    # Every Ctrl-C goes to the main task at a checkpoint: here, its receive.
    run_trio(main, restrict_keyboard_interrupt_to_checkpoints=True)


async def interrupt_until_rescheduled(main_task: Any, main_ran: list[str]) -> bool:
    """Send SIGINT, which Trio delivers to the parked main task, and wait
    until Trio has rescheduled that task with it: ``True``; or ``False``
    once ``main_ran`` shows that the main task ran first."""
    signal.raise_signal(signal.SIGINT)
    # Trio's own record of a rescheduled task (it has no public one).
    while main_task._next_send_fn is None:
        if main_ran:
            return False
        await trio.sleep(0)
    return True


@pytest.mark.usefixtures("default_sigint")
@pytest.mark.parametrize("flavour", [mpsc, spmc, mpmc])
def test_a_ctrl_c_delivered_to_a_parked_send_leaves_the_sender_usable_on_trio(
    flavour: types.ModuleType,
) -> None:
    # The Ctrl-C is delivered to the main task parked in a rendezvous send;
    # once Trio has rescheduled it with the KeyboardInterrupt, and before it
    # runs, another task tries to take the item.  With the native waiter the
    # send left the queue as it was interrupted, so nothing is taken.  The
    # generic waiter learns of it only when the task runs (docs/semantics.md):
    # the item is taken and the send still raises.  Either way the sender is
    # free afterwards (the single sender of spmc stayed busy for good).
    # Tasks woken together run in any order on Trio, so the attempt repeats
    # until the other task ran first.
    async def attempt() -> list[str]:
        tx, rx = flavour.channel(0)
        main_task = trio.lowlevel.current_task()
        sent: list[str] = []
        taken: list[str] = []

        async def interrupt_then_take() -> None:
            while rx.statistics().tasks_waiting_send == 0:
                await trio.sleep(0)
            if not await interrupt_until_rescheduled(main_task, sent):
                return
            try:
                taken.append(rx.receive_nowait())
            except anyio.WouldBlock:
                taken.append("WouldBlock")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupt_then_take)
            try:
                await tx.send("item")
            except KeyboardInterrupt:
                sent.append("interrupted")
            else:
                sent.append("returned")
        assert sent == ["interrupted"]
        assert taken in ([], ["item"] if FORCE_GENERIC else ["WouldBlock"])
        stats = tx.statistics()
        assert (stats.tasks_waiting_send, stats.tasks_waiting_receive) == (0, 0)
        with pytest.raises(anyio.WouldBlock):
            tx.send_nowait("no receiver waits")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tx.send, "after")
            assert await rx.receive() == "after"
        return taken

    async def main() -> None:
        for _ in range(100):
            if await attempt():
                return
        pytest.fail("the main task always ran before the other task could try")

    run_trio(main, restrict_keyboard_interrupt_to_checkpoints=True)


@pytest.mark.usefixtures("default_sigint")
def test_a_ctrl_c_delivered_to_a_parked_submit_spawns_nothing_on_trio() -> None:
    # The main task waits in submit() for room in a full queue; the Ctrl-C
    # is delivered to it there, and once Trio has rescheduled it with the
    # KeyboardInterrupt, and before it runs, another task makes room (it
    # cancels the queued job).  With the native waiter the submit left the
    # queue of submitters as it was interrupted, so the room goes to
    # nobody.  The generic waiter learns of it only when the task runs
    # (docs/semantics.md): the submit was admitted and its job queued, and
    # the job is withdrawn as the submit raises.  Either way the job never
    # runs, and the executor takes the next submit.
    async def attempt() -> bool:
        main_task = trio.lowlevel.current_task()
        release = trio.Event()
        ran: list[str] = []
        outcome: list[str] = []
        in_window: list[bool] = []

        async def job(name: str) -> None:
            if name == "first":
                await release.wait()
            ran.append(name)

        async with Executor(max_workers=1, max_queued=1) as executor:
            executor.spawn(job, "first")
            await parked()  # the only worker runs "first"
            queued = executor.spawn(job, "queued")

            async def interrupt_then_make_room() -> None:
                await parked()  # the main task waits in submit()
                if await interrupt_until_rescheduled(main_task, outcome):
                    in_window.append(True)
                queued.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(interrupt_then_make_room)
                try:
                    await executor.submit(job, "interrupted")
                except KeyboardInterrupt:
                    outcome.append("interrupted")
                else:  # pragma: no cover - the failure
                    outcome.append("returned")
            assert outcome == ["interrupted"]
            stats = executor.statistics()
            assert (stats.jobs_queued, stats.jobs_pending) == (0, 1)
            after = await executor.submit(job, "after")
            release.set()
            await after
        assert ran == ["first", "after"]
        return bool(in_window)

    async def main() -> None:
        for _ in range(100):
            if await attempt():
                return
        pytest.fail("the main task always ran before the other task could act")

    run_trio(main, restrict_keyboard_interrupt_to_checkpoints=True)


@pytest.mark.usefixtures("default_sigint")
@pytest.mark.parametrize("woken_by", ["notify", "cancel"])
def test_a_ctrl_c_while_condition_wait_reacquires_leaves_the_lock_held_on_trio(
    woken_by: str,
) -> None:
    # Notified (or cancelled), the main task parks re-acquiring the lock
    # the other task holds; Trio delivers the Ctrl-C to it there, shield or
    # not.  wait() raises it, over a cancellation, holding the lock, so the
    # ``async with`` releases the lock instead of failing; a notification
    # goes on to the other waiter.
    outcome: list[str] = []

    async def main() -> None:
        cond = Condition()

        def lock_waiters() -> int:
            return cond.statistics().lock_statistics.tasks_waiting

        async def other_waiter() -> None:
            async with cond:
                await cond.wait()
                outcome.append("other notified")

        async def wake(scope: Any) -> None:  # a trio.CancelScope
            async with cond:
                if woken_by == "notify":
                    cond.notify(1)
                else:
                    scope.cancel()
                while lock_waiters() == 0:
                    await trio.sleep(0)
                signal.raise_signal(signal.SIGINT)  # to the main task
                # Delivered (through Trio's signal wake-up, a few steps on)
                # while the lock is held: hold it until every task waits.
                await trio.testing.wait_all_tasks_blocked(cushion=0.01)

        async with trio.open_nursery() as nursery, cond:
            nursery.start_soon(other_waiter)
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as scope:
                nursery.start_soon(wake, scope)
                try:
                    await cond.wait()
                except KeyboardInterrupt as exc:  # not the cancellation
                    outcome.append("interrupted")
                    # The traceback keeps wait()'s frame: no exception left
                    # in its locals to close a reference cycle.
                    tb = exc.__traceback__
                    while tb is not None:
                        frame = tb.tb_frame
                        if frame.f_code is Condition.wait.__code__:
                            kept = frame.f_locals.values()
                            if not any(isinstance(v, BaseException) for v in kept):
                                outcome.append("no cycle")
                        tb = tb.tb_next
            owner = cond.statistics().lock_statistics.owner
            if owner == anyio.get_current_task():
                outcome.append("raised holding the lock")
            if woken_by == "cancel":
                cond.notify()
        assert not cond.locked()

    run_trio(main, restrict_keyboard_interrupt_to_checkpoints=True)
    assert outcome == [
        "interrupted",
        "no cycle",
        "raised holding the lock",
        "other notified",
    ]


def test_the_marking_leaves_code_outside_the_library_alone_on_trio() -> None:
    # A dataclass's __repr__ is a functools.wraps wrapper: it carries the
    # __module__ of the class it was made for (the library's own statistics
    # classes too), but its code is the wrapping module's, shared by every
    # dataclass in the process.
    @dataclasses.dataclass
    class UserRecord:
        field: object

    class Probe:
        def __repr__(self) -> str:
            return f"protected={trio.lowlevel.currently_ki_protected()}"

    shown: list[str] = []

    async def main() -> None:
        shown.append(repr(UserRecord(Probe())))

    run_trio(main)
    assert len(shown) == 1
    assert shown[0].endswith("UserRecord(field=protected=False)")


class CtrlCAt:
    """Send this process SIGINT when ``func`` reaches the line that holds
    ``text``, once: a Ctrl-C that lands exactly there."""

    def __init__(self, func: Callable[..., object], text: str) -> None:
        self.code = func.__code__
        lines, first = inspect.getsourcelines(func)
        self.line = first + next(i for i, line in enumerate(lines) if text in line)
        self.sent = False

    def _local(self, frame: types.FrameType, event: str, arg: object) -> Any:
        if event == "line" and frame.f_lineno == self.line and not self.sent:
            self.sent = True
            signal.raise_signal(signal.SIGINT)
        return self._local

    def _global(self, frame: types.FrameType, event: str, arg: object) -> Any:
        return self._local if frame.f_code is self.code else None

    def __enter__(self) -> CtrlCAt:
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.settrace(None)


@pytest.mark.usefixtures("default_sigint")
def test_a_ctrl_c_in_a_worker_between_taking_a_job_and_starting_it_loses_no_job() -> (
    None
):
    # The worker takes the next queued job (popleft) and marks it handed over:
    # a Ctrl-C between the two must wait for a checkpoint, or the job is in
    # neither the queue nor a worker and its handle never settles.
    handles: list[Any] = []

    async def main() -> None:
        watch = CtrlCAt(Executor._work_in_scope, "job._state = HANDED")
        with pytest.raises(BaseException) as caught:  # noqa: PT011, PT012
            async with Executor(max_workers=1) as executor:
                handles.extend(executor.spawn(trio.sleep, 0) for _ in range(3))
                with watch:
                    await checkpoints(100)
        assert watch.sent
        assert caught.group_contains(KeyboardInterrupt) or isinstance(
            caught.value, KeyboardInterrupt
        )
        assert [handle.done() for handle in handles] == [True, True, True]

    run_trio(main)


FIRST_USE = """
import asyncio, math, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import anyio_prims
from anyio_prims import Condition, Lock, Semaphore, mpsc

# Made before Trio's import, as at a module's import: a lock, a semaphore,
# a condition, and a channel whose receive side has parked a task on
# asyncio already, so that its wait structure exists.  None of them can
# mark the library's code.
LOCK, SEMAPHORE, CONDITION = Lock(), Semaphore(1), Condition()
SEND, RECEIVE = mpsc.channel(0)

async def park_on_asyncio():
    asyncio.get_running_loop().call_soon(SEND.send_nowait, "on asyncio")
    assert await RECEIVE.receive() == "on asyncio"

asyncio.run(park_on_asyncio())
assert "trio" not in sys.modules, "Trio must be imported after the library"
import trio
from anyio_prims import BatchSemaphore, Executor
sys.path.insert(0, sys.argv[1])
from test_keyboard_interrupt import CtrlCAt

async def checkpoints_after(watch):
    assert watch.sent
    try:
        for _ in range(100):
            await trio.sleep(0)
    except KeyboardInterrupt:
        print("interrupted at a checkpoint")

async def spawn():
    async with Executor() as executor:
        with CtrlCAt(Executor.spawn, "self._queue.append(job)") as watch:
            try:
                executor.spawn(trio.sleep, 0)
            except KeyboardInterrupt:
                print("interrupted inside the call")
                return
        await checkpoints_after(watch)

async def acquire(sem, method, line):
    with CtrlCAt(method, line) as watch:
        try:
            await sem.acquire()
        except KeyboardInterrupt:
            print("interrupted inside the call")
            return
    await checkpoints_after(watch)

async def channel():
    # A channel made after Trio's import marks nothing, nor do its budgeted
    # sends: the first call that asks Trio for anything is the budget's
    # checkpoint, within 64 sends, and from then on a send is protected.
    send, receive = mpsc.channel(math.inf)
    for i in range(100):
        await send.send(i)
    with CtrlCAt(type(send).send, "state = self._state") as watch:
        try:
            await send.send(100)
        except KeyboardInterrupt:
            print("interrupted inside the call")
            return
    await checkpoints_after(watch)

async def receive():
    # A receive that parks on the channel used on asyncio, woken by a send:
    # the first thing that marks is making its waiter.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(SEND.send, "item")
        with CtrlCAt(type(RECEIVE).receive, "if waiter.state is FAILED:") as watch:
            try:
                print("received", await RECEIVE.receive())
            except KeyboardInterrupt:
                print("interrupted inside the call")
                return
        await checkpoints_after(watch)

async def condition_wait():
    # Condition.wait() after acquire_nowait(), which marks as it looks up
    # the current task.  A Ctrl-C between releasing the lock and parking
    # waits for the park, and wait() raises it holding the lock again.
    CONDITION.acquire_nowait()
    with CtrlCAt(Condition.wait, "waiters = self._waiters") as watch:
        try:
            await CONDITION.wait()
        except KeyboardInterrupt:
            assert watch.sent
            print("interrupted, locked:", CONDITION.locked())
            return
    print("woken")

async def main():
    # The library's first call on Trio comes first in each.
    if sys.argv[2] == "receive":
        await receive()
    elif sys.argv[2] == "Lock":
        # Strict (the drop-in's default), made before Trio's import: it
        # marks as it looks up the current task; the Ctrl-C lands between
        # the take and naming the owner.
        await acquire(LOCK, Lock.acquire, "self._owner = task")
    elif sys.argv[2] == "strict Semaphore":
        # The same for a Semaphore, which looks up no task: it marks as it
        # asks for the acquire's checkpoints.
        await acquire(SEMAPHORE, Semaphore.acquire, "sem._value -= 1")
    elif sys.argv[2] == "Condition":
        await condition_wait()
    elif sys.argv[2] == "spawn":
        await spawn()
    elif sys.argv[2] == "channel":
        await channel()
    elif sys.argv[2] == "BatchSemaphore":
        await acquire(BatchSemaphore(1), BatchSemaphore.acquire, "self._value -= n")
    else:
        sem = Semaphore(1, fast_acquire=True)
        await acquire(sem, Semaphore.acquire, "budget.left -= 1")

trio.run(main)
"""


#: What each first call prints: where the Ctrl-C was raised.
FIRST_CALL_OUTPUT = {
    "spawn": ["interrupted at a checkpoint"],
    "BatchSemaphore": ["interrupted at a checkpoint"],
    "Semaphore": ["interrupted at a checkpoint"],
    "channel": ["interrupted at a checkpoint"],
    "Lock": ["interrupted at a checkpoint"],
    "strict Semaphore": ["interrupted at a checkpoint"],
    "Condition": ["interrupted, locked: True"],
    "receive": ["received item", "interrupted at a checkpoint"],
}


@pytest.mark.parametrize("first_call", list(FIRST_CALL_OUTPUT))
def test_the_first_call_on_trio_is_protected_when_trio_came_after_the_library(
    first_call: str,
) -> None:
    # Trio imported after anyio_prims (anyio.run(..., backend="trio") does
    # so): the very first call is protected already, though it asks Trio
    # for nothing: an Executor.spawn before any wait or checkpoint, or a
    # budgeted acquire of a semaphore just made (whose wait queue, made
    # only when a task parks, does not mark the library's code).  A
    # channel is the exception the docs name: neither making one nor its
    # budgeted calls mark anything, so its sends are protected from its
    # first checkpoint on.  Primitives made before Trio's import, as a
    # module's globals are, mark nothing when made: there the first call
    # marks, as it looks up the current task (Lock, Condition), asks for a
    # strict acquire's checkpoints (Semaphore) or, on a channel that parked
    # a task on asyncio first, makes the receive's waiter.  With the generic
    # waiter forced, the last two rely on the generic paths' own marking
    # (take_checkpoints, GenericWaiter).  A process of its own: the marking
    # is done once per process.
    done = subprocess.run(
        [sys.executable, "-c", FIRST_USE, os.path.dirname(__file__), first_call],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == FIRST_CALL_OUTPUT[first_call]
