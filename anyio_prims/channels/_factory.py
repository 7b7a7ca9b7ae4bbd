# The channel factories' typed call form, ``channel[int](capacity)``, at the
# cost of the untyped one.
#
# Each factory (``mpsc.channel``, ``oneshot.channel``,
# ``create_memory_object_stream``...) is a generic class built by ``__new__``
# alone, so that type checkers read ``channel[int](n)`` as the endpoints of
# ``int``.  At run time, ``Generic``'s subscript makes a typing alias, and
# calling the alias calls the class and then tries to set ``__orig_class__``
# on the tuple it returned, which raises and is caught: about 310 ns on
# CPython 3.11 on top of a ~590 ns channel creation.  The decorator below
# makes the subscript return ``__new__`` bound to the class instead (made
# once), so ``channel[int](n)`` runs the same ``__new__`` as ``channel(n)``,
# with the same arguments, checks and result.
#
# Invariant: nothing but the run-time subscript changes; type checkers see
# the decorator as the identity.  The drop-in ``create_memory_object_stream``
# takes any subscript, as anyio's (a ``tuple`` subclass, whose subscript
# checks nothing) does; the library's own factories take one item type.

from __future__ import annotations

from types import MethodType
from typing import Any, TypeVar

C = TypeVar("C", bound=type)

__all__ = ["any_subscript_calls_new", "subscript_calls_new"]


def subscript_calls_new(cls: C) -> C:
    """Make ``cls[T]`` return ``cls.__new__`` bound to ``cls``.

    ``cls`` takes exactly one type argument; a subscript with another number
    raises ``TypeError``, as ``Generic``'s does.
    """
    return _calls_new(cls, one_type=True)


def any_subscript_calls_new(cls: C) -> C:
    """Make ``cls[...]`` return ``cls.__new__`` bound to ``cls``, whatever
    is in the brackets: the subscript of anyio's ``tuple`` subclass checks
    nothing, and a drop-in for it must raise no error it does not."""
    return _calls_new(cls, one_type=False)


def _calls_new(cls: C, *, one_type: bool) -> C:
    new = MethodType(cls.__new__, cls)
    name = f"{cls.__module__}.{cls.__qualname__}"

    def __class_getitem__(cls_: type, params: Any) -> MethodType:
        if one_type and type(params) is tuple and len(params) != 1:
            raise TypeError(f"{name}[...] takes one item type, got {len(params)}")
        return new

    cls.__class_getitem__ = classmethod(__class_getitem__)  # type: ignore[attr-defined]
    return cls
