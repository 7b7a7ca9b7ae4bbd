"""Stress: client tasks spawning, submitting, joining and cancelling jobs
freely while a third task cancels their calls at random (tests/_stress.py:
AnyIO scopes, and plain ``task.cancel()`` on asyncio).

What must hold when the block has exited: every handle is settled; a job
that was not cancelled ran once, to its end, and its handle returns what
it returned; a submit that was cancelled spawned nothing; no job started
twice; the executor holds no job.
"""

from __future__ import annotations

import asyncio
import random

import anyio
import anyio.lowlevel
import pytest

from anyio_prims.executor import Executor, JobCancelled, JoinHandle

from .._stress import CANCELLERS, Chaos, skip_plain

pytestmark = pytest.mark.anyio

ROUNDS = 100


class Round:
    """One executor, its clients, and what the jobs did."""

    def __init__(self, seed: int, plain_asyncio: bool) -> None:
        rnd = self.rnd = random.Random(seed)
        self.chaos = Chaos(rnd, plain_asyncio)
        self.executor = Executor(
            rnd.choice([None, 1, 2, 4]),
            max_queued=rnd.choice([None, None, 1, 2, 4]),
            # Idle workers that give up as jobs arrive, in some rounds.
            idle_timeout=rnd.choice([None, None, 0.0005, 0.002]),
        )
        self.started: list[int] = []
        self.finished: list[int] = []
        #: the handle of each job spawned, by job number
        self.handles: dict[int, JoinHandle[int]] = {}
        #: jobs whose submit was cancelled (so never spawned)
        self.unspawned: list[int] = []
        self.next_job = 0

    async def job(self, number: int) -> int:
        self.started.append(number)
        for _ in range(self.rnd.randint(0, 3)):
            await anyio.lowlevel.checkpoint()
        self.finished.append(number)
        return number

    async def start_one(self) -> None:
        number = self.next_job
        self.next_job += 1
        executor = self.executor
        try:
            with self.chaos.scope():
                if self.rnd.random() < 0.4:
                    self.handles[number] = executor.spawn(self.job, number)
                else:
                    self.handles[number] = await executor.submit(self.job, number)
        except asyncio.CancelledError as exc:
            self.chaos.withdraw(exc)
        if number not in self.handles:  # the call was cancelled
            self.unspawned.append(number)

    async def join_one(self) -> None:
        handle = self.rnd.choice(list(self.handles.values()))
        try:
            with self.chaos.scope():
                await handle
        except JobCancelled:
            pass
        except asyncio.CancelledError as exc:
            self.chaos.withdraw(exc)

    async def client(self) -> None:
        rnd = self.rnd
        for _ in range(rnd.randint(1, 12)):
            await self.start_one()
            if self.handles and rnd.random() < 0.3:
                rnd.choice(list(self.handles.values())).cancel()
            if self.handles and rnd.random() < 0.3:
                await self.join_one()
            await self.chaos.pause()

    async def run(self) -> None:
        async with self.executor:
            clients = [self.client for _ in range(self.rnd.randint(1, 4))]
            await self.chaos.run(clients)


@CANCELLERS
async def test_jobs_among_cancelled_calls_run_once_or_not_at_all(
    plain_asyncio: bool, anyio_backend_name: str
) -> None:
    skip_plain(plain_asyncio, anyio_backend_name)
    for seed in range(ROUNDS):
        game = Round(seed, plain_asyncio)
        await game.run()
        where = f"seed {seed}"
        assert len(game.started) == len(set(game.started)), where
        assert not set(game.unspawned) & set(game.started), where
        for number, handle in game.handles.items():
            assert handle.done(), where
            if not handle.cancelled():
                assert handle.result() == number, where
                assert number in game.finished, where
        stats = game.executor.statistics()
        assert (stats.jobs_pending, stats.jobs_queued) == (0, 0), where
