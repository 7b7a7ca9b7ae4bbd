"""Synchronization primitives: locks, semaphores, the batch semaphore, RWLock.

Cases (one loop is the unit named in each benchmark's metadata):

``lock_uncontended``         one task: ``await acquire(); release()``
``semaphore_uncontended``    one task, 10 permits: ``await acquire(); release()``
``batch_acquire_n``          one task, 10 permits: ``await acquire(3); release(3)``
                             (no peer has an atomic weighted acquire: blank)
``rwlock_read_uncontended``  one task: ``await acquire_read(); release_read()``
``rwlock_write_uncontended`` one task: ``await acquire_write(); release_write()``
                             (no backend or peer ships a read-write lock: blank)
``lock_handoff``             two tasks alternating on one lock; one loop is a
                             round (each task acquires once: two handoffs).
                             The holder releases only once the other task is
                             parked on the lock, so every release is a
                             handoff; the alternation is checked.
``semaphore_contended``      100 tasks, 10 permits, each holds its permit
                             across one bare yield; one loop is one
                             acquire+release of one task.

Validation: the one-task cases check, after the timed loop, that an acquire
holds something (a no-op acquire fails) and that nothing is held at the end;
the cases where tasks compete check the count of acquisitions, that the
permits were all returned and that no more than the permits were ever held
at once.

Run as ``python bench/bench_sync.py --backend asyncio`` plus pyperf options.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from harness import (
    MAX_SPINS,
    Body,
    Native,
    Suite,
    ValidationError,
    expect,
    perf_counter,
)
from peers import (
    Ops,
    SyncImpl,
    batch_impls,
    lock_impls,
    rwlock_impls,
    semaphore_impls,
)

PERMITS = 10
BATCH_N = 3
CONTENDING_TASKS = 100

ONE_TASK = "limit_minimal_channel"
SWITCHING = "limit_park_unpark"


async def expect_it_holds(
    name: str,
    ops: Ops,
    acquire: Callable[[], Awaitable[object]],
    release: Callable[[], object],
) -> None:
    """After the timed loop: one more acquire must take something (a no-op
    acquire would pass ``idle()``), and its release must give it back."""
    await acquire()
    held = not ops.idle()
    release()
    expect(held, f"{name}: an acquire took nothing")
    expect(ops.idle(), f"{name}: something still held after the loop")


def uncontended(impl: SyncImpl, permits: int) -> Body:
    make = impl.make
    assert make is not None

    async def body(loops: int) -> float:
        ops = make(permits)
        acquire, release = ops.acquire, ops.release
        t0 = perf_counter()
        for _ in range(loops):
            await acquire()
            release()
        elapsed = perf_counter() - t0
        await expect_it_holds(impl.name, ops, acquire, release)
        return elapsed

    return body


def batch_acquire(impl: SyncImpl) -> Body:
    make = impl.make
    assert make is not None

    async def body(loops: int) -> float:
        ops = make(PERMITS)
        acquire, release = ops.acquire, ops.release
        n = BATCH_N
        t0 = perf_counter()
        for _ in range(loops):
            await acquire(n)
            release(n)
        elapsed = perf_counter() - t0
        await expect_it_holds(
            impl.name, ops, functools.partial(acquire, n), functools.partial(release, n)
        )
        return elapsed

    return body


def rwlock_uncontended(impl: SyncImpl, write: bool) -> Body:
    make = impl.make
    assert make is not None

    async def body(loops: int) -> float:
        ops = make(1)
        if write:
            acquire, release = ops.acquire_write, ops.release_write
        else:
            acquire, release = ops.acquire_read, ops.release_read
        t0 = perf_counter()
        for _ in range(loops):
            await acquire()
            release()
        elapsed = perf_counter() - t0
        await expect_it_holds(impl.name, ops, acquire, release)
        return elapsed

    return body


def lock_handoff(impl: SyncImpl, native: Native, permits: int) -> Body:
    """Two tasks, one lock (or a one-permit semaphore), strict alternation.

    A worker that holds the lock waits (bare yields) until the other worker
    is parked on the lock, then releases it, which hands it over, and asks
    again.  So every release meets a waiter: the case measures the contended
    handoff, whatever an implementation's checkpoint policy would otherwise
    let one task do (a budgeted acquire that yields before it queues would let
    the other task re-take a free lock, and no handoff would happen).  The
    main task holds the lock until both workers are parked on it.
    """
    make = impl.make
    assert make is not None

    async def body(loops: int) -> float:
        ops: Ops = make(permits)
        acquire, release = ops.acquire, ops.release
        parked, yield_ = native.parked, native.yield_
        holder: list[Any] = [None]  # who holds the lock now
        order: list[int] = []
        tasks: list[Any] = [None, None]
        done = [False, False]
        started: list[Any] = []

        async def worker(me: int) -> None:
            tasks[me] = native.current_task()
            started.append(me)
            other = 1 - me
            append = order.append
            for _ in range(loops):
                await acquire()
                if holder[0] is not None:
                    raise ValidationError(f"{impl.name}: two holders at once")
                holder[0] = me
                append(me)
                spins = 0
                while not (done[other] or parked(tasks[other])):
                    spins += 1
                    if spins > MAX_SPINS:
                        raise ValidationError(f"{impl.name}: the other never queued")
                    await yield_()
                holder[0] = None
                release()
            done[me] = True

        await acquire()
        async with native.group() as group:
            group.spawn(worker, 0)
            group.spawn(worker, 1)
            await native.wait_started(started, 2)
            for task in tasks:
                await native.wait_parked(task)
            t0 = perf_counter()
            release()
        elapsed = perf_counter() - t0
        expect(len(order) == 2 * loops, f"{impl.name}: {len(order)} acquisitions")
        handoffs = sum(1 for a, b in itertools.pairwise(order) if a != b)
        expect(
            handoffs == len(order) - 1,
            f"{impl.name}: the lock did not alternate ({handoffs} handoffs "
            f"in {len(order)} acquisitions)",
        )
        expect(ops.idle(), f"{impl.name}: lock still held at the end")
        return elapsed

    return body


def semaphore_contended(impl: SyncImpl, native: Native) -> Body:
    make = impl.make
    assert make is not None

    async def body(loops: int) -> float:
        ops = make(PERMITS)
        acquire, release = ops.acquire, ops.release
        yield_ = native.yield_
        state = [0, 0, 0]  # holders now, most holders seen, acquisitions

        async def worker() -> None:
            for _ in range(loops):
                await acquire()
                held = state[0] = state[0] + 1
                if held > state[1]:
                    state[1] = held
                state[2] += 1
                await yield_()
                state[0] -= 1
                release()

        async with native.group() as group:
            for _ in range(CONTENDING_TASKS):
                group.spawn(worker)
            t0 = perf_counter()
        elapsed = perf_counter() - t0
        expect(
            state[2] == CONTENDING_TASKS * loops,
            f"{impl.name}: {state[2]} acquisitions",
        )
        expect(state[1] == PERMITS, f"{impl.name}: at most {state[1]} holders at once")
        expect(ops.idle(), f"{impl.name}: permits not all returned")
        return elapsed

    return body


def main() -> None:
    suite = Suite("sync", __doc__.splitlines()[0])
    native = suite.native
    per_call = "acquire+release"
    for impl in lock_impls():
        suite.add(
            "lock_uncontended",
            impl,
            uncontended(impl, 1),
            unit=per_call,
            limit=ONE_TASK,
        )
    for impl in semaphore_impls():
        suite.add(
            "semaphore_uncontended",
            impl,
            uncontended(impl, PERMITS),
            unit=per_call,
            limit=ONE_TASK,
        )
    for impl in batch_impls():
        suite.add(
            "batch_acquire_n",
            impl,
            batch_acquire(impl),
            unit=f"acquire({BATCH_N})+release({BATCH_N})",
            limit=ONE_TASK,
        )
    for impl in rwlock_impls():
        suite.add(
            "rwlock_read_uncontended",
            impl,
            rwlock_uncontended(impl, False),
            unit="acquire_read+release_read",
            limit=ONE_TASK,
        )
    for impl in rwlock_impls():
        suite.add(
            "rwlock_write_uncontended",
            impl,
            rwlock_uncontended(impl, True),
            unit="acquire_write+release_write",
            limit=ONE_TASK,
        )
    for impl in lock_impls():
        suite.add(
            "lock_handoff",
            impl,
            lock_handoff(impl, native, 1),
            unit="round: two handoffs",
            limit=SWITCHING,
        )
    for impl in batch_impls():
        suite.add(
            "lock_handoff",
            impl,
            lock_handoff(impl, native, 1),
            unit="round: two handoffs",
            limit=SWITCHING,
            note="BatchSemaphore(1) used as a lock",
        )
    for impl in semaphore_impls():
        suite.add(
            "semaphore_contended",
            impl,
            semaphore_contended(impl, native),
            inner_loops=CONTENDING_TASKS,
            unit="acquire+release of one task",
            limit=SWITCHING,
        )


if __name__ == "__main__":
    main()
