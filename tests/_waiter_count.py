"""The count of waits that took a waiter, for the tests that check that a
fast path parks nothing.

The library keeps no count of its own: an increment on every park cost
about 290 instructions, 1% of a contended handoff.  ``install()`` wraps
the two places where a wait takes a waiter, made or recycled:
``WaitQueue.enqueue`` and ``Slot.enqueue``.  ``park()`` calls them, and so
does every wait the primitives write out.

On Trio the library marks its code against KeyboardInterrupt once per
process, finding it through the functions its modules and classes hold
(``_core/_ki.py``).  Once wrapped, the two functions are held only by
their wrappers, so ``install()`` has the marking done first when Trio is
installed.  The wrappers, test code, stay unmarked: Trio's walk skips
their frames to the library frame above.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from anyio_prims._core import Slot, WaitQueue, protect_from_keyboard_interrupt


class WaiterStats:
    """How many waits took a waiter since the session started."""

    __slots__ = ("created",)

    def __init__(self) -> None:
        self.created = 0


WAITER_STATS = WaiterStats()


def _counting(enqueue: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(enqueue)
    def counted(self: Any, payload: Any) -> Any:
        waiter = enqueue(self, payload)
        WAITER_STATS.created += 1
        return waiter

    return counted


def install() -> None:
    """Count every wait from now on (once per process)."""
    if getattr(WaitQueue.enqueue, "__wrapped__", None) is not None:
        return
    try:
        import trio  # noqa: F401
    except ImportError:
        pass
    else:
        protect_from_keyboard_interrupt()
    for cls in (WaitQueue, Slot):
        setattr(cls, "enqueue", _counting(cls.enqueue))  # noqa: B010
