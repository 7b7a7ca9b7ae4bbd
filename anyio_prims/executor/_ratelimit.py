# Rate limit for job starts: GCRA (generic cell rate algorithm), as aiometer.
#
# One number of state: the theoretical arrival time ``_tat`` of the next
# start.  A start asked for at ``now`` is given the time
# ``max(_tat, now)`` and pushes ``_tat`` one interval past it, so starts are
# spaced evenly, ``1 / per_second`` apart, with no burst beyond one.  The
# reservation is made before sleeping, so several workers asking at once
# each get their own slot, in the order they asked.  A reservation whose
# worker is cancelled while it sleeps (its job was cancelled, or the whole
# executor) is given back if it is still the last one made; one with later
# reservations behind it is not, since those are kept: the next start is
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
        """Sleep until this caller's start time.

        A checkpoint only if it sleeps.  Cancelled while it sleeps, it gives
        its slot back if no later one was reserved.
        """
        now = anyio.current_time()
        before = self._tat
        start = before if before > now else now
        self._tat = end = start + self._interval
        try:
            while start > now:
                # A timer may fire a little early (uvloop's clock counts
                # whole milliseconds), so sleep again until the slot has come.
                await anyio.sleep(start - now)
                now = anyio.current_time()
        except BaseException:
            if self._tat == end:
                self._tat = before
            raise
