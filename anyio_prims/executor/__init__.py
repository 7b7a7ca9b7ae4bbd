# The executor: structured job spawning on long-lived worker tasks with
# direct-schedule dispatch (see _executor.py), join handles (_handle.py),
# lazy map (_map.py) and a GCRA rate limit (_ratelimit.py).  Parks only on
# the waiter core; imports no backend.
from __future__ import annotations

from ._executor import Executor, ExecutorStatistics
from ._handle import JobCancelled, JoinHandle
from ._map import MapIterator

__all__ = [
    "Executor",
    "ExecutorStatistics",
    "JobCancelled",
    "JoinHandle",
    "MapIterator",
]
