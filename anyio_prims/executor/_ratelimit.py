# Rate limit for job starts: GCRA (generic cell rate algorithm), as aiometer.
#
# One number of state: the theoretical arrival time ``_tat`` of the next
# start.  A start asked for at ``now`` is given the time ``max(_tat, now)``
# (but see "Late timers") and pushes ``_tat`` one interval past it, so the
# slots are spaced evenly, ``1 / per_second`` apart, with no burst beyond
# one but the catch-up after a late timer.  The reservation is made before
# sleeping, so several waits made at once would each get their own slot, in
# the order they asked; the executor makes one at a time (one worker at a
# time waits for a slot: ``Executor._slot_waits``).  A reservation whose job
# is cancelled while its worker sleeps (or whose worker is cancelled with
# the whole executor) is given back: ``_tat`` returns to where it was before
# it, so the next wait gets that slot.  Only the last reservation made can
# be given back so; one with a later reservation behind it (made by waits
# that overlap, which the executor does not make) stays unused, since the
# later one keeps its time.  A job's cancel() gives its reservation back at
# once (give_back()), not only the wait as its cancellation is raised: a
# cancel that lands after the sleep's timer fired and before the worker ran
# raises nothing there on asyncio (AnyIO's scope does not cancel a task
# whose wait has ended), and the wait returns as if the job were due.  So
# that each reservation is given back once at most, ``_sleeping`` holds it,
# by job, until its worker runs after the sleep.
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
    """Spaces calls to :meth:`wait` at least ``1 / per_second`` apart, but
    for the catch-up after a late timer (see the module's comment)."""

    __slots__ = ("_interval", "_late", "_sleeping", "_tat")

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second
        self._tat = -math.inf
        #: job -> (the time reserved before its slot, its slot's end), for
        #: each job whose worker sleeps for its slot
        self._sleeping: dict[object, tuple[float, float]] = {}
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
        """Free the slot that ``job``'s worker sleeps for, if it is the last
        one reserved (with a later one reserved, it stays unused).  Once per
        reservation: nothing if ``job``'s worker does not sleep for a slot,
        or it was given back already."""
        reservation = self._sleeping.pop(job, None)
        if reservation is not None and self._tat == reservation[1]:
            self._tat = reservation[0]
