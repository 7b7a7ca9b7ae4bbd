"""Stress: tasks acquiring and releasing one primitive freely while a third
task cancels their calls at random (tests/_stress.py: AnyIO scopes, and
plain ``task.cancel()`` on asyncio), checked throughout and at the end.

The model tests settle after every step; here acquires are cancelled
wherever they stand, also after they were granted.  What must hold: while
a task holds, the holders never exceed what the primitive admits (the
permits; one writer and no reader beside it), and when every task is done
the primitive is at rest: every permit back, nothing locked, nobody
waiting.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import BatchSemaphore, CapacityLimiter, Lock, RWLock, Semaphore

from ._stress import CANCELLERS, Chaos, skip_plain

pytestmark = pytest.mark.anyio

ROUNDS = 60


class Held:
    """One primitive, seen as ``permits`` that an acquire of ``n`` takes."""

    def __init__(self, kind: str, rnd: random.Random) -> None:
        self.kind = kind
        self.permits = 1
        self.holding = 0
        self.readers = 0
        prim: Any
        if kind in ("batch_fair", "batch_unfair"):
            self.permits = rnd.randint(1, 5)
            prim = BatchSemaphore(self.permits, fair=kind == "batch_fair")
        elif kind == "lock":
            prim = Lock(fast_acquire=rnd.random() < 0.5)
        elif kind == "semaphore":
            self.permits = rnd.randint(1, 3)
            prim = Semaphore(self.permits, fast_acquire=rnd.random() < 0.5)
        elif kind == "limiter":
            self.permits = rnd.randint(1, 3)
            prim = CapacityLimiter(self.permits)
        else:
            prim = RWLock()
        self.prim = prim

    def weight(self, rnd: random.Random) -> int:
        """How many permits the next acquire asks for (0: an RWLock read)."""
        if self.kind.startswith("batch"):
            return rnd.randint(1, self.permits)
        if self.kind == "rwlock":
            return rnd.choice([0, 0, 1])
        return 1

    async def acquire(self, n: int, wait: bool) -> None:
        prim = self.prim
        if self.kind == "rwlock":
            if wait:
                await (prim.acquire_write() if n else prim.acquire_read())
            else:
                (prim.acquire_write_nowait if n else prim.acquire_read_nowait)()
        elif self.kind.startswith("batch"):
            await prim.acquire(n) if wait else prim.acquire_nowait(n)
        else:
            await prim.acquire() if wait else prim.acquire_nowait()

    def release(self, n: int) -> None:
        prim = self.prim
        if self.kind == "rwlock":
            (prim.release_write if n else prim.release_read)()
        elif self.kind.startswith("batch"):
            prim.release(n)
        else:
            prim.release()

    def took(self, n: int, sign: int) -> None:
        """Count a holder in (``sign`` 1) or out (-1); check the bound."""
        if n:
            self.holding += sign * n
        else:
            self.readers += sign
        assert self.holding <= self.permits, (self.holding, self.permits)
        assert not (self.holding and self.readers), (self.holding, self.readers)

    def assert_at_rest(self) -> None:
        prim = self.prim
        stats = prim.statistics()
        if self.kind == "rwlock":
            assert (stats.readers, stats.writer) == (0, None), stats
            assert (stats.tasks_waiting_read, stats.tasks_waiting_write) == (0, 0)
            return
        assert stats.tasks_waiting == 0, stats
        if self.kind.startswith("batch"):
            assert prim.available_permits == self.permits, stats
        elif self.kind == "lock":
            assert not prim.locked()
        elif self.kind == "semaphore":
            assert prim.value == self.permits
        else:
            assert prim.borrowed_tokens == 0


async def use(held: Held, chaos: Chaos, rnd: random.Random) -> None:
    """Acquire, hold across a few checkpoints, release; some times over."""
    for _ in range(rnd.randint(1, 15)):
        n = held.weight(rnd)
        try:
            with chaos.scope():
                try:
                    await held.acquire(n, wait=rnd.random() >= 0.2)
                except anyio.WouldBlock:
                    await anyio.lowlevel.checkpoint()
                    continue
                held.took(n, 1)
                try:
                    for _ in range(rnd.randint(0, 2)):
                        await anyio.lowlevel.checkpoint()
                finally:
                    held.took(n, -1)
                    held.release(n)
        except asyncio.CancelledError as exc:
            chaos.withdraw(exc)
        await chaos.pause()


KINDS = ["batch_fair", "batch_unfair", "lock", "semaphore", "limiter", "rwlock"]


@CANCELLERS
@pytest.mark.parametrize("kind", KINDS)
async def test_cancelled_acquires_among_free_running_tasks_keep_every_permit(
    kind: str, plain_asyncio: bool, anyio_backend_name: str
) -> None:
    skip_plain(plain_asyncio, anyio_backend_name)
    for seed in range(ROUNDS):
        rnd = random.Random(seed)
        held = Held(kind, rnd)
        chaos = Chaos(rnd, plain_asyncio)
        workers: list[Callable[[], Awaitable[None]]] = [
            partial(use, held, chaos, rnd) for _ in range(rnd.randint(2, 6))
        ]
        await chaos.run(workers)
        held.assert_at_rest()
