"""Static typing checks: run by mypy (``nox -s typecheck``) and pyright
(``nox -s pyright``), and also executed by pytest, where ``assert_type``
does nothing at run time.  A wrong item or result type makes the type
checkers fail, not the tests."""

from __future__ import annotations

import sys
from collections.abc import Callable

import anyio
import pytest

from anyio_prims import Executor, JoinHandle, MapIterator, mpmc, mpsc, oneshot, spmc
from anyio_prims.streams import (
    MemoryObjectReceiveStream,
    MemoryObjectSendStream,
    create_memory_object_stream,
)

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # pragma: no cover
    from typing_extensions import assert_type

pytestmark = pytest.mark.anyio


async def double(x: int) -> int:
    return 2 * x


async def greet(name: str, times: int) -> str:
    return name * times


async def test_mpsc_endpoints_carry_their_item_type() -> None:
    tx, rx = mpsc.channel[int](4)
    assert_type(tx, mpsc.Sender[int])
    assert_type(rx, mpsc.Receiver[int])
    clone = tx.clone()
    assert_type(clone, mpsc.Sender[int])
    await tx.send(1)
    clone.send_nowait(2)
    assert_type(await rx.receive(), int)
    assert_type(await rx.receive_many(8), list[int])
    assert_type(rx.receive_nowait, Callable[[], int])
    for endpoint in (tx, clone, rx):
        endpoint.close()


async def test_spmc_mpmc_and_oneshot_endpoints_carry_their_item_type() -> None:
    stx, srx = spmc.channel[str](1)
    assert_type(stx, spmc.Sender[str])
    assert_type(srx.clone(), spmc.Receiver[str])
    mtx, mrx = mpmc.channel[bytes](1)
    assert_type(mtx.clone(), mpmc.Sender[bytes])
    assert_type(mrx.clone(), mpmc.Receiver[bytes])
    otx, orx = oneshot.channel[float]()
    assert_type(otx, oneshot.Sender[float])
    otx.send(1.5)
    assert_type(await orx, float)
    for endpoint in (stx, srx, mtx, mrx, orx):
        endpoint.close()


async def test_async_iteration_yields_the_item_type() -> None:
    tx, rx = mpsc.channel[int](1)
    tx.close()
    async for item in rx:
        assert_type(item, int)
    rx.close()


async def test_memory_object_stream_drop_in_carries_its_item_type() -> None:
    send, receive = create_memory_object_stream[int](1)
    assert_type(send, MemoryObjectSendStream[int])
    assert_type(receive, MemoryObjectReceiveStream[int])
    send.close()
    receive.close()


async def test_join_handle_carries_the_job_result_type() -> None:
    async with Executor() as ex:
        handle = ex.spawn(double, 21)
        assert_type(handle, JoinHandle[int])
        assert_type(await handle, int)
        assert_type(handle.result(), int)
        other = ex.spawn(greet, "ab", 2)
        assert_type(other, JoinHandle[str])
        submitted = await ex.submit(greet, "x", 3)
        assert_type(submitted, JoinHandle[str])
        many = ex.spawn_many(double, [(1,), (2,)])
        assert_type(many, list[JoinHandle[int]])
    assert handle.result() == 42
    assert other.result() == "abab"


async def test_executor_map_yields_the_job_result_type() -> None:
    async with Executor(max_workers=2) as ex:
        results = ex.map(double, range(3))
        assert_type(results, MapIterator[int])
        collected: list[int] = []
        async with results:
            async for value in results:
                assert_type(value, int)
                collected.append(value)
    assert collected == [0, 2, 4]


async def test_receive_stream_checks_under_anyio_abc() -> None:
    tx, rx = mpsc.channel[int](0)
    stream: anyio.abc.ObjectReceiveStream[int] = rx
    sink: anyio.abc.ObjectSendStream[int] = tx
    await sink.aclose()
    with pytest.raises(anyio.EndOfStream):
        await stream.receive()
    await stream.aclose()
