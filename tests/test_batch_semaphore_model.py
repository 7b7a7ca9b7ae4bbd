"""BatchSemaphore against a pure-Python model, on random programs (hypothesis).

A program is a list of steps over a few task slots:

* ``acquire(slot, n)``: the slot starts a task that acquires ``n`` permits
  (skipped while the slot already waits);
* ``release(n)``: ``n`` new permits are released from outside;
* ``give_back(slot)``: the slot releases every permit it holds;
* ``cancel(slot, native)``: the slot's queued acquire is cancelled;
* ``release_cancel(n, slot, native)``: ``n`` permits are released and the
  slot's queued acquire is cancelled in the same synchronous step (the
  grant-then-cancel race when the release reaches that slot);
* ``acquire_nowait(slot, n)``: the test task takes ``n`` permits for the
  slot without waiting, or gets ``WouldBlock`` (or ``ClosedResourceError``);
* ``close(k)``: the semaphore is closed, so every queued and later acquire
  fails with ``ClosedResourceError`` while releases still work (only while
  a task is queued, and for ``k == 0``: closing ends most programs);
* ``release_close(n, k)``: ``n`` permits are released and the semaphore is
  closed in the same synchronous step (on the same terms): a waiter
  granted by the release keeps its permits, the rest fail.

A cancellation is an AnyIO cancel scope's, or with ``native`` on asyncio a
plain ``task.cancel()``.  Only the latter can cancel a task whose wait was
already granted (AnyIO holds back its cancellation from a task whose future
is done; Trio cannot cancel a rescheduled task): then the permits must go
back and on to the next waiters; otherwise the grant stands.

After every step all tasks are left to run until blocked
(``anyio.wait_all_tasks_blocked()``), and the semaphore, the permits each
slot holds and the slots still waiting must equal the model's, so permits are
conserved (available + held == initial + released) and the fair order is
kept.  At the end enough permits are released for every waiter: every task
must finish (no deadlock).

Hypothesis cannot run inside a running event loop, so each test is a plain
function that calls ``anyio.run`` once per example, on each backend of
``tests/conftest.py``'s list.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from anyio_prims import BatchSemaphore

from .conftest import _selected

SLOTS = 4

Step = tuple[Any, ...]

slot_ids = st.integers(0, SLOTS - 1)
amounts = st.integers(1, 4)
releases = st.integers(1, 2)  # less than asked, on average: queues form
acquires = st.tuples(st.just("acquire"), slot_ids, amounts)
steps: st.SearchStrategy[Step] = st.one_of(
    acquires,  # weighted, so that most steps find tasks queued
    acquires,
    acquires,
    acquires,
    st.tuples(st.just("release"), releases),
    st.tuples(st.just("give_back"), slot_ids),
    st.tuples(st.just("cancel"), slot_ids, st.booleans()),
    st.tuples(st.just("release_cancel"), releases, slot_ids, st.booleans()),
    st.tuples(st.just("acquire_nowait"), slot_ids, amounts),
    st.tuples(st.just("close"), st.integers(0, 3)),
    st.tuples(st.just("release_close"), releases, st.integers(0, 3)),
)
programs = st.lists(steps, min_size=8, max_size=40)


@dataclass
class Model:
    """What the semaphore must look like: permits, FIFO queue, holdings."""

    fair: bool
    initial: int
    value: int = 0
    released: int = 0
    queue: list[tuple[int, int]] = field(default_factory=list)  # (slot, n)
    held: list[int] = field(default_factory=lambda: [0] * SLOTS)
    closed: bool = False
    #: acquires that failed with ClosedResourceError, per slot
    closed_out: list[int] = field(default_factory=lambda: [0] * SLOTS)

    def __post_init__(self) -> None:
        self.value = self.initial

    def waiting(self) -> set[int]:
        return {slot for slot, _ in self.queue}

    def acquire(self, slot: int, n: int) -> None:
        if self.closed:
            self.closed_out[slot] += 1
        elif n <= self.value and (not self.fair or not self.queue):
            self.value -= n
            self.held[slot] += n
        else:
            self.queue.append((slot, n))

    def acquire_nowait(self, slot: int, n: int) -> str:
        """The outcome of ``acquire_nowait(n)`` for the slot."""
        if self.closed:
            return "ClosedResourceError"
        if n <= self.value and (not self.fair or not self.queue):
            self.value -= n
            self.held[slot] += n
            return "acquired"
        return "WouldBlock"

    def close(self) -> None:
        self.closed = True
        for slot, _ in self.queue:
            self.closed_out[slot] += 1
        self.queue = []

    def release(self, n: int) -> set[int]:
        """Release ``n`` outside permits; the slots granted now."""
        self.value += n
        self.released += n
        return self.regrant()

    def give_back(self, slot: int) -> None:
        self.value += self.held[slot]
        self.held[slot] = 0
        self.regrant()

    def cancel(self, slot: int) -> None:
        self.queue = [(s, n) for s, n in self.queue if s != slot]
        self.regrant()

    def undo_grant(self, slot: int, n: int) -> None:
        self.held[slot] -= n
        self.value += n
        self.regrant()

    def regrant(self) -> set[int]:
        granted: list[tuple[int, int]] = []
        if self.fair:
            while self.queue and self.queue[0][1] <= self.value:
                granted.append(self.queue.pop(0))
                self.value -= granted[-1][1]
        else:
            left = self.value
            kept = []
            for slot, n in self.queue:
                if n <= left:
                    left -= n
                    granted.append((slot, n))
                else:
                    kept.append((slot, n))
            self.queue = kept
            self.value = left
        for slot, n in granted:
            self.held[slot] += n
        return {slot for slot, _ in granted}


async def settle() -> None:
    # A few plain checkpoints first: on asyncio, wait_all_tasks_blocked()
    # sleeps 0.1 s whenever it finds a runnable task.
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


class Slots:
    """The real tasks: one acquire at a time per slot."""

    def __init__(self, sem: BatchSemaphore, tg: anyio.abc.TaskGroup, backend: str):
        self.sem = sem
        self.tg = tg
        self.on_asyncio = backend == "asyncio"
        self.held = [0] * SLOTS
        self.closed_out = [0] * SLOTS
        self.waiting: set[int] = set()
        self.scopes: dict[int, anyio.CancelScope] = {}
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.all_tasks: list[asyncio.Task[None]] = []

    def start_acquire(self, slot: int, n: int) -> None:
        self.waiting.add(slot)
        if self.on_asyncio:
            # A plain task, so that task.cancel() can reach it.
            task = asyncio.get_running_loop().create_task(self._acquire(slot, n))
            self.tasks[slot] = task
            self.all_tasks.append(task)
        else:
            self.tg.start_soon(self._acquire, slot, n)

    async def _acquire(self, slot: int, n: int) -> None:
        try:
            with anyio.CancelScope() as scope:
                self.scopes[slot] = scope
                await self.sem.acquire(n)
                self.held[slot] += n
        except anyio.ClosedResourceError:
            self.closed_out[slot] += 1
        except asyncio.CancelledError:
            # A plain task.cancel() (an AnyIO cancellation stops at the scope).
            assert self.on_asyncio
        finally:
            self.waiting.discard(slot)

    def cancel(self, slot: int, native: bool) -> None:
        if native and self.on_asyncio:
            self.tasks[slot].cancel()
        else:
            self.scopes[slot].cancel()

    def acquire_nowait(self, slot: int, n: int) -> str:
        try:
            self.sem.acquire_nowait(n)
        except (anyio.WouldBlock, anyio.ClosedResourceError) as exc:
            return type(exc).__name__
        self.held[slot] += n
        return "acquired"

    def give_back(self, slot: int) -> None:
        self.sem.release(self.held[slot])
        self.held[slot] = 0

    async def join(self) -> None:
        if self.all_tasks:
            await asyncio.gather(*self.all_tasks)


def check(sem: BatchSemaphore, slots: Slots, model: Model) -> None:
    assert sem.available_permits == model.value
    assert slots.held == model.held
    assert slots.waiting == model.waiting()
    assert sem.statistics().tasks_waiting == len(model.queue)
    assert slots.closed_out == model.closed_out
    assert sem.closed == sem.statistics().closed == model.closed
    # Conservation, in the model and in the real thing.
    supplied = model.initial + model.released
    assert model.value + sum(model.held) == supplied
    assert sem.available_permits + sum(slots.held) == supplied


async def run_program(
    backend: str, fair: bool, initial: int, program: list[Step]
) -> None:
    sem = BatchSemaphore(initial, fair=fair)
    model = Model(fair, initial)
    async with anyio.create_task_group() as tg:
        slots = Slots(sem, tg, backend)
        for step in program:
            kind = step[0]
            if kind == "acquire":
                _, slot, n = step
                if slot in model.waiting():
                    continue
                model.acquire(slot, n)
                slots.start_acquire(slot, n)
            elif kind == "release":
                model.release(step[1])
                sem.release(step[1])
            elif kind == "give_back":
                slot = step[1]
                if not model.held[slot]:
                    continue
                model.give_back(slot)
                slots.give_back(slot)
            elif kind == "cancel":
                _, slot, native = step
                if slot not in model.waiting():
                    continue
                model.cancel(slot)
                slots.cancel(slot, native)
            elif kind == "acquire_nowait":
                _, slot, n = step
                if slot in model.waiting():
                    continue
                assert slots.acquire_nowait(slot, n) == model.acquire_nowait(slot, n)
            elif kind == "close":
                if step[1] or not model.queue:
                    continue
                event(f"closed with {len(model.queue)} queued")
                model.close()
                sem.close()
            elif kind == "release_close":
                _, n, k = step
                if k or not model.queue:
                    continue
                granted = model.release(n)
                event(
                    f"closed as a release granted {len(granted)},"
                    f" {len(model.queue)} left queued"
                )
                model.close()
                sem.release(n)
                sem.close()
            else:
                _, n, slot, native = step
                if slot not in model.waiting():
                    continue
                wanted = dict(model.queue)[slot]
                granted = model.release(n)
                if slot not in granted:
                    model.cancel(slot)
                elif native and slots.on_asyncio:
                    model.undo_grant(slot, wanted)
                sem.release(n)
                slots.cancel(slot, native)
            await settle()
            check(sem, slots, model)

        # Enough permits for every waiter: all of them must get through.
        owed = sum(n for _, n in model.queue)
        if owed:
            model.release(owed)
            sem.release(owed)
        with anyio.fail_after(30):  # a guard against a hang, not a timing test
            await settle()
            check(sem, slots, model)
            assert not slots.waiting
            await slots.join()


@pytest.mark.parametrize("fair", [True, False], ids=["fair", "non_fair"])
@pytest.mark.parametrize("backend", _selected())
@settings(max_examples=50, deadline=None)
@given(initial=st.integers(0, 2), program=programs)
def test_batch_semaphore_matches_the_model(
    backend: tuple[str, dict[str, Any]], fair: bool, initial: int, program: list[Step]
) -> None:
    name, options = backend
    anyio.run(
        run_program, name, fair, initial, program, backend=name, backend_options=options
    )
