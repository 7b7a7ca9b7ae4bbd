"""Helpers shared by the tests of the drop-in sync primitives (Lock,
Semaphore, CapacityLimiter, Event, Condition).

``cancel_while_blocked`` cancels a blocked call through each cancellation
source the library must handle: an AnyIO cancel scope on every backend, and
on asyncio plain ``task.cancel()``, ``asyncio.wait_for()`` and
``asyncio.timeout()``.  The timeouts only need to fire while the call is
blocked forever; no test asserts anything about elapsed time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskGroup

from ._tasks import assert_schedule_point, settle

__all__ = [
    "CANCEL_SOURCES",
    "assert_schedule_point",
    "cancel_while_blocked",
    "cancelled_acquire_beside_a_release",
    "settle",
    "skip_if_unsupported",
    "start_in_order",
    "task_id",
]

#: Every cancellation source; the last three exist on asyncio only.
CANCEL_SOURCES = ["scope", "task_cancel", "wait_for", "timeout"]


def skip_if_unsupported(source: str, backend_name: str) -> None:
    """Skip a test parametrized by ``source`` where that source cannot exist."""
    if source != "scope" and backend_name != "asyncio":
        pytest.skip(f"{source} is asyncio's own cancellation")
    if source == "timeout" and sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout() needs Python 3.11")


async def cancel_while_blocked(source: str, make: Callable[[], Awaitable[Any]]) -> None:
    """Run ``make()`` until it blocks, cancel it through ``source``, and
    return once it has ended; fail if it was not cancelled."""
    if source == "scope":
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                await make()
                raise AssertionError("the call was not cancelled")

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await settle()
            scope.cancel()
        assert scope.cancelled_caught
    elif source == "task_cancel":

        async def run_task() -> None:
            await make()

        task = asyncio.ensure_future(run_task())
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    elif source == "wait_for":
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(make(), 0.01)
    elif source == "timeout":
        if sys.version_info < (3, 11):  # skip_if_unsupported() skips it first
            pytest.skip("asyncio.timeout() needs Python 3.11")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await make()
    else:  # pragma: no cover
        raise ValueError(f"unknown cancellation source {source!r}")


async def start_in_order(
    tg: TaskGroup, *calls: Callable[[], Coroutine[Any, Any, Any]]
) -> None:
    """Start each call in its own task, the next only once all are blocked,
    so they queue in the order given (Trio starts tasks in any order)."""
    for call in calls:
        tg.start_soon(call)
        await settle()


def task_id() -> int:
    """``id()`` of the running task object: what borrowers and owners hold."""
    return anyio.get_current_task().id


async def cancelled_acquire_beside_a_release(
    acquire: Callable[[], Awaitable[object]],
    taken: Callable[[], bool],
    release: Callable[[], object],
) -> tuple[bool, bool]:
    """Call ``acquire()`` in a scope cancelled before the call, while another
    task polls ``taken()`` (the unit taken for the acquire's checkpoint)
    until the acquire is over, and calls ``release()`` if it sees the unit
    taken.  Returns the scope's ``cancelled_caught`` and whether the other
    task released; an exception of the acquire or the release propagates."""
    go = anyio.Event()
    caught: list[bool] = []
    released: list[bool] = []

    async def acquirer() -> None:
        await go.wait()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await acquire()
        caught.append(scope.cancelled_caught)

    async def releaser() -> None:
        await go.wait()
        while not caught:
            if taken():
                release()
                released.append(True)
                return
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(acquirer)
        tg.start_soon(releaser)
        await anyio.wait_all_tasks_blocked()
        go.set()
    return caught == [True], released == [True]
