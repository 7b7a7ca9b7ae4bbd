"""The drop-in create_memory_object_stream: the same scenarios run on
anyio's and on ours must leave the same trace (results, exceptions,
statistics), plus what anyio's own API promises: call forms, checkpoints on
every call, ResourceWarning when an endpoint is collected unclosed.

Where ours deliberately differs (the four fixes listed in
docs/channels.md: a send whose item was taken returns normally when
cancelled, a cancelled parked send delivers nothing, a receive cancelled
after its grant passes the item on, the last receiver's close releases
the buffer), the test says so.
"""

from __future__ import annotations

import functools
import gc
import math
import warnings
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import anyio.streams.memory
import pytest
from anyio.streams.memory import MemoryObjectStreamStatistics

import anyio_prims.streams as ours
from anyio_prims.streams import (
    MemoryObjectReceiveStream,
    MemoryObjectSendStream,
    create_memory_object_stream,
)

from .._anyio_version import requires_anyio
from ._support import (
    Call,
    assert_schedule_point,
    looks_between_call_and_park,
    settle,
)

pytestmark = pytest.mark.anyio

Scenario = Callable[[Any, list[Any]], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(func: Scenario) -> Scenario:
    SCENARIOS[func.__name__] = func
    return func


async def record(trace: list[Any], label: str, operation: Callable[[], Any]) -> None:
    """Run ``operation`` (sync or async) and note its result or error type."""
    try:
        result = operation()
        if isinstance(result, Awaitable):
            result = await result
    except Exception as exc:
        trace.append((label, type(exc).__name__))
    else:
        trace.append((label, result))


@scenario
async def buffering(create: Any, trace: list[Any]) -> None:
    tx, rx = create(2)
    with tx, rx:
        for i in range(3):
            await record(trace, f"send_nowait {i}", partial(tx.send_nowait, i))
        trace.append(tuple(tx.statistics()))
        for _ in range(3):
            await record(trace, "receive_nowait", rx.receive_nowait)
        await record(trace, "send", lambda: tx.send("a"))
        await record(trace, "receive", rx.receive)


@scenario
async def rendezvous(create: Any, trace: list[Any]) -> None:
    tx, rx = create(0)
    with tx, rx:
        await record(trace, "send_nowait", lambda: tx.send_nowait(1))
        async with anyio.create_task_group() as tg:
            sender = Call(lambda: tx.send("s")).start(tg)
            await settle()
            trace.append(tuple(rx.statistics()))
            await record(trace, "receive_nowait", rx.receive_nowait)
            await settle()
            trace.append(sender.outcome)
            receiver = Call(rx.receive).start(tg)
            await settle()
            trace.append(tuple(tx.statistics()))
            await record(trace, "send_nowait", lambda: tx.send_nowait("r"))
            await settle()
            trace.append(receiver.result)


@scenario
async def unbounded(create: Any, trace: list[Any]) -> None:
    tx, rx = create(math.inf)
    with tx, rx:
        for i in range(100):
            tx.send_nowait(i)
        trace.append(tuple(rx.statistics()))
        trace.append([rx.receive_nowait() for _ in range(100)])


@scenario
async def closing_the_send_side(create: Any, trace: list[Any]) -> None:
    tx, rx = create(2)
    clone = tx.clone()
    await tx.send(1)
    tx.close()
    trace.append(tuple(rx.statistics()))
    await record(trace, "send on closed", lambda: tx.send(2))
    await record(trace, "send_nowait on closed", lambda: tx.send_nowait(2))
    await record(trace, "clone closed", tx.clone)
    await clone.send(2)
    await clone.aclose()
    trace.append([item async for item in rx])
    await record(trace, "receive after end", rx.receive)
    await record(trace, "receive_nowait after end", rx.receive_nowait)
    rx.close()


@scenario
async def closing_the_receive_side(create: Any, trace: list[Any]) -> None:
    tx, rx = create(2)
    clone = rx.clone()
    await tx.send(1)
    rx.close()
    await record(trace, "receive on closed", rx.receive)
    await record(trace, "receive_nowait on closed", rx.receive_nowait)
    await record(trace, "clone closed", rx.clone)
    await record(trace, "clone receives", clone.receive)
    async with clone:
        pass
    await record(trace, "send to no receiver", lambda: tx.send(2))
    await record(trace, "send_nowait to no receiver", lambda: tx.send_nowait(2))
    stats = rx.statistics()
    # anyio keeps the buffer after the last receiver closes, ours releases
    # it: compare everything else.
    trace.append(tuple(stats)[1:])
    tx.close()


@scenario
async def blocked_tasks_and_closing(create: Any, trace: list[Any]) -> None:
    tx, rx = create(0)
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send(1)).start(tg)
        await settle()
        tx.close()  # its own blocked send: ClosedResourceError
        await settle()
        trace.append(type(sender.error).__name__)
        receiver = Call(rx.receive).start(tg)
        await settle()
        trace.append(tuple(rx.statistics()))
    trace.append(type(receiver.error).__name__)  # the end of the stream
    tx2, rx2 = create(0)
    async with anyio.create_task_group() as tg:
        receiver = Call(rx2.receive).start(tg)
        await settle()
        rx2.close()
        await settle()
        trace.append(type(receiver.error).__name__)
        sender = Call(lambda: tx2.send(1)).start(tg)
        await settle()
    trace.append(type(sender.error).__name__)
    rx.close()
    tx2.close()


@scenario
async def blocked_sender_broken_by_last_receiver(create: Any, trace: list[Any]) -> None:
    tx, rx = create(0)
    async with anyio.create_task_group() as tg:
        sender = Call(lambda: tx.send(1)).start(tg)
        await settle()
        rx.close()
        await settle()
    trace.append(type(sender.error).__name__)
    tx.close()


@scenario
async def arrival_order(create: Any, trace: list[Any]) -> None:
    tx, rx = create(1)
    with tx, rx:
        async with anyio.create_task_group() as tg:
            receivers = []
            for _ in range(3):
                receivers.append(Call(rx.receive).start(tg))
                await settle()
            for item in "abc":
                await tx.send(item)
            await settle()
        trace.append([r.result for r in receivers])
        await tx.send("x")
        async with anyio.create_task_group() as tg:
            for item in "def":
                Call(partial(tx.send, item)).start(tg)
                await settle()
            trace.append(tuple(rx.statistics()))
            trace.append([await rx.receive() for _ in range(4)])


@scenario
async def cancelled_blocked_calls(create: Any, trace: list[Any]) -> None:
    tx, rx = create(0)
    with tx, rx:
        async with anyio.create_task_group() as tg:
            sender = Call(lambda: tx.send(1)).start(tg)
            await settle()
            sender.cancel()
            await settle()
            receiver = Call(rx.receive).start(tg)
            await settle()
            receiver.cancel()
            await settle()
        trace.extend([sender.outcome, receiver.outcome, tuple(tx.statistics())])
        await record(trace, "receive_nowait", rx.receive_nowait)


@scenario
async def both_ends_closed_back_to_back_while_a_call_waits(
    create: Any, trace: list[Any]
) -> None:
    # The first close wakes the blocked call (end of stream, or broken); its
    # own endpoint's close follows before it runs, and decides the error.
    for side in ("receive", "send"):
        tx, rx = create(0)
        async with anyio.create_task_group() as tg:
            call = Call(rx.receive if side == "receive" else partial(tx.send, 1))
            call.start(tg)
            await settle()
            for endpoint in (tx, rx) if side == "receive" else (rx, tx):
                endpoint.close()
            await settle()
        trace.append((side, type(call.error).__name__))


@scenario
async def every_call_is_a_checkpoint(create: Any, trace: list[Any]) -> None:
    tx, rx = create(5)
    with tx, rx:
        await tx.send(1)
        for label, operation in [
            ("send", lambda: tx.send(2)),
            ("receive", rx.receive),
        ]:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await operation()
            trace.append((label, scope.cancelled_caught))
        trace.append(tuple(tx.statistics()))
    # Even a call that fails at once checkpoints first.
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tx.send(3)
    trace.append(("send on closed", scope.cancelled_caught))


@scenario
async def a_call_that_must_wait_yields_before_it_parks(
    create: Any, trace: list[Any]
) -> None:
    # anyio checkpoints first and then parks, so a task watching for the
    # parked caller gets to look in between.  Only "ever" is recorded: on
    # Trio the order within a batch is random.
    for side in ("receive", "send"):
        tx, rx = create(0)
        with tx, rx:
            misses = await looks_between_call_and_park(tx, rx, side)
        trace.append((side, misses > 0))


@requires_anyio(4, 16, "closing an endpoint wakes its own blocked tasks")
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario_leaves_the_same_trace_as_anyio(name: str) -> None:
    theirs: list[Any] = []
    mine: list[Any] = []
    await SCENARIOS[name](anyio.create_memory_object_stream, theirs)
    await SCENARIOS[name](create_memory_object_stream, mine)
    assert mine == theirs


# ---------------------------------------------------------------------------
# API and call forms
# ---------------------------------------------------------------------------


def test_call_forms_match_anyio() -> None:
    for tx, rx in [
        create_memory_object_stream(),
        create_memory_object_stream(5),
        create_memory_object_stream[int](5),
        create_memory_object_stream[int](max_buffer_size=5),
        create_memory_object_stream(float("inf")),
    ]:
        assert isinstance(tx, MemoryObjectSendStream)
        assert isinstance(rx, MemoryObjectReceiveStream)
        assert isinstance(tx, anyio.abc.ObjectSendStream)
        assert isinstance(rx, anyio.abc.ObjectReceiveStream)
        tx.close()
        rx.close()


async def test_streams_are_instances_of_anyio_memory_stream_classes() -> None:
    tx, rx = create_memory_object_stream[int](1)
    tx2, rx2 = tx.clone(), rx.clone()
    with tx, rx, tx2, rx2:
        for send in (tx, tx2):
            assert isinstance(send, anyio.streams.memory.MemoryObjectSendStream)
            assert not isinstance(send, anyio.streams.memory.MemoryObjectReceiveStream)
        for receive in (rx, rx2):
            assert isinstance(receive, anyio.streams.memory.MemoryObjectReceiveStream)
            assert not isinstance(receive, anyio.streams.memory.MemoryObjectSendStream)


async def test_singledispatch_on_anyio_memory_stream_classes_reaches_ours() -> None:
    # Beside handlers for the abstract streams, as code written for anyio
    # has them: ours must reach the memory stream handlers, as anyio's do.
    @functools.singledispatch
    def kind(stream: object) -> str:
        return "something else"

    @kind.register(anyio.abc.ObjectSendStream)
    def _(stream: object) -> str:
        return "an object send stream"

    @kind.register(anyio.abc.ObjectReceiveStream)
    def _(stream: object) -> str:
        return "an object receive stream"

    @kind.register(anyio.streams.memory.MemoryObjectSendStream)
    def _(stream: object) -> str:
        return "a memory send stream"

    @kind.register(anyio.streams.memory.MemoryObjectReceiveStream)
    def _(stream: object) -> str:
        return "a memory receive stream"

    for tx, rx in [
        anyio.create_memory_object_stream[int](1),
        create_memory_object_stream[int](1),
    ]:
        async with tx, rx:
            assert kind(tx) == "a memory send stream", type(tx)
            assert kind(rx) == "a memory receive stream", type(rx)


def test_statistics_is_anyios_tuple() -> None:
    tx, rx = create_memory_object_stream[int](3)
    with tx, rx:
        tx.send_nowait(1)
        stats = rx.statistics()
        assert type(stats) is MemoryObjectStreamStatistics
        assert stats == MemoryObjectStreamStatistics(1, 3, 1, 1, 0, 0)
        assert tx.statistics() == stats


def test_no_item_counts_as_buffered_once_the_last_receive_stream_closes() -> None:
    # The items are released at once (AnyIO's stream keeps counting them).
    tx, rx = create_memory_object_stream[int](3)
    with tx:
        tx.send_nowait(1)
        tx.send_nowait(2)
        rx.close()
        assert tx.statistics().current_buffer_used == 0


async def test_sends_failed_by_closing_the_last_receive_stream_stop_counting() -> None:
    # Woken with BrokenResourceError, they no longer count as waiting, also
    # before they run (AnyIO counts them until they do).
    tx, rx = create_memory_object_stream[int](0)
    outcomes: list[str] = []

    async def send(item: int) -> None:
        try:
            await tx.send(item)
        except anyio.BrokenResourceError:
            outcomes.append("broken")

    with tx:
        async with anyio.create_task_group() as tg:
            tg.start_soon(send, 1)
            tg.start_soon(send, 2)
            await settle()
            assert tx.statistics().tasks_waiting_send == 2
            rx.close()
            assert tx.statistics().tasks_waiting_send == 0
            assert outcomes == []  # the senders have not run yet
    assert outcomes == ["broken", "broken"]


@pytest.mark.parametrize("size", [-1, 1.5, "3", None, -math.inf])
def test_bad_max_buffer_size_raises_what_anyio_raises(size: Any) -> None:
    with pytest.raises(ValueError, match="max_buffer_size") as theirs:
        anyio.create_memory_object_stream(size)
    with pytest.raises(ValueError, match=f"^{theirs.value}$"):
        create_memory_object_stream(size)


@pytest.mark.parametrize("size", [-1, 1.5])
def test_the_typed_form_rejects_what_anyio_rejects(size: float) -> None:
    with pytest.raises(ValueError, match="max_buffer_size") as theirs:
        anyio.create_memory_object_stream[int](size)
    with pytest.raises(ValueError, match=f"^{theirs.value}$"):
        create_memory_object_stream[int](size)


@pytest.mark.parametrize("typed", [False, True])
def test_item_type_is_deprecated_as_in_anyio(typed: bool) -> None:
    factory = create_memory_object_stream[int] if typed else create_memory_object_stream
    with pytest.warns(DeprecationWarning, match="item_type") as caught:
        tx, rx = factory(1, int)
    assert caught[0].filename == __file__  # the warning names the caller's line
    tx.close()
    rx.close()


@pytest.mark.parametrize("side", [0, 1])
def test_an_endpoint_collected_unclosed_warns(side: int) -> None:
    streams = create_memory_object_stream[int](1)
    streams[1 - side].close()
    kept = streams[1 - side]
    with pytest.warns(ResourceWarning, match="Unclosed"):
        del streams  # the last reference to the unclosed endpoint
    assert kept.closed


def test_a_closed_endpoint_collected_does_not_warn() -> None:
    tx, rx = create_memory_object_stream[int](1)
    tx.close()
    rx.close()
    del tx, rx
    gc.collect()  # filterwarnings=error would turn a warning into a failure


@pytest.mark.parametrize("cls", [MemoryObjectSendStream, MemoryObjectReceiveStream])
def test_an_endpoint_never_attached_to_a_channel_does_not_warn(cls: Any) -> None:
    # Pins the __del__ guard: the endpoints have no __init__ (the factory
    # and clone() make one by a bare class call and then set its
    # attributes), so an endpoint made by the class call alone was never
    # counted as open, has nothing to close, and must not warn "Unclosed"
    # when it is collected.  Not reachable through the factory or clone(),
    # here or in anyio; anyio's dataclass endpoints do warn for one whose
    # construction failed, as their _closed defaults to False.
    with pytest.raises(TypeError):
        cls(None)  # no public constructor takes a channel
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        endpoint = cls()
        assert not hasattr(endpoint, "_closed")
        del endpoint
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_send_and_receive_are_schedule_points_even_when_they_do_not_block(
    anyio_backend_name: str,
) -> None:
    tx, rx = create_memory_object_stream[int](5)
    with tx, rx:
        for _ in range(3):
            await assert_schedule_point(anyio_backend_name, lambda: tx.send(1))
            assert await assert_schedule_point(anyio_backend_name, rx.receive) == 1


async def test_a_send_whose_item_was_taken_returns_when_cancelled_after(
    anyio_backend_name: str,
) -> None:
    # Where ours differs from anyio on purpose: the item was delivered, so
    # the send returns, and the cancellation hits the next checkpoint.
    if anyio_backend_name != "asyncio":
        pytest.skip("plain asyncio cancellation")
    tx, rx = create_memory_object_stream[str](0)
    with tx, rx:
        async with anyio.create_task_group() as tg:
            sender = Call(
                lambda: tx.send("x"),
                "asyncio_task_cancel",
                after=anyio.lowlevel.checkpoint,
            ).start(tg)
            await settle()
            sender.grant_then_cancel(rx.receive_nowait)
            await sender.finished.wait()
        assert sender.returned
        assert sender.outcome == "cancelled"


def test_the_module_exports_anyios_names() -> None:
    assert set(ours.__all__) == {
        "MemoryObjectReceiveStream",
        "MemoryObjectSendStream",
        "MemoryObjectStreamStatistics",
        "create_memory_object_stream",
    }


@pytest.mark.parametrize("params", [(int, str), (), (int, str, bytes), 5])
def test_the_subscript_takes_whatever_anyio_takes(params: Any) -> None:
    # anyio's factory is a tuple subclass, whose subscript checks nothing;
    # switching to the drop-in must raise no error that anyio's does not.
    for factory in (
        anyio.create_memory_object_stream[params],
        create_memory_object_stream[params],
    ):
        tx, rx = factory(1)
        tx.send_nowait("x")
        assert rx.receive_nowait() == "x"
        tx.close()
        rx.close()
