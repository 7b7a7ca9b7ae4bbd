# Rate limit for job starts: GCRA (generic cell rate algorithm), as aiometer.
#
# One number of state: the theoretical arrival time ``_tat`` of the next
# start.  A start asked for at ``now`` is given the time
# ``max(_tat, now)`` and pushes ``_tat`` one interval past it, so starts are
# spaced evenly, ``1 / per_second`` apart, with no burst beyond one.  The
# reservation is made before sleeping, so several workers asking at once
# each get their own slot, in the order they asked.  A reservation whose
# worker is cancelled while it sleeps is not given back: the next start is
# then at most one interval later than it could have been.
#
# The clock is AnyIO's (``anyio.current_time`` / ``anyio.sleep``), so a
# backend's fake clock (Trio's ``MockClock``) drives it in tests.
from __future__ import annotations

import math

import anyio


class RateLimiter:
    """Spaces calls to :meth:`wait` at least ``1 / per_second`` apart."""

    __slots__ = ("_interval", "_tat")

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second
        self._tat = -math.inf

    async def wait(self) -> None:
        """Sleep until this caller's start time.  A checkpoint only if it sleeps."""
        now = anyio.current_time()
        start = self._tat if self._tat > now else now
        self._tat = start + self._interval
        while start > now:
            # A timer may fire a little early (uvloop's clock counts whole
            # milliseconds), so sleep again until the slot has come.
            await anyio.sleep(start - now)
            now = anyio.current_time()
