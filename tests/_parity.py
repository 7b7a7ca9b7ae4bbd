"""Helpers shared by the parity tests of the drop-ins and the streams."""

from __future__ import annotations

import inspect

#: The protocol methods compared besides the public names.
_PROTOCOL = (
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


def coroutine_function_mismatches(theirs: type, ours: type) -> list[str]:
    """The methods that are coroutine functions on one class and not on the
    other: ``inspect.iscoroutinefunction`` (what ``unittest.mock``, asyncio
    and frameworks that inspect callables go by) must agree, not only what a
    call returns.  Names that only one class has are left to the API tests.
    """
    names = {n for n in dir(theirs) if not n.startswith("_")} | set(_PROTOCOL)
    mismatches = []
    for name in sorted(names):
        theirs_attr = inspect.getattr_static(theirs, name, None)
        ours_attr = inspect.getattr_static(ours, name, None)
        if theirs_attr is None or ours_attr is None:
            continue
        if inspect.iscoroutinefunction(theirs_attr) != inspect.iscoroutinefunction(
            ours_attr
        ):
            mismatches.append(name)
    return mismatches
