"""Helpers every test module shares: ordering tasks without sleeps, running
one awaited call under one cancellation source, checking schedule points.

``settle()`` orders tasks (no sleeps); ``Call`` runs one operation in its
own task under one cancellation source, so a test can cancel it while it is
blocked, or grant it and cancel it in one synchronous step (the
grant-then-cancel race, which only plain asyncio cancellation can produce:
AnyIO's and Trio's scopes do not cancel a task whose wait has been granted).
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Final

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

FAR = 1e6  # a deadline that never comes by itself


async def settle() -> None:
    """Let every woken task run until all other tasks are blocked again."""
    # A few plain checkpoints first: on asyncio, wait_all_tasks_blocked()
    # sleeps 0.1 s whenever it finds a runnable task.
    for _ in range(4):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


class Call:
    """One awaited operation in its own task, under one cancellation source.

    ``outcome`` ends as "returned" (``result`` holds the value), "cancelled"
    (the source's cancellation ended the call) or "raised" (``error``).
    ``after`` runs once the operation returned, still inside the source's
    scope: a checkpoint there shows whether a cancellation was re-armed.
    """

    def __init__(
        self,
        operation: Callable[[], Awaitable[Any]],
        source: str = "anyio_cancel_scope",
        after: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.operation = operation
        self.source = source
        self.after = after
        self.outcome: str | None = None
        self.returned = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = anyio.Event()
        self.cancelling_after: int | None = None
        self._cancel: Callable[[], object] | None = None

    def start(self, tg: anyio.abc.TaskGroup) -> Call:
        if self.source.startswith("asyncio"):
            # A plain asyncio task: the source cancels it natively.
            task = asyncio.get_running_loop().create_task(self._run())
            self._keep = task
        else:
            tg.start_soon(self._run)
        return self

    def cancel(self) -> None:
        assert self._cancel is not None, "the call has not started"
        self._cancel()

    def grant_then_cancel(self, grant: Callable[[], object]) -> None:
        """Grant and cancel in one synchronous step (the race)."""
        if self.source == "asyncio_timeout":
            # The timeout's callback is queued now and runs before the woken
            # task: it fires on a wait that has been granted.
            self.cancel()
            grant()
        else:
            grant()
            self.cancel()

    async def _operate(self) -> None:
        try:
            self.result = await self.operation()
        except Exception as exc:
            self.outcome = "raised"
            self.error = exc
            return
        self.returned = True
        self.outcome = "returned"
        if self.after is not None:
            await self.after()

    async def _run(self) -> None:
        try:
            await getattr(self, "_" + self.source)()
        finally:
            self.finished.set()

    async def _anyio_cancel_scope(self) -> None:
        with anyio.CancelScope() as scope:
            self._cancel = scope.cancel
            await self._operate()
        if scope.cancelled_caught:
            self.outcome = "cancelled"

    async def _anyio_move_on_after(self) -> None:
        with anyio.move_on_after(FAR) as scope:
            self._cancel = lambda: setattr(scope, "deadline", -math.inf)
            await self._operate()
        if scope.cancelled_caught:
            self.outcome = "cancelled"

    async def _anyio_fail_after(self) -> None:
        try:
            with anyio.fail_after(FAR) as scope:
                self._cancel = lambda: setattr(scope, "deadline", -math.inf)
                await self._operate()
        except TimeoutError:
            self.outcome = "cancelled"

    async def _trio_cancel_scope(self) -> None:
        import trio

        with trio.CancelScope() as scope:
            self._cancel = scope.cancel
            await self._operate()
        if scope.cancelled_caught:
            self.outcome = "cancelled"

    async def _trio_move_on_after(self) -> None:
        import trio

        with trio.move_on_after(FAR) as scope:
            self._cancel = lambda: setattr(scope, "deadline", -math.inf)
            await self._operate()
        if scope.cancelled_caught:
            self.outcome = "cancelled"

    async def _asyncio_task_cancel(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._cancel = task.cancel
        try:
            await self._operate()
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            if sys.version_info >= (3, 11):
                self.cancelling_after = task.cancelling()
                task.uncancel()

    async def _asyncio_timeout(self) -> None:
        if sys.version_info < (3, 11):
            pytest.skip("asyncio.timeout is 3.11+")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(None) as timeout:
                self._cancel = lambda: timeout.reschedule(loop.time())
                await self._operate()
        except TimeoutError:
            self.outcome = "cancelled"

    async def _asyncio_wait_for(self) -> None:
        # Cancelling the task that waits in wait_for() makes wait_for()
        # cancel the task it runs the operation in (as its timeout does).
        task = asyncio.current_task()
        assert task is not None
        self._cancel = task.cancel
        try:
            await asyncio.wait_for(self._operate(), timeout=FAR)
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            uncancel(task)


async def assert_schedule_point(
    backend_name: str, call: Callable[[], Awaitable[Any]], expected: bool = True
) -> Any:
    """Await ``call()`` and fail unless it was a schedule point (or, with
    ``expected=False``, if it was one).

    On Trio, ``trio.testing.assert_checkpoints`` (``assert_no_checkpoints``);
    on asyncio, a task started just before the call must have run (must not
    have run) by the time it returns.
    """
    if backend_name == "trio":
        import trio.testing

        with (
            trio.testing.assert_checkpoints()
            if expected
            else trio.testing.assert_no_checkpoints()
        ):
            return await call()
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    task = asyncio.ensure_future(other())
    result = await call()
    assert ran is expected, (
        "the call returned without a schedule point"
        if expected
        else "the call let another task run"
    )
    await task
    return result


async def assert_no_schedule_point(
    backend_name: str, call: Callable[[], Awaitable[Any]]
) -> Any:
    """Await ``call()`` and fail if it was a schedule point."""
    return await assert_schedule_point(backend_name, call, expected=False)


def cancel_as_slot_sleep_ends(
    monkeypatch: pytest.MonkeyPatch, nth: int, cancel: Callable[[], bool]
) -> Callable[[], int]:
    """Make an executor's rate limiter call ``cancel()`` (which must return
    true) right after its ``nth`` wait for a start slot has slept, before
    the worker resumes: a cancellation that lands as the slot's sleep ends,
    which a real clock cannot time.  Returns a function that gives how many
    waits there have been."""
    from anyio_prims.executor._ratelimit import RateLimiter

    real_wait = RateLimiter.wait
    waits = 0

    async def wait(self: RateLimiter, job: object) -> None:
        nonlocal waits
        waits += 1
        await real_wait(self, job)
        if waits == nth:
            assert cancel()

    monkeypatch.setattr(RateLimiter, "wait", wait)
    return lambda: waits


def uncancel(task: asyncio.Task[Any]) -> None:
    """Withdraw one ``task.cancel()`` that was handled (3.11+ counts them)."""
    if sys.version_info >= (3, 11):
        task.uncancel()


def run_on_every_backend_in_turn(main: Callable[[], Awaitable[object]]) -> list[str]:
    """Run ``main`` in one event loop after another: asyncio, Trio, Trio in
    another thread, Trio again, uvloop, asyncio in another thread, asyncio
    again (those installed), to show that an object made outside any loop
    keeps working when it moves between loops, backends and threads (one at
    a time: none of them may be used by two threads at once).  Returns the
    runs made, by backend name."""
    # (name, anyio backend, backend options, in another thread)
    runs: list[tuple[str, str, dict[str, Any], bool]] = [
        ("asyncio", "asyncio", {}, False)
    ]
    try:
        import trio  # noqa: F401

        runs += [(name, "trio", {}, thread) for name, thread in TRIO_RUNS]
    except ImportError:  # pragma: no cover - trio is a test dependency
        pass
    try:
        import uvloop  # noqa: F401

        runs.append(("uvloop", "asyncio", {"use_uvloop": True}, False))
    except ImportError:  # pragma: no cover - not on every platform
        pass
    runs += [("asyncio", "asyncio", {}, True), ("asyncio", "asyncio", {}, False)]
    for _name, backend, options, in_thread in runs:
        run = partial(anyio.run, main, backend=backend, backend_options=options)
        if in_thread:
            with ThreadPoolExecutor(1) as pool:
                pool.submit(run).result()  # its exception, raised here
        else:
            run()
    return [name for name, _, _, _ in runs]


#: The Trio runs of run_on_every_backend_in_turn: (name, in another thread).
TRIO_RUNS: Final = (("trio", False), ("trio", True), ("trio", False))
