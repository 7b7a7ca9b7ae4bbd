"""Run every async test on asyncio, asyncio+uvloop and Trio.

Which waiter runs underneath is chosen by ``ANYIO_PRIMS_WAITER`` at import;
nox runs the suite once with the native waiters and once with
``ANYIO_PRIMS_WAITER=generic``.  ``ANYIO_PRIMS_BACKENDS`` (comma-separated
names from the list below) narrows the backends for one run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from ._reentry import Arm, arm_inside_wake
from ._waiter_count import install

# Before any test runs (see _waiter_count.py).
install()

_ALL_BACKENDS: dict[str, Any] = {
    "asyncio": pytest.param(("asyncio", {}), id="asyncio"),
    "uvloop": pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    "trio": pytest.param(("trio", {}), id="trio"),
}


def _selected() -> list[Any]:
    names = os.environ.get("ANYIO_PRIMS_BACKENDS", "asyncio,uvloop,trio")
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in _ALL_BACKENDS]
    if unknown:
        raise pytest.UsageError(f"unknown backends in ANYIO_PRIMS_BACKENDS: {unknown}")
    return [_ALL_BACKENDS[n] for n in chosen]


@pytest.fixture(params=_selected())
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.fixture(autouse=True)
def full_budget() -> None:
    """Each test starts with the checkpoint budget full: the counter is one
    per interpreter, and the tests before (in whatever order the workers
    run them) leave it anywhere.  A test that counts on where it stands
    when a call starts sets it there itself."""
    from anyio_prims._core import BUDGET, BUDGET_SIZE

    BUDGET.left = BUDGET_SIZE


@pytest.fixture(params=["kept", "left empty"])
def task_map(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """asyncio's loop -> task map as this Python keeps it, or as CPython
    3.14's C tasks leave it: empty, whatever runs (``TASK_MAP_KEPT``).  On
    3.14 and later both leave it empty."""
    if request.param == "left empty":
        from anyio_prims._core import _backend, _waiter

        empty: dict[object, object] = {}
        monkeypatch.setattr(_backend, "_tasks_by_loop", empty)
        monkeypatch.setattr(_backend, "TASK_MAP_KEPT", False)
        monkeypatch.setattr(_waiter, "_tasks_by_loop", empty)
        monkeypatch.setattr(_waiter, "TASK_MAP_KEPT", False)
    return str(request.param)


@pytest.fixture
def inside_wake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Arm]:
    """Arm one-shot actions to run inside the library's next wake-ups of a
    task (a wake-up allocates: a finalizer may run there); see
    ``_reentry.arm_inside_wake``.  The primitive must be made after."""
    armed = arm_inside_wake(monkeypatch)
    yield armed.append
    assert not armed, "an action never ran: too few tasks were woken"
