"""Channels: asyncio.Queue, Trio memory channels, anyio memory streams,
aiologic.Queue and anyio-prims' mpsc/spmc/mpmc/oneshot and drop-in stream.

Cases (one loop is the unit named in each benchmark's metadata; items are the
ints 0, 1, 2, ... and every case checks their sum and count at the end):

``ready_send_receive``       one task, capacity 64: ``await send(i)`` then
                             ``await receive()``; nothing ever blocks.
``create_send_receive``      one task: open a capacity-1 channel, send one
                             item, receive it, close both ends (the oneshot's
                             use; its send is synchronous, as its API is).
                             Each row runs the implementation's own calls,
                             with no adapter (a queue has no ends to close).
``wake_receiver_cap64``      a receiver task is parked on an empty channel;
``wake_receiver_unbounded``  the main task sends one item, which wakes it, and
                             waits until it has parked again.  One loop is one
                             wake-up.
``wake_blocked_sender``      capacity 1: a sender task is parked on a full
                             channel; the main task receives one item, which
                             lets the blocked send complete, and waits until
                             the sender has parked again.
``cancel_pending_send``      capacity 1, full: the main task's send parks and
                             a second task cancels it (``task.cancel()`` on
                             asyncio, a Trio cancel scope on Trio).  Checked:
                             the channel still holds only the first item.
``cancel_pending_receive``   capacity 1, empty: the same for a receive.
                             Checked: the next item sent is the one received.
``pingpong_cap1``            two tasks, two capacity-1 channels; one loop is a
                             round trip (two task switches).
``spmc_batch_<k>c_<cap>``    16,384 messages from the main task to k = 1, 2,
                             4, 8 consumer tasks, capacity 64 or unbounded,
                             then one end marker per consumer; one loop is one
                             batch, reported per message.
``mpsc_4p1c_cap64``          4 producer tasks (4,096 items and an end marker
                             each), the main task consumes; per message.
``mpmc_4p4c_cap64``          4 producers, 4 consumers; per message.

The batch cases have one more row on asyncio and uvloop, ``asyncio_budgeted``:
asyncio.Queue under anyio-prims' checkpoint policy (``peers.BudgetedQueue``),
a reference for what the policy alone costs there, not a peer.

A case a row cannot express is left out (mpsc in multi-consumer cases, spmc
in multi-producer cases, aiologic below capacity 1); the table shows a blank.

Run as ``python bench/bench_channels.py --backend asyncio`` plus pyperf options.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

from harness import Body, Native, Suite, ValidationError, expect, perf_counter
from peers import BUDGETED_QUEUE, ChannelImpl, channel_impls

MESSAGES = 16_384
EXPECTED_SUM = MESSAGES * (MESSAGES - 1) // 2
END = -1  # the end marker: items are >= 0

ONE_TASK = "limit_minimal_channel"
SWITCHING = "limit_park_unpark"


def _sum_to(n: int) -> int:
    return n * (n - 1) // 2


def ready_send_receive(impl: ChannelImpl) -> Body | None:
    if impl.open is None:
        return None
    open_ = impl.open

    async def body(loops: int) -> float:
        chan = open_(64)
        send, receive = chan.send, chan.receive
        total = 0
        t0 = perf_counter()
        for i in range(loops):
            await send(i)
            total += await receive()
        elapsed = perf_counter() - t0
        expect(total == _sum_to(loops), f"{impl.name}: checksum {total}")
        expect(not chan.try_receive()[0], f"{impl.name}: items left over")
        chan.close()
        return elapsed

    return body


def create_send_receive(impl: ChannelImpl) -> Body | None:
    # Times each implementation's own calls, as a user writes them, with no
    # adapter in the loop (``impl.pair``, ``impl.queue``, ``impl.oneshot``):
    # an adapter made per channel would add the same few hundred ns to every
    # row and pull every ratio towards 1.
    if impl.oneshot is not None:
        make_oneshot = impl.oneshot

        async def oneshot_body(loops: int) -> float:
            total = 0
            t0 = perf_counter()
            for i in range(loops):
                tx, rx = make_oneshot()
                tx.send(i)
                total += await rx.receive()
                tx.close()  # as every row closes its endpoints
                rx.close()
            elapsed = perf_counter() - t0
            expect(total == _sum_to(loops), f"{impl.name}: checksum {total}")
            return elapsed

        return oneshot_body
    if impl.queue is not None:
        make_queue, put, get = impl.queue

        async def queue_body(loops: int) -> float:
            total = 0
            t0 = perf_counter()
            for i in range(loops):
                queue = make_queue(1)
                await put(queue, i)
                total += await get(queue)
            elapsed = perf_counter() - t0
            expect(total == _sum_to(loops), f"{impl.name}: checksum {total}")
            return elapsed

        return queue_body
    if impl.pair is None:
        return None
    make_pair = impl.pair

    async def body(loops: int) -> float:
        total = 0
        t0 = perf_counter()
        for i in range(loops):
            tx, rx = make_pair(1)
            await tx.send(i)
            total += await rx.receive()
            tx.close()
            rx.close()
        elapsed = perf_counter() - t0
        expect(total == _sum_to(loops), f"{impl.name}: checksum {total}")
        return elapsed

    return body


def wake_receiver(impl: ChannelImpl, native: Native, capacity: float) -> Body | None:
    if impl.open is None:
        return None
    open_ = impl.open

    async def body(loops: int) -> float:
        chan = open_(capacity)
        send, receive = chan.send, chan.receive
        tasks: list[Any] = []
        total = [0]

        async def receiver() -> None:
            tasks.append(native.current_task())
            s = 0
            for _ in range(loops):
                s += await receive()
            total[0] = s

        wait_parked = native.wait_parked
        async with native.group() as group:
            group.spawn(receiver)
            task = (await native.wait_started(tasks))[0]
            await wait_parked(task)
            t0 = perf_counter()
            for i in range(loops):
                await wait_parked(task)
                await send(i)
        elapsed = perf_counter() - t0
        expect(total[0] == _sum_to(loops), f"{impl.name}: checksum {total[0]}")
        chan.close()
        return elapsed

    return body


def wake_blocked_sender(impl: ChannelImpl, native: Native) -> Body | None:
    if impl.open is None:
        return None
    open_ = impl.open

    async def body(loops: int) -> float:
        chan = open_(1)
        send, receive = chan.send, chan.receive
        tasks: list[Any] = []

        async def sender() -> None:
            tasks.append(native.current_task())
            for i in range(loops + 1):
                await send(i)

        wait_parked = native.wait_parked
        total = 0
        async with native.group() as group:
            group.spawn(sender)
            task = (await native.wait_started(tasks))[0]
            await wait_parked(task)
            t0 = perf_counter()
            for i in range(loops):
                if i:
                    await wait_parked(task)
                total += await receive()
            total += await receive()  # the last item; the sender is done
        elapsed = perf_counter() - t0
        expect(total == _sum_to(loops + 1), f"{impl.name}: checksum {total}")
        expect(not chan.try_receive()[0], f"{impl.name}: items left over")
        chan.close()
        return elapsed

    return body


def cancel_pending(impl: ChannelImpl, native: Native, op: str) -> Body | None:
    """The main task's send (or receive) parks; another task cancels it."""
    if impl.open is None:
        return None
    open_ = impl.open

    async def body(loops: int) -> float:
        chan = open_(1)
        target: Callable[..., Awaitable[Any]]
        arg: tuple[Any, ...]
        if op == "send":
            await chan.send(END)  # full: every send below must wait
            target, arg = chan.send, (7,)
        else:
            target, arg = chan.receive, ()
        attempt, cancel = native.cancellable()
        me = native.current_task()
        started = [0]

        async def canceller() -> None:
            yield_, wait_parked = native.yield_, native.wait_parked
            for i in range(loops):
                while started[0] <= i:  # attempt i + 1 has not begun
                    await yield_()
                await wait_parked(me)
                cancel()

        async with native.group() as group:
            group.spawn(canceller)
            t0 = perf_counter()
            for i in range(loops):
                started[0] = i + 1
                if not await attempt(target, *arg):
                    raise ValidationError(
                        f"{impl.name}: a {op} that must wait completed"
                    )
            elapsed = perf_counter() - t0
        if op == "send":
            expect(chan.try_receive() == (True, END), f"{impl.name}: first item lost")
        else:
            await chan.send(7)
            expect(chan.try_receive() == (True, 7), f"{impl.name}: item not received")
        expect(not chan.try_receive()[0], f"{impl.name}: a cancelled {op} took effect")
        chan.close()
        return elapsed

    return body


def pingpong(impl: ChannelImpl, native: Native) -> Body | None:
    if impl.open is None:
        return None
    open_ = impl.open

    async def body(loops: int) -> float:
        there, back = open_(1), open_(1)
        send, receive = there.send, back.receive
        echo_send, echo_receive = back.send, there.receive
        tasks: list[Any] = []

        async def echo() -> None:
            tasks.append(native.current_task())
            for _ in range(loops):
                await echo_send(await echo_receive())

        total = 0
        async with native.group() as group:
            group.spawn(echo)
            await native.wait_parked((await native.wait_started(tasks))[0])
            t0 = perf_counter()
            for i in range(loops):
                await send(i)
                total += await receive()
            elapsed = perf_counter() - t0
        expect(total == _sum_to(loops), f"{impl.name}: checksum {total}")
        there.close()
        back.close()
        return elapsed

    return body


async def _consume_until_end(receive: Any, out: list[int], k: int) -> None:
    s = c = 0
    while True:
        item = await receive()
        if item < 0:
            break
        s += item
        c += 1
    out[2 * k] = s
    out[2 * k + 1] = c


def spmc_batch(
    impl: ChannelImpl, native: Native, consumers: int, capacity: float
) -> Body | None:
    if impl.open is None or (consumers > 1 and not impl.many_receivers):
        return None
    open_ = impl.open

    async def body(loops: int) -> float:
        t0 = perf_counter()
        for _ in range(loops):
            chan = open_(capacity)
            send = chan.send
            receivers = [chan.receive] + [chan.receiver() for _ in range(consumers - 1)]
            out = [0] * (2 * consumers)
            async with native.group() as group:
                for k, receive in enumerate(receivers):
                    group.spawn(_consume_until_end, receive, out, k)
                for i in range(MESSAGES):
                    await send(i)
                for _ in range(consumers):
                    await send(END)
            chan.close()
            expect(
                sum(out[0::2]) == EXPECTED_SUM,
                f"{impl.name}: checksum {sum(out[0::2])}",
            )
            expect(
                sum(out[1::2]) == MESSAGES, f"{impl.name}: {sum(out[1::2])} received"
            )
        return perf_counter() - t0

    return body


async def _produce(send: Any, first: int, count: int) -> None:
    for i in range(first, first + count):
        await send(i)
    await send(END)


def mpsc_batch(impl: ChannelImpl, native: Native, producers: int) -> Body | None:
    if impl.open is None or not impl.many_senders:
        return None
    open_ = impl.open
    share = MESSAGES // producers

    async def body(loops: int) -> float:
        t0 = perf_counter()
        for _ in range(loops):
            chan = open_(64)
            receive = chan.receive
            senders = [chan.send] + [chan.sender() for _ in range(producers - 1)]
            s = c = ends = 0
            async with native.group() as group:
                for p, send in enumerate(senders):
                    group.spawn(_produce, send, p * share, share)
                while ends < producers:
                    item = await receive()
                    if item < 0:
                        ends += 1
                    else:
                        s += item
                        c += 1
            chan.close()
            expect(
                s == EXPECTED_SUM and c == MESSAGES, f"{impl.name}: {c} items, sum {s}"
            )
        return perf_counter() - t0

    return body


def mpmc_batch(
    impl: ChannelImpl, native: Native, producers: int, consumers: int
) -> Body | None:
    if impl.open is None or not (impl.many_senders and impl.many_receivers):
        return None
    open_ = impl.open
    share = MESSAGES // producers

    async def body(loops: int) -> float:
        t0 = perf_counter()
        for _ in range(loops):
            chan = open_(64)
            senders = [chan.send] + [chan.sender() for _ in range(producers - 1)]
            receivers = [chan.receive] + [chan.receiver() for _ in range(consumers - 1)]
            out = [0] * (2 * consumers)
            async with native.group() as group:
                for k, receive in enumerate(receivers):
                    group.spawn(_consume_until_end, receive, out, k)
                for p, send in enumerate(senders):
                    group.spawn(_produce, send, p * share, share)
            chan.close()
            expect(
                sum(out[0::2]) == EXPECTED_SUM,
                f"{impl.name}: checksum {sum(out[0::2])}",
            )
            expect(
                sum(out[1::2]) == MESSAGES, f"{impl.name}: {sum(out[1::2])} received"
            )
        return perf_counter() - t0

    return body


def main() -> None:
    suite = Suite("channels", __doc__.splitlines()[0])
    native = suite.native
    impls = channel_impls()
    assert MESSAGES % 4 == 0

    def each(case: str, make: Any, **kw: Any) -> None:
        for impl in impls:
            suite.add(case, impl, make(impl), **kw)

    each("ready_send_receive", ready_send_receive, unit="send+receive", limit=ONE_TASK)
    each(
        "create_send_receive",
        create_send_receive,
        unit="open, send+receive, close",
        limit=ONE_TASK,
    )
    each(
        "wake_receiver_cap64",
        lambda i: wake_receiver(i, native, 64),
        unit="send that wakes a parked receiver",
        limit=SWITCHING,
    )
    each(
        "wake_receiver_unbounded",
        lambda i: wake_receiver(i, native, math.inf),
        unit="send that wakes a parked receiver",
        limit=SWITCHING,
    )
    each(
        "wake_blocked_sender",
        lambda i: wake_blocked_sender(i, native),
        unit="receive that wakes a blocked sender",
        limit=SWITCHING,
    )
    each(
        "cancel_pending_send",
        lambda i: cancel_pending(i, native, "send"),
        unit="send parked then cancelled",
        limit=SWITCHING,
    )
    each(
        "cancel_pending_receive",
        lambda i: cancel_pending(i, native, "receive"),
        unit="receive parked then cancelled",
        limit=SWITCHING,
    )
    each(
        "pingpong_cap1",
        lambda i: pingpong(i, native),
        unit="round trip (two task switches)",
        limit=SWITCHING,
    )
    # The batch cases also run asyncio.Queue under anyio-prims' checkpoint
    # policy (the reference row ``asyncio_budgeted``): what the policy alone
    # costs where the targets compare with asyncio.Queue, which never yields.
    batch_impls = [*impls, BUDGETED_QUEUE]

    def batch(case: str, make: Any) -> None:
        for impl in batch_impls:
            suite.add(
                case,
                impl,
                make(impl),
                inner_loops=MESSAGES,
                unit="message",
                limit=ONE_TASK,
            )

    for capacity, cap_name in ((64, "cap64"), (math.inf, "unbounded")):
        for consumers in (1, 2, 4, 8):
            batch(
                f"spmc_batch_{consumers}c_{cap_name}",
                lambda i, k=consumers, c=capacity: spmc_batch(i, native, k, c),
            )
    batch("mpsc_4p1c_cap64", lambda i: mpsc_batch(i, native, 4))
    batch("mpmc_4p4c_cap64", lambda i: mpmc_batch(i, native, 4, 4))


if __name__ == "__main__":
    main()
