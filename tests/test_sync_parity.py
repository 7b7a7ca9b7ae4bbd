"""Parity with AnyIO: the same scenario runs against anyio's Lock, Semaphore,
CapacityLimiter, Event and Condition and against anyio_prims' drop-ins, and
the observable results (order of events, statistics, errors) must be equal.

A scenario takes a namespace of the five classes and returns a trace.  Tasks
are named, and statistics are recorded with task names instead of task
objects, so traces compare across implementations.

An uncontended acquire takes the lock, unit or token first and then
reaches its checkpoint, as AnyIO's does (``acquire_taken_before_checkpoint``).

Exception messages are compared on asyncio; on Trio AnyIO passes some of
Trio's own wording through (``Lock.release``), so there only the types are.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import math
import pickle
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import BatchSemaphore, RWLock
from anyio_prims._core import BUDGET_SIZE
from anyio_prims.sync._event import Condition, Event
from anyio_prims.sync._limiter import CapacityLimiter
from anyio_prims.sync._lock import Lock, Semaphore

from ._anyio_version import requires_anyio
from ._sync_support import settle, start_in_order

pytestmark = [
    pytest.mark.anyio,
    requires_anyio(
        4, 14, "its locks' hand-over and CapacityLimiter's argument checks changed"
    ),
]

ANYIO = SimpleNamespace(
    Lock=anyio.Lock,
    Semaphore=anyio.Semaphore,
    CapacityLimiter=anyio.CapacityLimiter,
    Event=anyio.Event,
    Condition=anyio.Condition,
)
OURS = SimpleNamespace(
    Lock=Lock,
    Semaphore=Semaphore,
    CapacityLimiter=CapacityLimiter,
    Event=Event,
    Condition=Condition,
)


class Tracer:
    """A trace of one scenario run, with tasks known by name."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.trace: list[object] = []
        self.names: dict[int, str] = {}

    def me(self, name: str) -> None:
        self.names[anyio.get_current_task().id] = name

    def add(self, *event: object) -> None:
        self.trace.append(event)

    def error(self, exc: BaseException) -> tuple[str, str | None]:
        message = str(exc) if self.backend == "asyncio" else None
        return (type(exc).__name__, message)

    def lock_stats(self, stats: anyio.LockStatistics) -> tuple[object, ...]:
        owner = self.names.get(stats.owner.id, "?") if stats.owner else None
        return (type(stats).__name__, stats.locked, owner, stats.tasks_waiting)

    def limiter_stats(
        self, stats: anyio.CapacityLimiterStatistics
    ) -> tuple[object, ...]:
        # tasks by name, other borrowers (strings here) as they are
        borrowers = sorted(
            b if isinstance(b, str) else self.names.get(id(b), "?")
            for b in stats.borrowers
        )
        return (
            type(stats).__name__,
            stats.borrowed_tokens,
            stats.total_tokens,
            borrowers,
            stats.tasks_waiting,
        )

    def call(self, label: str, fn: Callable[[], object]) -> None:
        try:
            result = fn()
        except Exception as exc:
            self.add(label, "raised", *self.error(exc))
        else:
            self.add(label, "returned", result)

    async def acall(self, label: str, fn: Callable[[], Awaitable[object]]) -> None:
        try:
            result = await fn()
        except Exception as exc:
            self.add(label, "raised", *self.error(exc))
        else:
            self.add(label, "returned", result)


Scenario = Callable[[SimpleNamespace, Tracer], Awaitable[None]]


async def assert_same_trace(scenario: Scenario, backend: str) -> None:
    theirs = Tracer(backend)
    await scenario(ANYIO, theirs)
    ours = Tracer(backend)
    await scenario(OURS, ours)
    assert theirs.trace, "the scenario recorded nothing"
    assert ours.trace == theirs.trace


# Creation outside an event loop


def test_statistics_before_first_use_match() -> None:
    for name in ("Lock", "Event", "Condition"):
        assert getattr(OURS, name)().statistics() == getattr(ANYIO, name)().statistics()
    assert OURS.Semaphore(2).statistics() == ANYIO.Semaphore(2).statistics()
    assert OURS.Semaphore(2).value == ANYIO.Semaphore(2).value
    ours, theirs = OURS.CapacityLimiter(3), ANYIO.CapacityLimiter(3)
    assert ours.statistics() == theirs.statistics()
    assert ours.available_tokens == theirs.available_tokens


#: The calls that need the current task, made where no event loop runs.
OUTSIDE_A_LOOP: dict[str, Callable[[SimpleNamespace], object]] = {
    "Lock.acquire_nowait": lambda ns: ns.Lock().acquire_nowait(),
    "Lock(fast_acquire=True).acquire_nowait": lambda ns: ns.Lock(
        fast_acquire=True
    ).acquire_nowait(),
    "Lock.release": lambda ns: ns.Lock().release(),
    "CapacityLimiter.acquire_nowait": lambda ns: ns.CapacityLimiter(1).acquire_nowait(),
    "CapacityLimiter.release": lambda ns: ns.CapacityLimiter(1).release(),
    "Condition.acquire_nowait": lambda ns: ns.Condition().acquire_nowait(),
    "Condition.notify": lambda ns: ns.Condition().notify(),
    "Condition.release": lambda ns: ns.Condition().release(),
}


@pytest.mark.parametrize("call", list(OUTSIDE_A_LOOP))
def test_a_call_that_needs_the_task_raises_anyio_s_error_outside_a_loop(
    call: str,
) -> None:
    # AnyIO's error for "no event loop runs" (NoEventLoopError, a
    # RuntimeError), with Trio imported, as in this process; the test
    # without Trio checks the other branch.
    with pytest.raises(RuntimeError) as theirs:
        OUTSIDE_A_LOOP[call](ANYIO)
    with pytest.raises(RuntimeError) as ours:
        OUTSIDE_A_LOOP[call](OURS)
    assert type(ours.value) is type(theirs.value)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("1",), {}), ((-1,), {}), ((1,), {"max_value": "2"}), ((2,), {"max_value": 1})],
)
def test_semaphore_constructor_errors_match(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    with pytest.raises((TypeError, ValueError)) as theirs:
        ANYIO.Semaphore(*args, **kwargs)
    with pytest.raises((TypeError, ValueError)) as ours:
        OURS.Semaphore(*args, **kwargs)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("bad", [1.5, -1, -math.inf])
def test_capacity_limiter_constructor_errors_match(bad: float) -> None:
    with pytest.raises((TypeError, ValueError)) as theirs:
        ANYIO.CapacityLimiter(bad)
    with pytest.raises((TypeError, ValueError)) as ours:
        OURS.CapacityLimiter(bad)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


# Lock


async def lock_fifo(ns: SimpleNamespace, t: Tracer) -> None:
    # Snapshots also right after each release hands the lock over, before
    # the new owner runs: it is already named.
    t.me("main")
    lock = ns.Lock()

    async def contend(name: str) -> None:
        t.me(name)
        async with lock:
            t.add("acquired", name, t.lock_stats(lock.statistics()))
            await anyio.lowlevel.checkpoint()
        t.add("released by", name, t.lock_stats(lock.statistics()))

    await lock.acquire()
    t.add(t.lock_stats(lock.statistics()))
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(contend, n) for n in "abc"))
        t.add(t.lock_stats(lock.statistics()))
        lock.release()
        t.add("handed over", t.lock_stats(lock.statistics()))
        t.call("nowait after handoff", lock.acquire_nowait)
        t.call("release after handoff", lock.release)
    t.add(t.lock_stats(lock.statistics()))


async def lock_errors(ns: SimpleNamespace, t: Tracer) -> None:
    t.me("main")
    lock = ns.Lock()
    t.call("release free", lock.release)
    await lock.acquire()
    await t.acall("reacquire", lock.acquire)
    t.call("reacquire nowait", lock.acquire_nowait)

    async def other() -> None:
        t.me("other")
        t.call("nowait held", lock.acquire_nowait)
        t.call("release not owner", lock.release)

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
    lock.release()
    t.call("nowait free", lock.acquire_nowait)
    t.add(t.lock_stats(lock.statistics()))


async def lock_cancelled_waiter(ns: SimpleNamespace, t: Tracer) -> None:
    t.me("main")
    lock = ns.Lock()
    scope = anyio.CancelScope()

    async def contend(name: str) -> None:
        t.me(name)
        async with lock:
            t.add("acquired", name)

    async def cancelled() -> None:
        with scope:
            await contend("cancelled")
        t.add("cancelled caught", scope.cancelled_caught)

    await lock.acquire()
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, partial(contend, "a"), cancelled)
        await start_in_order(tg, partial(contend, "b"))
        scope.cancel()
        await settle()
        t.add(t.lock_stats(lock.statistics()))
        lock.release()
    t.add(t.lock_stats(lock.statistics()))


async def lock_checkpoints(ns: SimpleNamespace, t: Tracer) -> None:
    lock = ns.Lock()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await lock.acquire()
    t.add("cancelled scope", scope.cancelled_caught, lock.locked())
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        for _ in range(3):  # Trio may need more than one schedule point
            await lock.acquire()
            lock.release()
        t.add("others ran", ran)


async def lock_reacquire_in_a_cancelled_scope(ns: SimpleNamespace, t: Tracer) -> None:
    # The owner asks again where a cancellation is pending: AnyIO's asyncio
    # Lock raises RuntimeError at once, its Trio Lock (Trio's) checks for the
    # cancellation first.
    for fast in (False, True):
        lock = ns.Lock(fast_acquire=fast)
        await lock.acquire()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await t.acall("reacquire", lock.acquire)
        t.add("fast_acquire", fast, scope.cancelled_caught, lock.locked())
        lock.release()


@pytest.mark.parametrize(
    "scenario",
    [
        lock_fifo,
        lock_errors,
        lock_reacquire_in_a_cancelled_scope,
        lock_cancelled_waiter,
        lock_checkpoints,
    ],
)
async def test_lock_matches_anyio(scenario: Scenario, anyio_backend_name: str) -> None:
    await assert_same_trace(scenario, anyio_backend_name)


# Semaphore


async def semaphore_counting(ns: SimpleNamespace, t: Tracer) -> None:
    sem = ns.Semaphore(2, max_value=2)
    t.add(sem.value, sem.max_value, sem.statistics())
    t.call("release at max", sem.release)
    async with sem as entered:
        t.add("enter returns sem", entered is sem, sem.value)
        await sem.acquire()
        t.call("nowait at zero", sem.acquire_nowait)
        sem.release()
    t.add(sem.value)


async def semaphore_fifo(ns: SimpleNamespace, t: Tracer) -> None:
    sem = ns.Semaphore(0)

    async def take(name: str) -> None:
        await sem.acquire()
        t.add("acquired", name, sem.value)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(take, n) for n in "abc"))
        t.add(sem.statistics())
        for _ in range(3):
            sem.release()
            t.add("released", sem.value)
            await settle()
    t.add(sem.value, sem.statistics())


async def semaphore_cancellation(ns: SimpleNamespace, t: Tracer) -> None:
    sem = ns.Semaphore(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sem.acquire()
    t.add("cancelled scope", scope.cancelled_caught, sem.value)
    await sem.acquire()
    with anyio.move_on_after(0.01) as scope:
        await sem.acquire()
    t.add("timed out", scope.cancelled_caught, sem.value, sem.statistics())


async def semaphore_with_no_room(ns: SimpleNamespace, t: Tracer) -> None:
    # max_value equal to a value of 0, no task waiting: neither acquirable
    # nor releasable.
    for fast in (False, True):
        sem = ns.Semaphore(0, max_value=0, fast_acquire=fast)
        t.add(fast, sem.value, sem.max_value, sem.statistics())
        t.call("release", sem.release)
        t.call("nowait", sem.acquire_nowait)
        with anyio.move_on_after(0.01) as scope:
            await sem.acquire()
        t.add("timed out", scope.cancelled_caught, sem.value, sem.statistics())


async def semaphore_with_no_room_and_waiters(ns: SimpleNamespace, t: Tracer) -> None:
    # Semaphore(0, max_value=0) with tasks waiting: AnyIO's asyncio class
    # refuses the release; on Trio (Trio's class) it goes to the first task
    # still waiting, past one cancelled before the release.
    for fast in (False, True):
        sem = ns.Semaphore(0, max_value=0, fast_acquire=fast)
        scopes: dict[str, anyio.CancelScope] = {}

        async def take(
            name: str,
            sem: Any = sem,
            scopes: dict[str, anyio.CancelScope] = scopes,
        ) -> None:
            with anyio.CancelScope() as scopes[name]:
                await sem.acquire()
                t.add("acquired", name, sem.value)

        async with anyio.create_task_group() as tg:
            await start_in_order(tg, *(partial(take, n) for n in "abc"))
            t.add(fast, sem.statistics())
            scopes["a"].cancel()
            t.call("release", sem.release)
            await settle()
            t.add(sem.value, sem.statistics())
            tg.cancel_scope.cancel()
        t.add(sem.value, sem.statistics())


@pytest.mark.parametrize(
    "scenario",
    [
        semaphore_counting,
        semaphore_fifo,
        semaphore_cancellation,
        semaphore_with_no_room,
        semaphore_with_no_room_and_waiters,
    ],
)
async def test_semaphore_matches_anyio(
    scenario: Scenario, anyio_backend_name: str
) -> None:
    await assert_same_trace(scenario, anyio_backend_name)


async def semaphore_with_no_room_released_by_a_loop_callback(
    ns: SimpleNamespace, t: Tracer
) -> None:
    # On asyncio, with Trio imported (as here): a release() that no task
    # makes (a loop callback, a call from another thread) is asyncio's.
    sem = ns.Semaphore(0, max_value=0)

    async def take() -> None:
        await sem.acquire()
        t.add("acquired")

    async with anyio.create_task_group() as tg:
        tg.start_soon(take)
        await settle()
        asyncio.get_running_loop().call_soon(t.call, "release", sem.release)
        await settle()
        t.add(sem.value, sem.statistics())
        tg.cancel_scope.cancel()


async def test_a_semaphore_released_by_an_asyncio_loop_callback_matches_anyio(
    anyio_backend_name: str,
) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's loop callbacks")
    assert "trio" in sys.modules
    await assert_same_trace(
        semaphore_with_no_room_released_by_a_loop_callback, anyio_backend_name
    )


# The order of an acquire's checkpoints (Lock, Semaphore, CapacityLimiter)


def _acquirable(ns: SimpleNamespace, kind: str) -> object:
    if kind == "Lock":
        return ns.Lock()
    if kind == "Semaphore":
        return ns.Semaphore(1)
    return ns.CapacityLimiter(1)


async def acquire_beside_a_peek(
    cancelled: bool, kind: str, ns: SimpleNamespace, t: Tracer
) -> None:
    # A task woken just before another's uncontended acquire runs while that
    # acquire yields, and tries to take the primitive.  It finds it taken:
    # the acquire takes, then reaches its checkpoint.  But in a scope
    # cancelled before the call, AnyIO's acquire checks for cancellation
    # before it takes: the task finds the primitive free.
    prim: Any = _acquirable(ns, kind)
    woken = anyio.Event()

    async def peek() -> None:
        await woken.wait()
        try:
            prim.acquire_nowait()
        except anyio.WouldBlock:
            t.add("during the acquire", "taken")
        else:
            t.add("during the acquire", "free")
            await anyio.lowlevel.checkpoint()
            prim.release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(peek)
        await settle()
        woken.set()
        with anyio.CancelScope() as scope:
            if cancelled:
                scope.cancel()
            await prim.acquire()
            await settle()
            prim.release()
        t.add("cancelled", scope.cancelled_caught)
    t.call("free again", prim.acquire_nowait)


@pytest.mark.parametrize("kind", ["Lock", "Semaphore", "CapacityLimiter"])
async def test_an_uncontended_acquire_takes_before_its_checkpoint_as_anyio(
    kind: str, anyio_backend_name: str
) -> None:
    await assert_same_trace(
        partial(acquire_beside_a_peek, False, kind), anyio_backend_name
    )


@contextlib.contextmanager
def steps_of_this_task(after_first: Callable[[], object] = lambda: None) -> Any:
    """Trio only: count the steps the current task runs in the block (a
    Trio instrument), calling ``after_first()`` right after the first one
    ends, before any other task runs.  Yields the list of those steps."""
    import trio
    import trio.lowlevel

    me = trio.lowlevel.current_task()
    steps: list[object] = []

    class Steps(trio.abc.Instrument):
        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if task is me:
                steps.append(task)
                if len(steps) == 1:
                    after_first()

    instrument = Steps()
    trio.lowlevel.add_instrument(instrument)
    try:
        yield steps
    finally:
        trio.lowlevel.remove_instrument(instrument)


async def acquire_cancelled_during_its_checkpoint(
    kind: str, ns: SimpleNamespace, t: Tracer
) -> None:
    # The scope is cancelled right after the step in which this task
    # reaches the checkpoint of its uncontended acquire, so the
    # cancellation lands there, before the task resumes.  AnyIO's
    # checkpoint there is shielded: the acquire returns holding the
    # primitive, and the next checkpoint raises.
    prim: Any = _acquirable(ns, kind)
    held = False
    with anyio.CancelScope() as scope, steps_of_this_task(scope.cancel):
        try:
            await prim.acquire()
            held = True
            t.add("acquired")
            await anyio.lowlevel.checkpoint()
        finally:
            if held:
                prim.release()
    t.add("cancelled", scope.cancelled_caught, "held", held)
    t.call("free again", prim.acquire_nowait)


async def acquire_that_must_wait_in_a_cancelled_scope(
    kind: str, ns: SimpleNamespace, t: Tracer, *, enter: bool = False
) -> None:
    # Another task holds the primitive.  AnyIO's acquire (Trio's) checks
    # for cancellation before it parks: its task raises after two steps
    # (Trio's checkpoint), not after one (a park Trio cancels at once).
    # ``enter``: the same for ``async with``.
    prim: Any = _acquirable(ns, kind)
    release = anyio.Event()

    async def holder() -> None:
        await prim.acquire()
        await release.wait()
        prim.release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await settle()
        with anyio.CancelScope() as scope, steps_of_this_task() as steps:
            scope.cancel()
            if enter:
                async with prim:
                    pass  # pragma: no cover
            else:
                await prim.acquire()
        t.add("cancelled", scope.cancelled_caught, "after steps", len(steps))
        t.add("waiting", prim.statistics().tasks_waiting)
        release.set()
    t.call("free again", prim.acquire_nowait)


@pytest.mark.parametrize(
    "scenario",
    [
        partial(acquire_beside_a_peek, True),
        acquire_cancelled_during_its_checkpoint,
        acquire_that_must_wait_in_a_cancelled_scope,
        partial(acquire_that_must_wait_in_a_cancelled_scope, enter=True),
    ],
    ids=[
        "cancelled_before_the_call",
        "cancelled_at_the_checkpoint",
        "must_wait_cancelled_before_the_call",
        "must_wait_cancelled_before_async_with",
    ],
)
@pytest.mark.parametrize("kind", ["Lock", "Semaphore", "CapacityLimiter"])
async def test_a_cancelled_acquire_matches_anyio_on_trio(
    scenario: Callable[[str, SimpleNamespace, Tracer], Awaitable[None]],
    kind: str,
    anyio_backend_name: str,
) -> None:
    # On asyncio the drop-ins take before they check, their checkpoint
    # there is not shielded, and AnyIO's Lock and Semaphore park without a
    # check (docs/migrate-anyio.md; the test below and test_semaphore.py,
    # test_limiter.py cover what the drop-ins do there instead).
    if anyio_backend_name != "trio":
        pytest.skip("a documented difference off Trio")
    await assert_same_trace(partial(scenario, kind), anyio_backend_name)


@pytest.mark.parametrize("kind", ["Lock", "Semaphore", "CapacityLimiter"])
async def test_every_uncontended_acquire_cancelled_at_its_checkpoint_behaves_alike(
    kind: str, anyio_backend_name: str
) -> None:
    # On Trio the scope is cancelled during the acquire's checkpoint and,
    # as AnyIO's, the acquire returns holding the primitive and the next
    # checkpoint raises; elsewhere the scope is cancelled before the call,
    # and the acquire raises at its checkpoint and holds nothing
    # (docs/migrate-anyio.md).  Every time, not only until the checkpoint
    # budget runs out: these drop-ins keep AnyIO's checkpoints.
    prim: Any = _acquirable(OURS, kind)
    for _ in range(2 * BUDGET_SIZE + 1):
        held = False
        with anyio.CancelScope() as scope:
            if anyio_backend_name == "trio":
                with steps_of_this_task(scope.cancel):
                    await prim.acquire()
            else:
                scope.cancel()  # off Trio the checkpoint is a plain one
                await prim.acquire()
            held = True
            try:
                await anyio.lowlevel.checkpoint()
            finally:
                prim.release()
        assert scope.cancelled_caught
        assert held is (anyio_backend_name == "trio")
        prim.acquire_nowait()  # free again
        prim.release()


@pytest.mark.parametrize("kind", ["Lock", "Semaphore", "CapacityLimiter"])
async def test_an_acquire_cancelled_at_its_checkpoint_gives_back_what_it_took(
    kind: str,
) -> None:
    # Ours only.  Off Trio the acquire takes the primitive, then its
    # checkpoint raises (the scope is cancelled): it must give it back, to
    # the task that queued on it meanwhile (on asyncio that task runs during
    # the checkpoint), and hold nothing.  On Trio it raises before it takes,
    # and the other task gets the primitive all the same.
    prim: Any = _acquirable(OURS, kind)
    woken = anyio.Event()
    got: list[str] = []

    async def queue() -> None:
        await woken.wait()
        await prim.acquire()
        got.append("queued task")
        prim.release()

    with anyio.fail_after(5):  # a regression fails, it does not hang
        async with anyio.create_task_group() as tg:
            tg.start_soon(queue)
            await settle()
            woken.set()
            with anyio.CancelScope() as scope:
                scope.cancel()
                await prim.acquire()
                got.append("cancelled acquire")
    assert scope.cancelled_caught
    assert got == ["queued task"]
    prim.acquire_nowait()  # free again


# CapacityLimiter


async def limiter_borrowers(ns: SimpleNamespace, t: Tracer) -> None:
    t.me("main")
    limiter = ns.CapacityLimiter(2)
    await limiter.acquire()
    await limiter.acquire_on_behalf_of("job")
    t.add(t.limiter_stats(limiter.statistics()), limiter.available_tokens)
    await t.acall("double", limiter.acquire)
    t.call("double nowait", partial(limiter.acquire_on_behalf_of_nowait, "job"))
    t.call("full nowait", partial(limiter.acquire_on_behalf_of_nowait, "x"))
    t.call("unknown release", partial(limiter.release_on_behalf_of, "x"))
    limiter.release()
    t.call("release again", limiter.release)
    limiter.release_on_behalf_of("job")
    t.add(t.limiter_stats(limiter.statistics()))


async def limiter_total_tokens(ns: SimpleNamespace, t: Tracer) -> None:
    limiter = ns.CapacityLimiter(0)
    borrowed: list[str] = []

    async def take(name: str) -> None:
        await limiter.acquire_on_behalf_of(name)
        borrowed.append(name)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(take, n) for n in "abcd"))
        t.add(t.limiter_stats(limiter.statistics()))
        limiter.total_tokens = 2
        t.add(t.limiter_stats(limiter.statistics()))
        await settle()
        t.add("borrowed", sorted(borrowed))  # Trio runs woken tasks in any order
        limiter.total_tokens = 1
        limiter.release_on_behalf_of("a")
        t.add(t.limiter_stats(limiter.statistics()), limiter.available_tokens)
        limiter.release_on_behalf_of("b")
        t.add(t.limiter_stats(limiter.statistics()))
        await settle()
        limiter.total_tokens = math.inf
        t.add(t.limiter_stats(limiter.statistics()), limiter.available_tokens)
    t.add("borrowed", sorted(borrowed))
    t.call("bad total", partial(setattr, limiter, "total_tokens", 1.5))
    t.add(limiter.total_tokens)


async def limiter_cancellation(ns: SimpleNamespace, t: Tracer) -> None:
    limiter = ns.CapacityLimiter(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await limiter.acquire_on_behalf_of("a")
    t.add("cancelled scope", scope.cancelled_caught, limiter.borrowed_tokens)
    await limiter.acquire_on_behalf_of("a")
    with anyio.move_on_after(0.01) as scope:
        await limiter.acquire_on_behalf_of("b")
    t.add("timed out", scope.cancelled_caught, t.limiter_stats(limiter.statistics()))


async def limiter_double_acquire_in_a_cancelled_scope(
    ns: SimpleNamespace, t: Tracer
) -> None:
    # A borrower that already holds a token asks again where a cancellation
    # is pending: AnyIO checks for the cancellation first.
    t.me("main")
    limiter = ns.CapacityLimiter(2)
    await limiter.acquire()
    await limiter.acquire_on_behalf_of("job")
    for label, again in [
        ("task", limiter.acquire),
        ("job", partial(limiter.acquire_on_behalf_of, "job")),
    ]:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await t.acall(f"{label} again", again)
        t.add(label, scope.cancelled_caught)
    t.add(t.limiter_stats(limiter.statistics()))


async def limiter_unhashable_borrower(ns: SimpleNamespace, t: Tracer) -> None:
    # An unhashable borrower: TypeError, but in a cancelled scope the
    # cancellation (AnyIO checks for it before it looks at the borrower),
    # with a token free and with none.
    limiter = ns.CapacityLimiter(1)
    for tokens in ("free", "none"):
        with anyio.CancelScope() as scope:
            scope.cancel()
            await t.acall(
                f"{tokens}: cancelled", partial(limiter.acquire_on_behalf_of, [])
            )
        t.add(tokens, scope.cancelled_caught)
        await t.acall(f"{tokens}: acquire", partial(limiter.acquire_on_behalf_of, []))
        t.call(f"{tokens}: nowait", partial(limiter.acquire_on_behalf_of_nowait, []))
        t.call(f"{tokens}: release", partial(limiter.release_on_behalf_of, []))
        t.add(t.limiter_stats(limiter.statistics()))
        if tokens == "free":
            await limiter.acquire_on_behalf_of("holder")


@pytest.mark.parametrize(
    "scenario",
    [
        limiter_borrowers,
        limiter_total_tokens,
        limiter_cancellation,
        limiter_double_acquire_in_a_cancelled_scope,
        limiter_unhashable_borrower,
    ],
)
async def test_capacity_limiter_matches_anyio(
    scenario: Scenario, anyio_backend_name: str
) -> None:
    await assert_same_trace(scenario, anyio_backend_name)


# Event


async def event_set_and_wait(ns: SimpleNamespace, t: Tracer) -> None:
    event = ns.Event()
    woken: list[str] = []

    async def wait(name: str) -> None:
        await event.wait()
        woken.append(name)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, partial(wait, "a"), partial(wait, "b"))
        t.add(event.is_set(), event.statistics())
        event.set()
        event.set()
        t.add(event.is_set())
        await settle()
        t.add(event.statistics())
    t.add("woken", sorted(woken))  # Trio runs woken tasks in any order
    with anyio.CancelScope() as scope:
        scope.cancel()
        await event.wait()
    t.add("set event, cancelled scope", scope.cancelled_caught)
    with anyio.move_on_after(0.01) as scope:
        await ns.Event().wait()
    t.add("timed out", scope.cancelled_caught)


async def test_event_matches_anyio(anyio_backend_name: str) -> None:
    await assert_same_trace(event_set_and_wait, anyio_backend_name)


# Condition


async def condition_notify(ns: SimpleNamespace, t: Tracer) -> None:
    t.me("main")
    cond = ns.Condition(ns.Lock())
    t.call("notify unlocked", cond.notify)
    t.call("notify_all unlocked", cond.notify_all)
    await t.acall("wait unlocked", cond.wait)

    woken: list[tuple[str, bool]] = []

    async def wait(name: str) -> None:
        t.me(name)
        async with cond:
            await cond.wait()
            owner = cond.statistics().lock_statistics.owner
            woken.append((name, owner == anyio.get_current_task()))

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(wait, n) for n in "abcd"))
        async with cond:
            stats = cond.statistics()
            t.add(stats.tasks_waiting, t.lock_stats(stats.lock_statistics))
            cond.notify()
        await settle()
        t.add("woken", list(woken))
        async with cond:
            cond.notify(2)
            t.add(cond.statistics().tasks_waiting)
        await settle()
        t.add("woken", sorted(woken))  # Trio runs woken tasks in any order
        async with cond:
            cond.notify_all()
    t.add("woken", sorted(woken))
    t.add(cond.statistics().tasks_waiting, cond.locked())


async def condition_cancellation(ns: SimpleNamespace, t: Tracer) -> None:
    t.me("main")
    cond = ns.Condition(ns.Lock())
    scope = anyio.CancelScope()

    async def wait() -> None:
        t.me("waiter")
        with scope:
            async with cond:
                try:
                    await cond.wait()
                finally:
                    t.add("held", t.lock_stats(cond.statistics().lock_statistics))
        t.add("cancelled", scope.cancelled_caught)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await settle()
        async with cond:
            scope.cancel()
            await settle()
            t.add("still waiting for the lock", cond.statistics().tasks_waiting)
    async with cond:
        got = await cond.wait_for(lambda: "ready")
    t.add("wait_for", got, cond.locked())


async def condition_subclass_overriding_acquire_and_release(
    ns: SimpleNamespace, t: Tracer
) -> None:
    # A subclass that wraps acquire() and release() (to log, to count) has
    # them called by async with and by wait(), also when wait() is
    # cancelled and takes the lock back.
    t.me("main")

    class Logged(ns.Condition):  # type: ignore[misc, name-defined]
        async def acquire(self) -> None:
            t.add(anyio.get_current_task().name, "acquire")
            await super().acquire()

        def release(self) -> None:
            t.add(anyio.get_current_task().name, "release")
            super().release()

    cond = Logged(ns.Lock())
    scope = anyio.CancelScope()

    async def notified() -> None:
        async with cond:
            await cond.wait()

    async def cancelled() -> None:
        with scope:
            async with cond:
                await cond.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(notified, name="notified")
        await settle()
        async with cond:
            cond.notify()
        await settle()
        tg.start_soon(cancelled, name="cancelled")
        await settle()
        scope.cancel()
    t.add("locked", cond.locked())


@pytest.mark.parametrize(
    "scenario",
    [
        condition_notify,
        condition_cancellation,
        condition_subclass_overriding_acquire_and_release,
    ],
)
async def test_condition_matches_anyio(
    scenario: Scenario, anyio_backend_name: str
) -> None:
    await assert_same_trace(scenario, anyio_backend_name)


async def test_a_subclass_acquire_cancelled_holding_the_lock_in_wait_matches_anyio(
    anyio_backend_name: str,
) -> None:
    # The subclass's acquire() yields after it took the lock; a plain
    # task.cancel() lands there while wait() takes the lock back.  The lock
    # is held: wait() raises the cancellation (it must not acquire again).
    if anyio_backend_name != "asyncio":
        pytest.skip("a plain asyncio task.cancel() inside a shielded acquire")

    async def run(base: Any) -> list[object]:
        class YieldsAfterAcquiring(base):  # type: ignore[misc]
            async def acquire(self) -> None:
                await super().acquire()
                await asyncio.sleep(0)
                await asyncio.sleep(0)

        cond = YieldsAfterAcquiring()
        result: list[object] = []

        async def waiter() -> None:
            try:
                async with cond:
                    await cond.wait()
                result.append("returned")
            except BaseException as exc:
                result.append(type(exc).__name__)
                result.append(("locked", cond.locked()))
                raise

        task = asyncio.get_running_loop().create_task(waiter())
        for _ in range(5):
            await asyncio.sleep(0)
        async with cond:
            cond.notify()
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # inside the re-acquire, holding the lock
        task.cancel()
        await asyncio.wait([task])
        result.append(("task cancelled", task.cancelled()))
        result.append(("locked at the end", cond.locked()))
        return result

    theirs = await run(anyio.Condition)
    assert "CancelledError" in theirs
    assert await run(Condition) == theirs


@pytest.mark.parametrize("scenario", [condition_notify, condition_cancellation])
async def test_condition_on_an_anyio_lock_matches_anyio(
    scenario: Scenario, anyio_backend_name: str
) -> None:
    # Both Conditions get an anyio.Lock, as code not yet migrated passes.
    async def on_an_anyio_lock(ns: SimpleNamespace, t: Tracer) -> None:
        await scenario(SimpleNamespace(**{**vars(ns), "Lock": anyio.Lock}), t)

    await assert_same_trace(on_an_anyio_lock, anyio_backend_name)


# The grant-then-cancel race on asyncio (plain task.cancel())


async def race_lock(ns: SimpleNamespace, t: Tracer) -> None:
    lock = ns.Lock()

    async def take(name: str) -> None:
        t.me(name)
        await lock.acquire()
        t.add("acquired", name, t.lock_stats(lock.statistics()))
        lock.release()

    await lock.acquire()
    first = asyncio.ensure_future(take("first"))
    await settle()
    second = asyncio.ensure_future(take("second"))
    await settle()
    lock.release()
    t.add("handed over", t.lock_stats(lock.statistics()))
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    t.add(first.cancelled(), lock.locked(), lock.statistics().tasks_waiting)


async def race_semaphore(ns: SimpleNamespace, t: Tracer) -> None:
    sem = ns.Semaphore(0)
    first = asyncio.ensure_future(sem.acquire())
    await settle()
    second = asyncio.ensure_future(sem.acquire())
    await settle()
    sem.release()
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    t.add(first.cancelled(), second.done(), sem.value, sem.statistics())


async def race_limiter(ns: SimpleNamespace, t: Tracer) -> None:
    limiter = ns.CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("holder")
    first = asyncio.ensure_future(limiter.acquire_on_behalf_of("first"))
    await settle()
    second = asyncio.ensure_future(limiter.acquire_on_behalf_of("second"))
    await settle()
    limiter.release_on_behalf_of("holder")
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    t.add(first.cancelled(), t.limiter_stats(limiter.statistics()))


async def race_event(ns: SimpleNamespace, t: Tracer) -> None:
    event = ns.Event()
    first = asyncio.ensure_future(event.wait())
    second = asyncio.ensure_future(event.wait())
    await settle()
    event.set()
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    t.add(first.cancelled(), second.cancelled(), event.is_set())


async def race_condition(ns: SimpleNamespace, t: Tracer) -> None:
    cond = ns.Condition()

    async def wait(name: str) -> None:
        async with cond:
            await cond.wait()
            t.add("woke", name)

    first = asyncio.ensure_future(wait("first"))
    await settle()
    second = asyncio.ensure_future(wait("second"))
    await settle()
    async with cond:
        cond.notify()
        first.cancel()
    await settle()
    t.add(first.cancelled(), second.done(), cond.locked())
    second.cancel()
    await asyncio.gather(first, second, return_exceptions=True)


@pytest.mark.parametrize(
    "scenario", [race_lock, race_semaphore, race_limiter, race_event, race_condition]
)
async def test_grant_then_cancel_matches_anyio(
    scenario: Scenario, anyio_backend_name: str
) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("the race exists on asyncio only")
    await assert_same_trace(scenario, anyio_backend_name)


# Task infos, wording on Trio, copying


async def test_lock_owner_is_the_backend_task_info_anyio_gives() -> None:
    ours, theirs = Lock(), anyio.Lock()
    ours_cond, theirs_cond = Condition(), anyio.Condition()

    async def hold() -> None:
        async with ours, theirs, ours_cond, theirs_cond:
            owners = [
                ours.statistics().owner,
                ours_cond.statistics().lock_statistics.owner,
            ]
            expected = theirs.statistics().owner
            assert expected is not None
            for owner in owners:
                assert type(owner) is type(expected)
                assert owner == expected
                assert owner.parent_id == expected.parent_id
                assert not owner.has_pending_cancellation()
            with anyio.CancelScope() as scope:
                scope.cancel()
                assert expected.has_pending_cancellation()
                for owner in owners:
                    assert owner is not None
                    assert owner.has_pending_cancellation()
                await anyio.lowlevel.checkpoint()  # raises: the scope ends

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)


async def test_releasing_a_lock_held_by_another_task_words_it_as_anyio() -> None:
    # On Trio AnyIO passes Trio's own message through.
    messages: list[list[str]] = []
    for lock in (anyio.Lock(), Lock()):
        await lock.acquire()
        seen: list[str] = []

        async def release_it(lock: Any = lock, seen: list[str] = seen) -> None:
            with pytest.raises(RuntimeError) as info:
                lock.release()
            seen.append(str(info.value))

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_it)
        lock.release()
        messages.append(seen)
    assert messages[0] == messages[1]


def _idle_primitives() -> list[object]:
    return [
        Lock(),
        Lock(fast_acquire=True),
        Semaphore(2, max_value=3),
        CapacityLimiter(2),
        Event(),
        Condition(),
        RWLock(),
        BatchSemaphore(3),
    ]


async def _use(prim: Any) -> None:
    # Park on it once, so that it has bound its event loop and kept a spare
    # waiter, then leave it idle.
    if isinstance(prim, Event):
        async with anyio.create_task_group() as tg:
            tg.start_soon(prim.wait)
            await settle()
            prim.set()
        return
    if isinstance(prim, RWLock):
        acquire, release = prim.acquire_write, prim.release_write
    else:
        acquire, release = prim.acquire, prim.release
    await acquire()

    async def wait_for_it() -> None:
        await acquire()
        release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_for_it)
        await settle()
        release()


@pytest.mark.parametrize("used", [False, True], ids=["new", "used"])
async def test_an_idle_primitive_copies_and_pickles_like_anyio_s(used: bool) -> None:
    # anyio's Lock, Condition and Event copy and pickle; ours do, and so do
    # the rest, also after use (which binds an event loop internally).
    for prim in _idle_primitives():
        if used:
            await _use(prim)
        for copied in (
            copy.copy(prim),
            copy.deepcopy(prim),
            pickle.loads(pickle.dumps(prim)),
        ):
            assert type(copied) is type(prim)
            before = repr(prim)
            assert repr(copied) == before
            await _use(copied)  # works on this loop, independently
            assert repr(prim) == before


async def test_a_shallow_copy_shares_no_wait_queue_with_the_original() -> None:
    # A task parked on the copy is not woken by a release of the original.
    sem = BatchSemaphore(0)
    dup = copy.copy(sem)
    woken: list[str] = []

    async def wait_on_copy() -> None:
        await dup.acquire()
        woken.append("copy")

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_on_copy)
        await settle()
        sem.release()
        await settle()
        assert woken == []
        assert sem.available_permits == 1
        dup.release()
    assert woken == ["copy"]


async def test_events_never_waited_on_share_no_waiters() -> None:
    # A fresh event and its copy (or a second fresh event) make their own
    # queue at their first wait: setting one wakes only its own waiters.
    async def wait_on(event: Event, name: str, woken: list[str]) -> None:
        await event.wait()
        woken.append(name)

    first = Event()
    for other in (copy.copy(first), Event()):
        woken: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_on, other, "other", woken)
            await settle()
            tg.start_soon(wait_on, first, "first", woken)
            await settle()
            assert first.statistics().tasks_waiting == 1
            assert other.statistics().tasks_waiting == 1
            first.set()
            await settle()
            assert woken == ["first"]
            other.set()
        assert woken == ["first", "other"]
        first = Event()


async def _acquire(prim: Any) -> None:
    await prim.acquire()


async def _release(prim: Any) -> None:
    prim.release()


async def _nothing(prim: Any) -> None:
    pass


async def _write(prim: RWLock) -> None:
    await prim.acquire_write()


async def _unwrite(prim: RWLock) -> None:
    prim.release_write()


async def _wait_notified(cond: Condition) -> None:
    async with cond:
        await cond.wait()


async def _notify(cond: Condition) -> None:
    async with cond:
        cond.notify()


#: kind -> (make a fresh one; make its next wait park, by the test task; the
#: wait, by another task; what that task does once through; let one waiter
#: through, by the test task)
_Step = Callable[[Any], Awaitable[None]]
_FRESH_WAITS: dict[str, tuple[Callable[[], Any], _Step, _Step, _Step, _Step]] = {
    "Lock": (Lock, _acquire, _acquire, _release, _release),
    "Lock-fast": (
        partial(Lock, fast_acquire=True),
        _acquire,
        _acquire,
        _release,
        _release,
    ),
    "Semaphore": (partial(Semaphore, 1), _acquire, _acquire, _release, _release),
    "CapacityLimiter": (
        partial(CapacityLimiter, 1),
        _acquire,
        _acquire,
        _release,
        _release,
    ),
    "BatchSemaphore": (
        partial(BatchSemaphore, 0),
        _nothing,
        _acquire,
        _nothing,
        _release,
    ),
    "BatchSemaphore-unfair": (
        partial(BatchSemaphore, 0, fair=False),
        _nothing,
        _acquire,
        _nothing,
        _release,
    ),
    "RWLock": (RWLock, _write, _write, _unwrite, _unwrite),
    "Condition": (Condition, _nothing, _wait_notified, _nothing, _notify),
}


def _tasks_waiting(prim: Any) -> int:
    stats = prim.statistics()
    if isinstance(prim, RWLock):
        return int(stats.tasks_waiting_read + stats.tasks_waiting_write)
    return int(stats.tasks_waiting)


@pytest.mark.parametrize("kind", list(_FRESH_WAITS))
async def test_primitives_never_waited_on_share_no_waiters(kind: str) -> None:
    # Each primitive makes its wait queue when a task first parks on it
    # (until then it holds a stand-in shared by all): a fresh one and its
    # copy, or two fresh ones, each let in only their own waiters.
    make, take, wait, leave, give = _FRESH_WAITS[kind]

    async def wait_on(prim: Any, name: str, woken: list[str]) -> None:
        await wait(prim)
        woken.append(name)
        await leave(prim)

    first = make()
    for other in (copy.copy(first), make()):
        woken: list[str] = []
        await take(first)
        await take(other)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_on, other, "other", woken)
            await settle()
            tg.start_soon(wait_on, first, "first", woken)
            await settle()
            assert _tasks_waiting(first) == 1
            assert _tasks_waiting(other) == 1
            await give(first)
            await settle()
            assert woken == ["first"]
            assert _tasks_waiting(other) == 1
            await give(other)
        assert woken == ["first", "other"]
        first = make()


async def test_a_primitive_with_parked_tasks_is_not_copied() -> None:
    sem = Semaphore(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sem.acquire)
        await settle()
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="parked"):
                attempt(sem)
        sem.release()  # the parked task takes it and ends


async def _hold(how: str) -> tuple[Any, Callable[[], None]]:
    """A primitive held as ``how`` says, and what releases it."""
    if how == "lock":
        lock = Lock()
        await lock.acquire()
        return lock, lock.release
    if how in ("write", "read"):
        rwlock = RWLock()
        await getattr(rwlock, f"acquire_{how}")()
        return rwlock, getattr(rwlock, f"release_{how}")
    limiter = CapacityLimiter(2)
    if how == "token":
        await limiter.acquire()
        return limiter, limiter.release
    limiter.acquire_on_behalf_of_nowait("job-1")
    return limiter, partial(limiter.release_on_behalf_of, "job-1")


@pytest.mark.parametrize("how", ["lock", "write", "read", "token", "on_behalf_of"])
async def test_a_held_lock_is_not_copied_and_its_owner_is_not_walked(how: str) -> None:
    # A task cannot be copied; a copy that walked into it first would leave
    # half-copied backend objects behind (on Trio, "Exception ignored"
    # reports from their __del__).  A limiter token borrowed on behalf of
    # an object of the caller's is not copied either: a copy cannot take
    # over that borrower.
    prim, release = await _hold(how)
    refusal = (
        "that a task holds"
        if how in ("lock", "write", "read")
        else ("whose tokens are borrowed")
    )
    unraisable: list[object] = []
    previous = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match=refusal):
                attempt(prim)
        gc.collect()
    finally:
        sys.unraisablehook = previous
        release()
    assert unraisable == []
    assert copy.copy(prim) is not prim  # idle again: copies
