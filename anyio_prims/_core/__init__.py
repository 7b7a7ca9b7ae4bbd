# The waiter core: the only backend-aware package of anyio_prims.
#
# Everything above it (sync/, channels/, executor/) parks tasks on
# WaitQueue/Slot and reaches checkpoints through the functions re-exported
# here; none of it imports asyncio or trio.
from __future__ import annotations

from ._backend import (
    FORCE_GENERIC,
    checkpoint,
    checkpoint_if_cancelled,
    current_task,
    running_backend,
    task_info,
)
from ._budget import BUDGET, BUDGET_SIZE
from ._mode import BUDGETED, STRICT, budget_checkpoint, check_strict, enter, mode_for
from ._waiter import WAITER_STATS, Slot, Waiter, WaitQueue

__all__ = [
    "BUDGET",
    "BUDGETED",
    "BUDGET_SIZE",
    "FORCE_GENERIC",
    "STRICT",
    "WAITER_STATS",
    "Slot",
    "WaitQueue",
    "Waiter",
    "budget_checkpoint",
    "check_strict",
    "checkpoint",
    "checkpoint_if_cancelled",
    "current_task",
    "enter",
    "mode_for",
    "running_backend",
    "task_info",
]
