# The cooperative budget: how non-blocking calls still reach schedule points.
#
# AnyIO makes every async call a checkpoint; asyncio's Queue and Lock never
# yield unless they block.  The per-call schedule point is most of the cost of
# AnyIO's primitives, so by default a call that completes without blocking
# does not yield, but spends one unit of a budget; when the budget is spent,
# the call first goes through a full checkpoint (cancellation point and
# schedule point), and the budget is refilled once that checkpoint is over.
#
# Invariant: between two checkpoints taken by this package, at most
# BUDGET_SIZE budgeted calls complete, the calls that park included.  The
# counter is one per interpreter and counts calls since the last such
# checkpoint, whichever task made them.  It is refilled only by a task that
# has just been through one: a task resuming from a checkpoint of ours
# (``_backend.checkpoint``) or from a park in a WaitQueue or Slot that a
# cancellation ended (a cancellation reaches a parked task only when the
# loop runs it again), never by a task on its way into one.  A task on its
# way in may not give the turn back to the loop: under asyncio's eager task
# factory a new task runs its first step inside ``create_task()``, and when
# it parks or checkpoints there its creator carries on with no schedule
# point in between.
#
# A park that ends granted refills nothing, and a call whose checkpoint is
# due takes it first even if it is about to park (a strict call that is
# not due parks at once: parking is its checkpoint); or, where what it is
# granted can be given back (a BatchSemaphore's permits, an RWLock), it
# parks first, keeping its place in the queue, and takes the checkpoint
# once granted, giving the grant back if it is cancelled there.  On asyncio a wait
# that is granted before a cancellation lands does not raise it: AnyIO
# delivers a scope's cancellation only to a task whose wait is not yet
# resolved, a loop iteration later, and a ``task.cancel()`` that meets a
# grant that cannot be undone (a send's item taken) is re-armed for the
# next checkpoint (which spends the budget: Parking._interrupted).  A loop
# of waits each granted as it parks (a producer and a consumer in step,
# each yielding once per item) met no other checkpoint when wakes refilled
# the budget, and could not be cancelled.
#
# On one event loop only the running task can make calls, so a task that
# makes nothing but budgeted calls takes a checkpoint at least once every
# BUDGET_SIZE of them (sooner if other tasks spent part of the budget).  A
# cancelled checkpoint refills nothing (a cautious rule: the next
# checkpoint only comes sooner).  Code that drives a coroutine itself and
# throws into it where it parks is no loop: each such throw refills the
# budget (Parking._interrupted).  Event loops running in several threads
# share the counter; each still yields every BUDGET_SIZE calls or sooner
# except while another thread refills it at the same moment.
#
# The counter is a slot on a module-level object rather than a thread-local
# or context variable because it sits on every fast path: a slot decrement
# costs about 20 ns, a thread-local about 100 ns (measured on CPython 3.11).
from __future__ import annotations

from typing import Final

#: Budgeted calls between two forced checkpoints.
BUDGET_SIZE: Final = 64


class Budget:
    """The shared counter of budgeted calls left before a checkpoint."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = BUDGET_SIZE


#: The one budget of this interpreter.  Every budgeted call spends it
#: inline, with no call of its own::
#:
#:     budget = BUDGET
#:     budget.left -= 1
#:     if budget.left <= 0 or self._strict:
#:         await budget_checkpoint()  # refills the budget once it is over
BUDGET: Final = Budget()
