# KeyboardInterrupt protection on Trio.
#
# Trio defers a Ctrl-C that arrives while *protected* code runs: the
# KeyboardInterrupt is raised in the main task at its next checkpoint.  In
# unprotected code it is raised at whatever bytecode is running.  Trio's own
# primitives are protected, so a Ctrl-C cannot leave one half-updated (a
# waiter taken from its queue and never woken, an item taken from a buffer
# and never delivered); anyio-prims marks its code the same way.
#
# The mark is Trio's public ``enable_ki_protection``, which since Trio 0.28
# records the function's code object and returns the function unchanged: no
# wrapper, nothing on any call path.  Trio decides, when the signal arrives,
# by walking from the running frame towards the task's first frame and
# taking the first marked one.  Older Trio wraps the function instead (a
# call and a frame-locals write per call); there nothing is marked.
#
# What is marked: every function, method and property whose code is in the
# library's own files, and the code nested in them, once, when Trio is first
# seen (the library never imports Trio itself: it is an optional extra): at
# the package's import if Trio is imported already, else when a WaitQueue or
# Slot is made (a primitive makes its own at its first wait, an Executor when
# it is made), a BatchSemaphore is made (a budgeted acquire, its own or a
# drop-in Semaphore's, may run 63 times without asking Trio for anything) or
# an Executor block is entered with Trio imported, or at the first Trio call
# of the core (a wait, a checkpoint, a task lookup).  Code of other modules
# that the library's namespaces hold (a dataclass's ``__repr__`` wrapper,
# shared by every dataclass) is left alone.  Exception: the functions tagged
# ``runs_user_code``, which make a call into user code that may run for long,
# and nothing else (an executor's job, ``spawn_many`` iterating its argument,
# the map's input read, ``Condition.wait_for``'s predicate), so that the
# library's own steps around the call stay protected.  Those are marked
# *unprotected*, not left unmarked, so that the walk stops there and the user
# code stays interruptible, as in a task of its own; their nested code is left
# alone.
#
# Invariant: once ``protect_from_keyboard_interrupt`` has run, every code
# object of a loaded anyio_prims module is marked, protected or (tagged)
# unprotected, and no other code is.  Modules are all imported by the
# package's ``__init__``.
from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_TAG: Final = "_anyio_prims_runs_user_code"

#: None until the first attempt; then whether the library's code is marked.
_marked: bool | None = None


class Marking:
    """Whether the library's code is marked: :data:`MARKING`."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


#: ``MARKING.done``: the library's code is marked, so a call into user code
#: that must stay interruptible has to go through a ``runs_user_code``
#: function (the frame Trio's walk stops at); before that, and on a Trio
#: that marks nothing, the call is made directly (one frame less per job).
MARKING: Final = Marking()


def runs_user_code(func: F) -> F:
    """Tag ``func`` as calling user code: left interruptible on Trio."""
    setattr(func, _TAG, True)
    return func


def protect_if_trio_imported() -> None:
    """:func:`protect_from_keyboard_interrupt`, if not done and Trio is
    imported: for the paths that may be the first to run on Trio without
    asking Trio for anything (the package's import, the generic waiter)."""
    if _marked is None and "trio" in sys.modules:
        protect_from_keyboard_interrupt()


class _CodeHolder:
    """What ``enable_ki_protection`` needs of a function: its code."""

    __slots__ = ("__code__",)

    def __init__(self, code: types.CodeType) -> None:
        self.__code__ = code


def _nested(code: types.CodeType) -> Iterator[types.CodeType]:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested(const)


def _functions(namespace: dict[str, Any], module: str, path: str) -> Iterator[Any]:
    """The functions defined in ``module``'s source file ``path`` among
    ``namespace``'s values, including methods, properties' accessors and
    nested classes' members.

    By the code's file, not by ``__module__``: a wrapper that
    ``functools.wraps`` made (a dataclass's ``__repr__``) copies the
    ``__module__`` of what it wraps, but its code is the wrapping module's,
    shared by every function wrapped the same way in the process; marking
    it would protect user code too.
    """
    for value in list(namespace.values()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            accessors = (value.fget, value.fset, value.fdel)
            yield from (f for f in accessors if _defined_in(f, path))
        elif isinstance(value, types.FunctionType):
            if _defined_in(value, path):
                yield value
        elif isinstance(value, type) and value.__module__ == module:
            yield from _functions(dict(vars(value)), module, path)


def _defined_in(func: object, path: str) -> bool:
    code = getattr(func, "__code__", None)
    return isinstance(code, types.CodeType) and code.co_filename == path


def protect_from_keyboard_interrupt() -> bool:
    """Mark the library's code as protected from KeyboardInterrupt on Trio.

    Imports ``trio.lowlevel``: call it only once Trio is imported.  Runs
    once; later calls return the first one's answer: whether the code is
    marked (``False`` on a Trio older than 0.28, which would need a wrapper
    around every function).
    """
    global _marked
    if _marked is not None:
        return _marked
    from trio.lowlevel import disable_ki_protection, enable_ki_protection

    def probe() -> None:  # pragma: no cover - never called
        pass

    if enable_ki_protection(probe) is not probe:  # an older Trio's wrapper
        _marked = False
        return False
    _marked = True
    for name, module in list(sys.modules.items()):
        if module is None or not (
            name == "anyio_prims" or name.startswith("anyio_prims.")
        ):
            continue
        path = getattr(module, "__file__", None)
        if path is None:
            continue
        for func in _functions(dict(vars(module)), name, path):
            if getattr(func, _TAG, False):
                disable_ki_protection(func)
                continue
            enable_ki_protection(func)
            for code in _nested(func.__code__):
                enable_ki_protection(_CodeHolder(code))
    MARKING.done = True
    return True
