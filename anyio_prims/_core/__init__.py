# The waiter core: the only backend-aware package of anyio_prims.
#
# Everything above it (sync/, channels/, executor/) parks tasks on
# WaitQueue/Slot and reaches checkpoints through the functions re-exported
# here; none of it imports asyncio or trio.
from __future__ import annotations

from ._backend import (
    FORCE_GENERIC,
    NO_TASKS,
    REARMS_QUEUED,
    TaskMap,
    asyncio_cancelling,
    checkpoint,
    checkpoint_if_cancelled,
    current_task,
    on_trio,
    take_checkpoints,
    task_finder,
    task_info,
    threadsafe_call_soon,
    trio_task_runs,
    uncancel_to,
    withdraw_rearmed,
)
from ._budget import BUDGET, BUDGET_SIZE
from ._copying import CopiedWhole, NotCopied
from ._ki import (
    MARKING,
    protect_from_keyboard_interrupt,
    protect_if_trio_imported,
    runs_user_code,
)
from ._mode import budget_checkpoint, check_strict
from ._waiter import (
    FAILED,
    GRANTED,
    NOT_OPENED,
    PENDING,
    WITHDRAWN,
    Slot,
    Unopened,
    Waiter,
    WaitQueue,
    raise_failure,
    settled_wait,
)

__all__ = [
    "BUDGET",
    "BUDGET_SIZE",
    "FAILED",
    "FORCE_GENERIC",
    "GRANTED",
    "MARKING",
    "NOT_OPENED",
    "NO_TASKS",
    "PENDING",
    "REARMS_QUEUED",
    "WITHDRAWN",
    "CopiedWhole",
    "NotCopied",
    "Slot",
    "TaskMap",
    "Unopened",
    "WaitQueue",
    "Waiter",
    "asyncio_cancelling",
    "budget_checkpoint",
    "check_strict",
    "checkpoint",
    "checkpoint_if_cancelled",
    "current_task",
    "on_trio",
    "protect_from_keyboard_interrupt",
    "protect_if_trio_imported",
    "raise_failure",
    "runs_user_code",
    "settled_wait",
    "take_checkpoints",
    "task_finder",
    "task_info",
    "threadsafe_call_soon",
    "trio_task_runs",
    "uncancel_to",
    "withdraw_rearmed",
]
