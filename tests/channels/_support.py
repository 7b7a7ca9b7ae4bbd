"""Helpers shared by the channel tests: the flavours, the cancellation
sources each backend has, and (from ``tests/_tasks.py``) ``settle()``,
``Call`` and ``assert_schedule_point()``."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from anyio_prims import mpmc, mpsc, spmc
from anyio_prims.streams import create_memory_object_stream

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
#: The flavours and the drop-in streams ("memory"), for the tests that run
#: on all four (see :func:`make`).
WITH_MEMORY = [*CHANNELS, "memory"]


def make(flavour: str, capacity: float) -> tuple[Any, Any]:
    """A channel of ``flavour``, or of the drop-in streams for "memory"."""
    if flavour == "memory":
        return create_memory_object_stream(capacity)
    return CHANNELS[flavour](capacity)  # type: ignore[no-any-return]


#: Flavours whose sender can be cloned (many producers).
MANY_SENDERS = ("mpsc", "mpmc")
#: Flavours whose receiver can be cloned (many consumers).
MANY_RECEIVERS = ("spmc", "mpmc")


def drain(rx: Any) -> list[Any]:
    """Every item ``rx`` can receive now, without waiting."""
    items = []
    while True:
        try:
            items.append(rx.receive_nowait())
        except anyio.WouldBlock:
            return items


async def park_receives(tg: Any, rx: Any, count: int) -> list[Call]:
    """``count`` receives on new clones of ``rx``, each in its own task in
    ``tg``, each parked before the next starts (so in arrival order)."""
    calls = []
    for _ in range(count):
        calls.append(Call(rx.clone().receive).start(tg))
        await settle()
    return calls


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


async def looks_between_call_and_park(
    tx: Any, rx: Any, side: str, calls: int = 20
) -> int:
    """Make ``calls`` calls of ``side`` ("send" or "receive") that must wait;
    another task, told when each call starts, completes it as soon as it
    sees the caller parked.  Returns how often that task looked and found
    the caller not parked yet: 0 when every call parked without yielding
    first (a yield would let the other task look in between)."""
    started = -1
    misses = 0
    received: list[int] = []

    def parked() -> int:
        stats = tx.statistics()
        waiting: int = (
            stats.tasks_waiting_receive
            if side == "receive"
            else stats.tasks_waiting_send
        )
        return waiting

    async def other() -> None:
        nonlocal misses
        for i in range(calls):
            while started != i:
                await anyio.lowlevel.checkpoint()
            while not parked():
                misses += 1
                await anyio.lowlevel.checkpoint()
            if side == "receive":
                tx.send_nowait(i)
            else:
                received.append(rx.receive_nowait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        for i in range(calls):
            started = i
            if side == "receive":
                received.append(await rx.receive())
            else:
                await tx.send(i)
    assert received == list(range(calls))
    return misses
