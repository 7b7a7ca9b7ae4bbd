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
from .sync import BatchSemaphore, BatchSemaphoreStatistics, RWLock, RWLockStatistics

__all__ = [
    "BatchSemaphore",
    "BatchSemaphoreStatistics",
    "Executor",
    "ExecutorStatistics",
    "JobCancelled",
    "JoinHandle",
    "MapIterator",
    "RWLock",
    "RWLockStatistics",
]
