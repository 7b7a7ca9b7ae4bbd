"""Concurrency primitives for AnyIO, written once, running on asyncio (also
with uvloop) and Trio, faster than what each backend ships."""

from __future__ import annotations

from .executor import (
    Executor,
    ExecutorStatistics,
    JobCancelled,
    JoinHandle,
    MapIterator,
)
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
]
