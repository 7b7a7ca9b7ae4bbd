# Synchronization primitives, all parked on the waiter core: BatchSemaphore,
# and on it the locks and the capacity limiter; RWLock, Event and Condition
# on a WaitQueue of their own.  Nothing here imports a backend.
from __future__ import annotations

from ._batch_semaphore import BatchSemaphore, BatchSemaphoreStatistics
from ._event import Condition, Event
from ._limiter import CapacityLimiter
from ._lock import Lock, Semaphore
from ._rwlock import RWLock, RWLockStatistics

__all__ = [
    "BatchSemaphore",
    "BatchSemaphoreStatistics",
    "CapacityLimiter",
    "Condition",
    "Event",
    "Lock",
    "RWLock",
    "RWLockStatistics",
    "Semaphore",
]
