"""A finalizer that runs while a primitive takes waiters out of its queue.

A garbage collection may run a finalizer inside any call the library makes
(3.10 allocates each call's frame; 3.12+ runs a pending collection as a
call starts), and the finalizer may use the primitive: notify, release, or
cancel a waiting task's scope.  These tests run such code at the start of
the calls the library makes between finding a waiter and waking it (the
waiter's ``_gone()``, ``grant()`` and ``try_grant()``), and check that no
waiter is woken twice or lost and no permit is lost or made up.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import pytest

from anyio_prims import BatchSemaphore, Condition, Event, RWLock, mpmc, mpsc, spmc
from anyio_prims._core import Slot, WaitQueue, _waiter
from anyio_prims.executor import Executor

from ._sync_support import settle, start_in_order

pytestmark = pytest.mark.anyio

WAITER_CLASSES = (
    _waiter.Waiter,
    _waiter.AsyncioWaiter,
    _waiter.TrioWaiter,
    _waiter.GenericWaiter,
)


def run_first(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Callable[[], Any]]:
    """Run the armed one-shot actions as the waiters' method ``name``
    starts, for every kind of waiter; return the list to arm them in."""
    armed: list[Callable[[], Any]] = []
    for cls in WAITER_CLASSES:
        original = cls.__dict__.get(name)
        if original is None:
            continue

        def wrapper(self: Any, *args: Any, _original: Any = original) -> Any:
            if armed:
                armed.pop(0)()
            return _original(self, *args)

        monkeypatch.setattr(cls, name, wrapper)
        if cls is _waiter.AsyncioWaiter and name == "wake":
            monkeypatch.setattr(cls, "_wake", wrapper)
    return armed


async def wait_on(cond: Condition, woke: list[int], i: int) -> None:
    async with cond:
        await cond.wait()
        woke.append(i)


@pytest.mark.parametrize("outer", ["notify", "notify_all"])
async def test_a_notify_run_as_a_notify_looks_at_the_queue_wakes_each_waiter_once(
    outer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An inner notify(1) takes the head while the outer call tests it.  An
    # outer notify(1) must take the next waiter, not the one after it, and
    # not wake the head a second time; an outer notify_all(), which reads
    # the whole queue, must wake each of the others once (the queue
    # changed under its loop: RuntimeError).
    cond = Condition()
    woke: list[int] = []
    armed = run_first(monkeypatch, "_gone")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            waits = [partial(wait_on, cond, woke, i) for i in range(3)]
            await start_in_order(tg, *waits)
            async with cond:
                armed.append(lambda: cond.notify(1))
                if outer == "notify":
                    cond.notify(1)
                else:
                    cond.notify_all()
                assert not armed, "the inner notify never ran"
            await settle()
            if outer == "notify":
                assert sorted(woke) == [0, 1]
                assert cond.statistics().tasks_waiting == 1
                async with cond:
                    cond.notify(1)
            else:
                assert cond.statistics().tasks_waiting == 0
    assert sorted(woke) == [0, 1, 2]


async def test_a_release_run_as_an_unfair_release_tests_a_waiter_grants_each_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The inner release grants both waiters while the outer one is looking
    # at the first: the outer one must grant neither again (it counted the
    # first one's permit out twice, and left the second waiting).
    sem = BatchSemaphore(0, fair=False)
    got: list[int] = []

    async def acquire(i: int) -> None:
        await sem.acquire()
        got.append(i)

    armed = run_first(monkeypatch, "_gone")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, *[partial(acquire, i) for i in range(2)])
            armed.append(lambda: sem.release(1))
            sem.release(1)
            assert not armed, "the inner release never ran"
    assert sorted(got) == [0, 1]
    assert sem.available_permits == 0
    assert sem.statistics().tasks_waiting == 0


async def test_a_waiter_cancelled_as_notify_wakes_it_takes_the_notification_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The head's scope is cancelled once notify() has taken it and before
    # it is woken.  The notification is not lost and not spent twice: on
    # Trio the head still wakes notified (Trio refuses a cancellation once
    # the waiter is taken; it comes at the next checkpoint), elsewhere the
    # head is cancelled and passes it on to the next waiter.  (On Trio the
    # wake-up failed; on asyncio notify() raised InvalidStateError.)
    cond = Condition()
    woke: list[int] = []
    scopes = [anyio.CancelScope() for _ in range(2)]

    async def waiter(i: int) -> None:
        with scopes[i]:
            await wait_on(cond, woke, i)
            await anyio.lowlevel.checkpoint()

    armed = run_first(monkeypatch, "grant")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, *[partial(waiter, i) for i in range(2)])
            async with cond:
                armed.append(scopes[0].cancel)
                cond.notify(1)
                assert not armed, "the cancellation never ran"
            await settle()
            if woke == [0]:  # Trio's own waiter
                assert cond.statistics().tasks_waiting == 1
                async with cond:
                    cond.notify(1)
            else:
                assert woke == [1]
                assert cond.statistics().tasks_waiting == 0
    assert scopes[0].cancel_called
    assert sorted(woke) in ([0, 1], [1])


@pytest.mark.parametrize("fair", [True, False])
async def test_a_head_cancelled_as_a_release_grants_it_holds_the_permit_or_nothing(
    fair: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The head's scope is cancelled once release() has taken it and before
    # the grant wakes it: either its acquire returns holding the permit
    # (Trio's own waiter), or it raises and the permit goes to the next
    # waiter.  None is lost or made up.
    sem = BatchSemaphore(0, fair=fair)
    holding: list[int] = []
    scopes = [anyio.CancelScope() for _ in range(2)]

    async def acquire(i: int) -> None:
        with scopes[i]:
            await sem.acquire()
            holding.append(i)
            await anyio.sleep_forever()

    name = "try_grant" if fair else "grant"
    armed = run_first(monkeypatch, name)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, *[partial(acquire, i) for i in range(2)])
            armed.append(scopes[0].cancel)
            sem.release(1)
            assert not armed, "the cancellation never ran"
            await settle()
            # Whoever holds the permit holds the only one.
            assert len(holding) == 1
            assert sem.available_permits == 0
            assert sem.statistics().tasks_waiting == 1 - holding.count(1)
            scopes[1].cancel()
    assert sem.available_permits == 0


async def test_a_waiter_cancelled_as_event_set_wakes_another_leaves_set_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # set() takes both waiters, then wakes them; the second one's scope is
    # cancelled as the first is woken.  set() must not raise (it raised
    # InvalidStateError on asyncio, and Trio's reschedule failed), and
    # both tasks end: woken, or woken and then cancelled.
    event = Event()
    scopes = [anyio.CancelScope() for _ in range(2)]
    ended: list[int] = []

    async def wait(i: int) -> None:
        with scopes[i]:
            await event.wait()
        ended.append(i)

    armed = run_first(monkeypatch, "grant")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, *[partial(wait, i) for i in range(2)])
            armed.append(scopes[1].cancel)
            event.set()
            assert not armed, "the cancellation never ran"
    assert sorted(ended) == [0, 1]
    assert event.statistics().tasks_waiting == 0


async def test_a_waiter_cancelled_as_close_fails_another_raises_one_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # close() takes both acquires, then fails them; the second one's scope
    # is cancelled as the first is failed.  close() must not raise, and the
    # second acquire raises either the close's error (Trio refuses the
    # cancellation once the waiter is taken) or its cancellation.
    sem = BatchSemaphore(0)
    scopes = [anyio.CancelScope() for _ in range(2)]
    outcome: dict[int, str] = {}

    async def acquire(i: int) -> None:
        with scopes[i]:
            try:
                await sem.acquire()
            except anyio.ClosedResourceError:
                outcome[i] = "closed"
                return
            outcome[i] = "acquired"
        if scopes[i].cancelled_caught:
            outcome[i] = "cancelled"

    armed = run_first(monkeypatch, "fail")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, *[partial(acquire, i) for i in range(2)])
            armed.append(scopes[1].cancel)
            sem.close()
            assert not armed, "the cancellation never ran"
    assert outcome[0] == "closed"
    assert outcome[1] in ("closed", "cancelled")
    assert sem.available_permits == 0


async def test_a_reader_cancelled_as_release_write_looks_at_it_is_passed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The queued reader's scope is cancelled as the release tests it (on
    # Trio the abort marks it dead there and then): the release must look
    # again and pass it over (it read the dead waiter's payload: TypeError).
    lock = RWLock()
    scope = anyio.CancelScope()
    outcome: list[str] = []

    async def read() -> None:
        with scope:
            async with lock.read():
                outcome.append("acquired")
        if scope.cancelled_caught:
            outcome.append("cancelled")

    armed = run_first(monkeypatch, "_gone")
    with anyio.fail_after(5):
        await lock.acquire_write()
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, read)
            armed.append(scope.cancel)
            lock.release_write()
            assert not armed, "the cancellation never ran"
    assert outcome == ["cancelled"]
    stats = lock.statistics()
    assert (stats.writer, stats.readers, stats.tasks_waiting_read) == (None, 0, 0)


async def test_a_send_cancelled_as_its_sender_closes_ends_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # close() takes the sends its endpoint has parked; the parked send's
    # scope is cancelled as close() tests it (on Trio the abort marks it
    # dead and drops its item there and then): close() must pass it over
    # (it read the dead waiter's payload: TypeError).
    tx, rx = mpmc.channel[int](0)
    other = tx.clone()
    scope = anyio.CancelScope()
    outcome: list[str] = []

    async def send() -> None:
        with scope:
            try:
                await tx.send(1)
            except anyio.ClosedResourceError:
                outcome.append("closed")
        if scope.cancelled_caught:
            outcome.append("cancelled")

    armed = run_first(monkeypatch, "_gone")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, send)
            armed.append(scope.cancel)
            tx.close()
            assert not armed, "the cancellation never ran"
    assert outcome in (["cancelled"], ["closed"])
    assert rx.statistics().tasks_waiting_send == 0
    other.close()
    rx.close()


def run_first_in(
    monkeypatch: pytest.MonkeyPatch, name: str, structure: Callable[[], object]
) -> list[Callable[[], Any]]:
    """Run the armed one-shot actions as the method ``name`` of the wait
    structure ``structure()`` starts; return the list to arm them in."""
    armed: list[Callable[[], Any]] = []
    for cls in (WaitQueue, Slot):
        real = getattr(cls, name)

        def call(self: Any, *args: Any, _real: Any = real) -> Any:
            if armed and self is structure():
                armed.pop()()
            return _real(self, *args)

        monkeypatch.setattr(cls, name, call)
    return armed


async def test_an_item_taken_as_a_send_takes_back_its_waiter_is_received_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A receive run inside the send's enqueue() makes room, so the send
    # takes its waiter back; a second one, run as it does so, takes the
    # item from that waiter.  The send must then wait for that taking, not
    # send its item again (the item was received twice).
    tx, rx = mpmc.channel[str](1)
    got: list[str] = []

    def receive() -> None:
        got.append(rx.receive_nowait())

    on_enqueue = run_first_in(monkeypatch, "enqueue", lambda: tx._state.send_waiters)
    on_withdraw = run_first_in(monkeypatch, "withdraw", lambda: tx._state.send_waiters)
    with anyio.fail_after(5):
        await tx.send("a")
        async with anyio.create_task_group() as tg:
            # A send that parks once: the channel's queue of senders made.
            await start_in_order(tg, partial(tx.send, "pre"))
            got.append(await rx.receive())
        on_enqueue.append(receive)
        on_withdraw.append(receive)
        await tx.send("b")
        assert not on_enqueue, "the receive in enqueue() never ran"
        assert not on_withdraw, "the receive in withdraw() never ran"
        await settle()
        with pytest.raises(anyio.WouldBlock):
            rx.receive_nowait()
    assert got == ["a", "pre", "b"]
    assert rx.statistics().tasks_waiting_send == 0
    tx.close()
    rx.close()


@pytest.mark.parametrize("flavour", [mpsc, spmc, mpmc], ids=["mpsc", "spmc", "mpmc"])
async def test_a_stream_ended_as_a_receive_takes_back_its_waiter_gives_it_the_item(
    flavour: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A send run inside the receive's enqueue() buffers an item, so the
    # receive takes its waiter back; the last sender's close, run as it
    # does so, must not end the stream for it: the item comes first (it
    # raised EndOfStream, and a later receive got the item).
    tx, rx = flavour.channel(4)
    got: list[str] = []
    on_enqueue = run_first_in(monkeypatch, "enqueue", lambda: rx._state.recv_waiters)
    on_withdraw = run_first_in(monkeypatch, "withdraw", lambda: rx._state.recv_waiters)

    async def receive() -> None:
        try:
            got.append(await rx.receive())
        except anyio.EndOfStream:
            got.append("end")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            # A receive that parks once: the channel's wait structure made.
            await start_in_order(tg, receive)
            tx.send_nowait("pre")
        on_enqueue.append(partial(tx.send_nowait, "x"))
        on_withdraw.append(tx.close)
        await receive()
        assert not on_enqueue, "the send in enqueue() never ran"
        assert not on_withdraw, "the close in withdraw() never ran"
        await receive()
    assert got == ["pre", "x", "end"]
    rx.close()


async def test_a_waiter_taken_where_a_compaction_gives_up_is_parked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An unfair release takes a waiter and then compacts the queue; a
    # cancellation run in that compaction changes the queue, so it gives
    # up.  The taken waiter must still leave the deque: its task recycles
    # it and parks it again, and it must not then be there twice.
    sem = BatchSemaphore(0, fair=False)
    scopes = {name: anyio.CancelScope() for name in "ac"}
    again = anyio.Event()
    armed: list[Callable[[], Any]] = []
    real_deque = collections.deque

    def filtering_deque(*args: Any) -> Any:
        if armed and args:  # the compaction's deque of what it keeps
            armed.pop()()
        return real_deque(*args)

    async def first() -> None:
        with scopes["a"]:
            await sem.acquire(1)
            await again.wait()
            await sem.acquire(3)  # the recycled waiter, parked again

    async def large(name: str) -> None:
        with scopes.get(name, anyio.CancelScope()):
            await sem.acquire(5)

    monkeypatch.setattr(_waiter, "deque", filtering_deque)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await start_in_order(tg, first, partial(large, "b"), partial(large, "c"))
            queue = sem._waiters
            assert isinstance(queue, WaitQueue)
            armed.append(scopes["c"].cancel)
            sem.release(1)
            assert not armed, "the cancellation never ran"
            again.set()
            await settle()
            parked = list(queue.parked)
            assert all(parked.count(w) == 1 for w in parked)
            assert sem.statistics().tasks_waiting == 2
            scopes["a"].cancel()
            await settle()
            assert sem.statistics().tasks_waiting == 1
            sem.release(5)
    assert sem.available_permits == 0


async def _current_task_id() -> object:
    return anyio.get_current_task().id


async def _after(event: anyio.Event) -> object:
    await event.wait()
    return anyio.get_current_task().id


def _before_the_sweepers_take(
    monkeypatch: pytest.MonkeyPatch,
) -> list[Callable[[], Any]]:
    """A list of calls, each run once as WaitQueue.take() (what the sweeper
    calls to send a worker away) is next called."""
    armed: list[Callable[[], Any]] = []
    real = WaitQueue.take

    def hooked(self: Any, *args: Any) -> Any:
        if armed:
            armed.pop()()
        return real(self, *args)

    monkeypatch.setattr(WaitQueue, "take", hooked)
    return armed


async def test_a_job_spawned_as_the_sweeper_retires_the_only_idle_worker_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sweeper finds the one idle worker due to retire, and a spawn run
    # as it goes to take that worker hands it a job instead.  The sweeper
    # must then look again, and find nobody to send away: the worker runs
    # the job and stays.
    armed = _before_the_sweepers_take(monkeypatch)
    with anyio.fail_after(5):
        async with Executor(max_workers=1, idle_timeout=1000) as executor:
            executor._tick = 0
            worker = await executor.spawn(_current_task_id)
            await settle()  # idle since tick 0
            executor._tick = 10
            spawned: list[Any] = []
            armed.append(lambda: spawned.append(executor.spawn(_current_task_id)))
            executor._retire_idle()  # tick 11: due, but handed a job first
            assert not armed, "the spawn never ran"
            assert executor.statistics().jobs_queued == 0  # handed, not queued
            assert await spawned[0] == worker
            await settle()
            assert [w.payload for w in executor._idle] == [11]


async def test_a_job_spawned_as_the_sweeper_retires_workers_goes_to_the_newest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two idle workers, the older due to retire: a spawn run as the sweeper
    # goes to take it hands the job to the newer one (the one that parked
    # last), and the sweeper sends the older away.
    armed = _before_the_sweepers_take(monkeypatch)
    held = anyio.Event()
    with anyio.fail_after(5):
        async with Executor(max_workers=2, idle_timeout=1000) as executor:
            executor._tick = 0
            newer = executor.spawn(_after, held)  # its worker runs it
            older = executor.spawn(_current_task_id)  # a second worker's
            await settle()  # one worker idle since tick 0
            executor._tick = 10
            held.set()
            await settle()  # the other idle since tick 10
            assert [w.payload for w in executor._idle] == [0, 10]
            spawned: list[Any] = []
            armed.append(lambda: spawned.append(executor.spawn(_current_task_id)))
            executor._retire_idle()  # tick 11: idle since before 10 goes
            assert not armed, "the spawn never ran"
            assert await spawned[0] == await newer
            await settle()
            assert executor.statistics().workers == 1
            assert await older != await newer
