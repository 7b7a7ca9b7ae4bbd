# mpsc: many producers, one consumer.
#
# The shared ChannelState with senders parked in a WaitQueue and the one
# receiver in a Slot: a blocked consumer costs one waiter and no queue.  The
# sender can be cloned; the receiver cannot, and a second task receiving
# while one is blocked gets BusyResourceError.
"""Channels with many senders and one receiver.

``tx, rx = mpsc.channel(capacity)`` (or ``mpsc.channel[int](capacity)``):
``capacity`` is an int >= 0 (0: a send completes when the receiver takes the
item) or ``math.inf``.  Clone the sender for each producer; the stream ends
(``anyio.EndOfStream``, ``async for`` stops) once every clone is closed and
the buffer is drained.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from ._core import check_strict
from .channels._endpoints import CloneableSender, open_channel
from .channels._endpoints import Receiver as _Receiver
from .channels._factory import subscript_calls_new
from .channels._state import ChannelStatistics, check_capacity

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)

__all__ = ["ChannelStatistics", "Receiver", "Sender", "channel"]


class Sender(CloneableSender[T_contra], Generic[T_contra]):
    """The sending side of an mpsc channel; :meth:`clone` it per producer."""

    __slots__ = ()


class Receiver(_Receiver[T_co], Generic[T_co]):
    """The one receiving side of an mpsc channel (no ``clone``).

    Only one task may block on it at a time: another task receiving while
    one is blocked gets ``anyio.BusyResourceError``.
    """

    __slots__ = ()


@subscript_calls_new
class channel(tuple[Sender[T], Receiver[T]]):
    """Create an mpsc channel: ``(sender, receiver)``.

    :param capacity: items buffered before ``send()`` blocks: an int >= 0
        (0 makes each send wait for the receiver) or ``math.inf``
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
            False,  # single_sender
            True,  # single_receiver
        )
