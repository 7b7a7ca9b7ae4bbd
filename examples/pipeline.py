"""A producer/consumer pipeline with backpressure.

    source --spmc(4)--> 3 workers --mpsc(4)--> collector

The channels are bounded: when the workers fall behind, ``send`` blocks the
source once 4 items are buffered, so memory stays bounded however fast the
source is.  Closing propagates down the pipeline: the source closes its
sender, the workers' ``async for`` loops end once the buffer is drained,
each worker closes its clone of the result sender, and the collector's loop
ends when the last clone is closed.

Run it with ``python examples/pipeline.py`` (asyncio) or
``python examples/pipeline.py trio``.
"""

from __future__ import annotations

import sys

import anyio
import anyio.lowlevel

from anyio_prims import mpsc, spmc

ITEMS = 100
WORKERS = 3
CAPACITY = 4


async def source(tx: spmc.Sender[int], peak_buffered: list[int]) -> None:
    async with tx:
        for n in range(ITEMS):
            await tx.send(n)  # blocks while CAPACITY items are buffered
            buffered = tx.statistics().items_buffered
            peak_buffered[0] = max(peak_buffered[0], buffered)


async def worker(rx: spmc.Receiver[int], tx: mpsc.Sender[tuple[int, int]]) -> None:
    async with rx, tx:
        async for n in rx:
            await anyio.lowlevel.checkpoint()  # stands for real work
            await tx.send((n, n * n))


async def main() -> dict[int, int]:
    """Square ``ITEMS`` numbers through the pipeline; return ``{n: n*n}``."""
    work_tx, work_rx = spmc.channel[int](CAPACITY)
    result_tx, result_rx = mpsc.channel[tuple[int, int]](CAPACITY)
    peak_buffered = [0]
    results: dict[int, int] = {}

    async with anyio.create_task_group() as tg:
        tg.start_soon(source, work_tx, peak_buffered)
        for _ in range(WORKERS):
            tg.start_soon(worker, work_rx.clone(), result_tx.clone())
        # The workers hold clones; close the originals so that the stream
        # ends when the clones are done.
        work_rx.close()
        result_tx.close()
        async with result_rx:
            async for n, square in result_rx:
                results[n] = square

    assert results == {n: n * n for n in range(ITEMS)}
    assert peak_buffered[0] <= CAPACITY  # backpressure held the source back
    print(f"{len(results)} results, at most {peak_buffered[0]} items buffered")
    return results


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
