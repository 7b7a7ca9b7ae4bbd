"""Run code inside a wait structure's ``enqueue``: where a finalizer that a
garbage collection sets off while a call makes its waiter runs.

"before": as ``enqueue`` makes the waiter, before it is parked; "after":
as it returns, the waiter parked.
"""

from __future__ import annotations

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
