# A drop-in for anyio's create_memory_object_stream, on the shared
# ChannelState (WaitQueues on both sides, as mpmc).
#
# It keeps anyio's API and rules: every send/receive is a checkpoint (strict
# mode), the same exceptions in the same order (closed, then broken /
# end-of-stream, then would-block), ``clone()`` on both endpoints,
# ``statistics()`` returning anyio's MemoryObjectStreamStatistics, and a
# ResourceWarning for an endpoint garbage-collected unclosed.  It differs
# where anyio's behaviour is a defect this package fixes everywhere:
# * a send whose item a receiver took before the send's cancellation arrived
#   returns normally (anyio raises the cancellation although the item was
#   delivered); the cancellation takes effect at the next checkpoint;
# * a parked send whose cancellation has arrived delivers nothing, even to
#   a receive_nowait() before it resumes (anyio delivers it and raises);
# * a receive granted an item and cancelled before it ran passes the item
#   on (anyio loses it), before the end of the stream if the last sender
#   closed meanwhile;
# * when the last receiver closes, buffered items are released at once
#   (anyio keeps them until the streams are collected), so
#   ``current_buffer_used`` is 0 from then on;
# and, following from the third: a receive by another task while a woken
# receiver has not run yet takes the oldest item, the one that receiver was
# woken for, which then gets the next (anyio's hands it the next item):
# which task gets which item differs, the order of the items does not.
# Endpoints cannot be copied or pickled (_core.NotCopied): anyio's copy is
# an endpoint its stream does not count.
#
# The endpoint classes are registered as virtual subclasses of anyio's (its
# classes are ABCs), so isinstance() and functools.singledispatch on
# anyio.streams.memory.MemoryObjectSendStream / MemoryObjectReceiveStream
# take ours too.  Not real subclasses: anyio's classes are dataclasses with
# its own buffer state.  anyio never tests an object against those classes
# (anyio 4.16), so the registration changes none of its code paths.  Type
# checkers do not see a registration: to them the classes stay distinct.
from __future__ import annotations

import math
import warnings
from typing import Any, Generic, TypeVar

import anyio
import anyio.streams.memory
from anyio.streams.memory import MemoryObjectStreamStatistics

from ._endpoints import ReceiveEndpoint, SendEndpoint, open_channel
from ._factory import any_subscript_calls_new
from ._state import ChannelState

T_Item = TypeVar("T_Item")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


def _statistics(state: ChannelState[Any]) -> MemoryObjectStreamStatistics:
    stats = state.statistics()
    return MemoryObjectStreamStatistics(
        stats.items_buffered,
        stats.capacity,
        stats.open_senders,
        stats.open_receivers,
        stats.tasks_waiting_send,
        stats.tasks_waiting_receive,
    )


class MemoryObjectSendStream(SendEndpoint[T_contra], Generic[T_contra]):
    """The send side of :func:`create_memory_object_stream`, as anyio's.

    ``send()`` is a checkpoint on every call, as in anyio: before it
    blocks, too.
    """

    __slots__ = ()
    _checkpoint_before_park = True

    def clone(self) -> MemoryObjectSendStream[T_contra]:
        """Another send stream on the same buffer, closed independently.

        Never blocks; not a checkpoint.

        :raises anyio.ClosedResourceError: if this stream is closed
        """
        if self._closed:
            raise anyio.ClosedResourceError
        return self._new_clone()

    def statistics(self) -> MemoryObjectStreamStatistics:
        """anyio's statistics tuple for this stream's buffer."""
        return _statistics(self._state)

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"Unclosed <{self.__class__.__name__} at {id(self):x}>",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )


class MemoryObjectReceiveStream(ReceiveEndpoint[T_co], Generic[T_co]):
    """The receive side of :func:`create_memory_object_stream`, as anyio's.

    ``receive()`` is a checkpoint on every call, as in anyio: before it
    blocks, too.
    """

    __slots__ = ()
    _checkpoint_before_park = True

    def clone(self) -> MemoryObjectReceiveStream[T_co]:
        """Another receive stream on the same buffer, closed independently.

        Never blocks; not a checkpoint.

        :raises anyio.ClosedResourceError: if this stream is closed
        """
        if self._closed:
            raise anyio.ClosedResourceError
        return self._new_clone()

    def statistics(self) -> MemoryObjectStreamStatistics:
        """anyio's statistics tuple for this stream's buffer."""
        return _statistics(self._state)

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"Unclosed <{self.__class__.__name__} at {id(self):x}>",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )


anyio.streams.memory.MemoryObjectSendStream.register(MemoryObjectSendStream)
anyio.streams.memory.MemoryObjectReceiveStream.register(MemoryObjectReceiveStream)


@any_subscript_calls_new
class create_memory_object_stream(
    tuple[MemoryObjectSendStream[T_Item], MemoryObjectReceiveStream[T_Item]],
):
    """Create a memory object stream: a drop-in for anyio's function.

    Call it as anyio's: ``create_memory_object_stream(5)``,
    ``create_memory_object_stream[int](max_buffer_size=5)``,
    ``create_memory_object_stream(math.inf)``.

    :param max_buffer_size: items held in the buffer before ``send()`` blocks
        (an int >= 0, or ``math.inf``)
    :param item_type: deprecated in anyio 4, as there
    :return: a tuple of (send stream, receive stream)
    :raises ValueError: if ``max_buffer_size`` is neither an int nor
        ``math.inf``, or is negative (``ValueError`` for both, as anyio's)
    """

    def __new__(  # type: ignore[misc]
        cls, max_buffer_size: float = 0, item_type: object = None
    ) -> tuple[MemoryObjectSendStream[T_Item], MemoryObjectReceiveStream[T_Item]]:
        if max_buffer_size != math.inf and not isinstance(max_buffer_size, int):
            raise ValueError("max_buffer_size must be either an integer or math.inf")
        if max_buffer_size < 0:
            raise ValueError("max_buffer_size cannot be negative")
        if item_type is not None:
            warnings.warn(
                "The item_type argument has been deprecated in AnyIO 4.0. "
                "Use create_memory_object_stream[YourItemType](...) instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        return open_channel(
            MemoryObjectSendStream,
            MemoryObjectReceiveStream,
            max_buffer_size,
            True,  # strict
            False,  # single_sender
            False,  # single_receiver
        )
