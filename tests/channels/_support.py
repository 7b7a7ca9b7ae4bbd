"""Helpers shared by the channel tests: the flavours, the cancellation
sources each backend has, and (from ``tests/_tasks.py``) ``settle()``,
``Call`` and ``assert_schedule_point()``."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from anyio_prims import mpmc, mpsc, spmc

from .._tasks import FAR, Call, assert_schedule_point, settle, uncancel

__all__ = [
    "FAR",
    "Call",
    "assert_schedule_point",
    "settle",
    "uncancel",
]

#: The three flavours, by name.
CHANNELS: dict[str, Any] = {
    "mpsc": mpsc.channel,
    "spmc": spmc.channel,
    "mpmc": mpmc.channel,
}
#: Flavours whose sender can be cloned (many producers).
MANY_SENDERS = ("mpsc", "mpmc")
#: Flavours whose receiver can be cloned (many consumers).
MANY_RECEIVERS = ("spmc", "mpmc")

ALL = ("asyncio", "trio")
SOURCES: dict[str, tuple[str, ...]] = {
    "anyio_cancel_scope": ALL,
    "anyio_move_on_after": ALL,
    "anyio_fail_after": ALL,
    "trio_cancel_scope": ("trio",),
    "trio_move_on_after": ("trio",),
    "asyncio_task_cancel": ("asyncio",),
    "asyncio_timeout": ("asyncio",),
    "asyncio_wait_for": ("asyncio",),
}
#: Sources that cancel a task even though the wait it is in was granted:
#: with them, the grant-then-cancel race reaches the give-back path.
GIVE_BACK_SOURCES = ("asyncio_task_cancel", "asyncio_timeout")


def source_param(name: str, backend_name: str) -> str:
    """``name`` if that cancellation source exists on the backend, else skip."""
    if backend_name not in SOURCES[name]:
        pytest.skip(f"{name} is not a cancellation source on {backend_name}")
    if name == "asyncio_timeout" and sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    return name
