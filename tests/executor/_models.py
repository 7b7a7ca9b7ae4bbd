"""What the executor's model tests (``test_model.py``, ``test_map_model.py``,
``test_fail_fast_model.py``) share: hypothesis's phases for them, runs whose
failure comes alone, and an executor block that must exit."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio
import anyio.abc
from hypothesis import Phase

from anyio_prims import Executor

from .._tasks import settle

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import (  # type: ignore[import-not-found,unused-ignore]
        BaseExceptionGroup,
    )

T = TypeVar("T")

#: Every phase but explain, which reruns a failing program hundreds of
#: times under a tracer, for minutes, to say which lines only failures run.
PHASES: Final = (
    Phase.explicit,
    Phase.reuse,
    Phase.generate,
    Phase.target,
    Phase.shrink,
)


async def run_with_helpers(
    body: Callable[[anyio.abc.TaskGroup], Awaitable[None]],
) -> None:
    """Await ``body(helpers)``, ``helpers`` a task group for its helper
    tasks, which are cancelled once it returns.  An ``AssertionError`` from
    ``body`` is raised alone, not in a group with what the cancelled
    helpers raise: one failure, one origin, for hypothesis to shrink."""
    failure: AssertionError | None = None
    async with anyio.create_task_group() as helpers:
        try:
            await body(helpers)
        except AssertionError as exc:
            failure = exc
        helpers.cancel_scope.cancel()  # helpers left waiting by a failure
    if failure is not None:
        raise failure


async def run_block(
    executor: Executor,
    body: Callable[[Executor], Awaitable[T]],
    helpers: anyio.abc.TaskGroup,
    *,
    cancelled: T | None = None,
) -> tuple[T, list[str]]:
    """Enter ``executor``'s block, await ``body(executor)`` in it, and leave:
    ``body``'s result and the messages of the ``ValueError``\\ s the block
    raised at its exit (the jobs' errors nobody retrieved; anything else
    there is raised).

    The block must exit once ``body`` returned: a watchdog cancels it if
    every task is blocked and it has not (a deadlock, which then fails at
    once where a timeout would cost every failing example 30 s), and the
    deadlock fails the run even where the block's exit replaced the
    cancellation with the jobs' errors.  An exception from ``body`` (an
    ``AssertionError``, or a model's own ``ValueError`` where it and the
    executor disagree) cancels the block and is raised alone, not in a
    group with whatever the jobs raised.

    ``cancelled``: where the block may cancel ``body`` (``fail_fast``), the
    result to return if it does; the cancellation goes on into the block's
    exit, which must exit all the same.  Without it a cancellation of
    ``body`` is raised.
    """
    exit_errors: list[str] = []
    failed: list[Exception] = []
    watch = anyio.CancelScope()

    async def watchdog(guard: anyio.CancelScope) -> None:
        # Nothing here sleeps: once every task is blocked and the block has
        # not exited, it never will.  Three rounds: on asyncio a finished
        # worker wakes the block's exit through a loop callback, which
        # wait_all_tasks_blocked() does not see.
        with watch:
            for _ in range(3):
                await settle()
            guard.cancel()

    def must_exit(guard: anyio.CancelScope) -> None:
        helpers.start_soon(watchdog, guard)
        guard.deadline = anyio.current_time() + 30  # in case

    with anyio.CancelScope() as guard:
        try:
            async with executor:
                try:
                    result = await body(executor)
                except Exception as exc:
                    failed.append(exc)
                    guard.cancel()
                except anyio.get_cancelled_exc_class():
                    if cancelled is None:
                        raise
                    result = cancelled
                    must_exit(guard)
                    raise
                else:
                    must_exit(guard)
        except BaseExceptionGroup as group:
            # A deadlock's cancellation may leave more than the jobs' errors.
            if (
                not failed
                and not guard.cancel_called
                and not all(type(e) is ValueError for e in group.exceptions)
            ):
                raise
            exit_errors = [str(e) for e in group.exceptions]
        finally:
            watch.cancel()
    if failed:
        raise failed[0]
    # cancel_called, not cancelled_caught: the exit raises the jobs' errors
    # in place of the watchdog's cancellation.
    assert not guard.cancel_called, "the Executor's block did not exit"
    return result, exit_errors
