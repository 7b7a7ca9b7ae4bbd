# Rate limit for job starts: GCRA (generic cell rate algorithm), as aiometer.
#
# One number of state: the theoretical arrival time ``_tat`` of the next
# start.  A start asked for at ``now`` is given the time ``max(_tat, now)``
# (but see "Late timers") and pushes ``_tat`` one interval past it, so the
# slots are spaced evenly, ``1 / per_second`` apart, with no burst beyond
# one but the catch-up after a late timer.  The reservation is made before
# sleeping, so several workers asking at once each get their own slot, in
# the order they asked.  A reservation whose
# job is cancelled while its worker sleeps (or whose worker is cancelled
# with the whole executor) is given back if it is still the last one made;
# one with later reservations behind it is kept in ``_freed`` (its end ->
# the time reserved before it), since the later ones keep their times, and
# is given back with them if they all are: a map closed with a window of
# jobs waiting for their slots cancels them in input order, first slot
# first, and the next job then starts on the first slot, not after all of
# them.  A freed slot that has passed can free little more (a time in the
# past is as good as now, but for the catch-up below: dropping it gives
# fewer starts, never more), so ``_freed`` is cleared once every reserved
# slot is past, and pruned of the passed ones whenever it has doubled.
# A job's cancel() gives it back at once (give_back()), not when its worker
# next runs: on Trio the worker that takes the next job may run first, and
# would reserve the slot after the free one.  So that each reservation is
# given back once at most, ``_sleeping`` holds it, by job, while its worker
# sleeps.
#
# Late timers.  A slot that has passed is not given (``max(_tat, now)``): the
# time nobody asked for is gone.  But a worker that sleeps for its slot may
# wake late (the event loops wait in whole milliseconds, so by up to about
# one), and the executor has one worker at a time wait for a slot, so the
# next job's worker reserves only after that: at a rate above about 1,000
# a second, each late wake-up would lose the slots that passed meanwhile,
# and the starts fell to 32-40% of 5,000 a second.  So a slot that passed
# within ``_late`` (how late the last sleep ended, at most ``_MAX_LATE``)
# is still given, and its job starts at once: the starts catch up with
# the slots after a late timer, as they would with the slots reserved
# before it.  Up to ``1 + _MAX_LATE * per_second`` jobs may start at once,
# and a window of any length may hold ``_MAX_LATE * per_second`` starts
# more than its share, but for a loop held up for longer: the job whose slot
# passed while it was held starts when it runs again, and the next slot,
# which keeps its time, may have come by then too (two at once, whatever the
# rate, as with aiometer's limiter).  ``_late`` is kept until the next sleep
# ends, so a burst spawned within ``_late`` after the last slot, after the
# executor went idle, gets the slots that passed too, though no job asked
# for them then.  A slot given late only to a job queued before it would
# drop that, but it starves producers held back by backpressure: a job
# submitted with ``max_queued=1`` (or mapped with a window of two) is queued
# only as the one before it leaves the queue, after the late timer, and such
# starts fell to 46-49% of 5,000 a second (tried in 7e10b6f, and undone).  A
# rule by demand would count the producers that wait too.  A Trio
# ``MockClock`` is late only when a test jumps it.
#
# The clock is AnyIO's (``anyio.current_time`` / ``anyio.sleep``), so a
# backend's fake clock (Trio's ``MockClock``) drives it in tests.
from __future__ import annotations

import math

import anyio

#: The most catch-up a late timer earns (_late): the event loops wait in
#: whole milliseconds, so a timer fires up to about one late; a longer delay
#: (a loop blocked by a job) earns no burst of the slots it let pass.
_MAX_LATE = 0.002


class RateLimiter:
    """Spaces calls to :meth:`wait` at least ``1 / per_second`` apart."""

    __slots__ = ("_freed", "_interval", "_late", "_prune_at", "_sleeping", "_tat")

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second
        self._tat = -math.inf
        #: job -> (the time reserved before its slot, its slot's end), for
        #: each job whose worker sleeps for its slot
        self._sleeping: dict[object, tuple[float, float]] = {}
        #: end -> the time reserved before it, for each slot given back
        #: while later ones were still reserved
        self._freed: dict[float, float] = {}
        self._prune_at = 32  # the size of _freed that prunes it
        #: how late the last sleep for a slot ended (at most _MAX_LATE)
        self._late = 0.0

    async def wait(self, job: object) -> None:
        """Sleep until the start time of ``job`` (a key of the caller's).

        A checkpoint only if it sleeps.  Cancelled while it sleeps, it gives
        its slot back (:meth:`give_back`), unless that was done already.
        """
        now = anyio.current_time()
        before = self._tat
        # The next slot, or now if it has passed; but a slot that passed
        # within as long as the last sleep overslept is still given: it
        # passed while that sleeper's timer was late (see the module's
        # comment, "Late timers").
        start = before if before > now - self._late else now
        self._tat = end = start + self._interval
        if start <= now:
            if self._freed:
                self._freed.clear()  # every slot reserved before is past
            return
        sleeping = self._sleeping
        sleeping[job] = (before, end)
        try:
            while start - now > 1e-9:
                # A timer may fire a little early (uvloop's clock counts
                # whole milliseconds), so sleep again until the slot has come,
                # within a nanosecond: uvloop's clock may land a float step
                # short, and a sleep of that step spins until its
                # millisecond has passed.
                await anyio.sleep(start - now)
                now = anyio.current_time()
        except BaseException:
            self.give_back(job)
            raise
        late = now - start
        if late <= 0.0:
            late = 0.0
        elif late > _MAX_LATE:
            late = _MAX_LATE
        self._late = late
        sleeping.pop(job, None)  # gone if the job was cancelled meanwhile

    def give_back(self, job: object) -> None:
        """Free the slot that ``job``'s worker sleeps for, with every slot
        given back before it that it was the last one reserved after; a slot
        with later ones still reserved is freed when they all are.  Once per
        reservation: nothing if ``job``'s worker does not sleep for a slot,
        or it was given back already."""
        reservation = self._sleeping.pop(job, None)
        if reservation is None:
            return
        before, end = reservation
        freed = self._freed
        if self._tat != end:
            freed[end] = before
            if len(freed) >= self._prune_at:
                now = anyio.current_time()
                for passed in [e for e in freed if e <= now]:
                    del freed[passed]
                self._prune_at = max(32, 2 * len(freed))
            return
        while before in freed:
            before = freed.pop(before)
        self._tat = before
