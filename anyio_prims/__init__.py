"""Concurrency primitives for AnyIO, written once, running on asyncio (also
with uvloop) and Trio, faster than what each backend ships."""

from __future__ import annotations

from . import mpmc, mpsc, oneshot, spmc, streams
from ._core import protect_if_trio_imported as _protect_if_trio_imported
from .channels import ChannelStatistics
from .executor import (
    Executor,
    ExecutorStatistics,
    JobCancelled,
    JoinHandle,
    MapIterator,
)
from .streams import create_memory_object_stream
from .sync import (
    BatchSemaphore,
    BatchSemaphoreStatistics,
    CapacityLimiter,
    Condition,
    Event,
    Lock,
    RWLock,
    RWLockStatistics,
    Semaphore,
)

__all__ = [
    "BatchSemaphore",
    "BatchSemaphoreStatistics",
    "CapacityLimiter",
    "ChannelStatistics",
    "Condition",
    "Event",
    "Executor",
    "ExecutorStatistics",
    "JobCancelled",
    "JoinHandle",
    "Lock",
    "MapIterator",
    "RWLock",
    "RWLockStatistics",
    "Semaphore",
    "create_memory_object_stream",
    "mpmc",
    "mpsc",
    "oneshot",
    "spmc",
    "streams",
]

# KeyboardInterrupt protection on Trio (see _core/_ki.py), now if Trio is
# imported already; else the first wait or checkpoint on Trio does it.
_protect_if_trio_imported()
