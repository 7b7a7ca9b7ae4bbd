# oneshot: one item, from one sender to one receiver (see
# channels/_oneshot.py for the state and its invariants).
"""Channels that carry at most one item.

``tx, rx = oneshot.channel()`` (or ``oneshot.channel[int]()``):
``tx.send(item)`` is synchronous and succeeds once; ``await rx`` (or
``await rx.receive()``) returns the item, or raises ``anyio.EndOfStream``
if the sender was closed or dropped without sending.  For returning one
result from a task or a callback to the task that awaits it.  Like every
primitive here it is not thread-safe: from another thread, send through
the event loop (``anyio.from_thread.run_sync(tx.send, item)``).
"""

from __future__ import annotations

from typing import TypeVar

from ._core import check_strict
from .channels._factory import subscript_calls_new
from .channels._oneshot import Receiver, Sender, open_oneshot

T = TypeVar("T")

__all__ = ["Receiver", "Sender", "channel"]


@subscript_calls_new
class channel(tuple[Sender[T], Receiver[T]]):
    """Create a oneshot channel: ``(sender, receiver)``.

    :param strict: make every ``receive`` a checkpoint, as AnyIO does; by
        default a receive that finds the item is a checkpoint only once every
        64 calls
    :raises TypeError: if ``strict`` is not a bool
    """

    def __new__(  # type: ignore[misc]
        cls, *, strict: bool = False
    ) -> tuple[Sender[T], Receiver[T]]:
        return open_oneshot(strict if strict is False else check_strict(strict))
