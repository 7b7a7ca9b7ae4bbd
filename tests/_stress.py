"""Random cancellation for the stress tests: free-running worker tasks whose
calls a third task cancels wherever they stand.

Each call a worker makes runs in a fresh AnyIO cancel scope from
:meth:`Chaos.scope`, and the canceller cancels one of the recent ones.  With
``plain_asyncio`` it also calls ``task.cancel()`` on the workers' asyncio
tasks, which can land on a wait already granted (the give-back paths) or
on any other await; the worker catches the ``CancelledError`` around the
call, counts the call as cancelled and withdraws the request
(:meth:`Chaos.withdraw`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence

import anyio
import anyio.lowlevel
import pytest

from ._tasks import uncancel

#: Parametrize a stress test over the cancellers: AnyIO scopes only, and
#: also plain ``task.cancel()`` (asyncio only: see :func:`skip_plain`).
CANCELLERS = pytest.mark.parametrize(
    "plain_asyncio", [False, True], ids=["anyio", "task_cancel"]
)


def skip_plain(plain_asyncio: bool, backend_name: str) -> None:
    """Skip the plain ``task.cancel()`` canceller where it does not exist."""
    if plain_asyncio and backend_name != "asyncio":
        pytest.skip("task.cancel() is plain asyncio's")


class Chaos:
    """The canceller of one round, and what it needs from the workers."""

    def __init__(self, rnd: random.Random, plain_asyncio: bool) -> None:
        self.rnd = rnd
        self.plain_asyncio = plain_asyncio
        #: the scopes of the calls made so far, and the workers' tasks
        self.scopes: list[anyio.CancelScope] = []
        self.tasks: list[asyncio.Task[object]] = []
        #: the round's own scopes, whose cancellation is not a call's
        self.own_scopes: list[anyio.CancelScope] = []

    def scope(self) -> anyio.CancelScope:
        """A cancel scope for one call, which the canceller may cancel."""
        scope = anyio.CancelScope()
        self.scopes.append(scope)
        return scope

    def withdraw(self, exc: asyncio.CancelledError) -> None:
        """A plain ``task.cancel()`` ended the call: withdraw it (3.11+).
        Any other cancellation (the round's timeout, or its task group's
        after a worker failed) propagates."""
        if not self.plain_asyncio or any(s.cancel_called for s in self.own_scopes):
            raise exc
        task = asyncio.current_task()
        assert task is not None
        uncancel(task)

    async def pause(self, always: bool = False) -> None:
        """Sometimes a checkpoint between calls; ``always`` at a worker's
        end, where a cancellation that a call re-armed (a send whose item
        was taken as it was cancelled) must be raised, not end the task
        cancelled."""
        if always or self.rnd.random() < 0.3:
            try:
                await anyio.lowlevel.checkpoint()
            except asyncio.CancelledError as exc:
                self.withdraw(exc)

    async def _worker(self, work: Callable[[], Awaitable[None]]) -> None:
        if self.plain_asyncio:
            task = asyncio.current_task()
            assert task is not None
            self.tasks.append(task)
        await work()
        await self.pause(always=True)

    async def _cancel_some(self) -> None:
        rnd = self.rnd
        for _ in range(rnd.randint(0, 60)):
            for _ in range(rnd.randint(0, 3)):
                await anyio.lowlevel.checkpoint()
            if self.plain_asyncio and self.tasks and rnd.random() < 0.5:
                rnd.choice(self.tasks).cancel()
            elif self.scopes:
                rnd.choice(self.scopes[-8:]).cancel()

    async def run(self, workers: Sequence[Callable[[], Awaitable[None]]]) -> None:
        """Run the workers and the canceller until all are done."""
        with anyio.fail_after(20) as timeout:  # a lost wake-up fails, not hangs
            async with anyio.create_task_group() as tg:
                self.own_scopes = [timeout, tg.cancel_scope]
                for work in workers:
                    tg.start_soon(self._worker, work)
                tg.start_soon(self._cancel_some)
