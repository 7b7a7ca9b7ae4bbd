# Copying a primitive.
#
# A primitive keeps its state in objects of its own (its WaitQueue, an
# RWLock's set of readers, a drop-in lock's BatchSemaphore), so the default
# shallow copy would share them with the original: a task parked on the copy
# could be granted by a release of the original.  ``copy.copy()`` of a
# primitive therefore makes what ``copy.deepcopy()`` and pickling make: an
# independent primitive with the same settings and state, whose wait
# structures start empty and bound to no event loop.  Like them it raises
# TypeError for a primitive that tasks wait in, a lock a task holds (a task
# cannot be copied), or a limiter whose tokens are borrowed.
from __future__ import annotations

import copy
from typing import NoReturn, SupportsIndex, TypeVar

C = TypeVar("C", bound="CopiedWhole")


class CopiedWhole:
    """Mixin: ``copy.copy()`` makes an independent copy, as ``deepcopy``."""

    __slots__ = ()

    def __copy__(self: C) -> C:
        return copy.deepcopy(self)


class NotCopied:
    """Mixin for channel endpoints: copying or pickling one raises TypeError.

    An endpoint is one counted handle on a channel it shares with its peers
    (closing the last sender ends the stream); a copy would be a handle the
    channel does not count, and a single side's copy would dodge the rule
    that one task uses it at a time.  ``clone()`` makes a counted one where
    the side may have many.
    """

    __slots__ = ()

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        # copy.copy(), copy.deepcopy() and pickle all come here.
        raise TypeError(
            f"a {type(self).__name__} cannot be copied or pickled: it is one "
            "of the handles its channel counts (clone() makes another, where "
            "that side may have many)"
        )
