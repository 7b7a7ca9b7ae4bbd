# spmc: one producer, many consumers.
#
# The shared ChannelState with the one sender parked in a Slot and receivers
# in a WaitQueue: a blocked producer costs one waiter and no queue.  The
# receiver can be cloned (consumers share the items: each item goes to one
# of them); the sender cannot, and a second task sending while one is
# blocked gets BusyResourceError.
"""Channels with one sender and many receivers.

``tx, rx = spmc.channel(capacity)`` (or ``spmc.channel[int](capacity)``):
``capacity`` is an int >= 0 (0: a send completes when a receiver takes the
item) or ``math.inf``.  Clone the receiver for each consumer; each item goes
to exactly one consumer, in arrival order of the blocked ones.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from ._core import check_strict
from .channels._endpoints import CloneableReceiver, open_channel
from .channels._endpoints import Sender as _Sender
from .channels._factory import subscript_calls_new
from .channels._state import ChannelStatistics, check_capacity

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)

__all__ = ["ChannelStatistics", "Receiver", "Sender", "channel"]


class Sender(_Sender[T_contra], Generic[T_contra]):
    """The one sending side of an spmc channel (no ``clone``).

    Only one task may block on it at a time: another task sending while one
    is blocked gets ``anyio.BusyResourceError``.
    """

    __slots__ = ()


class Receiver(CloneableReceiver[T_co], Generic[T_co]):
    """The receiving side of an spmc channel; :meth:`clone` it per consumer."""

    __slots__ = ()


@subscript_calls_new
class channel(tuple[Sender[T], Receiver[T]]):
    """Create an spmc channel: ``(sender, receiver)``.

    :param capacity: items buffered before ``send()`` blocks: an int >= 0
        (0 makes each send wait for a receiver) or ``math.inf``
    :param strict: make every ``send``/``receive`` a checkpoint, as AnyIO
        does; by default a call that does not block is a checkpoint only once
        every 64 calls
    :raises TypeError: if ``capacity`` is not an int or a float (or is a
        ``bool``), or ``strict`` is not a ``bool``
    :raises ValueError: if ``capacity`` is negative, or a float other than inf
    """

    def __new__(  # type: ignore[misc]
        cls, capacity: float, *, strict: bool = False
    ) -> tuple[Sender[T], Receiver[T]]:
        # The checks' common cases written out: a channel is often made for
        # one item (the two calls cost about 45 ns of ~1.5 us on CPython 3.11).
        if type(capacity) is not int or capacity < 0:
            capacity = check_capacity(capacity)  # converts inf, or raises
        return open_channel(
            Sender,
            Receiver,
            capacity,
            strict if strict is False else check_strict(strict),
            True,  # single_sender
            False,  # single_receiver
        )
