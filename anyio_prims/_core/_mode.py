# Checkpoint modes: what an async call does before it tries its fast path.
#
# budgeted  the default of anyio_prims' own primitives: a cooperative budget
#           (see _budget.py); a checkpoint every BUDGET_SIZE calls.
# strict    AnyIO's rule: every call is a checkpoint (cancellation point and
#           schedule point).  A primitive holds it as a ``_strict`` bool.
#
# The drop-ins map AnyIO's ``fast_acquire=True`` to budgeted: AnyIO checks
# for cancellation on every such call without yielding, and that check alone
# costs about 0.8 us on asyncio (twice a whole asyncio.Semaphore round trip);
# see docs/semantics.md.
#
# A call that blocks is a cancellation point in every mode (it parks).  The
# checkpoint of a call that can proceed comes before the operation, so a
# cancellation there leaves nothing done.
from __future__ import annotations

from typing import Final

from ._backend import checkpoint

#: The checkpoint a hot path takes when its budget is spent or it is strict:
#: :func:`checkpoint` itself, which refills the budget once the task has been
#: through it (see _budget.py).  Await the result at once.  Hot paths inline
#: the budget check, which is a third of the cost of the call otherwise (a
#: method call per fast path)::
#:
#:     budget = BUDGET
#:     budget.left -= 1
#:     if budget.left <= 0 or self._strict:
#:         await budget_checkpoint()
budget_checkpoint: Final = checkpoint


def check_strict(strict: object) -> bool:
    """``strict`` validated: a primitive's ``strict=`` keyword."""
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, not {type(strict).__name__}")
    return strict
