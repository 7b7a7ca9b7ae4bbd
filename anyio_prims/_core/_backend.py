# The only module that knows which event loop is running.
#
# Detection, on the slow paths that need it: asyncio (and uvloop, whose loop
# is an asyncio loop) when ``asyncio._get_running_loop()`` names a loop *and*
# an asyncio task is running on it; otherwise, if Trio has been imported,
# Trio is assumed; anything else falls back to the generic waiter, which
# speaks only AnyIO's public API.  The task check matters for Trio in guest
# mode on an asyncio host: Trio's tasks then run inside the host loop's
# callbacks, so a loop is running but no asyncio task is.  The check is a
# membership test on asyncio's own loop -> task map, which holds a loop only
# while one of its tasks runs (about 12 ns; ``asyncio.current_task`` is
# asked only where the map says no task).  ``ANYIO_PRIMS_WAITER=generic``
# forces the generic waiter and the generic checkpoints everywhere; it is
# read once, at import.
#
# One exception to "asyncio first": a ``trio.run()`` called from inside an
# asyncio task's step, on the same thread (a notebook cell that IPython's
# ``%autoawait trio`` runs, while the kernel's asyncio task executes the
# cell).  The outer loop and its task still look running while the Trio
# tasks run, so where Trio is imported and a Trio task runs on this thread,
# the tests below also ask :func:`trio_nested`, which walks the stack to
# find which of the two tasks is the caller's.  The reverse nesting, an
# ``asyncio.run()`` inside a Trio task, needs no such test (the asyncio task
# is the caller whenever one runs), but there AnyIO, asking sniffio, takes
# Trio's path for the whole thread: so a cancellation is told by this
# module's detection (``is_cancellation``), and what is built on AnyIO's
# scopes and task groups does not work there.  A primitive that parked a
# task of the outer loop keeps choosing asyncio on its waiter's fast path
# (``_waiter``), and an owner lookup bound there keeps naming the outer
# run's task: sharing one primitive between an outer run and a run nested
# in it is not supported (docs/semantics.md, docs/design.md).
#
# Everything here is a slow path, a 1-in-64 path or the checkpoint of a
# strict call, which yields anyway.  Budgeted fast paths in the primitives
# never call into this module.
from __future__ import annotations

import asyncio
import asyncio.tasks
import os
import sys
import types
import weakref
from asyncio import _get_running_loop
from asyncio import current_task as _asyncio_current_task
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel

from ._budget import BUDGET, BUDGET_SIZE
from ._ki import protect_from_keyboard_interrupt, protect_if_trio_imported

_WAITER_ENV: Final = os.environ.get("ANYIO_PRIMS_WAITER", "").strip().lower()
if _WAITER_ENV not in ("", "native", "generic"):
    raise ValueError(
        f"ANYIO_PRIMS_WAITER must be 'native' or 'generic', not {_WAITER_ENV!r}"
    )

#: ``True`` when ``ANYIO_PRIMS_WAITER=generic`` forces AnyIO's public API.
FORCE_GENERIC: Final = _WAITER_ENV == "generic"


_trio_lowlevel: types.ModuleType | None = None


def trio_lowlevel() -> Any:
    """``trio.lowlevel``, imported on first use (Trio is an optional extra)."""
    global _trio_lowlevel
    if _trio_lowlevel is None:
        import trio.lowlevel

        _trio_lowlevel = trio.lowlevel
        protect_from_keyboard_interrupt()
    return _trio_lowlevel


#: asyncio's map of running loop -> running task, where this Python keeps one
#: that its tasks maintain (3.10-3.13 do); :func:`task_finder` checks before
#: relying on it.
_found: object = getattr(asyncio.tasks, "_current_tasks", None)
_tasks_by_loop: dict[object, object] = (
    _found if isinstance(_found, dict) else {}  # pragma: no branch
)


def _task_map_kept() -> bool:
    """Whether asyncio's tasks keep ``_tasks_by_loop`` up to date.

    CPython 3.10-3.13's C tasks keep it: their module's own dict is the one
    ``asyncio.tasks`` exports.  From 3.14 the C tasks keep the running task
    on the thread state instead (CPython gh-129898), and the dict that
    ``asyncio.tasks`` still defines is kept only by its pure-Python tasks.
    """
    if not isinstance(_found, dict):  # pragma: no cover - other Pythons
        return False
    try:
        import _asyncio
    except ImportError:  # pragma: no cover - a Python without the C tasks
        return True
    c_map = getattr(_asyncio, "_current_tasks", None)
    return c_map is _found or asyncio.Task is getattr(asyncio.tasks, "_PyTask", None)


#: ``True`` where a running asyncio task is always in ``_tasks_by_loop``,
#: so that the map's emptiness tells that no asyncio task runs, in any
#: thread.  Where ``False`` (CPython 3.14's C tasks) the map stays empty:
#: every test of it falls back to ``asyncio.current_task()``, which reads
#: the thread state there; the asyncio fast path of ``enqueue`` compares
#: the running loop and asks for its current task, and its Trio fast path
#: asks :func:`asyncio_loop` instead of testing the map's emptiness.
TASK_MAP_KEPT: Final = _task_map_kept()


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop if an asyncio task runs on it, else ``None``.

    ``None`` also for a Trio task in guest mode on an asyncio host, or in a
    ``trio.run()`` nested in an asyncio task (see the top of this module).
    Hot paths write this out inline.
    """
    loop = _get_running_loop()
    if (
        loop is not None
        and (loop in _tasks_by_loop or _asyncio_current_task(loop) is not None)
        and ("trio" not in sys.modules or not trio_nested())
    ):
        return loop
    return None


#: Trio's run context (``trio._core._run.GLOBAL_RUN_CONTEXT``, a
#: ``threading.local`` whose per-thread ``__dict__`` holds the running Trio
#: task as ``"task"``) for :func:`trio_nested`, bound on its first call;
#: ``False`` where this Trio keeps none.
_trio_thread_context: Any = None


def _bind_trio_thread_context() -> Any:
    global _trio_thread_context
    try:
        from trio._core import _run
    except ImportError:  # pragma: no cover - another Trio
        context: Any = False
    else:
        context = getattr(_run, "GLOBAL_RUN_CONTEXT", False)
        if not isinstance(getattr(context, "__dict__", None), dict):
            context = False  # pragma: no cover - another Trio
    _trio_thread_context = context
    return context


def trio_nested() -> bool:
    """Whether the caller is a Trio task of a ``trio.run()`` that an asyncio
    task running on this thread called (and is blocked in).

    Ask it only where an asyncio task runs on this thread and Trio is
    imported: then a Trio task runs here too only if one run is nested in
    the other, and the stack tells which task is the caller's: walking out
    from the caller, the first of the two tasks' outermost coroutine frames
    met is its task's.  ``False`` when no Trio task runs on this thread (a
    dict lookup in Trio's per-thread run context: about 70 ns with the
    call, on CPython 3.11), and where this Trio or this task keeps none of
    what the test reads (the earlier answer, asyncio).
    """
    context = _trio_thread_context
    if context is None:
        context = _bind_trio_thread_context()
    if context is False:  # pragma: no cover - another Trio
        return False
    trio_task = context.__dict__.get("task")
    if trio_task is None:
        return False
    loop = _get_running_loop()
    asyncio_task = _asyncio_current_task(loop) if loop is not None else None
    get_coro = getattr(asyncio_task, "get_coro", None)
    asyncio_frame = getattr(get_coro(), "cr_frame", None) if get_coro else None
    trio_frame = getattr(getattr(trio_task, "coro", None), "cr_frame", None)
    if asyncio_frame is None or trio_frame is None:  # pragma: no cover
        return False
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame is trio_frame:
            return True
        if frame is asyncio_frame:
            return False
        frame = frame.f_back
    return False  # pragma: no cover - both frames are the caller's


#: Whether ``asyncio.Future()`` makes a future faster than the loop's
#: ``create_future()`` does (which passes ``loop=``): from CPython 3.12.
#: Before, finding the running loop makes a ``getpid()`` system call, so
#: neither way wins on both loops.  Per future made and freed, timed in a
#: running loop on this project's machine, ``create_future()`` ->
#: ``Future()``: 3.12 asyncio 218 -> 125 ns, uvloop 161 -> 88 ns; 3.13
#: 216 -> 117, 155 -> 81; 3.11 169 -> 165, 127 -> 139; 3.10 234 -> 193,
#: 133 -> 145.
FUTURE_FROM_RUNNING_LOOP: Final = sys.version_info >= (3, 12)


def future_factory(
    loop: asyncio.AbstractEventLoop,
) -> Callable[[], asyncio.Future[Any]]:
    """What makes a future of ``loop``, for a task of ``loop`` to await.

    Call the result only while a task of ``loop`` runs in this thread (the
    waiter core's ``enqueue`` paths, which test for that).  It is
    ``asyncio.Future`` where that is the faster way and ``loop`` makes its
    futures as asyncio's or uvloop's own loop does (``asyncio.Future(loop=
    loop)``): the future then finds ``loop`` as the running loop.  A loop
    that defines its own ``create_future`` keeps it.
    """
    if FUTURE_FROM_RUNNING_LOOP:
        create = getattr(type(loop), "create_future", None)
        uvloop_loop = sys.modules.get("uvloop.loop")
        if create is asyncio.BaseEventLoop.create_future or (
            uvloop_loop is not None
            and create is getattr(uvloop_loop.Loop, "create_future", None)
        ):
            return asyncio.Future
    return loop.create_future


@types.coroutine
def _asyncio_yield() -> Generator[None, None, None]:
    # What ``asyncio.sleep(0)`` does, without its call overhead: a bare
    # yield makes the task a schedule point, and a pending ``task.cancel()``
    # (plain asyncio or an AnyIO cancel scope) is thrown in on resumption.
    yield
    # Resumed by the loop: a schedule point is behind this task (not only
    # ahead of it: an eager task's first step runs in its creator's turn).
    BUDGET.left = BUDGET_SIZE


async def _refilled_after(checkpoint: Awaitable[None]) -> None:
    # A backend's own checkpoint, then the refill, as in _asyncio_yield.
    await checkpoint
    BUDGET.left = BUDGET_SIZE


def checkpoint() -> Awaitable[None]:
    """A cancellation point and a schedule point, on the running backend.

    Await the result at once.  Refills the budget (_budget.py) once the
    task has been through the schedule point, never before it; a cancelled
    checkpoint refills nothing.  A plain function returning an awaitable
    that costs no frame of ours where that is free: on asyncio a one-yield
    generator that refills after its yield; on Trio, Trio's own checkpoint
    while budget is left (a strict call: it refills nothing, which is safe,
    since a refill only lets calls go on without a checkpoint), and a
    coroutine that refills after it once the budget is spent (about 900
    instructions more, once in BUDGET_SIZE calls); the generic checkpoint
    (AnyIO's) likewise.
    """
    if not FORCE_GENERIC:
        loop = _get_running_loop()  # asyncio_loop() written out
        if (
            loop is not None
            and (loop in _tasks_by_loop or _asyncio_current_task(loop) is not None)
            and ("trio" not in sys.modules or not trio_nested())
        ):
            return _asyncio_yield()
        if "trio" in sys.modules:
            trio_checkpoint: Awaitable[None] = trio_lowlevel().checkpoint()
            if BUDGET.left <= 0:
                return _refilled_after(trio_checkpoint)
            return trio_checkpoint
    protect_if_trio_imported()
    if BUDGET.left <= 0:  # as on Trio
        return _refilled_after(anyio.lowlevel.checkpoint())
    return anyio.lowlevel.checkpoint()


#: What :func:`take_checkpoints` returns on Trio, bound on first use.
_trio_take_checkpoints: tuple[Any, Any] | None = None


def take_checkpoints() -> tuple[Any, Any]:
    """The checkpoints of a drop-in's uncontended strict acquire: ``(check,
    after)``, two functions returning awaitables, or ``check`` ``None``.

    The caller awaits ``check()`` (if not ``None``) before it takes the
    lock, unit or token, and ``after()`` once it has taken it, giving it
    back if that await raises.  ``check()`` raises the task's pending
    cancellation, and returns only without yielding: the take that follows
    still sees what the caller tested.

    AnyIO's ``Lock``, ``Semaphore`` and ``CapacityLimiter`` check for
    cancellation, take, then yield with the cancellation shielded: a
    cancellation delivered during that yield is raised at the task's next
    checkpoint, and the acquire returns holding what it took.  On Trio,
    whose own primitives AnyIO's are there, that is Trio's
    ``checkpoint_if_cancelled`` and ``cancel_shielded_checkpoint``, which
    together cost about what Trio's ``checkpoint()`` does; those are
    returned (AnyIO's public ones under the generic waiter, which are
    Trio's there).  Elsewhere ``check`` is ``None`` and ``after`` a plain
    checkpoint: on asyncio AnyIO's shielded yield enters a cancel scope
    (over 1 us on CPython 3.11), so the drop-ins take, yield unshielded and
    give back if the yield raises (docs/migrate-anyio.md).
    """
    global _trio_take_checkpoints
    if not FORCE_GENERIC:
        loop = _get_running_loop()  # asyncio_loop() written out
        if (
            loop is not None
            and (loop in _tasks_by_loop or _asyncio_current_task(loop) is not None)
            and ("trio" not in sys.modules or not trio_nested())
        ):
            return _ASYNCIO_TAKE_CHECKPOINTS
        if "trio" in sys.modules:
            if _trio_take_checkpoints is None:
                lowlevel = trio_lowlevel()
                _trio_take_checkpoints = (
                    lowlevel.checkpoint_if_cancelled,
                    lowlevel.cancel_shielded_checkpoint,
                )
            return _trio_take_checkpoints
    elif asyncio_loop() is None and "trio" in sys.modules:
        protect_if_trio_imported()
        return _GENERIC_TRIO_TAKE_CHECKPOINTS
    return _OTHER_TAKE_CHECKPOINTS


_ASYNCIO_TAKE_CHECKPOINTS: Final = (None, _asyncio_yield)
_GENERIC_TRIO_TAKE_CHECKPOINTS: Final = (
    anyio.lowlevel.checkpoint_if_cancelled,
    anyio.lowlevel.cancel_shielded_checkpoint,
)
_OTHER_TAKE_CHECKPOINTS: Final = (None, checkpoint)


def _no_event_loop_error(namespace: Any = anyio) -> type[RuntimeError]:
    """What AnyIO raises where a call needs an event loop and none runs:
    ``anyio.NoEventLoopError`` from AnyIO 4.12, else sniffio's
    ``AsyncLibraryNotFoundError``; both are RuntimeErrors.

    AnyIO 4.11 defines ``NoEventLoopError`` but raises it from
    ``anyio.from_thread`` only; its primitives still raise sniffio's error.
    4.12.0 added ``get_available_backends()``, the public name that tells
    the two apart, and dropped sniffio.  Its primitives raise a private
    ``NoCurrentAsyncBackend``, an ``Exception`` but no ``RuntimeError``;
    4.12.1 replaced that with ``NoEventLoopError``.  With 4.12.0 the
    library raises ``NoEventLoopError`` too, as every later AnyIO does,
    rather than copy a private class.  ``namespace`` stands for the
    ``anyio`` module (a test presents 4.11's).
    """
    found: type[RuntimeError] | None = getattr(namespace, "NoEventLoopError", None)
    if found is not None and hasattr(namespace, "get_available_backends"):
        return found
    try:  # AnyIO before 4.12 depends on sniffio
        from sniffio import AsyncLibraryNotFoundError
    except ImportError:  # pragma: no cover
        return RuntimeError
    return AsyncLibraryNotFoundError


#: Raised, as AnyIO's classes raise it, by a call that needs the running
#: task made where no task runs (``Lock().acquire_nowait()`` outside any
#: event loop).
NoEventLoopError: Final = _no_event_loop_error()


def _no_task() -> RuntimeError:
    # Outside any event loop, or in one's callback (``loop.call_soon``,
    # ``anyio.from_thread.run_sync``), which runs in no task.
    return NoEventLoopError(
        "no task is running: call this from a task of an event loop, not from"
        " outside one or from a loop callback"
    )


def current_task() -> object:
    """The running task object (asyncio ``Task`` or Trio ``Task``).

    About 0.17 us on CPython 3.11 (where ``_get_running_loop`` alone is
    0.09 us), 0.05 us on 3.12.  Hot paths use :func:`task_finder` instead.

    :raises RuntimeError: :data:`NoEventLoopError`, if no task is running
    """
    loop = _get_running_loop()
    if loop is not None:
        task = _asyncio_current_task(loop)
        if task is not None and ("trio" not in sys.modules or not trio_nested()):
            return task
    if "trio" in sys.modules:
        # Also Trio in guest mode on an asyncio host (a loop, but no task),
        # and Trio nested in an asyncio task.
        try:
            return trio_lowlevel().current_task()
        except RuntimeError:  # Trio's own, outside a Trio run
            raise _no_task() from None
    raise _no_task()


class TaskMap(Protocol):
    """Where an owner-tracking primitive looks up the running task.

    ``get(key)`` is the running task while the caller runs where the map and
    key were made (see :func:`task_finder`), and ``None`` elsewhere.
    """

    def get(self, key: Any, /) -> object | None: ...


class _TrioTasks:
    """Trio's running task, shaped as a :class:`TaskMap` (the key is unused)."""

    __slots__ = ()

    def get(self, key: object, /) -> object | None:
        lowlevel: Any = _trio_lowlevel  # imported by task_finder()
        try:
            task: object = lowlevel.current_task()
        except RuntimeError:
            return None
        return task


class _AnyTasks:
    """:func:`current_task` shaped as a :class:`TaskMap` (the key is unused)."""

    __slots__ = ()

    def get(self, key: object, /) -> object | None:  # pragma: no cover
        try:
            return current_task()
        except RuntimeError:
            return None


class _LoopTasks:
    """asyncio's own ``current_task(loop)`` shaped as a :class:`TaskMap`
    (the key is the loop): where asyncio's C tasks keep the running task on
    the thread state instead of the loop -> task map (``TASK_MAP_KEPT``
    false, CPython 3.14), it reads the thread state for the running loop,
    with no Python call of ours.  For another loop it asks every thread, so
    a primitive moved to another loop or backend pays that once, then is
    bound again."""

    __slots__ = ()

    get = staticmethod(_asyncio_current_task)


class _NoTasks:
    """The empty :class:`TaskMap`; copied and pickled as itself."""

    __slots__ = ()

    def get(self, key: object, /) -> object | None:
        return None

    def __reduce__(self) -> str:
        return "NO_TASKS"


#: The map an owner-tracking primitive starts with: it finds no task, so the
#: first call binds a real one through :func:`task_finder`.  A primitive
#: that is copied or pickled starts from it again (the bound map may hold an
#: event loop).
NO_TASKS: Final[TaskMap] = _NoTasks()
_TRIO_TASKS: Final = _TrioTasks()
_ANY_TASKS: Final = _AnyTasks()
_LOOP_TASKS: Final = _LoopTasks()


def task_finder() -> tuple[object, TaskMap, object]:
    """The running task, and a map and key that find it again cheaply.

    The primitives whose fast paths track an owner task (Lock, RWLock) keep
    the map and key (starting from :data:`NO_TASKS`) and inline::

        task = self._tasks.get(self._task_key)
        if task is None:
            task, self._tasks, self._task_key = task_finder()

    The lookup returns the running task while the caller runs on the same
    event loop and thread as when it was made, and ``None`` elsewhere (never
    a wrong task: a task of another loop can only be returned if the
    primitive is shared between threads, which none of them allows).  On
    asyncio the map is asyncio's own loop -> task dict and the key the loop:
    a dict lookup, about 0.02 us on CPython 3.11 against 0.17 us for
    :func:`current_task`.  It keeps the loop referenced until the primitive
    is used on another one.  Where asyncio's tasks leave that dict empty
    (``TASK_MAP_KEPT`` false, CPython 3.14), the map's ``get`` is
    ``asyncio.current_task`` itself, with the same key.  On Trio the map is
    the thread's Trio run-context dict and the key ``"task"``
    (:func:`trio_task_dict`), again a dict lookup where
    ``trio.lowlevel.current_task()`` is a Python call.

    :raises RuntimeError: :data:`NoEventLoopError`, if no task is running
    """
    loop = _get_running_loop()
    task = _asyncio_current_task(loop) if loop is not None else None
    if task is not None and ("trio" not in sys.modules or not trio_nested()):
        if _tasks_by_loop.get(loop) is task:
            return task, _tasks_by_loop, loop
        if not TASK_MAP_KEPT:
            return task, _LOOP_TASKS, loop
        return task, _ANY_TASKS, None  # pragma: no cover - other Pythons
    if "trio" in sys.modules:  # also Trio in guest mode, or nested in asyncio
        try:
            trio_task = trio_lowlevel().current_task()
        except RuntimeError:  # Trio's own, outside a Trio run
            raise _no_task() from None
        tasks = trio_task_dict()
        if tasks is not None and tasks.get("task") is trio_task:
            return trio_task, tasks, "task"
        return trio_task, _TRIO_TASKS, None  # pragma: no cover - another Trio
    raise _no_task()


#: Trio's run context (``trio._core._run.GLOBAL_RUN_CONTEXT``, a
#: ``threading.local``), bound by the first :func:`trio_task_dict` call that
#: finds it; None until then.
_trio_run_context: Any = None


def trio_task_dict() -> dict[str, object] | None:
    """This thread's Trio run-context dict, where Trio keeps the running task.

    While a Trio task runs on this thread, ``["task"]`` is that task (Trio's
    own ``current_task()`` reads it there), and the key is absent between
    task steps and outside ``trio.run``.  A map and key for
    :func:`task_finder`, and what a wait structure checks to skip the
    backend dispatch on Trio (``_waiter.Parking``): a C-level ``dict.get``
    where ``trio.lowlevel.current_task()`` is a Python call.  The dict is
    the calling thread's: it answers for tasks of this thread only.

    A private part of Trio, so it is checked: None (the callers then use
    Trio's public calls) unless Trio keeps its run context there and this
    thread's dict names the running task.  Call it from a Trio task.
    """
    global _trio_run_context
    context = _trio_run_context
    if context is None:
        try:
            from trio._core import _run
        except ImportError:  # pragma: no cover - another Trio
            return None
        context = getattr(_run, "GLOBAL_RUN_CONTEXT", None)
    tasks = getattr(context, "__dict__", None)
    if not isinstance(tasks, dict):  # pragma: no cover - another Trio
        return None
    try:
        running = trio_lowlevel().current_task()
    except RuntimeError:
        return None
    if tasks.get("task") is not running:  # pragma: no cover - another Trio
        return None
    _trio_run_context = context
    return tasks


def task_info(task: object) -> anyio.TaskInfo:
    """An ``anyio.TaskInfo`` for a task returned by :func:`current_task`.

    Equal to ``anyio.get_current_task()`` taken in that task (AnyIO compares
    task infos by ``id(task)`` on both backends).
    """
    # AnyIO's own TaskInfo subclass for the backend, as its Lock statistics
    # give (a parent_id and a working has_pending_cancellation()); these
    # live in AnyIO's backend modules, so a plain TaskInfo is the fallback.
    try:
        if isinstance(task, asyncio.Task):
            from anyio._backends._asyncio import AsyncIOTaskInfo

            return AsyncIOTaskInfo(task)
        if "trio" in sys.modules:  # imported already: no import cost here
            from trio.lowlevel import Task as TrioTask

            if isinstance(task, TrioTask):
                from anyio._backends._trio import TrioTaskInfo

                return TrioTaskInfo(task)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover
        pass
    name = getattr(task, "name", None)
    if name is None:
        get_name = getattr(task, "get_name", None)
        name = get_name() if get_name is not None else None
    coro = getattr(task, "coro", None) or task.get_coro()  # type: ignore[attr-defined]
    return anyio.TaskInfo(id(task), None, name, coro)


def threadsafe_call_soon() -> Callable[[Callable[[], object]], object]:
    """The running event loop's way to run a callback soon, safely from
    anywhere: asyncio's ``loop.call_soon_threadsafe``, or Trio's
    ``TrioToken.run_sync_soon``.

    For a finalizer to wake a task with.  A ``__del__`` runs wherever the
    collector runs: in another thread, where waking a task directly is not
    safe (asyncio's loop, asleep, is not woken; Trio's ``reschedule()``
    refuses), or inside the step of the very task to wake, before it sleeps
    (where the generic waiter's ``asyncio.Event.wait()`` loses a ``set()``).
    Both calls are safe there, as from a signal handler.
    """
    loop = asyncio_loop()
    if loop is not None:
        return loop.call_soon_threadsafe
    return trio_lowlevel().current_trio_token().run_sync_soon  # type: ignore[no-any-return]


def on_trio() -> bool:
    """Whether the running task is a Trio task (whichever waiter is in use).

    For the few places where AnyIO's wording differs by backend.
    """
    return asyncio_loop() is None and "trio" in sys.modules


def trio_task_runs() -> bool:
    """Whether a Trio task is running on this thread, as Trio itself says.

    :func:`on_trio` answers yes wherever Trio is imported and no asyncio
    task runs, which includes an asyncio loop's callbacks (timers, a call
    from another thread): enough to choose wording.  Behaviour that
    differs by backend asks this instead.
    """
    if "trio" not in sys.modules or asyncio_loop() is not None:
        return False
    try:
        trio_lowlevel().current_task()
    except RuntimeError:
        return False
    return True


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the running backend's cancellation exception.

    The backend as this module detects it: AnyIO's
    ``get_cancelled_exc_class()`` asks sniffio, which answers "trio" for
    the whole thread of a Trio run, also for the tasks of an asyncio loop
    run inside one of its tasks.
    """
    if asyncio_loop() is not None:
        return isinstance(exc, asyncio.CancelledError)
    trio = sys.modules.get("trio")
    if trio is not None:
        return isinstance(exc, trio.Cancelled)
    try:  # pragma: no cover - neither asyncio nor Trio
        return isinstance(exc, anyio.get_cancelled_exc_class())
    except Exception:  # pragma: no cover - no backend running
        return False


#: How AnyIO's asyncio backend words the cancellations its cancel scopes
#: deliver: "Cancelled via cancel scope <id>" (AnyIO 4.12 and later),
#: "Cancelled by cancel scope <id>" (before).  AnyIO recognises its own the
#: same way.
_ANYIO_SCOPE_MESSAGES: Final = (
    "Cancelled via cancel scope ",
    "Cancelled by cancel scope ",
)


def _is_anyio_scope_cancellation(exc: BaseException) -> bool:
    """Whether an asyncio ``CancelledError`` came from an AnyIO cancel scope.

    Follows ``__context__`` as AnyIO does, for code that caught one and
    raised another.
    """
    seen: BaseException | None = exc
    while isinstance(seen, asyncio.CancelledError):
        message = seen.args[0] if seen.args else None
        if isinstance(message, str) and message.startswith(_ANYIO_SCOPE_MESSAGES):
            return True
        seen = seen.__context__
    return False


def asyncio_cancelling() -> int | None:
    """The running asyncio task's ``cancelling()`` count (3.11+), else None."""
    if asyncio_loop() is None:
        return None
    task: Any = _asyncio_current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling() if cancelling is not None else None


class RearmsQueued:
    """How many re-armed cancellations (``rearm_cancellation``) are queued
    and not made again yet, and for which asyncio tasks.

    ``count`` is read on a hot path (after every executor job) as a plain
    slot.  The tasks are held weakly: a loop closed with a re-arm still
    queued drops it, and the task with it.  ``count`` then stays above 0,
    which costs each later job one task lookup and changes nothing else.
    """

    __slots__ = ("count", "tasks")

    def __init__(self) -> None:
        self.count = 0
        self.tasks: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


#: The one registry of this interpreter.
REARMS_QUEUED: Final = RearmsQueued()


def uncancel_to(count: int) -> None:
    """Withdraw the running asyncio task's cancellation requests above
    ``count`` (a ``cancelling()`` count that :func:`asyncio_cancelling`
    read in this task, so 3.11+ and asyncio only).

    For requests that were meant for what the task ran meanwhile and ended
    with it: a plain ``task.cancel()`` of an executor's worker while it ran
    a job, which cancels that job only.  The count is then what a fresh task
    would start the next job with (``asyncio.timeout()`` and
    ``asyncio.TaskGroup`` compare against it).
    """
    task: Any = _asyncio_current_task()
    while task.cancelling() > count:
        task.uncancel()


def withdraw_rearmed(count: int) -> None:
    """Withdraw the running asyncio task's requests above ``count`` (as
    :func:`uncancel_to`) if one of them was re-armed and is still queued.

    For an executor's worker whose job ended normally, its last call a send
    taken as a plain ``task.cancel()`` of the worker came: that request was
    meant for the job, which ended with it.  Its queued re-arm then finds
    the count back at ``count``, the worker's (0 for a worker task that
    nothing else cancelled), and makes nothing.  Call only
    when ``REARMS_QUEUED.count`` is above 0 (the test is the caller's, so
    that the usual case costs no call).
    """
    if _asyncio_current_task() in REARMS_QUEUED.tasks:
        uncancel_to(count)


def rearm_cancellation(
    exc: BaseException, cancelling_before: int | None = None
) -> None:
    """Make a cancellation that was caught take effect at the next checkpoint.

    Used when a cancellation arrives after an operation has already taken
    effect (a send whose item a receiver has taken): the operation returns
    normally, and the task is cancelled again at its next schedule point.

    * asyncio: the request stays counted in ``Task.cancelling()`` (what
      ``asyncio.timeout()`` and AnyIO's cancel scopes count) and is made
      again once the task has stopped at its next checkpoint: a loop
      callback, queued now, runs after the task's current step and calls
      ``cancel()`` (then ``uncancel()``, for the count) if the task is not
      done and its ``cancelling()`` is above 0: Python 3.13's
      ``uncancel()`` withdraws a pending ``cancel()`` when the count
      reaches 0, and keeps it otherwise.  So an ``asyncio.timeout()`` block
      that expired at such a send and ends right after it lets nothing out
      (a ``cancel()`` made at once would, on 3.11 and 3.12, whose
      ``uncancel()`` leaves it pending).  The count does not tell which
      requests were withdrawn: with another one still counted (a cleanup
      after a caught cancellation, a shielded AnyIO scope inside a
      cancelled one), a withdrawn request is made again, as 3.13 keeps a
      pending one there.  A rule that compared with the count when the
      task parked would not: it lost the request instead where an older
      one was withdrawn (the ``uncancel()`` that code which swallows a
      cancellation owes), so a ``TaskGroup`` abort went unheard.  A
      request made again where none was due is the lesser fault.  A task
      that ends in this step is not cancelled: its last call did what it
      was asked.  Python 3.10 has no count; there the request is made
      again unless the task is done.
    * An AnyIO cancel scope's cancellation (asyncio) is left alone: those
      scopes are level-triggered on asyncio too (the scope cancels the task
      again at its next wait inside it) and count their own ``cancel()``
      calls to undo at exit.  But a task woken by an AnyIO scope's
      cancellation may have been cancelled again before it ran (by
      ``asyncio.timeout()``, or ``task.cancel()``): asyncio counts that
      request in ``cancelling()`` but raises only the first one's
      exception.  Given the count when the task parked
      (``cancelling_before``), a rise of more than the scope's one request
      means such a request came too, and it is re-armed as above.  AnyIO
      cancels a task at most once while it waits; the native waiters never
      grant a task AnyIO has cancelled, so only the generic waiter passes it.
    * Trio: cancellation is level-triggered; the scope is still cancelled and
      raises again at the next checkpoint, so nothing needs to be done
      (also in a Trio run nested in an asyncio task, whose task is left
      alone).
    """
    if asyncio_loop() is None:
        return
    task: Any = _asyncio_current_task()
    if task is None:  # pragma: no cover - not inside a task
        return
    if _is_anyio_scope_cancellation(exc):
        if cancelling_before is None or task.cancelling() - cancelling_before <= 1:
            return
        message = None  # the other request's message is not kept
    else:
        message = exc.args[0] if exc.args else None
    task.get_loop().call_soon(_cancel_again, task, message)
    queued = REARMS_QUEUED
    queued.tasks[task] = queued.tasks.get(task, 0) + 1
    queued.count += 1


def _cancel_again(task: Any, message: object) -> None:
    # rearm_cancellation()'s request, made when the task has stopped at its
    # next checkpoint (or ended): unless it ended, or no request is counted
    # any more (3.13's rule for a pending cancel()).  The count stays what
    # it was.
    queued = REARMS_QUEUED
    queued.count -= 1
    left = queued.tasks.pop(task, 1) - 1
    if left:
        queued.tasks[task] = left
    if task.done():
        return
    cancelling = getattr(task, "cancelling", None)
    if cancelling is None:  # 3.10
        task.cancel(message)
    elif cancelling() > 0:
        task.cancel(message)
        task.uncancel()


#: AnyIO's asyncio backend's ``checkpoint_if_cancelled``, bound on first use
#: (what ``anyio.lowlevel.checkpoint_if_cancelled`` calls on asyncio, without
#: finding the backend first: about 430 ns instead of 770 on CPython 3.11).
_asyncio_checkpoint_if_cancelled: Any = None


def checkpoint_if_cancelled() -> Awaitable[None]:
    """A cancellation point that is a schedule point only when cancelled.

    Await the result at once (the backend's own, as :func:`checkpoint`).
    """
    global _asyncio_checkpoint_if_cancelled
    if not FORCE_GENERIC:
        loop = _get_running_loop()  # asyncio_loop() written out
        if (
            loop is not None
            and (loop in _tasks_by_loop or _asyncio_current_task(loop) is not None)
            and ("trio" not in sys.modules or not trio_nested())
        ):
            if _asyncio_checkpoint_if_cancelled is None:
                # AnyIO's backend module, as task_info() reads it; the public
                # function is the fallback.
                try:
                    from anyio._backends._asyncio import AsyncIOBackend

                    found = AsyncIOBackend.checkpoint_if_cancelled
                except (ImportError, AttributeError):  # pragma: no cover
                    found = anyio.lowlevel.checkpoint_if_cancelled
                _asyncio_checkpoint_if_cancelled = found
            return _asyncio_checkpoint_if_cancelled()  # type: ignore[no-any-return]
        if "trio" in sys.modules:
            return trio_lowlevel().checkpoint_if_cancelled()  # type: ignore[no-any-return]
    protect_if_trio_imported()
    return anyio.lowlevel.checkpoint_if_cancelled()
