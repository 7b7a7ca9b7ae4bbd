"""The kind of each method matches AnyIO's: what inspects a class sees the
same on the drop-ins and the channel endpoints as on AnyIO's classes.

``async with`` and ``await`` work on a coroutine either way; what tells a
coroutine function from a plain function returning a coroutine is
inspection: ``inspect.iscoroutinefunction``, ``unittest.mock``'s autospec
(``create_autospec``, ``patch(autospec=True)``), which gives a plain
function's mock a plain ``__aenter__`` that ``async with`` then rejects, and
frameworks that wrap coroutine functions.  No AnyIO version gate: the kinds
compared here were the same on every AnyIO it was run on (4.6, 4.10, 4.11,
4.13 and 4.16).
"""

from __future__ import annotations

import inspect
from typing import Any
from unittest import mock

import anyio
import anyio.abc
import anyio.streams.memory
import pytest

import anyio_prims
import anyio_prims.streams
from anyio_prims import mpmc, mpsc, spmc

#: The protocol methods compared besides the public names.
PROTOCOL = (
    "__aenter__",
    "__aexit__",
    "__enter__",
    "__exit__",
    "__aiter__",
    "__anext__",
    "__iter__",
    "__next__",
    "__await__",
)


def kind(attr: object) -> str:
    """What inspection tells of a class attribute, as found on the class."""
    if isinstance(attr, property):
        return "property"
    if isinstance(attr, (staticmethod, classmethod)):
        return f"{type(attr).__name__} {kind(attr.__func__)}"
    if inspect.iscoroutinefunction(attr):
        return "coroutine function"
    if inspect.isasyncgenfunction(attr):
        return "async generator function"
    if inspect.isgeneratorfunction(attr):
        return "generator function"
    return "callable" if callable(attr) else "attribute"


def kind_mismatches(theirs: type, ours: type) -> dict[str, tuple[str, str]]:
    """The names both classes have whose kinds differ, as theirs and ours.
    Names only one class has are left to the API tests."""
    names = {n for n in dir(theirs) if not n.startswith("_")} | set(PROTOCOL)
    mismatches = {}
    for name in sorted(names):
        theirs_attr = inspect.getattr_static(theirs, name, None)
        ours_attr = inspect.getattr_static(ours, name, None)
        if theirs_attr is None or ours_attr is None:
            continue
        if kind(theirs_attr) != kind(ours_attr):
            mismatches[name] = (kind(theirs_attr), kind(ours_attr))
    return mismatches


def test_kind_tells_the_kinds_of_method_apart() -> None:
    # The comparison must see each difference a user's inspection would.
    async def coroutine() -> None:
        pass

    async def asyncgen() -> Any:
        yield

    def plain() -> None:
        pass

    def generator() -> Any:
        yield

    def getter(self: object) -> None:
        pass

    async def for_class(cls: type) -> None:
        pass

    kinds = [
        kind(coroutine),
        kind(asyncgen),
        kind(plain),
        kind(generator),
        kind(None),
        kind(property(getter)),
        kind(staticmethod(coroutine)),
        kind(staticmethod(plain)),
        kind(classmethod(for_class)),
    ]
    assert len(set(kinds)) == len(kinds)


SYNC_DROP_INS = ["Lock", "Semaphore", "CapacityLimiter", "Event", "Condition"]


@pytest.mark.parametrize("name", SYNC_DROP_INS)
def test_a_drop_in_s_methods_are_of_anyio_s_kinds(name: str) -> None:
    assert kind_mismatches(getattr(anyio, name), getattr(anyio_prims, name)) == {}


@pytest.mark.parametrize("side", ["send", "receive"])
def test_the_memory_streams_methods_are_of_anyio_s_kinds(side: str) -> None:
    cls = {"send": "MemoryObjectSendStream", "receive": "MemoryObjectReceiveStream"}
    theirs = getattr(anyio.streams.memory, cls[side])
    ours = getattr(anyio_prims.streams, cls[side])
    assert kind_mismatches(theirs, ours) == {}


@pytest.mark.parametrize("module", [mpsc, spmc, mpmc], ids=lambda m: m.__name__)
def test_a_channel_s_endpoints_are_of_anyio_s_stream_kinds(module: Any) -> None:
    tx, rx = module.channel(1)
    with tx, rx:
        assert kind_mismatches(anyio.abc.ObjectSendStream, type(tx)) == {}
        assert kind_mismatches(anyio.abc.ObjectReceiveStream, type(rx)) == {}


@pytest.mark.anyio
async def test_an_autospec_mock_of_a_condition_works_in_async_with() -> None:
    # What the kinds are for: a mock built from the class, as a test of
    # user code would build it, is entered as the real one is.
    cond = mock.create_autospec(anyio_prims.Condition, instance=True)
    async with cond:
        pass
    cond.__aenter__.assert_awaited_once()
