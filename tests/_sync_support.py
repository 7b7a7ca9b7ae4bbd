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
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await make()
    else:  # pragma: no cover
        raise ValueError(f"unknown cancellation source {source!r}")


async def settle() -> None:
    """Return once every other task is blocked.

    ``anyio.wait_all_tasks_blocked()`` on asyncio sleeps 0.1 s whenever a
    task is merely runnable; a few schedule points first let freshly started
    tasks reach their wait, which keeps the suite fast.
    """
    for _ in range(4):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


async def start_in_order(
    tg: TaskGroup, *calls: Callable[[], Coroutine[Any, Any, Any]]
) -> None:
    """Start each call in its own task, the next only once all are blocked,
    so they queue in the order given (Trio starts tasks in any order)."""
    for call in calls:
        tg.start_soon(call)
        await settle()


async def assert_schedule_point(
    backend_name: str, call: Callable[[], Awaitable[Any]]
) -> Any:
    """Await ``call()`` and fail unless it let other tasks run.

    On Trio, ``trio.testing.assert_checkpoints``; on asyncio, a task started
    just before the call must have run by the time it returns.
    """
    if backend_name == "trio":
        import trio.testing

        with trio.testing.assert_checkpoints():
            return await call()
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    task = asyncio.ensure_future(other())
    result = await call()
    assert ran, "the call returned without a schedule point"
    await task
    return result


def task_id() -> int:
    """``id()`` of the running task object: what borrowers and owners hold."""
    return anyio.get_current_task().id
