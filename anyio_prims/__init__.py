"""Concurrency primitives for AnyIO, written once, running on asyncio (also
with uvloop) and Trio, faster than what each backend ships."""

from __future__ import annotations

from .sync import BatchSemaphore, BatchSemaphoreStatistics

__all__ = ["BatchSemaphore", "BatchSemaphoreStatistics"]
