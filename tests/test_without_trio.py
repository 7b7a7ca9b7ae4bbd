"""Trio is an optional extra: on asyncio the library neither needs nor imports it.

The suite's own process has Trio installed and imported (the anyio plugin
runs every test on it too), so these run a program in a process of its
own in which ``import trio`` fails as it does where Trio is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ._anyio_version import ANYIO_RELEASE

PROGRAM = """
import importlib.abc, sys

class NoTrio(importlib.abc.MetaPathFinder):
    # As where Trio is not installed: its import fails, and "trio" never
    # enters sys.modules.
    def find_spec(self, name, path=None, target=None):
        if name == "trio" or name.startswith("trio."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoTrio())

import anyio
from anyio_prims import (
    BatchSemaphore, Event, Executor, Lock, RWLock, mpmc, mpsc, oneshot,
)
from anyio_prims.streams import create_memory_object_stream

async def ping_pong(channel):
    to_peer, from_me = channel(1)
    to_me, from_peer = channel(1)

    async def peer():
        async for item in from_me:
            await to_me.send(item + 1)
        to_me.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(peer)
        got = []
        for i in range(100):
            await to_peer.send(i)
            got.append(await from_peer.receive())
        to_peer.close()
    assert got == list(range(1, 101)), got

async def contend(hold, rounds=50):
    held = []

    async def worker(n):
        for _ in range(rounds):
            async with hold():
                held.append(n)
                await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        for n in range(3):
            tg.start_soon(worker, n)
    assert len(held) == 3 * rounds

async def main():
    await ping_pong(mpsc.channel)
    await ping_pong(mpmc.channel)
    await ping_pong(create_memory_object_stream)
    lock, semaphore, rwlock = Lock(), BatchSemaphore(1), RWLock()
    await contend(lambda: lock)
    await contend(lambda: semaphore)
    await contend(rwlock.write)
    await contend(rwlock.read)
    event = Event()
    sender, receiver = oneshot.channel()

    async def setter():
        sender.send("item")
        event.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(setter)
        await event.wait()
        assert await receiver.receive() == "item"

    async def double(x):
        await anyio.sleep(0)
        return 2 * x

    async with Executor(2, max_per_second=10_000.0) as ex:
        handles = [ex.spawn(double, i) for i in range(20)]
        assert [await h for h in handles] == [2 * i for i in range(20)]
        assert [r async for r in ex.map(double, range(20))] == [
            2 * i for i in range(20)
        ]
        unordered = [r async for r in ex.map(double, range(20), ordered=False)]
        assert sorted(unordered) == [2 * i for i in range(20)]

# Outside any event loop, a call that needs the current task raises what
# AnyIO's raises: sniffio's AsyncLibraryNotFoundError before AnyIO 4.12,
# its NoEventLoopError from 4.12.1 (both RuntimeErrors).  AnyIO 4.12.0's
# is a private class and no RuntimeError; ours is NoEventLoopError there.
import anyio._core._eventloop
private = getattr(anyio._core._eventloop, "NoCurrentAsyncBackend", RuntimeError)
for namespace in (anyio, sys.modules["anyio_prims"]):
    for call in (
        lambda: namespace.Lock().acquire_nowait(),
        lambda: namespace.Condition().notify(),
    ):
        try:
            call()
        except (RuntimeError, private) as exc:
            print(type(exc).__name__)

options = {"use_uvloop": sys.argv[2] == "uvloop"}
anyio.run(main, backend=sys.argv[1], backend_options=options)
assert "trio" not in sys.modules, [m for m in sys.modules if m.startswith("trio")]
print("done")
"""


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_library_runs_on_asyncio_where_trio_cannot_be_imported(loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "asyncio", loop],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    errors = done.stdout.splitlines()[:-1]
    assert len(errors) == 4  # AnyIO's two, then ours
    if ANYIO_RELEASE == "4.12.0":
        # 4.12.0 alone raises a private class there, no RuntimeError; the
        # library raises AnyIO's public error, as 4.12.1 and later do.
        assert errors == ["NoCurrentAsyncBackend"] * 2 + ["NoEventLoopError"] * 2
    else:
        assert errors[:2] == errors[2:]
        assert set(errors) <= {"AsyncLibraryNotFoundError", "NoEventLoopError"}
    assert done.stdout.splitlines()[-1] == "done"
