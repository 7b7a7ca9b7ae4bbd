"""The two limits every other figure is read against, measured in the same run.

``limits.limit_minimal_channel.<backend>.bare``
    bench_channels' ``ready_send_receive`` body on a deque behind two plain
    async functions (``await send(x)`` appends, ``await receive()`` pops), one
    task, one send+receive per loop: the cost of the Python calls a channel
    cannot avoid.  No checkpoint, never blocks.

``limits.limit_park_unpark.<backend>.bare``
    Two tasks ping-ponging through the backend's bare wake-up mechanism, one
    round trip (two task switches) per loop: the cost of a task switch.  On
    asyncio (and uvloop) each side awaits a fresh future (made as
    ``peers.future_maker()`` says: the cheaper way on this Python) that the
    other resolves; on Trio each side parks in
    ``wait_task_rescheduled`` and the other calls ``reschedule``.

``limits.limit_minimal_pingpong.<backend>.bare``
    bench_channels' ``pingpong_cap1`` body, run on two minimal parking
    channels (``peers.FutureChan`` on asyncio and uvloop,
    ``peers.RescheduleChan`` on Trio): ``await send(x)`` and ``await
    receive()`` are coroutine methods over a deque and one parked receiver,
    woken by the same bare mechanism.  No cancellation handling, no
    checkpoint, no closing.  Not a target: what a ping-pong through any
    channel with awaitable methods costs at least, next to the bare switch.

``limits.limit_minimal_lock_handoff.<backend>.bare``
    bench_sync's ``lock_handoff`` body, run on a minimal lock
    (``peers.FutureLock`` on asyncio and uvloop, ``peers.RescheduleLock`` on
    Trio): a flag and a FIFO of parked tasks, the lock handed to the first
    on release, woken by the same bare mechanism.  No cancellation handling,
    no checkpoint, no owner.  Not a target: what the handoff case costs at
    least with an awaitable ``acquire``, next to the bare switch.

``limits.limit_budgeted_channel.<backend>.bare``
    The same body on the minimal channel under anyio-prims' checkpoint
    policy and nothing else: each call spends a unit of the library's
    budget and takes the library's checkpoint when it is spent
    (``peers.BudgetedMinimalChan``).
    Read against ``limit_minimal_channel``, it is what the policy itself
    costs a ``ready_send_receive`` loop.  Not a target.

Run as ``python bench/bench_limits.py --backend asyncio`` plus pyperf options;
bench/run.py does that for every backend.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench_channels import pingpong, ready_send_receive
from bench_sync import lock_handoff
from harness import Impl, Suite, expect, perf_counter
from peers import (
    BUDGETED_MINIMAL_CHANNEL,
    MINIMAL_CHANNEL,
    MINIMAL_LOCK_HANDOFF,
    MINIMAL_PINGPONG,
    future_maker,
)

BARE_SWITCH = Impl("bare", "limit: bare wake-up, no cancellation handling")


async def park_unpark_asyncio(loops: int) -> float:
    loop = asyncio.get_running_loop()
    create_future = future_maker()
    # box[0]: the future the echo task waits on; box[1]: the main task's.
    box: list[Any] = [None, None]
    echoed = 0

    async def echo() -> None:
        nonlocal echoed
        fut = box[0] = create_future()
        for _ in range(loops):
            value = await fut
            fut = box[0] = create_future()
            echoed += 1
            box[1].set_result(value)

    task = loop.create_task(echo())
    await asyncio.sleep(0)  # the echo task parks on its first future
    total = 0
    t0 = perf_counter()
    for i in range(loops):
        fut = box[1] = create_future()
        box[0].set_result(i)
        total += await fut
    elapsed = perf_counter() - t0
    box[0].cancel()
    await task
    expect(echoed == loops, f"park/unpark echoed {echoed} of {loops}")
    expect(total == loops * (loops - 1) // 2, f"park/unpark checksum {total}")
    return elapsed


async def park_unpark_trio(loops: int) -> float:
    import trio
    import trio.lowlevel as lowlevel

    wait, reschedule = lowlevel.wait_task_rescheduled, lowlevel.reschedule
    value = trio.lowlevel.Abort.SUCCEEDED

    def abort(_: Any) -> Any:
        return value

    # box[0]: the echo task, box[1]: the main task, box[2]: the value passed.
    box: list[Any] = [None, lowlevel.current_task(), 0]
    echoed = 0

    async def echo() -> None:
        nonlocal echoed
        box[0] = lowlevel.current_task()
        for _ in range(loops):
            await wait(abort)
            echoed += 1
            reschedule(box[1])

    total = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(echo)
        while box[0] is None or box[0]._abort_func is None:
            await lowlevel.cancel_shielded_checkpoint()
        echo_task = box[0]
        t0 = perf_counter()
        for i in range(loops):
            box[2] = i
            reschedule(echo_task)
            await wait(abort)
            total += box[2]
        elapsed = perf_counter() - t0
    expect(echoed == loops, f"park/unpark echoed {echoed} of {loops}")
    expect(total == loops * (loops - 1) // 2, f"park/unpark checksum {total}")
    return elapsed


def main() -> None:
    suite = Suite("limits", __doc__.splitlines()[0])
    suite.add(
        "limit_minimal_channel",
        MINIMAL_CHANNEL,
        ready_send_receive(MINIMAL_CHANNEL),
        unit="send+receive",
    )
    # The minimal channel again, under the checkpoint policy alone.
    suite.add(
        "limit_budgeted_channel",
        BUDGETED_MINIMAL_CHANNEL,
        ready_send_receive(BUDGETED_MINIMAL_CHANNEL),
        unit="send+receive",
        limit="limit_minimal_channel",
    )
    suite.add(
        "limit_park_unpark",
        BARE_SWITCH,
        park_unpark_trio if suite.backend == "trio" else park_unpark_asyncio,
        unit="round trip (two task switches)",
    )
    for impl in MINIMAL_PINGPONG:
        # channels.pingpong_cap1's own body, on the minimal parking channel.
        suite.add(
            "limit_minimal_pingpong",
            impl,
            pingpong(impl, suite.native),
            unit="round trip (two task switches)",
            limit="limit_park_unpark",
        )
    for lock in MINIMAL_LOCK_HANDOFF:
        # sync.lock_handoff's own body, on the minimal lock.
        suite.add(
            "limit_minimal_lock_handoff",
            lock,
            lock_handoff(lock, suite.native, 1),
            unit="round: two handoffs",
            limit="limit_park_unpark",
        )


if __name__ == "__main__":
    main()
