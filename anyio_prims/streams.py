# The anyio drop-in (see channels/_memory.py): change
# ``from anyio import create_memory_object_stream`` to
# ``from anyio_prims.streams import create_memory_object_stream``.
"""A drop-in for ``anyio.create_memory_object_stream`` and its endpoints.

Same call forms, API, exceptions and checkpoints as anyio's, on the waiter
core.  See ``docs/channels.md`` for the six places it deliberately
differs (four fixes, and two that follow from the third), and for copying
(an endpoint cannot be copied).
"""

from __future__ import annotations

from anyio.streams.memory import MemoryObjectStreamStatistics

from .channels._memory import (
    MemoryObjectReceiveStream,
    MemoryObjectSendStream,
    create_memory_object_stream,
)

__all__ = [
    "MemoryObjectReceiveStream",
    "MemoryObjectSendStream",
    "MemoryObjectStreamStatistics",
    "create_memory_object_stream",
]
