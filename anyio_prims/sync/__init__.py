# Synchronization primitives, all parked on the waiter core: BatchSemaphore,
# and on it the locks and the capacity limiter; Event and Condition on a
# WaitQueue of their own.  Nothing here imports a backend.
from __future__ import annotations

from ._batch_semaphore import BatchSemaphore, BatchSemaphoreStatistics

__all__ = ["BatchSemaphore", "BatchSemaphoreStatistics"]
