"""Run code where a finalizer that a garbage collection sets off inside a
call runs: inside a wait structure's ``enqueue``, as the call makes its
waiter ("before": before it is parked; "after": as ``enqueue`` returns,
the waiter parked), or inside the wake-up of a parked task.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest

from anyio_prims._core import Slot, WaitQueue

#: Arms a one-shot action for the next ``enqueue``.
Arm = Callable[[Callable[[], None]], None]


def arm_inside_enqueue(monkeypatch: pytest.MonkeyPatch, where: str) -> list[Any]:
    """Wrap ``WaitQueue.enqueue`` and ``Slot.enqueue``; return the list to
    append one-shot actions to (empty again once each has run)."""
    armed: list[Callable[[], None]] = []

    def wrap(real: Any) -> Any:
        def enqueue(self: Any, payload: Any) -> Any:
            action = armed.pop() if armed else None
            if action is not None and where == "before":
                action()
            waiter = real(self, payload)
            if action is not None and where == "after":
                action()
            return waiter

        return enqueue

    monkeypatch.setattr(WaitQueue, "enqueue", wrap(WaitQueue.enqueue))
    monkeypatch.setattr(Slot, "enqueue", wrap(Slot.enqueue))
    return armed


def arm_inside_wake(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Run one-shot actions inside the library's next wake-ups of a parked
    task: where a finalizer that a collection sets off there runs (a
    wake-up allocates).  Returns the list to append actions to.

    Below the library, so that it meets every way of waking: on asyncio
    inside the waiter's future's ``set_result()``, once the result is set
    (futures made from here on are of a subclass that runs the action; a
    primitive must be made after this is armed); on Trio inside the
    library's ``reschedule()``; with the generic waiter inside its event's
    ``set()``.
    """
    import asyncio

    from anyio_prims._core import _waiter

    armed: list[Callable[[], None]] = []

    def fire() -> None:
        if armed:
            armed.pop(0)()

    class HookFuture(asyncio.Future[Any]):
        def set_result(self, result: Any) -> None:
            super().set_result(result)
            fire()

    def future_factory(loop: Any) -> Callable[[], asyncio.Future[Any]]:
        return lambda: HookFuture(loop=loop)

    monkeypatch.setattr(_waiter, "future_factory", future_factory)
    monkeypatch.setattr(_waiter, "FUTURE_FROM_RUNNING_LOOP", True)
    if _waiter._trio_reschedule is None and importlib.util.find_spec("trio"):
        _waiter._bind_trio()  # what the first Trio wait does
    real_reschedule = _waiter._trio_reschedule
    if real_reschedule is not None:

        def reschedule(task: Any) -> None:
            real_reschedule(task)
            fire()

        monkeypatch.setattr(_waiter, "_trio_reschedule", reschedule)
    real_wake = _waiter.GenericWaiter._wake

    def wake(self: Any) -> None:
        real_wake(self)
        fire()

    monkeypatch.setattr(_waiter.GenericWaiter, "_wake", wake)
    return armed


def arm_inside_refused_grant(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """asyncio only: run one-shot actions where a grant would be refused, a
    ``set_result()`` on the future of a waiter whose task was cancelled
    (the error it raises allocates: a finalizer could run there).  A
    primitive must be made after this is armed.  The library tests for a
    cancelled task first, so nothing should run here."""
    import asyncio

    from anyio_prims._core import _waiter

    armed: list[Callable[[], None]] = []

    class HookFuture(asyncio.Future[Any]):
        def set_result(self, result: Any) -> None:
            if self.cancelled() and armed:
                armed.pop(0)()
            super().set_result(result)

    def future_factory(loop: Any) -> Callable[[], asyncio.Future[Any]]:
        return lambda: HookFuture(loop=loop)

    monkeypatch.setattr(_waiter, "future_factory", future_factory)
    monkeypatch.setattr(_waiter, "FUTURE_FROM_RUNNING_LOOP", True)
    return armed
