# Rate limit for job starts: GCRA (generic cell rate algorithm), as aiometer.
#
# One number of state: the theoretical arrival time ``_tat`` of the next
# start.  A start asked for at ``now`` is given the time
# ``max(_tat, now)`` and pushes ``_tat`` one interval past it, so starts are
# spaced evenly, ``1 / per_second`` apart, with no burst beyond one.  The
# reservation is made before sleeping, so several workers asking at once
# each get their own slot, in the order they asked.  A reservation whose
# job is cancelled while its worker sleeps (or whose worker is cancelled
# with the whole executor) is given back if it is still the last one made;
# one with later reservations behind it is not, since those are kept: the
# next start is then at most one interval later than it could have been.
# A job's cancel() gives it back at once (give_back()), not when its worker
# next runs: on Trio the worker that takes the next job may run first, and
# would reserve the slot after the free one.  So that each reservation is
# given back once at most, ``_sleeping`` holds it, by job, while its worker
# sleeps.
#
# The clock is AnyIO's (``anyio.current_time`` / ``anyio.sleep``), so a
# backend's fake clock (Trio's ``MockClock``) drives it in tests.
from __future__ import annotations

import math

import anyio


class RateLimiter:
    """Spaces calls to :meth:`wait` at least ``1 / per_second`` apart."""

    __slots__ = ("_interval", "_sleeping", "_tat")

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second
        self._tat = -math.inf
        #: job -> (the time reserved before its slot, its slot's end), for
        #: each job whose worker sleeps for its slot
        self._sleeping: dict[object, tuple[float, float]] = {}

    async def wait(self, job: object) -> None:
        """Sleep until the start time of ``job`` (a key of the caller's).

        A checkpoint only if it sleeps.  Cancelled while it sleeps, it gives
        its slot back (:meth:`give_back`), unless that was done already.
        """
        now = anyio.current_time()
        before = self._tat
        start = before if before > now else now
        self._tat = end = start + self._interval
        if start <= now:
            return
        sleeping = self._sleeping
        sleeping[job] = (before, end)
        try:
            while start > now:
                # A timer may fire a little early (uvloop's clock counts
                # whole milliseconds), so sleep again until the slot has come.
                await anyio.sleep(start - now)
                now = anyio.current_time()
        except BaseException:
            self.give_back(job)
            raise
        sleeping.pop(job, None)  # gone if the job was cancelled meanwhile

    def give_back(self, job: object) -> None:
        """Free the slot that ``job``'s worker sleeps for, if it is still
        the last one reserved.  Once per reservation: nothing if ``job``'s
        worker does not sleep for a slot, or it was given back already."""
        reservation = self._sleeping.pop(job, None)
        if reservation is not None and self._tat == reservation[1]:
            self._tat = reservation[0]
