"""Task spawning: anyio TaskGroup, asyncio.TaskGroup, Trio nurseries, aiometer
(and anyio-prims' Executor when it imports).

smol's async-executor benchmark suite, scaled to a 2-core machine.  Each row
uses its own ecosystem throughout: its spawn, its yield (``asyncio.sleep(0)``,
``trio.lowlevel.checkpoint()``, ``anyio.lowlevel.checkpoint()``) and, where
messages pass, its channel (asyncio.Queue, Trio memory channels, anyio memory
streams, anyio-prims channels).  Jobs are awaited by leaving the block (task
groups have no handles); ``spawn_one`` awaits one job the way the API does
(``await tg.create_task(...)``, a group per job for anyio and Trio,
``await ex.spawn(...)``).

``create``             open and close an empty group
``spawn_one``          spawn one empty job and wait for it
``spawn_many``         spawn 25,000 empty jobs, wait for all; per job
``spawn_batch``        spawn 250 jobs that each yield once (the API's batch
                       spawn where it has one), wait for all; per job
``spawn_recursively``  25 chains, 25 deep: each job spawns the next level,
                       yields, and waits for it; per job
``yield_now``          100 jobs that each yield 100 times; per yield
``channels``           a ring of 50 jobs linked by capacity-1 channels; 50
                       tokens go round; per hop
``web_server``         a database job behind a capacity-100 channel, 500
                       request jobs: half are cache hits, the others send a
                       reply channel to the database, which yields 0-9 times
                       (seeded) and answers; per request
``web_server_open``    the same rounds in one block that stays open (as a
                       server's does), after an untimed first round; each
                       round waits for its requests through a channel;
                       per request

Every case counts what its jobs did and checks it.  A row that cannot express
a case is left blank (aiometer only runs batches).

Run as ``python bench/bench_executor.py --backend asyncio`` plus pyperf options.
"""

from __future__ import annotations

import random
from typing import Any

from harness import Body, Suite, expect, perf_counter
from peers import SpawnerImpl, spawner_impls

SPAWN_MANY = 25_000
BATCH = 250
CHAINS, DEPTH = 25, 25
YIELD_TASKS, YIELD_STEPS = 100, 100
RING, TOKENS = 50, 50
REQUESTS, DB_CAPACITY = 500, 100

_rng = random.Random(0x12345678)
CACHE_HIT = [_rng.random() < 0.5 for _ in range(REQUESTS)]
DB_YIELDS = [_rng.randrange(10) for _ in range(REQUESTS)]
del _rng

SWITCHING = "limit_park_unpark"


def create(impl: SpawnerImpl) -> Body | None:
    if impl.group is None:
        return None
    group = impl.group

    async def body(loops: int) -> float:
        t0 = perf_counter()
        for _ in range(loops):
            async with group():
                pass
        return perf_counter() - t0

    return body


def spawn_one(impl: SpawnerImpl) -> Body | None:
    if impl.group is None:
        return None
    group = impl.group

    async def body(loops: int) -> float:
        done = [0]

        async def job() -> None:
            done[0] += 1

        async with group() as g:
            join = g.join
            t0 = perf_counter()
            for _ in range(loops):
                await join(job)
            elapsed = perf_counter() - t0
        expect(done[0] == loops, f"{impl.name}: {done[0]} of {loops} jobs ran")
        return elapsed

    return body


def _batch(impl: SpawnerImpl, n: int, yields: int, batch_api: bool) -> Body | None:
    """``loops`` times: ``n`` jobs that each yield ``yields`` times, then wait."""
    checkpoint = impl.checkpoint
    done = [0]

    async def job(*_args: Any) -> None:
        for _ in range(yields):
            await checkpoint()
        done[0] += 1

    if impl.group is not None:
        group = impl.group

        async def body(loops: int) -> float:
            done[0] = 0
            t0 = perf_counter()
            for _ in range(loops):
                async with group() as g:
                    if batch_api:
                        g.spawn_batch(job, n)
                    else:
                        g.spawn_n(job, n)
            elapsed = perf_counter() - t0
            expect(done[0] == n * loops, f"{impl.name}: {done[0]} of {n * loops} jobs")
            return elapsed

        return body
    if impl.run_each is None:
        return None
    run_each = impl.run_each

    async def body_each(loops: int) -> float:
        done[0] = 0
        args = range(n)
        t0 = perf_counter()
        for _ in range(loops):
            await run_each(job, args)
        elapsed = perf_counter() - t0
        expect(done[0] == n * loops, f"{impl.name}: {done[0]} of {n * loops} jobs")
        return elapsed

    return body_each


def spawn_recursively(impl: SpawnerImpl) -> Body | None:
    if impl.group is None:
        return None
    group, checkpoint = impl.group, impl.checkpoint

    async def body(loops: int) -> float:
        steps = [0]

        async def go(g: Any, depth: int) -> None:
            if depth:
                await g.join(step, g, depth)

        async def step(g: Any, depth: int) -> None:
            steps[0] += 1
            await checkpoint()
            await go(g, depth - 1)

        t0 = perf_counter()
        for _ in range(loops):
            async with group() as g:
                for _ in range(CHAINS):
                    g.spawn(go, g, DEPTH)
        elapsed = perf_counter() - t0
        expect(steps[0] == CHAINS * DEPTH * loops, f"{impl.name}: {steps[0]} jobs ran")
        return elapsed

    return body


def channels_ring(impl: SpawnerImpl) -> Body | None:
    if impl.group is None or impl.channel is None:
        return None
    group, channel = impl.group, impl.channel

    async def body(loops: int) -> float:
        hops = [0]

        async def link(receive: Any, send: Any) -> None:
            n = 0
            for _ in range(TOKENS):
                await send(await receive())
                n += 1
            hops[0] += n

        t0 = perf_counter()
        for _ in range(loops):
            chans = [channel(1) for _ in range(RING + 1)]
            async with group() as g:
                for i in range(RING):
                    g.spawn(link, chans[i].receive, chans[i + 1].send)
                first, last = chans[0].send, chans[RING].receive
                for token in range(TOKENS):
                    await first(token)
                total = 0
                for _ in range(TOKENS):
                    total += await last()
            for chan in chans:
                chan.close()
            expect(total == TOKENS * (TOKENS - 1) // 2, f"{impl.name}: tokens {total}")
        elapsed = perf_counter() - t0
        expect(hops[0] == RING * TOKENS * loops, f"{impl.name}: {hops[0]} hops")
        return elapsed

    return body


def _web_server_jobs(impl: SpawnerImpl, answered: list[int]) -> tuple[Any, Any]:
    """The database and request jobs of the ``web_server`` cases; a request
    adds 1 to ``answered[0]`` and its answer to ``answered[1]``."""
    channel, checkpoint = impl.channel, impl.checkpoint
    assert channel is not None

    async def database(receive: Any) -> None:
        served = 0
        while True:
            request = await receive()
            if request is None:
                return
            key, reply = request
            for _ in range(DB_YIELDS[served]):
                await checkpoint()
            served += 1
            await reply.send(2 * key + 1)

    async def request(key: int, send: Any) -> None:
        if CACHE_HIT[key]:
            value = 2 * key + 1
        else:
            reply = channel(1)
            await send((key, reply))
            value = await reply.receive()
            reply.close()
        answered[0] += 1
        answered[1] += value

    return database, request


def _expect_answers(impl: SpawnerImpl, answered: list[int], rounds: int) -> None:
    expect(answered[0] == REQUESTS * rounds, f"{impl.name}: {answered[0]} answers")
    expect(answered[1] == REQUESTS * REQUESTS * rounds, f"{impl.name}: bad answers")


def web_server(impl: SpawnerImpl) -> Body | None:
    if impl.group is None or impl.channel is None:
        return None
    group, channel = impl.group, impl.channel

    async def body(loops: int) -> float:
        answered = [0, 0]  # requests answered, their checksum
        database, request = _web_server_jobs(impl, answered)
        t0 = perf_counter()
        for _ in range(loops):
            db = channel(DB_CAPACITY)
            async with group() as g:
                g.spawn(database, db.receive)
                async with group() as requests:
                    for key in range(REQUESTS):
                        requests.spawn(request, key, db.send)
                await db.send(None)
            db.close()
        elapsed = perf_counter() - t0
        _expect_answers(impl, answered, loops)
        return elapsed

    return body


def web_server_open(impl: SpawnerImpl) -> Body | None:
    """``web_server``'s rounds in one block that stays open, as a server's
    does: an untimed first round starts whatever the block keeps (the
    Executor's workers), and each timed round waits for its requests
    through a channel instead of leaving a block."""
    if impl.group is None or impl.channel is None:
        return None
    group, channel = impl.group, impl.channel

    async def body(loops: int) -> float:
        answered = [0, 0]
        database, request = _web_server_jobs(impl, answered)

        async def database_done(receive: Any, done: Any) -> None:
            await database(receive)
            await done(None)

        async def request_done(key: int, send: Any, done: Any) -> None:
            await request(key, send)
            await done(None)

        async def one_round(g: Any) -> None:
            db = channel(DB_CAPACITY)
            done = channel(REQUESTS + 1)
            g.spawn(database_done, db.receive, done.send)
            for key in range(REQUESTS):
                g.spawn(request_done, key, db.send, done.send)
            for _ in range(REQUESTS):
                await done.receive()
            await db.send(None)
            await done.receive()  # the database job's
            db.close()
            done.close()

        async with group() as g:
            await one_round(g)
            t0 = perf_counter()
            for _ in range(loops):
                await one_round(g)
            elapsed = perf_counter() - t0
        _expect_answers(impl, answered, loops + 1)
        return elapsed

    return body


def main() -> None:
    suite = Suite("executor", __doc__.splitlines()[0])
    for impl in spawner_impls():
        suite.add("create", impl, create(impl), unit="empty group", limit=SWITCHING)
        suite.add("spawn_one", impl, spawn_one(impl), unit="job", limit=SWITCHING)
        suite.add(
            "spawn_many",
            impl,
            _batch(impl, SPAWN_MANY, 0, False),
            inner_loops=SPAWN_MANY,
            unit="job",
            limit=SWITCHING,
        )
        suite.add(
            "spawn_batch",
            impl,
            _batch(impl, BATCH, 1, True),
            inner_loops=BATCH,
            unit="job",
            limit=SWITCHING,
        )
        suite.add(
            "spawn_recursively",
            impl,
            spawn_recursively(impl),
            inner_loops=CHAINS * DEPTH,
            unit="job",
            limit=SWITCHING,
        )
        suite.add(
            "yield_now",
            impl,
            _batch(impl, YIELD_TASKS, YIELD_STEPS, False),
            inner_loops=YIELD_TASKS * YIELD_STEPS,
            unit="yield",
            limit=SWITCHING,
        )
        suite.add(
            "channels",
            impl,
            channels_ring(impl),
            inner_loops=RING * TOKENS,
            unit="hop",
            limit=SWITCHING,
        )
        suite.add(
            "web_server",
            impl,
            web_server(impl),
            inner_loops=REQUESTS,
            unit="request",
            limit=SWITCHING,
        )
        suite.add(
            "web_server_open",
            impl,
            web_server_open(impl),
            inner_loops=REQUESTS,
            unit="request",
            limit=SWITCHING,
        )


if __name__ == "__main__":
    main()
