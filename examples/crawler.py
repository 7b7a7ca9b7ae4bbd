"""A bounded, rate-limited, crawler-style fan-out on the Executor.

Each job "fetches" one page of a small in-memory site and spawns a job for
every link it has not seen yet.  ``max_workers=4`` bounds how many fetches
run at once and ``max_per_second`` spaces fetch starts evenly (GCRA, as
aiometer does), whatever the backend.  Jobs do not await the jobs they
spawn (with a bound on workers that could deadlock, see docs/executor.md):
the executor's block collects them all, and raises any error no one
retrieved.

Run it with ``python examples/crawler.py`` (asyncio) or
``python examples/crawler.py trio``.
"""

from __future__ import annotations

import sys

import anyio

from anyio_prims import Executor

# page -> links on that page: a small site with cycles
SITE: dict[str, list[str]] = {
    "/": ["/docs", "/blog", "/about"],
    "/docs": ["/docs/sync", "/docs/channels", "/docs/executor", "/"],
    "/docs/sync": ["/docs", "/docs/channels"],
    "/docs/channels": ["/docs", "/docs/executor"],
    "/docs/executor": ["/docs", "/blog/why-fast"],
    "/blog": ["/blog/why-fast", "/blog/release", "/"],
    "/blog/why-fast": ["/blog", "/docs/executor"],
    "/blog/release": ["/blog", "/about"],
    "/about": ["/"],
}
MAX_WORKERS = 4


async def fetch(url: str) -> list[str]:
    """Stands for an HTTP request: waits a little, returns the page's links."""
    await anyio.sleep(0.02)
    return SITE[url]


async def main(max_per_second: float = 200.0) -> dict[str, list[str]]:
    """Crawl ``SITE`` from ``/``; return every page with its links."""
    pages: dict[str, list[str]] = {}
    seen = {"/"}
    running = 0
    peak = 0

    async def crawl(url: str) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            links = await fetch(url)
        finally:
            running -= 1
        pages[url] = links
        for link in links:
            if link not in seen:
                seen.add(link)
                ex.spawn(crawl, link)  # fan out; the block collects it

    async with Executor(max_workers=MAX_WORKERS, max_per_second=max_per_second) as ex:
        ex.spawn(crawl, "/")
    # Leaving the block waited for every job, including those spawned by jobs.

    assert set(pages) == set(SITE)
    assert peak <= MAX_WORKERS
    print(f"crawled {len(pages)} pages, at most {peak} fetches at once")
    return pages


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
