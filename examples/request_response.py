"""Request/response between tasks: an mpsc inbox and a oneshot reply.

A server task owns some state and serves requests from an mpsc channel.
Each request carries the sending half of a fresh oneshot channel; the
client awaits the receiving half.  ``oneshot.Sender.send`` is synchronous
and never blocks, so the server never waits on a slow client, and a
request dropped without a reply (here: an unknown key) ends the client's
wait with ``anyio.EndOfStream`` instead of hanging forever.

Run it with ``python examples/request_response.py`` (asyncio) or
``python examples/request_response.py trio``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import anyio

from anyio_prims import mpsc, oneshot


@dataclass
class Request:
    key: str
    reply: oneshot.Sender[int]


async def server(inbox: mpsc.Receiver[Request]) -> None:
    counters: dict[str, int] = {"hits": 0, "misses": 0}
    async with inbox:
        async for request in inbox:
            with request.reply:  # closing without sending: EndOfStream
                if request.key in counters:
                    counters[request.key] += 1
                    request.reply.send(counters[request.key])


async def call(tx: mpsc.Sender[Request], key: str) -> int | None:
    """Ask the server to count ``key``; ``None`` if it did not answer."""
    reply_tx, reply_rx = oneshot.channel[int]()
    await tx.send(Request(key, reply_tx))
    try:
        return await reply_rx
    except anyio.EndOfStream:
        return None


async def main() -> list[int | None]:
    """Make a few calls from concurrent clients; return the answers."""
    tx, rx = mpsc.channel[Request](8)
    answers: list[int | None] = []

    async def client(tx: mpsc.Sender[Request], keys: list[str]) -> None:
        async with tx:
            for key in keys:
                answers.append(await call(tx, key))

    async with anyio.create_task_group() as tg:
        tg.start_soon(server, rx)
        async with tx, anyio.create_task_group() as clients:
            clients.start_soon(client, tx.clone(), ["hits", "hits", "nope"])
            clients.start_soon(client, tx.clone(), ["misses", "hits"])
        # every sender is closed now: the server's loop ends

    assert sorted(a for a in answers if a is not None) == [1, 1, 2, 3]
    assert answers.count(None) == 1
    print(f"answers: {answers}")
    return answers


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
