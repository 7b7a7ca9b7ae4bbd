"""The drop-ins against AnyIO's own classes on random programs (hypothesis).

A program gives each of two to four tasks a list of calls on shared
primitives: a ``Lock``, ``Semaphore`` or ``CapacityLimiter`` with an
``Event`` and a ``Condition`` beside it, or a memory object stream.  Each
program runs twice, in a fresh event loop each time: on AnyIO's classes and
on ours.  The traces must be equal: every call's result or exception type
and every statistics snapshot, in the order the calls complete.  So ours
checkpoints, queues, wakes and fails where AnyIO's do, call by call, in
interleavings no hand-written scenario lists.

After a fixed number of schedule points the main task records the
statistics and cancels the tasks still blocked; which calls were cancelled
is compared as a set (the order in which cancelled tasks unwind is not part
of either API).

Trio runs the tasks of each scheduling batch in a random order.  With
hypothesis imported it orders each batch by task creation and shuffles it
with its own random generator, which the test seeds alike before each of
the two runs: the runs then interleave alike wherever the two
implementations wake the same tasks at the same points.  (So on Trio the
test cannot see in which order a call wakes several tasks at once; the
Event test of that order runs on asyncio.)

Left out, each for a reason:

* cancellation, where the drop-ins differ from AnyIO on purpose
  (docs/migrate-anyio.md lists how; those differences have tests of their
  own), except where they do not: an ``Event.wait()`` cancelled by
  another task, a send or receive in a scope cancelled before the call,
  and on Trio with the native waiter, acquires and condition waits
  cancelled by another task, and acquires in a scope cancelled before
  the call (a test of their own);
* for the streams, which receiver got which item: a receive made while a
  woken receiver has not run yet takes the oldest item here and the next
  one in AnyIO (documented).  The items received are compared as a
  multiset, and the order is the channel model tests' business;
* the end of a stream and a broken stream: the stream's first two
  endpoints stay open until the run ends (the tasks close clones), since
  around a woken receiver that has not run yet ours ends the stream later
  than AnyIO (documented).  The scenario tests in
  tests/channels/test_memory_stream.py cover those.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import anyio_prims.streams
from anyio_prims._core import FORCE_GENERIC

from ._anyio_version import requires_anyio
from .conftest import _selected
from .test_sync_parity import ANYIO, OURS

pytestmark = requires_anyio(
    4, 14, "its locks' hand-over and CapacityLimiter's argument checks changed"
)

#: Schedule points the main task lets pass before it ends a run: far more
#: than any program of these sizes needs to block or finish.
TICKS = 120

Op = tuple[str, int]
Trace = list[tuple[object, ...]]


def trio_reseeder() -> Callable[[], None]:
    """What makes two Trio runs schedule alike (see the module docstring)."""
    from trio._core import _run

    rng = getattr(_run, "_r", None)
    if not getattr(_run, "_ALLOW_DETERMINISTIC_SCHEDULING", False) or rng is None:
        pytest.skip("this Trio does not schedule deterministically under hypothesis")
    return partial(rng.seed, 0)


def run_both(
    backend: tuple[str, dict[str, Any]],
    body: Callable[..., Coroutine[Any, Any, Trace]],
    implementations: tuple[object, object],
    *args: object,
) -> None:
    """Run ``body(implementation, *args)`` for AnyIO's implementation and
    for ours, each in an event loop of its own; the traces must be equal."""
    name, options = backend
    reseed = trio_reseeder() if name == "trio" else None
    traces = []
    for implementation in implementations:
        if reseed is not None:
            reseed()
        traces.append(
            anyio.run(
                body, implementation, *args, backend=name, backend_options=options
            )
        )
    assert traces[1] == traces[0]


SYNC_OPS = [
    "acquire",
    "acquire",
    "acquire_nowait",
    "release",
    "yield",
    "stats",
    "event_wait",
    "event_set",
    "cancel_event_waits",
    "condition_wait",
    "condition_notify",
    "set_total_tokens",
    "borrow_nowait",
    "borrow_release",
]
#: On Trio with the native waiter, cancelled calls too (see
#: test_the_sync_drop_ins_trace_random_cancellations_as_anyio_on_trio).
SYNC_OPS_WITH_CANCELLATION = [
    *SYNC_OPS,
    "scoped_acquire",
    "scoped_acquire",
    "cancel_scoped_calls",
    "cancelled_acquire",
]
STREAM_OPS = [
    "send",
    "send",
    "send_nowait",
    "receive",
    "receive",
    "receive_nowait",
    "yield",
    "stats",
    "cancelled_send",
    "cancelled_receive",
    "close_sender",
    "close_receiver",
    "clone_sender",
    "clone_receiver",
]


def programs(ops: list[str]) -> st.SearchStrategy[list[list[Op]]]:
    call = st.tuples(st.sampled_from(ops), st.integers(0, 2))
    return st.lists(st.lists(call, min_size=1, max_size=6), min_size=2, max_size=4)


async def run_tasks(
    task: Callable[[int, list[Op]], Coroutine[Any, Any, None]],
    program: list[list[Op]],
    trace: Trace,
    snapshot: Callable[[], object],
) -> Trace:
    """Run one task per list of ``program``, end the run, return the trace."""
    async with anyio.create_task_group() as tg:
        for number, ops in enumerate(program):
            tg.start_soon(task, number, ops)
        for _ in range(TICKS):
            await anyio.lowlevel.checkpoint()
        trace.append(("at the end", snapshot()))
        tg.cancel_scope.cancel()
    end = next(i for i, entry in enumerate(trace) if entry[0] == "at the end")
    return trace[: end + 1] + sorted(trace[end + 1 :], key=repr)


async def traced(
    trace: Trace, label: tuple[object, ...], call: Callable[[], Awaitable[object]]
) -> None:
    """Run ``call()`` and note its result, or the type of what it raised."""
    try:
        result = await call()
    except anyio.get_cancelled_exc_class():
        trace.append((*label, "cancelled"))
        raise
    except Exception as exc:
        result = ("raised", type(exc).__name__)
    trace.append((*label, result))


# Lock, Semaphore, CapacityLimiter, with an Event and a Condition


async def run_sync_program(
    ns: SimpleNamespace, kind: str, tokens: int, program: list[list[Op]]
) -> Trace:
    prim: Any
    if kind == "Lock":
        prim = ns.Lock()
    elif kind == "Semaphore":
        prim = ns.Semaphore(tokens)
    else:
        prim = ns.CapacityLimiter(max(tokens, 1))
    event, condition = ns.Event(), ns.Condition()
    event_wait_scopes: dict[int, list[anyio.CancelScope]] = {}
    call_scopes: dict[int, list[anyio.CancelScope]] = {}
    names: dict[int, int] = {}
    trace: Trace = []

    def snapshot() -> object:
        fields = dict(vars(prim.statistics()))
        if fields.get("owner") is not None:
            fields["owner"] = names.get(fields["owner"].id)
        if "borrowers" in fields:
            fields["borrowers"] = sorted(
                b if isinstance(b, str) else f"task {names.get(id(b))}"
                for b in fields["borrowers"]
            )
        return sorted(fields.items())

    async def call(op: str, arg: int, held: list[int]) -> object:
        # held[0]: what the task holds (acquired and not released).
        if op == "release_held":
            for _ in range(held[0]):
                prim.release()
            count, held[0] = held[0], 0
            return count
        if op in ("acquire", "acquire_nowait"):
            await prim.acquire() if op == "acquire" else prim.acquire_nowait()
            held[0] += 1
        elif op == "release":
            prim.release()
            held[0] -= 1
        elif op == "yield":
            await anyio.lowlevel.checkpoint()
        elif op == "stats":
            return snapshot()
        elif op == "event_wait":
            # In a scope that "cancel_event_waits" with the same arg cancels.
            with anyio.CancelScope() as scope:
                event_wait_scopes.setdefault(arg, []).append(scope)
                await event.wait()
            return scope.cancelled_caught
        elif op == "cancel_event_waits":
            for scope in event_wait_scopes.pop(arg, []):
                scope.cancel()
        elif op == "event_set":
            event.set()
        elif op == "scoped_acquire":
            # In a scope that "cancel_scoped_calls" with the same arg cancels.
            with anyio.CancelScope() as scope:
                call_scopes.setdefault(arg, []).append(scope)
                await prim.acquire()
                held[0] += 1
            return scope.cancelled_caught
        elif op == "cancelled_acquire":
            with anyio.CancelScope() as scope:
                scope.cancel()
                await prim.acquire()
                held[0] += 1
            return scope.cancelled_caught
        elif op == "cancel_scoped_calls":
            for scope in call_scopes.pop(arg, []):
                scope.cancel()
        elif op in ("condition_wait", "condition_notify"):
            # A scope as "scoped_acquire"'s: the wait, and the acquire and
            # release of the condition's lock around either call.
            with anyio.CancelScope() as scope:
                call_scopes.setdefault(arg, []).append(scope)
                async with condition:
                    if op == "condition_wait":
                        await condition.wait()
                    else:
                        condition.notify(arg)
            return scope.cancelled_caught
        elif kind != "CapacityLimiter":
            pass  # the limiter's own calls, on a lock or semaphore
        elif op == "set_total_tokens":
            prim.total_tokens = arg + 1
        elif op == "borrow_nowait":
            prim.acquire_on_behalf_of_nowait(f"borrower {arg}")
        else:
            assert op == "borrow_release"
            prim.release_on_behalf_of(f"borrower {arg}")
        return None

    async def task(number: int, ops: list[Op]) -> None:
        names[anyio.get_current_task().id] = number
        held = [0]
        # Each task ends by releasing what it holds, so no call waits on a
        # task that is gone (where AnyIO's Lock on Trio would break).
        for index, (op, arg) in enumerate([*ops, ("release_held", 0)]):
            await traced(trace, (number, index, op), partial(call, op, arg, held))

    return await run_tasks(task, program, trace, snapshot)


@pytest.mark.parametrize("backend", _selected())
@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["Lock", "Semaphore", "CapacityLimiter"]),
    tokens=st.integers(0, 2),
    program=programs(SYNC_OPS),
)
def test_the_sync_drop_ins_trace_random_programs_as_anyio(
    backend: tuple[str, dict[str, Any]], kind: str, tokens: int, program: list[list[Op]]
) -> None:
    run_both(backend, run_sync_program, (ANYIO, OURS), kind, tokens, program)


@pytest.mark.parametrize(
    "backend", [b for b in _selected() if b.id == "trio"] or [pytest.param(None)]
)
@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["Lock", "Semaphore", "CapacityLimiter"]),
    tokens=st.integers(0, 2),
    program=programs(SYNC_OPS_WITH_CANCELLATION),
)
def test_the_sync_drop_ins_trace_random_cancellations_as_anyio_on_trio(
    backend: tuple[str, dict[str, Any]] | None,
    kind: str,
    tokens: int,
    program: list[list[Op]],
) -> None:
    # On Trio an acquire checks for cancellation before it takes or parks,
    # and an uncontended one yields shielded after the take, as AnyIO's
    # (Trio's own) does: acquires, condition waits and the condition's
    # lock, cancelled by another task while they wait or at their
    # checkpoint, and acquires in a scope cancelled before the call, trace
    # as AnyIO's.  Not on asyncio, where the drop-ins take before they
    # check and their checkpoint is not shielded (docs/migrate-anyio.md), nor
    # with the generic waiter, whose cancelled waiters count in statistics()
    # until their task runs and which wakes them a schedule point later.
    if backend is None:
        pytest.skip("Trio is not among the selected backends")
    if FORCE_GENERIC:
        pytest.skip("the generic waiter settles a cancelled wait later")
    run_both(backend, run_sync_program, (ANYIO, OURS), kind, tokens, program)


# Memory object streams


async def run_stream_program(
    create: Any, size: float, program: list[list[Op]]
) -> Trace:
    send, receive = create(size)
    endpoints: list[Any] = [send, receive]
    trace: Trace = []
    received: list[object] = []

    def snapshot() -> object:
        return repr(send.statistics())

    def got(item: object) -> str:
        received.append(item)
        return "an item"

    async def call(op: str, item: str, ends: list[Any]) -> object:
        # ends: the task's sender and receiver.
        sender, receiver = ends
        if op == "send":
            await sender.send(item)
        elif op == "send_nowait":
            sender.send_nowait(item)
        elif op == "receive":
            return got(await receiver.receive())
        elif op == "receive_nowait":
            return got(receiver.receive_nowait())
        elif op == "yield":
            await anyio.lowlevel.checkpoint()
        elif op == "stats":
            return snapshot()
        elif op in ("cancelled_send", "cancelled_receive"):
            result: object = None
            with anyio.CancelScope() as scope:
                scope.cancel()
                if op == "cancelled_send":
                    await sender.send(item)
                else:
                    result = got(await receiver.receive())
            return (result, scope.cancelled_caught)
        elif op == "close_sender":
            sender.close()
        elif op == "close_receiver":
            receiver.close()
        else:
            side = 0 if op == "clone_sender" else 1
            assert op in ("clone_sender", "clone_receiver")
            ends[side] = ends[side].clone()
            endpoints.append(ends[side])
        return None

    async def task(number: int, ops: list[Op]) -> None:
        ends = [send.clone(), receive.clone()]
        endpoints.extend(ends)
        for index, (op, _) in enumerate(ops):
            item = f"{number}.{index}"
            await traced(trace, (number, index, op), partial(call, op, item, ends))

    trace = await run_tasks(task, program, trace, snapshot)
    for endpoint in endpoints:
        endpoint.close()
    return [*trace, ("received", sorted(map(str, received)))]


@pytest.mark.parametrize("backend", _selected())
@settings(max_examples=150, deadline=None)
@given(size=st.sampled_from([0, 1, 2, math.inf]), program=programs(STREAM_OPS))
def test_the_drop_in_streams_trace_random_programs_as_anyio(
    backend: tuple[str, dict[str, Any]], size: float, program: list[list[Op]]
) -> None:
    streams = (
        anyio.create_memory_object_stream,
        anyio_prims.streams.create_memory_object_stream,
    )
    run_both(backend, run_stream_program, streams, size, program)
