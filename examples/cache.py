"""A read-mostly cache behind an RWLock.

Many readers look entries up at the same time (they share the read lock);
a refresher occasionally replaces the whole table under the write lock, so
no reader ever sees a half-updated table.  The lock is task-fair: a waiting
writer holds back readers that arrive after it, so a steady stream of
readers cannot starve the refresh, and readers queued behind the writer are
let in together once it is done.

Run it with ``python examples/cache.py`` (asyncio) or
``python examples/cache.py trio``.
"""

from __future__ import annotations

import sys

import anyio
import anyio.lowlevel

from anyio_prims import RWLock


class Cache:
    """A key-value table: many concurrent readers, one writer at a time."""

    def __init__(self, table: dict[str, int]) -> None:
        self._lock = RWLock()
        self._table = dict(table)
        self.version = 0

    async def get(self, key: str) -> tuple[int, int]:
        """The value of ``key`` and the version of the table it came from."""
        async with self._lock.read():
            await anyio.lowlevel.checkpoint()  # readers overlap here
            return self._table[key], self.version

    async def replace(self, table: dict[str, int]) -> None:
        """Swap in a new table; waits for the current readers to leave."""
        async with self._lock.write():
            self._table = {}
            await anyio.lowlevel.checkpoint()  # a reader here would see an empty table
            self._table = dict(table)
            self.version += 1

    @property
    def readers(self) -> int:
        return self._lock.statistics().readers


async def main() -> list[tuple[int, int]]:
    """Run readers and two refreshes concurrently; return what was read."""
    cache = Cache({"a": 1, "b": 2})
    seen: list[tuple[int, int]] = []
    peak_readers = 0

    async def reader(key: str) -> None:
        nonlocal peak_readers
        for _ in range(20):
            value, version = await cache.get(key)
            peak_readers = max(peak_readers, cache.readers)
            seen.append((version, value))

    async def refresher() -> None:
        for version in (1, 2):
            await anyio.lowlevel.checkpoint()
            await cache.replace({"a": 10 * version + 1, "b": 10 * version + 2})

    async with anyio.create_task_group() as tg:
        for key in ("a", "b", "a", "b"):
            tg.start_soon(reader, key)
        tg.start_soon(refresher)

    # Every read saw a complete table: the value matches its version.
    for version, value in seen:
        assert value in (10 * version + 1, 10 * version + 2), (version, value)
    assert cache.version == 2
    print(f"{len(seen)} reads, up to {peak_readers} readers at once")
    return seen


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
