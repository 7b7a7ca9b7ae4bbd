# The measuring harness shared by every bench_*.py script.
#
# Each script is a pyperf program run once per backend (``--backend asyncio``,
# ``uvloop`` or ``trio``; bench/run.py drives them).  It registers one pyperf
# benchmark per case and implementation, named ``<area>.<case>.<backend>.<impl>``
# (``sync.lock_uncontended.asyncio.anyio_prims``), through
# ``runner.bench_time_func``.
#
# What one measurement is: pyperf calls ``time_func(loops)``; the harness starts
# ONE event loop for it (``asyncio.run``, a uvloop ``asyncio.Runner`` or
# ``trio.run``) and runs the case's body, an ``async def body(loops) -> float``
# that builds its objects, runs its inner loop ``loops`` times, reads the clock
# around the inner loop only and validates what it did before returning the
# elapsed time.  Event-loop start-up and teardown are never timed; each case
# states whether its own setup (creating a channel, spawning its tasks) is.
#
# Honesty rules every body keeps (docs/benchmarks.md): every implementation in
# a case does the same work through the same harness code; the helpers that
# coordinate tasks (spawning, the bare yield, "wait until that task is
# parked", cancelling) come from ``Native`` for the running backend and are the
# same for every implementation; a result that does not check out raises
# ``ValidationError``, which stops the script.
from __future__ import annotations

import asyncio
import atexit
import faulthandler
import importlib.metadata
import os
import platform
import re
import sys
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

import pyperf

_sniffio: Any
try:
    import sniffio as _sniffio
except ImportError:  # AnyIO without sniffio: it asks asyncio directly
    _sniffio = None

BACKENDS = ("asyncio", "uvloop", "trio")

#: A task that has not parked after this many yields of the poller never will.
MAX_SPINS = 10_000

#: Seconds one measurement (one event-loop run) may take before the script
#: dumps its stacks and exits: a hang fails loudly instead of stalling the run.
MEASUREMENT_TIMEOUT = 300

# pyperf has no type information: say what its clock returns.
perf_counter: Callable[[], float] = pyperf.perf_counter

Body = Callable[[int], Coroutine[Any, Any, float]]


class ValidationError(AssertionError):
    """A benchmark's result is wrong: its timing must not be reported."""


def expect(condition: bool, what: str) -> None:
    """Fail loudly when a case's result does not check out."""
    if not condition:
        raise ValidationError(what)


# --------------------------------------------------------------------------
# running one measurement on a backend


def run_on(backend: str, body: Body, loops: int) -> float:
    """Run ``body(loops)`` in one fresh event loop of ``backend``."""
    if backend == "trio":
        import trio

        return trio.run(body, loops)
    # anyio.run() names the backend in sniffio's context variable before it
    # starts the loop, and AnyIO's calls (each checkpoint of its streams,
    # each task group) then find their backend at once; without it each
    # call takes sniffio's slower path through asyncio.current_task().  Do as
    # anyio.run() does, so that AnyIO's rows are not charged that path.
    cvar = None if _sniffio is None else _sniffio.current_async_library_cvar
    token = None if cvar is None else cvar.set("asyncio")
    try:
        return _run_asyncio(body, loops, backend)
    finally:
        if cvar is not None and token is not None:
            cvar.reset(token)


def _run_asyncio(body: Body, loops: int, backend: str) -> float:
    if backend == "uvloop":
        import uvloop

        if sys.version_info >= (3, 11):
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(body(loops))
        loop = uvloop.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            return loop.run_until_complete(body(loops))
        finally:
            asyncio.set_event_loop(None)
            loop.close()
    return asyncio.run(body(loops))


# --------------------------------------------------------------------------
# backend-native coordination, identical for every implementation of a case


@types.coroutine
def _bare_yield() -> Generator[None, None, None]:
    # What asyncio.sleep(0) does without its call overhead: one schedule point.
    yield


class _AsyncioGroup:
    """Spawn native tasks; on exit wait for all of them (errors propagate)."""

    async def __aenter__(self) -> _AsyncioGroup:
        self._loop = asyncio.get_running_loop()
        self._tasks: list[asyncio.Task[Any]] = []
        return self

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._tasks.append(self._loop.create_task(fn(*args)))

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            return
        await asyncio.gather(*self._tasks)


class _TrioGroup:
    async def __aenter__(self) -> _TrioGroup:
        import trio

        self._cm = trio.open_nursery()
        self._nursery = await self._cm.__aenter__()
        self.spawn = self._nursery.start_soon
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        return await self._cm.__aexit__(exc_type, exc, tb)


def _asyncio_parked(task: Any) -> bool:
    # Blocked on a future that is not resolved yet: a resolved one means the
    # task is already scheduled to run.
    waiter = task._fut_waiter
    return waiter is not None and not waiter.done()


def _trio_parked(task: Any) -> bool:
    # Set while the task sleeps in wait_task_rescheduled, cleared by reschedule.
    return task._abort_func is not None


class Native:
    """The running backend's own tools, used by the harness around the code
    under test: the same for every implementation of a case.

    * ``yield_()``: a bare schedule point (no cancellation check).
    * ``group()``: ``async with`` block that spawns native tasks and waits for
      them (a gather on asyncio, a nursery on Trio).
    * ``current_task()`` / ``parked(task)``: whether a task is blocked waiting
      to be woken (not merely between two steps, nor woken and not yet run).
      Read from private attributes (``Task._fut_waiter`` on asyncio,
      ``Task._abort_func`` on Trio): no public API says it, and only the
      harness reads it.
    * ``cancellable()``: ``(attempt, cancel)``; ``attempt(op, *args)`` runs
      ``await op(*args)`` so that another task can cancel it with the
      backend's own mechanism (``task.cancel()`` on asyncio, a
      ``trio.CancelScope`` on Trio); returns whether it was cancelled.
    """

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.yield_: Callable[[], Awaitable[None]]
        self.current_task: Callable[[], Any]
        self.parked: Callable[[Any], bool]
        if backend == "trio":
            import trio
            import trio.lowlevel

            self.yield_ = trio.lowlevel.cancel_shielded_checkpoint
            self.current_task = trio.lowlevel.current_task
            self.parked = _trio_parked
        else:
            self.yield_ = _bare_yield
            self.current_task = asyncio.current_task
            self.parked = _asyncio_parked

    def group(self) -> Any:
        return _TrioGroup() if self.backend == "trio" else _AsyncioGroup()

    async def wait_parked(self, task: Any) -> None:
        """Yield until ``task`` is blocked waiting to be woken."""
        spins = 0
        parked, yield_ = self.parked, self.yield_
        while not parked(task):
            spins += 1
            if spins > MAX_SPINS:
                raise ValidationError(f"task {task!r} never parked")
            await yield_()

    async def wait_started(self, tasks: list[Any], n: int = 1) -> list[Any]:
        """Yield until ``n`` spawned tasks have appended themselves to ``tasks``."""
        spins = 0
        while len(tasks) < n:
            spins += 1
            if spins > MAX_SPINS:
                raise ValidationError("spawned task never started")
            await self.yield_()
        return tasks

    def cancellable(
        self,
    ) -> tuple[Callable[..., Awaitable[bool]], Callable[[], object]]:
        """``(attempt, cancel)`` for the current task.

        ``await attempt(op, *args)`` runs ``await op(*args)`` and returns ``True``
        if it was cancelled by ``cancel()`` (called from another task while
        this one is parked in ``op``), ``False`` if ``op`` completed.
        """
        if self.backend == "trio":
            import trio  # already imported by __init__; here so mypy sees its types

            scope: list[Any] = [None]

            async def attempt_trio(
                op: Callable[..., Awaitable[Any]], *args: Any
            ) -> bool:
                with trio.CancelScope() as cs:
                    scope[0] = cs
                    await op(*args)
                return cs.cancelled_caught

            def cancel_trio() -> None:
                scope[0].cancel()

            return attempt_trio, cancel_trio

        task = asyncio.current_task()
        assert task is not None
        uncancel = getattr(task, "uncancel", None)

        async def attempt_asyncio(
            op: Callable[..., Awaitable[Any]], *args: Any
        ) -> bool:
            try:
                await op(*args)
            except asyncio.CancelledError:
                if uncancel is not None:
                    uncancel()
                return True
            return False

        return attempt_asyncio, task.cancel


# --------------------------------------------------------------------------
# registering benchmarks


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def environment_metadata() -> dict[str, str]:
    """Package versions recorded beside every result."""
    meta = {
        f"pkg_{dist.replace('-', '_')}": _version(dist)
        for dist in (
            "anyio",
            "trio",
            "uvloop",
            "aiologic",
            "aiometer",
            "pyperf",
            "anyio-prims",
        )
    }
    meta["python_implementation_full"] = (
        f"{platform.python_implementation()} {platform.python_version()}"
    )
    meta["bench_mode"] = os.environ.get("ANYIO_PRIMS_BENCH_MODE", "manual")
    meta["anyio_prims_waiter"] = (
        os.environ.get("ANYIO_PRIMS_WAITER", "native") or "native"
    )
    return meta


class Impl:
    """One implementation as it appears in the tables.

    :param name: the ``<impl>`` part of benchmark names
    :param semantics: checkpoint semantics, per backend (a string or a dict)
    :param backends: where it runs
    :param missing: why it is not available (the rows are skipped), or None
    """

    def __init__(
        self,
        name: str,
        semantics: str | dict[str, str],
        backends: tuple[str, ...] = BACKENDS,
        missing: str | None = None,
    ) -> None:
        self.name = name
        self._semantics = semantics
        self.backends = backends
        self.missing = missing

    def semantics(self, backend: str) -> str:
        if isinstance(self._semantics, str):
            return self._semantics
        return self._semantics.get(backend, self._semantics.get("*", ""))

    def __repr__(self) -> str:
        return f"<Impl {self.name}>"


class Suite:
    """The pyperf runner of one script, for one backend."""

    def __init__(self, area: str, description: str) -> None:
        def add_cmdline_args(cmd: list[str], args: Any) -> None:
            cmd.extend(("--backend", args.backend))
            if args.cases:
                cmd.extend(("--cases", args.cases))
            # --once never reaches pyperf's workers: it spawns none then.

        self.area = area
        self.runner = pyperf.Runner(
            add_cmdline_args=add_cmdline_args, metadata=environment_metadata()
        )
        self.runner.argparser.description = description
        self.runner.argparser.add_argument(
            "--backend", choices=BACKENDS, required=True, help="event loop to run on"
        )
        self.runner.argparser.add_argument(
            "--cases", default="", help="only benchmarks whose name matches this regex"
        )
        self.runner.argparser.add_argument(
            "--once",
            type=int,
            default=0,
            metavar="LOOPS",
            help="run each selected body once with LOOPS loops, without pyperf "
            "(for bench/instructions.py), and print its inner loops",
        )
        args = self.runner.parse_args()
        if args.once < 0:
            self.runner.argparser.error("--once: LOOPS must be >= 1")
        self._once: int = args.once
        self.backend: str = args.backend
        self.native = Native(self.backend)
        self._cases = re.compile(args.cases) if args.cases else None
        self._talk = not args.worker
        self._skipped: set[str] = set()
        self._walls: list[tuple[float, str]] = []
        if self._talk:
            atexit.register(self._summary)

    def _summary(self) -> None:
        if not self._walls:
            return
        total = sum(wall for wall, _ in self._walls)
        slowest = ", ".join(
            f"{name.split('.', 1)[1]} {wall:.1f} s"
            for wall, name in sorted(self._walls, reverse=True)[:3]
        )
        print(
            f"{self.area} on {self.backend}: {len(self._walls)} benchmarks in "
            f"{total:.0f} s (slowest: {slowest})",
            flush=True,
        )

    def say(self, text: str) -> None:
        if self._talk:
            print(text, flush=True)

    def add(
        self,
        case: str,
        impl: Impl,
        body: Body | None,
        *,
        inner_loops: int | None = None,
        unit: str,
        limit: str | None = None,
        note: str = "",
    ) -> None:
        """Register ``body`` as benchmark ``<area>.<case>.<backend>.<impl>``.

        :param unit: what one inner loop is ("send+receive", "round trip", ...)
        :param limit: the limit case this one is read against in the report
        :param body: ``None`` when the implementation cannot express the case
            (nothing is registered; the table shows a blank)
        """
        if self.backend not in impl.backends or body is None:
            return
        name = f"{self.area}.{case}.{self.backend}.{impl.name}"
        if self._cases is not None and not self._cases.search(name):
            return
        if impl.missing is not None:
            if impl.name not in self._skipped:
                self._skipped.add(impl.name)
                self.say(
                    f"skipped {self.area}.*.{self.backend}.{impl.name}: {impl.missing}"
                )
            return
        metadata = {
            "bench_area": self.area,
            "bench_case": case,
            "bench_backend": self.backend,
            "bench_impl": impl.name,
            "bench_checkpoints": impl.semantics(self.backend),
            "bench_unit": unit,
        }
        if limit:
            metadata["bench_limit"] = limit
        if note:
            metadata["bench_note"] = note
        backend = self.backend
        if self._once:
            # What bench/instructions.py counts the instructions of, at two
            # loop counts: a warm-up run of at least 128 units of work (two
            # budgets of 64 calls), then the run of LOOPS loops.  The warm-up
            # puts the process's one-time costs in both of the tool's runs,
            # where the difference cancels them: on Trio the marking of the
            # library's code for Ctrl-C at its first checkpoint, which a
            # budgeted one-task case otherwise reaches in the longer run
            # only (``ready_send_receive`` on Trio counted 625k instructions
            # per send+receive at 20 and 40 loops, 5.9k at 640 and 1280).
            run_on(backend, body, -(-128 // (inner_loops or 1)))
            run_on(backend, body, self._once)
            print(f"once {name} loops={self._once} inner_loops={inner_loops or 1}")
            return

        def time_func(loops: int) -> float:
            # A hang (a lost wake-up) must fail the run, not stall it: dump
            # every thread's stack and exit if one measurement takes too long.
            faulthandler.dump_traceback_later(MEASUREMENT_TIMEOUT, exit=True)
            try:
                return run_on(backend, body, loops)
            finally:
                faulthandler.cancel_dump_traceback_later()

        started = time.monotonic()
        self.runner.bench_time_func(
            name, time_func, inner_loops=inner_loops, metadata=metadata
        )
        self._walls.append((time.monotonic() - started, name))
