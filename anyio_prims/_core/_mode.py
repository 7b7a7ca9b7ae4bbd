# Checkpoint modes: what an async call does before it tries its fast path.
#
# BUDGETED      the default of anyio_prims' own primitives: a cooperative
#               budget (see _budget.py); a checkpoint every BUDGET_SIZE calls.
# STRICT        AnyIO's rule: every call is a checkpoint (cancellation point
#               and schedule point), whether or not it then blocks.
#
# The drop-ins map AnyIO's ``fast_acquire=True`` to BUDGETED: AnyIO checks
# for cancellation on every such call without yielding, and that check alone
# costs about 0.8 us on asyncio (twice a whole asyncio.Semaphore round trip);
# see docs/semantics.md.
#
# A call that blocks is a cancellation point in every mode.  The checkpoint
# comes before the operation, so a cancellation there leaves nothing done.
from __future__ import annotations

from typing import Final

from ._backend import checkpoint
from ._budget import BUDGET, BUDGET_SIZE

BUDGETED: Final = 0
STRICT: Final = 1


async def enter(mode: int) -> None:
    """The slow form of the mode check, for call sites that are not hot."""
    if mode == STRICT or BUDGET.spend():
        await checkpoint()


async def budget_checkpoint() -> None:
    """The checkpoint a hot path takes when its budget is spent or it is strict.

    Hot paths inline the budget check, which is a third of the cost of the
    call otherwise (a method call per fast path)::

        budget = BUDGET
        budget.left -= 1
        if budget.left <= 0 or self._strict:
            await budget_checkpoint()
    """
    BUDGET.left = BUDGET_SIZE
    await checkpoint()


def check_strict(strict: object) -> bool:
    """``strict`` validated: a primitive's ``strict=`` keyword."""
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, not {type(strict).__name__}")
    return strict


def mode_for(strict: object) -> int:
    """The mode of a primitive built with ``strict=...`` (validated)."""
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, not {type(strict).__name__}")
    return STRICT if strict else BUDGETED
