# The implementations compared, behind the thinnest adapters that give the
# cases one shape to call.
#
# An adapter only looks up bound methods once per object (``send = tx.send``):
# the cases then call the implementation's own methods in their inner loops,
# never a wrapper.  Where an adapter must add a call (opening a channel), it
# adds the same one call for every implementation, outside the timed loop,
# except in ``create_send_receive``: opening a channel is what it times, so
# it calls each implementation's own factory (``ChannelImpl.pair``,
# ``queue``, ``oneshot``; a strict row's is a ``functools.partial``).
#
# Rows of anyio-prims are imported defensively: a primitive that does not
# exist yet (or lacks a constructor argument a row needs) becomes an Impl with
# ``missing`` set, and the harness prints that its rows were skipped.
#
# Checkpoint semantics are stated per row (``Impl.semantics``); they are what
# the implementation does by default, never something the harness adds.
from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import math
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from harness import BACKENDS, Impl

ASYNCIO_ONLY = ("asyncio", "uvloop")
TRIO_ONLY = ("trio",)

# What each row does at a call that does not block.
NATIVE_ASYNCIO = "native asyncio: a checkpoint only when it blocks"
NATIVE_TRIO = "native Trio: every call a checkpoint"
ANYIO_DEFAULT = "anyio: every call a checkpoint"
ANYIO_FAST = "anyio fast_acquire: cancel check every call, yields only when blocking"
AIOLOGIC_DEFAULT = {
    "asyncio": "aiologic default on asyncio: a checkpoint only when it blocks",
    "uvloop": "aiologic default on asyncio: a checkpoint only when it blocks",
    "trio": "aiologic default on Trio: every call a checkpoint",
}
BUDGETED = "anyio-prims budgeted: a checkpoint at least every 64 calls"
STRICT = "anyio-prims strict: every call a checkpoint"
DROPIN_DEFAULT = "anyio-prims drop-in, anyio's rule: every call a checkpoint"
DROPIN_FAST = "anyio-prims drop-in fast_acquire: budgeted"
NO_CHECKPOINT = "limit: no checkpoint, never blocks"


def _find(*paths: str) -> tuple[Any, str | None]:
    """The first of ``module:attr`` paths that imports, or why none did."""
    broken = ""
    for path in paths:
        module_name, _, attr = path.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                broken = f" ({module_name}: {exc!r})"
            continue
        except ImportError as exc:  # the module exists but is broken: say so
            broken = f" ({module_name}: {exc!r})"
            continue
        if not attr:
            return obj, None
        if hasattr(obj, attr):
            return getattr(obj, attr), None
    wanted = " or ".join(p.replace(":", ".") for p in paths)
    return None, f"not importable as {wanted}{broken}"


def _accepts(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------------------
# channels
#
# ``impl.open(capacity)`` returns a Chan: ``send``/``receive`` bound to the
# first endpoints, ``sender()``/``receiver()`` for one more producer or
# consumer task (a clone where the API has clones), ``try_receive()`` for
# validation, ``close()`` for every endpoint opened.  ``capacity`` is an int
# or ``math.inf``.


class Chan:
    __slots__ = ("receive", "send")

    send: Callable[[Any], Awaitable[Any]]
    receive: Callable[[], Awaitable[Any]]

    def sender(self) -> Callable[[Any], Awaitable[Any]]:
        raise NotImplementedError

    def receiver(self) -> Callable[[], Awaitable[Any]]:
        raise NotImplementedError

    def try_receive(self) -> tuple[bool, Any]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class StreamChan(Chan):
    """Endpoints with send/receive/receive_nowait/clone/close (Trio, anyio,
    anyio-prims)."""

    __slots__ = ("_opened", "_rx", "_tx", "_would_block")

    def __init__(self, tx: Any, rx: Any, would_block: type[BaseException]) -> None:
        self._tx, self._rx = tx, rx
        self.send, self.receive = tx.send, rx.receive
        self._opened = [tx, rx]
        self._would_block = would_block

    def sender(self) -> Callable[[Any], Awaitable[Any]]:
        clone = self._tx.clone()
        self._opened.append(clone)
        return clone.send  # type: ignore[no-any-return]

    def receiver(self) -> Callable[[], Awaitable[Any]]:
        clone = self._rx.clone()
        self._opened.append(clone)
        return clone.receive  # type: ignore[no-any-return]

    def try_receive(self) -> tuple[bool, Any]:
        try:
            return True, self._rx.receive_nowait()
        except self._would_block:
            return False, None

    def close(self) -> None:
        for endpoint in self._opened:
            endpoint.close()


class AsyncioQueueChan(Chan):
    __slots__ = ("_q",)

    def __init__(self, capacity: float) -> None:
        q: asyncio.Queue[Any]
        self._q = q = asyncio.Queue(0 if capacity == math.inf else int(capacity))
        self.send, self.receive = q.put, q.get

    def sender(self) -> Callable[[Any], Awaitable[Any]]:
        return self._q.put

    def receiver(self) -> Callable[[], Awaitable[Any]]:
        return self._q.get

    def try_receive(self) -> tuple[bool, Any]:
        try:
            return True, self._q.get_nowait()
        except asyncio.QueueEmpty:
            return False, None


class AiologicQueueChan(Chan):
    __slots__ = ("_q",)

    def __init__(self, capacity: float) -> None:
        import aiologic

        q: aiologic.Queue[Any]
        self._q = q = aiologic.Queue(None if capacity == math.inf else int(capacity))
        self.send, self.receive = q.async_put, q.async_get

    def sender(self) -> Callable[[Any], Awaitable[Any]]:
        return self._q.async_put

    def receiver(self) -> Callable[[], Awaitable[Any]]:
        return self._q.async_get

    def try_receive(self) -> tuple[bool, Any]:
        import aiologic

        try:
            return True, self._q.green_get(blocking=False)
        except aiologic.QueueEmpty:
            return False, None


class MinimalChan(Chan):
    """The limit: a deque behind two plain async functions; never waits."""

    __slots__ = ("_items",)

    def __init__(self, capacity: float = math.inf) -> None:
        self._items: deque[Any] = deque()
        self.send, self.receive = self._send, self._receive

    async def _send(self, item: Any) -> None:
        self._items.append(item)

    async def _receive(self) -> Any:
        return self._items.popleft()

    def try_receive(self) -> tuple[bool, Any]:
        if self._items:
            return True, self._items.popleft()
        return False, None


#: A queue's own calls for ``create_send_receive``: its constructor (given the
#: capacity) and its unbound ``put`` and ``get``.
QueueCalls = tuple[Callable[[int], Any], Callable[..., Any], Callable[..., Any]]


class ChannelImpl(Impl):
    """A channel row.

    :param open: ``open(capacity) -> Chan``
    :param many_senders: whether several tasks may send (mpsc, mpmc, peers)
    :param many_receivers: whether several tasks may receive (spmc, mpmc, peers)
    :param min_capacity: the smallest capacity it supports (aiologic: 1)
    :param pair: the implementation's own factory, ``pair(capacity) ->
        (sender, receiver)``, endpoints with ``send``, ``receive`` and
        ``close``: what ``create_send_receive`` times, with no adapter
    :param queue: for a queue rather than a pair of endpoints, its own
        ``(constructor, put, get)``, the methods unbound (``asyncio.Queue.put``)
    :param oneshot: the oneshot's own factory, ``oneshot() -> (sender,
        receiver)``: a synchronous ``sender.send(item)``, ``await
        receiver.receive()``
    """

    def __init__(
        self,
        name: str,
        semantics: str | dict[str, str],
        open: Callable[[float], Chan] | None,
        *,
        backends: tuple[str, ...] = BACKENDS,
        missing: str | None = None,
        many_senders: bool = True,
        many_receivers: bool = True,
        pair: Callable[[int], tuple[Any, Any]] | None = None,
        queue: QueueCalls | None = None,
        oneshot: Callable[[], tuple[Any, Any]] | None = None,
    ) -> None:
        super().__init__(name, semantics, backends, missing)
        self.open = open
        self.pair = pair
        self.queue = queue
        self.many_senders = many_senders
        self.many_receivers = many_receivers
        self.oneshot = oneshot


def _trio_open(capacity: float) -> Chan:
    import trio

    tx, rx = trio.open_memory_channel(capacity)
    return StreamChan(tx, rx, trio.WouldBlock)


def _aiologic_queue() -> QueueCalls | None:
    queue, _ = _find("aiologic:Queue")
    if queue is None:
        return None
    return queue, queue.async_put, queue.async_get


def _anyio_open(capacity: float) -> Chan:
    tx: MemoryObjectSendStream[Any]
    rx: MemoryObjectReceiveStream[Any]
    tx, rx = anyio.create_memory_object_stream(capacity)
    return StreamChan(tx, rx, anyio.WouldBlock)


def _prims_flavour(flavour: str, strict: bool) -> ChannelImpl:
    module, missing = _find(f"anyio_prims.{flavour}", f"anyio_prims.channels.{flavour}")
    name = f"anyio_prims_{flavour}" + ("_strict" if strict else "")
    # None only when ``missing`` is set, and then no row calls open_().  Typed
    # Any, as _find() returns, rather than checked in open_(), which is timed.
    factory: Any = getattr(module, "channel", None) if module is not None else None
    if missing is None and factory is None:
        missing = f"anyio_prims.{flavour} has no channel()"
    if missing is None and strict and not _accepts(factory, "strict"):
        missing = f"anyio_prims.{flavour}.channel() takes no strict argument"

    def open_(capacity: float) -> Chan:
        tx, rx = factory(capacity, strict=True) if strict else factory(capacity)
        return StreamChan(tx, rx, anyio.WouldBlock)

    return ChannelImpl(
        name,
        STRICT if strict else BUDGETED,
        open_,
        missing=missing,
        pair=functools.partial(factory, strict=True) if strict else factory,
        many_senders=flavour in ("mpsc", "mpmc"),
        many_receivers=flavour in ("spmc", "mpmc"),
    )


def _prims_stream() -> ChannelImpl:
    create, missing = _find(
        "anyio_prims:create_memory_object_stream",
        "anyio_prims.streams:create_memory_object_stream",
        "anyio_prims.channels:create_memory_object_stream",
    )

    def open_(capacity: float) -> Chan:
        tx, rx = create(capacity)
        return StreamChan(tx, rx, anyio.WouldBlock)

    return ChannelImpl(
        "anyio_prims", DROPIN_DEFAULT, open_, missing=missing, pair=create
    )


def _prims_oneshot(strict: bool) -> ChannelImpl:
    module, missing = _find("anyio_prims.oneshot", "anyio_prims.channels.oneshot")
    # As in _prims_flavour: None only when ``missing`` is set.
    factory: Any = getattr(module, "channel", None) if module is not None else None
    if missing is None and factory is None:
        missing = "anyio_prims.oneshot has no channel()"
    if missing is None and strict and not _accepts(factory, "strict"):
        missing = "anyio_prims.oneshot.channel() takes no strict argument"

    return ChannelImpl(
        "anyio_prims_oneshot_strict" if strict else "anyio_prims_oneshot",
        (STRICT if strict else BUDGETED) + " (receive; its send is synchronous)",
        None,
        missing=missing,
        oneshot=functools.partial(factory, strict=True) if strict else factory,
    )


def channel_impls() -> list[ChannelImpl]:
    """Every channel row, natives first."""
    impls = [
        ChannelImpl(
            "asyncio",
            NATIVE_ASYNCIO,
            AsyncioQueueChan,
            backends=ASYNCIO_ONLY,
            queue=(asyncio.Queue, asyncio.Queue.put, asyncio.Queue.get),
        ),
        ChannelImpl(
            "trio",
            NATIVE_TRIO,
            _trio_open,
            backends=TRIO_ONLY,
            pair=_find("trio:open_memory_channel")[0],
        ),
        ChannelImpl(
            "anyio",
            ANYIO_DEFAULT,
            _anyio_open,
            pair=anyio.create_memory_object_stream,
        ),
        ChannelImpl(
            "aiologic",
            AIOLOGIC_DEFAULT,
            AiologicQueueChan,
            queue=_aiologic_queue(),
        ),
        _prims_stream(),
    ]
    for flavour in ("mpsc", "spmc", "mpmc"):
        impls.append(_prims_flavour(flavour, strict=False))
        impls.append(_prims_flavour(flavour, strict=True))
    impls.append(_prims_oneshot(strict=False))
    impls.append(_prims_oneshot(strict=True))
    return impls


MINIMAL_CHANNEL = ChannelImpl("bare", NO_CHECKPOINT, MinimalChan)


def future_maker() -> Callable[[], asyncio.Future[Any]]:
    """The cheaper way to make a future of the running (stock) loop here.

    ``asyncio.Future()`` from CPython 3.12, where it finds the running loop
    in the thread state and a ``loop=`` argument costs more; the loop's
    ``create_future`` on 3.10 and 3.11, which make a ``getpid()`` call to
    find the running loop.  anyio-prims makes its futures the same way
    (``_core._backend.future_factory``); the limits use this so that they
    stay limits.
    """
    if sys.version_info >= (3, 12):
        return asyncio.Future
    return asyncio.get_running_loop().create_future


class FutureChan(Chan):
    """A minimal parking channel on asyncio: a deque and at most one parked
    receiver, woken through a loop future.  Unbounded; no cancellation
    handling, no checkpoint, no closing (the reference row of the limits)."""

    __slots__ = ("_create_future", "_getter", "_items")

    def __init__(self, capacity: float = math.inf) -> None:
        self._items: deque[Any] = deque()
        self._getter: asyncio.Future[Any] | None = None
        self._create_future = future_maker()
        self.send, self.receive = self._send, self._receive

    async def _send(self, item: Any) -> None:
        getter = self._getter
        if getter is not None:
            self._getter = None
            getter.set_result(item)
        else:
            self._items.append(item)

    async def _receive(self) -> Any:
        if self._items:
            return self._items.popleft()
        getter = self._getter = self._create_future()
        return await getter


class RescheduleChan(Chan):
    """FutureChan on Trio: the receiver parks in ``wait_task_rescheduled``."""

    __slots__ = ("_current_task", "_getter", "_item", "_items", "_reschedule", "_wait")

    def __init__(self, capacity: float = math.inf) -> None:
        import trio.lowlevel as lowlevel

        self._items: deque[Any] = deque()
        self._getter: Any = None
        self._item: Any = None
        self._current_task = lowlevel.current_task
        self._reschedule = lowlevel.reschedule
        self._wait = lowlevel.wait_task_rescheduled
        self.send, self.receive = self._send, self._receive

    async def _send(self, item: Any) -> None:
        getter = self._getter
        if getter is not None:
            self._getter = None
            self._item = item
            self._reschedule(getter)
        else:
            self._items.append(item)

    async def _receive(self) -> Any:
        if self._items:
            return self._items.popleft()
        self._getter = self._current_task()
        await self._wait(_abort_succeeded)
        return self._item


def _abort_succeeded(_: Any) -> Any:
    import trio.lowlevel

    return trio.lowlevel.Abort.SUCCEEDED


_PARKING = "reference: minimal coroutine channel, bare wake-up, no cancellation"
#: The reference row ``limits.limit_minimal_pingpong``, one per backend family.
MINIMAL_PINGPONG = [
    ChannelImpl("bare", _PARKING, FutureChan, backends=ASYNCIO_ONLY),
    ChannelImpl("bare", _PARKING, RescheduleChan, backends=TRIO_ONLY),
]


# The checkpoint policy's own cost.  anyio-prims' budget (every call spends one
# unit; when the budget is spent the call checkpoints first, also one about to
# park; waking refills nothing) put on two implementations that
# have no checkpoint of their own: the minimal channel and asyncio.Queue.  The
# library's own counter and checkpoint are used, written as its hot paths
# write them (less the ``strict`` test), so the rows follow the library.
# References, not targets: what the policy costs before a channel does
# anything else, read in the same run as the targets it constrains.

_BUDGET: Any
_budget_checkpoint: Any
_BUDGET, _budget_missing = _find("anyio_prims._core:BUDGET")
_budget_checkpoint, _ = _find("anyio_prims._core:budget_checkpoint")


class BudgetedMinimalChan(MinimalChan):
    """MinimalChan under the checkpoint policy: a checkpoint every 64 calls."""

    __slots__ = ()

    async def _send(self, item: Any) -> None:
        budget = _BUDGET
        budget.left -= 1
        if budget.left <= 0:
            await _budget_checkpoint()
        self._items.append(item)

    async def _receive(self) -> Any:
        budget = _BUDGET
        budget.left -= 1
        if budget.left <= 0:
            await _budget_checkpoint()
        return self._items.popleft()


class BudgetedQueue(asyncio.Queue[Any]):
    """asyncio.Queue under the checkpoint policy.

    As in the library, every call spends a unit and takes the due
    checkpoint first, also one that must wait, which otherwise parks at
    once (Queue's own wait); waking refills nothing.  Otherwise Queue's own
    ``put``/``get``: their fast path is ``put_nowait``/``get_nowait`` after
    a ``full()``/``empty()`` test, written out here so that no coroutine
    frame is added.
    """

    async def put(self, item: Any) -> None:
        budget = _BUDGET
        budget.left -= 1
        if budget.left <= 0:
            await _budget_checkpoint()
        if self.full():
            await super().put(item)
        else:
            self.put_nowait(item)

    async def get(self) -> Any:
        budget = _BUDGET
        budget.left -= 1
        if budget.left <= 0:
            await _budget_checkpoint()
        if self.empty():
            return await super().get()
        return self.get_nowait()


class BudgetedQueueChan(AsyncioQueueChan):
    __slots__ = ()

    def __init__(self, capacity: float) -> None:
        q = BudgetedQueue(0 if capacity == math.inf else int(capacity))
        self._q = q
        self.send, self.receive = q.put, q.get


_BUDGETED_REFERENCE = "reference: anyio-prims' budget on a checkpoint-free peer"
#: The reference row ``limits.limit_budgeted_channel``.
BUDGETED_MINIMAL_CHANNEL = ChannelImpl(
    "bare", _BUDGETED_REFERENCE, BudgetedMinimalChan, missing=_budget_missing
)
#: The reference row ``asyncio_budgeted`` of the channels' batch cases.
BUDGETED_QUEUE = ChannelImpl(
    "asyncio_budgeted",
    _BUDGETED_REFERENCE,
    BudgetedQueueChan,
    backends=ASYNCIO_ONLY,
    missing=_budget_missing,
)


class FutureLock:
    """A minimal lock on asyncio: a flag and a FIFO of loop futures, the lock
    handed straight to the first waiter on release.  No cancellation
    handling, no checkpoint, no owner check (the reference row of the limits,
    as FutureChan is for channels)."""

    __slots__ = ("_create_future", "_locked", "_waiters")

    def __init__(self) -> None:
        self._locked = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._create_future = future_maker()

    async def acquire(self) -> None:
        if not self._locked:
            self._locked = True
            return
        fut = self._create_future()
        self._waiters.append(fut)
        await fut  # handed over: the lock stays taken

    def release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set_result(None)
        else:
            self._locked = False

    def locked(self) -> bool:
        return self._locked


class RescheduleLock:
    """FutureLock on Trio: waiters park in ``wait_task_rescheduled``."""

    __slots__ = ("_current_task", "_locked", "_reschedule", "_wait", "_waiters")

    def __init__(self) -> None:
        import trio.lowlevel as lowlevel

        self._locked = False
        self._waiters: deque[Any] = deque()
        self._current_task = lowlevel.current_task
        self._reschedule = lowlevel.reschedule
        self._wait = lowlevel.wait_task_rescheduled

    async def acquire(self) -> None:
        if not self._locked:
            self._locked = True
            return
        self._waiters.append(self._current_task())
        await self._wait(_abort_succeeded)

    def release(self) -> None:
        if self._waiters:
            self._reschedule(self._waiters.popleft())
        else:
            self._locked = False

    def locked(self) -> bool:
        return self._locked


_MINIMAL_LOCK = "reference: minimal lock, bare wake-up, no cancellation"

# --------------------------------------------------------------------------
# synchronization
#
# ``impl.make(permits)`` returns an Ops: bound ``acquire``/``release`` (with
# ``n`` for batch rows), ``idle()`` (nothing held: validation), and for
# RWLock rows ``acquire_read``/``release_read``/``acquire_write``/
# ``release_write``.


class Ops:
    __slots__ = (
        "acquire",
        "acquire_read",
        "acquire_write",
        "idle",
        "obj",
        "release",
        "release_read",
        "release_write",
    )

    # Set by the RWLock rows only (_prims_rwlock).
    acquire_read: Callable[[], Awaitable[Any]]
    release_read: Callable[[], object]
    acquire_write: Callable[[], Awaitable[Any]]
    release_write: Callable[[], object]

    def __init__(
        self,
        obj: Any,
        acquire: Any = None,
        release: Any = None,
        idle: Callable[[], bool] = lambda: True,
    ) -> None:
        self.obj = obj
        self.acquire, self.release, self.idle = acquire, release, idle


class SyncImpl(Impl):
    """A lock, semaphore, batch semaphore or RWLock row.

    :param make: ``make(permits) -> Ops`` (permits ignored by locks)
    """

    def __init__(
        self,
        name: str,
        semantics: str | dict[str, str],
        make: Callable[[int], Ops] | None,
        *,
        backends: tuple[str, ...] = BACKENDS,
        missing: str | None = None,
    ) -> None:
        super().__init__(name, semantics, backends, missing)
        self.make = make


def _lock_ops(lock: Any) -> Ops:
    return Ops(lock, lock.acquire, lock.release, lambda: not lock.locked())


def _aiologic_lock(_: int) -> Ops:
    import aiologic

    lock = aiologic.Lock()
    return Ops(lock, lock.async_acquire, lock.async_release, lambda: not lock.locked())


def _sem_ops(sem: Any, permits: int, value: Callable[[], float]) -> Ops:
    return Ops(sem, sem.acquire, sem.release, lambda: value() == permits)


def _aiologic_sem(permits: int) -> Ops:
    import aiologic

    sem = aiologic.Semaphore(permits)
    return Ops(sem, sem.async_acquire, sem.async_release, lambda: sem.value == permits)


def _trio_lock(_: int) -> Ops:
    import trio

    return _lock_ops(trio.Lock())


def _trio_sem(permits: int) -> Ops:
    import trio

    sem = trio.Semaphore(permits)
    return _sem_ops(sem, permits, lambda: sem.value)


def _asyncio_sem(permits: int) -> Ops:
    sem = asyncio.Semaphore(permits)
    return _sem_ops(sem, permits, lambda: sem._value)


def _anyio_lock(fast: bool) -> Callable[[int], Ops]:
    def make(_: int) -> Ops:
        return _lock_ops(anyio.Lock(fast_acquire=fast))

    return make


def _anyio_sem(fast: bool) -> Callable[[int], Ops]:
    def make(permits: int) -> Ops:
        sem = anyio.Semaphore(permits, fast_acquire=fast)
        return _sem_ops(sem, permits, lambda: sem.value)

    return make


def _prims_dropin(kind: str, fast: bool) -> SyncImpl:
    cls, missing = _find(
        f"anyio_prims:{kind}",
        f"anyio_prims.sync:{kind}",
        f"anyio_prims.sync._lock:{kind}",
        f"anyio_prims.sync._{kind.lower()}:{kind}",
    )
    if missing is None and fast and not _accepts(cls, "fast_acquire"):
        missing = f"anyio_prims.{kind} takes no fast_acquire argument"

    def make(permits: int) -> Ops:
        if kind == "Lock":
            return _lock_ops(cls(fast_acquire=True) if fast else cls())
        sem = cls(permits, fast_acquire=True) if fast else cls(permits)
        return _sem_ops(sem, permits, lambda: sem.value)

    return SyncImpl(
        "anyio_prims_fast" if fast else "anyio_prims",
        DROPIN_FAST if fast else DROPIN_DEFAULT,
        make,
        missing=missing,
    )


def _prims_batch(strict: bool) -> SyncImpl:
    cls, missing = _find(
        "anyio_prims:BatchSemaphore", "anyio_prims.sync._batch_semaphore:BatchSemaphore"
    )

    def make(permits: int) -> Ops:
        sem = cls(permits, strict=strict)
        return Ops(
            sem, sem.acquire, sem.release, lambda: sem.available_permits == permits
        )

    return SyncImpl(
        "anyio_prims_batch_strict" if strict else "anyio_prims_batch",
        STRICT if strict else BUDGETED,
        make,
        missing=missing,
    )


def _prims_rwlock(strict: bool) -> SyncImpl:
    cls, missing = _find(
        "anyio_prims:RWLock",
        "anyio_prims.sync:RWLock",
        "anyio_prims.sync._rwlock:RWLock",
    )
    if missing is None and strict and not _accepts(cls, "strict"):
        missing = "anyio_prims.RWLock takes no strict argument"

    def make(_: int) -> Ops:
        lock = cls(strict=True) if strict else cls()

        def idle() -> bool:
            try:
                lock.acquire_write_nowait()
            except (anyio.WouldBlock, RuntimeError):  # held (RuntimeError: by us)
                return False
            lock.release_write()
            return True

        ops = Ops(lock, idle=idle)
        ops.acquire_read, ops.release_read = lock.acquire_read, lock.release_read
        ops.acquire_write, ops.release_write = lock.acquire_write, lock.release_write
        return ops

    return SyncImpl(
        "anyio_prims_strict" if strict else "anyio_prims",
        STRICT if strict else BUDGETED,
        make,
        missing=missing,
    )


def lock_impls() -> list[SyncImpl]:
    """Rows of lock_uncontended and lock_handoff."""
    return [
        SyncImpl(
            "asyncio",
            NATIVE_ASYNCIO,
            lambda _: _lock_ops(asyncio.Lock()),
            backends=ASYNCIO_ONLY,
        ),
        SyncImpl("trio", NATIVE_TRIO, _trio_lock, backends=TRIO_ONLY),
        SyncImpl("anyio", ANYIO_DEFAULT, _anyio_lock(False)),
        SyncImpl("anyio_fast", ANYIO_FAST, _anyio_lock(True)),
        SyncImpl("aiologic", AIOLOGIC_DEFAULT, _aiologic_lock),
        _prims_dropin("Lock", fast=False),
        _prims_dropin("Lock", fast=True),
    ]


#: The reference row ``limits.limit_minimal_lock_handoff``, one per backend
#: family: sync's ``lock_handoff`` body on a minimal lock.
MINIMAL_LOCK_HANDOFF = [
    SyncImpl(
        "bare",
        _MINIMAL_LOCK,
        lambda _: _lock_ops(FutureLock()),
        backends=ASYNCIO_ONLY,
    ),
    SyncImpl(
        "bare",
        _MINIMAL_LOCK,
        lambda _: _lock_ops(RescheduleLock()),
        backends=TRIO_ONLY,
    ),
]


def semaphore_impls() -> list[SyncImpl]:
    """Rows of semaphore_uncontended and semaphore_contended."""
    return [
        SyncImpl("asyncio", NATIVE_ASYNCIO, _asyncio_sem, backends=ASYNCIO_ONLY),
        SyncImpl("trio", NATIVE_TRIO, _trio_sem, backends=TRIO_ONLY),
        SyncImpl("anyio", ANYIO_DEFAULT, _anyio_sem(False)),
        SyncImpl("anyio_fast", ANYIO_FAST, _anyio_sem(True)),
        SyncImpl("aiologic", AIOLOGIC_DEFAULT, _aiologic_sem),
        _prims_dropin("Semaphore", fast=False),
        _prims_dropin("Semaphore", fast=True),
        *batch_impls(),
    ]


def batch_impls() -> list[SyncImpl]:
    """BatchSemaphore rows (batch_acquire_n has no peer)."""
    return [_prims_batch(strict=False), _prims_batch(strict=True)]


def rwlock_impls() -> list[SyncImpl]:
    """RWLock rows (no backend or peer ships a read-write lock)."""
    return [_prims_rwlock(strict=False), _prims_rwlock(strict=True)]


# --------------------------------------------------------------------------
# executors (task spawning)
#
# A Spawner row gives ``group()``: an ``async with`` block whose object has
# ``spawn(fn, *args)``, ``spawn_n(fn, n)`` (n calls of ``fn()``, the hot loop
# written with the row's own call), ``spawn_batch(fn, n)`` (the API's batch
# spawn, or the same loop) and ``await join(fn, *args)`` (spawn one job and
# wait for it, the way that API awaits one task); ``checkpoint`` (the
# ecosystem's yield) and ``channel(capacity) -> Chan`` (the ecosystem's
# channel, for the cases that pass messages).  ``run_each(fn, args)`` is the
# batch form (aiometer has only that).


class SpawnerImpl(Impl):
    def __init__(
        self,
        name: str,
        semantics: str,
        *,
        backends: tuple[str, ...] = BACKENDS,
        missing: str | None = None,
        group: Callable[[], Any] | None = None,
        run_each: Callable[[Callable[[Any], Awaitable[Any]], Any], Awaitable[Any]]
        | None = None,
        checkpoint: Callable[[], Awaitable[None]],
        channel: Callable[[float], Chan] | None = None,
    ) -> None:
        super().__init__(name, semantics, backends, missing)
        self.group = group
        self.run_each = run_each
        self.checkpoint = checkpoint
        self.channel = channel


class _AnyioGroup:
    async def __aenter__(self) -> _AnyioGroup:
        self._tg = tg = anyio.create_task_group()
        await tg.__aenter__()
        self.spawn = tg.start_soon
        return self

    def spawn_n(self, fn: Callable[[], Coroutine[Any, Any, Any]], n: int) -> None:
        start_soon = self._tg.start_soon
        for _ in range(n):
            start_soon(fn)

    spawn_batch = spawn_n  # no batch API: the same loop

    async def join(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
    ) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fn, *args)

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._tg.__aexit__(*exc)


class _AsyncioTaskGroup:
    async def __aenter__(self) -> _AsyncioTaskGroup:
        self._tg = tg = asyncio.TaskGroup()  # type: ignore[attr-defined]
        await tg.__aenter__()
        return self

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._tg.create_task(fn(*args))

    def spawn_n(self, fn: Callable[[], Coroutine[Any, Any, Any]], n: int) -> None:
        create_task = self._tg.create_task
        for _ in range(n):
            create_task(fn())

    spawn_batch = spawn_n  # no batch API: the same loop

    async def join(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
    ) -> None:
        await self._tg.create_task(fn(*args))

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._tg.__aexit__(*exc)


class _TrioNursery:
    async def __aenter__(self) -> _TrioNursery:
        import trio

        self._trio = trio
        self._cm = trio.open_nursery()
        self._nursery = nursery = await self._cm.__aenter__()
        self.spawn = nursery.start_soon
        return self

    def spawn_n(self, fn: Callable[[], Coroutine[Any, Any, Any]], n: int) -> None:
        start_soon = self._nursery.start_soon
        for _ in range(n):
            start_soon(fn)

    spawn_batch = spawn_n  # no batch API: the same loop

    async def join(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
    ) -> None:
        async with self._trio.open_nursery() as nursery:
            nursery.start_soon(fn, *args)

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._cm.__aexit__(*exc)


#: ``await asyncio.sleep(0)`` as a user writes it, with no coroutine of ours
#: around it (Trio's row calls trio.lowlevel.checkpoint directly).
_asyncio_yield = functools.partial(asyncio.sleep, 0)


def _aiometer_run_each() -> tuple[Any, str | None]:
    aiometer, missing = _find("aiometer")
    if aiometer is None:
        return None, missing

    async def run_each(fn: Callable[[Any], Awaitable[Any]], args: Any) -> None:
        await aiometer.run_on_each(fn, args)

    return run_each, None


class _PrimsExecutorGroup:
    """anyio-prims' Executor: jobs handed to long-lived workers."""

    executor_cls: Any = None

    async def __aenter__(self) -> _PrimsExecutorGroup:
        self._ex = ex = self.executor_cls()
        await ex.__aenter__()
        self.spawn = ex.spawn
        return self

    def spawn_n(self, fn: Callable[[], Coroutine[Any, Any, Any]], n: int) -> None:
        spawn = self._ex.spawn
        for _ in range(n):
            spawn(fn)

    def spawn_batch(self, fn: Callable[[], Coroutine[Any, Any, Any]], n: int) -> None:
        self._ex.spawn_many(fn, [()] * n)

    async def join(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
    ) -> None:
        await self._ex.spawn(fn, *args)

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._ex.__aexit__(*exc)


def _prims_executor() -> SpawnerImpl:
    executor_cls, missing = _find(
        "anyio_prims:Executor", "anyio_prims.executor:Executor"
    )
    channel = _prims_flavour("mpsc", strict=False)
    if missing is None and channel.missing is not None:
        missing = channel.missing
    if missing is None and not all(
        hasattr(executor_cls, name) for name in ("spawn", "spawn_many", "__aenter__")
    ):
        missing = "anyio_prims.Executor lacks spawn/spawn_many/async with"
    group = type(
        "_PrimsExecutor", (_PrimsExecutorGroup,), {"executor_cls": executor_cls}
    )
    return SpawnerImpl(
        "anyio_prims",
        "anyio-prims Executor.spawn (jobs run on reused workers; spawn_many for"
        " batches); anyio checkpoint; anyio-prims mpsc channel (budgeted)",
        missing=missing,
        group=group,
        checkpoint=anyio.lowlevel.checkpoint,
        channel=channel.open,
    )


def spawner_impls() -> list[SpawnerImpl]:
    """Executor rows: each ecosystem's spawn with its own yield and channel."""
    trio_checkpoint: Any = None
    trio_missing = None
    try:
        import trio.lowlevel

        trio_checkpoint = trio.lowlevel.checkpoint
    except ImportError as exc:  # pragma: no cover - trio is a bench dependency
        trio_missing = str(exc)
    has_taskgroup = hasattr(asyncio, "TaskGroup")
    run_each, aiometer_missing = _aiometer_run_each()
    return [
        SpawnerImpl(
            "asyncio",
            "asyncio.TaskGroup.create_task; asyncio.sleep(0); asyncio.Queue",
            backends=ASYNCIO_ONLY,
            missing=None if has_taskgroup else "asyncio.TaskGroup needs Python 3.11",
            group=_AsyncioTaskGroup,
            checkpoint=_asyncio_yield,
            channel=AsyncioQueueChan,
        ),
        SpawnerImpl(
            "trio",
            "trio nursery.start_soon; trio.lowlevel.checkpoint; trio memory channel",
            backends=TRIO_ONLY,
            missing=trio_missing,
            group=_TrioNursery,
            checkpoint=trio_checkpoint,
            channel=_trio_open,
        ),
        SpawnerImpl(
            "anyio",
            "anyio TaskGroup.start_soon; anyio checkpoint; anyio memory stream",
            group=_AnyioGroup,
            checkpoint=anyio.lowlevel.checkpoint,
            channel=_anyio_open,
        ),
        SpawnerImpl(
            "aiometer",
            "aiometer.run_on_each (anyio task group inside); anyio checkpoint",
            missing=aiometer_missing,
            run_each=run_each,
            checkpoint=anyio.lowlevel.checkpoint,
        ),
        _prims_executor(),
    ]
