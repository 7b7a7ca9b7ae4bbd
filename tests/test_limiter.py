"""anyio_prims CapacityLimiter: the drop-in for anyio.CapacityLimiter."""

from __future__ import annotations

import asyncio
import decimal
import math
import numbers
from functools import partial

import anyio
import anyio.lowlevel
import pytest

from anyio_prims.sync._limiter import CapacityLimiter

from ._sync_support import (
    CANCEL_SOURCES,
    assert_schedule_point,
    cancel_while_blocked,
    cancelled_acquire_beside_a_release,
    settle,
    skip_if_unsupported,
    start_in_order,
    task_id,
)
from ._waiter_count import WAITER_STATS

pytestmark = pytest.mark.anyio

ALREADY_HOLDING = (
    "this borrower is already holding one of this CapacityLimiter's tokens"
)
NOT_HOLDING = "this borrower isn't holding any of this CapacityLimiter's tokens"


@pytest.fixture
def asyncio_only(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio's own cancellation")


def borrower_ids(limiter: CapacityLimiter) -> list[int]:
    return sorted(id(b) for b in limiter.statistics().borrowers)


def test_created_outside_an_event_loop() -> None:
    limiter = CapacityLimiter(2)
    assert limiter.total_tokens == 2
    assert limiter.available_tokens == 2
    assert limiter.borrowed_tokens == 0
    assert limiter.statistics() == anyio.CapacityLimiterStatistics(0, 2, (), 0)


def test_total_tokens_may_be_infinite() -> None:
    limiter = CapacityLimiter(math.inf)
    assert limiter.total_tokens == math.inf
    assert limiter.available_tokens == math.inf


@pytest.mark.parametrize("bad", [1.5, "2", None])
def test_total_tokens_of_the_wrong_type_raise_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="total_tokens"):
        CapacityLimiter(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, -math.inf])
def test_negative_total_tokens_raise_value_error(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^total_tokens must be >= 0$"):
        CapacityLimiter(bad)


class OtherInfinity:
    """A real infinity that is not a float, as NumPy's float32 is not."""

    def __float__(self) -> float:
        return math.inf

    def __gt__(self, other: object) -> bool:
        return True

    def __ge__(self, other: object) -> bool:
        return True

    def __lt__(self, other: object) -> bool:
        return False

    def __le__(self, other: object) -> bool:
        return isinstance(other, OtherInfinity)

    def __sub__(self, other: int) -> float:
        return math.inf

    def __eq__(self, other: object) -> bool:
        return other == math.inf or isinstance(other, OtherInfinity)

    __hash__ = object.__hash__


numbers.Real.register(OtherInfinity)


async def test_total_tokens_takes_a_real_infinity_that_is_not_a_float() -> None:
    # AnyIO's limiter takes what math.isinf() takes.
    infinity = OtherInfinity()
    limiter = CapacityLimiter(infinity)  # type: ignore[arg-type]
    assert limiter.total_tokens is infinity  # type: ignore[comparison-overlap]
    await limiter.acquire()
    limiter.acquire_on_behalf_of_nowait("other")
    assert limiter.available_tokens == math.inf
    with pytest.raises(TypeError, match=r"^total_tokens must be an int or math.inf$"):
        limiter.total_tokens = decimal.Decimal("inf")  # type: ignore[assignment]
    limiter.release()


def test_setting_bad_total_tokens_keeps_the_old_total() -> None:
    limiter = CapacityLimiter(2)
    with pytest.raises(TypeError, match=r"^total_tokens must be an int or math.inf$"):
        limiter.total_tokens = 2.5
    with pytest.raises(ValueError, match="total_tokens"):
        limiter.total_tokens = -1
    assert limiter.total_tokens == 2


async def test_acquire_borrows_for_the_current_task() -> None:
    limiter = CapacityLimiter(2)
    await limiter.acquire()
    assert limiter.borrowed_tokens == 1
    assert limiter.available_tokens == 1
    assert borrower_ids(limiter) == [task_id()]
    limiter.release()
    assert limiter.borrowed_tokens == 0


async def test_async_with_borrows_for_the_block() -> None:
    limiter = CapacityLimiter(1)
    async with limiter as entered:
        assert entered is None
        assert borrower_ids(limiter) == [task_id()]
    assert limiter.borrowed_tokens == 0


async def test_uncontended_acquire_creates_no_waiter() -> None:
    limiter = CapacityLimiter(1)
    created = WAITER_STATS.created
    for _ in range(10):
        async with limiter:
            pass
    assert WAITER_STATS.created == created


async def test_borrowers_are_the_borrower_objects() -> None:
    limiter = CapacityLimiter(3)
    borrower = object()
    await limiter.acquire_on_behalf_of(borrower)
    limiter.acquire_on_behalf_of_nowait("job-2")
    borrowers = limiter.statistics().borrowers
    assert borrower in borrowers
    assert "job-2" in borrowers
    limiter.release_on_behalf_of(borrower)
    limiter.release_on_behalf_of("job-2")
    assert limiter.statistics().borrowers == ()


async def test_acquire_twice_by_one_task_raises() -> None:
    limiter = CapacityLimiter(2)
    async with limiter:
        with pytest.raises(RuntimeError, match=ALREADY_HOLDING):
            await limiter.acquire()
        with pytest.raises(RuntimeError, match=ALREADY_HOLDING):
            limiter.acquire_nowait()
        assert limiter.borrowed_tokens == 1


async def test_acquire_twice_on_behalf_of_one_borrower_raises() -> None:
    limiter = CapacityLimiter(2)
    await limiter.acquire_on_behalf_of("b")
    with pytest.raises(RuntimeError, match=ALREADY_HOLDING):
        await limiter.acquire_on_behalf_of("b")
    with pytest.raises(RuntimeError, match=ALREADY_HOLDING):
        limiter.acquire_on_behalf_of_nowait("b")
    assert limiter.borrowed_tokens == 1


async def test_double_borrow_raises_even_when_no_token_is_free() -> None:
    limiter = CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("b")
    with pytest.raises(RuntimeError, match=ALREADY_HOLDING):
        await limiter.acquire_on_behalf_of("b")
    assert limiter.statistics().tasks_waiting == 0


@pytest.mark.parametrize("how", ["release", "total_tokens"])
async def test_a_second_wait_for_one_borrower_raises_when_the_first_is_granted(
    how: str,
) -> None:
    # Two tasks queued on behalf of one borrower: when the first is granted,
    # the borrower holds a token, so the second is refused as a call made
    # then would be, and the token it would have taken goes on in order.
    limiter = CapacityLimiter(2)
    limiter.acquire_on_behalf_of_nowait("a")
    limiter.acquire_on_behalf_of_nowait("d")
    outcomes: dict[str, str] = {}

    async def wait(name: str, borrower: str) -> None:
        try:
            await limiter.acquire_on_behalf_of(borrower)
        except RuntimeError as exc:
            outcomes[name] = str(exc)
        else:
            outcomes[name] = "granted"

    async with anyio.create_task_group() as tg:
        await start_in_order(
            tg,
            partial(wait, "B", "x"),
            partial(wait, "C", "x"),
            partial(wait, "E", "e"),
        )
        assert limiter.statistics().tasks_waiting == 3
        if how == "release":
            limiter.release_on_behalf_of("a")
            limiter.release_on_behalf_of("d")
        else:
            limiter.total_tokens = 4
        assert sorted(map(str, limiter.statistics().borrowers)) == (
            ["e", "x"] if how == "release" else ["a", "d", "e", "x"]
        )
        assert limiter.statistics().tasks_waiting == 0
    assert outcomes == {"B": "granted", "C": ALREADY_HOLDING, "E": "granted"}
    assert limiter.borrowed_tokens == (2 if how == "release" else 4)
    limiter.release_on_behalf_of("x")
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        limiter.release_on_behalf_of("x")


async def test_a_second_wait_for_one_borrower_gets_in_after_the_first_released() -> (
    None
):
    limiter = CapacityLimiter(1)
    limiter.acquire_on_behalf_of_nowait("holder")
    order: list[str] = []

    async def wait(name: str) -> None:
        await limiter.acquire_on_behalf_of("x")
        order.append(name)

    async with anyio.create_task_group() as tg:
        await start_in_order(tg, partial(wait, "first"), partial(wait, "second"))
        limiter.release_on_behalf_of("holder")
        await settle()
        assert order == ["first"]
        limiter.release_on_behalf_of("x")  # the first wait's token
        await settle()
        assert order == ["first", "second"]
        assert limiter.statistics().borrowers == ("x",)
        limiter.release_on_behalf_of("x")


async def test_release_without_a_token_raises() -> None:
    limiter = CapacityLimiter(1)
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        limiter.release()


async def test_release_on_behalf_of_an_unknown_borrower_raises() -> None:
    limiter = CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("a")
    with pytest.raises(RuntimeError, match=NOT_HOLDING):
        limiter.release_on_behalf_of("b")
    assert limiter.borrowed_tokens == 1


async def test_acquire_nowait_without_a_free_token_raises_would_block() -> None:
    limiter = CapacityLimiter(1)
    limiter.acquire_on_behalf_of_nowait("a")
    with pytest.raises(anyio.WouldBlock):
        limiter.acquire_nowait()
    with pytest.raises(anyio.WouldBlock):
        limiter.acquire_on_behalf_of_nowait("b")
    assert borrower_ids(limiter) == [id("a")]


async def test_zero_tokens_block_every_borrower() -> None:
    limiter = CapacityLimiter(0)
    with pytest.raises(anyio.WouldBlock):
        limiter.acquire_nowait()
    async with anyio.create_task_group() as tg:
        tg.start_soon(limiter.acquire_on_behalf_of, "a")
        await settle()
        assert limiter.statistics().tasks_waiting == 1
        limiter.total_tokens = 1
    assert limiter.statistics().borrowers == ("a",)


async def test_contended_acquire_waits_for_release() -> None:
    limiter = CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("a")
    async with anyio.create_task_group() as tg:
        tg.start_soon(limiter.acquire_on_behalf_of, "b")
        await settle()
        assert limiter.statistics().tasks_waiting == 1
        limiter.release_on_behalf_of("a")
        # the token is handed over at once, before "b"'s task runs
        assert limiter.statistics().borrowers == ("b",)
        assert limiter.statistics().tasks_waiting == 0
    assert limiter.statistics().borrowers == ("b",)


async def test_waiters_borrow_in_arrival_order() -> None:
    limiter = CapacityLimiter(1)
    order: list[int] = []

    async def take(i: int) -> None:
        await limiter.acquire_on_behalf_of(i)
        order.append(i)

    await limiter.acquire_on_behalf_of("holder")
    async with anyio.create_task_group() as tg:
        await start_in_order(tg, *(partial(take, i) for i in range(4)))
        limiter.release_on_behalf_of("holder")
        for i in range(3):
            await settle()
            limiter.release_on_behalf_of(i)
    assert order == [0, 1, 2, 3]


async def test_raising_total_tokens_wakes_that_many_waiters() -> None:
    limiter = CapacityLimiter(0)
    async with anyio.create_task_group() as tg:
        await start_in_order(
            tg, *(partial(limiter.acquire_on_behalf_of, i) for i in range(4))
        )
        limiter.total_tokens = 2
        assert set(limiter.statistics().borrowers) == {0, 1}
        assert limiter.statistics().tasks_waiting == 2
        limiter.total_tokens = 3
        assert set(limiter.statistics().borrowers) == {0, 1, 2}
        assert limiter.statistics().tasks_waiting == 1
        limiter.total_tokens = 4


async def test_infinite_total_tokens_wake_every_waiter() -> None:
    limiter = CapacityLimiter(0)
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(limiter.acquire_on_behalf_of, i)
        await settle()
        limiter.total_tokens = math.inf
    assert limiter.borrowed_tokens == 5
    assert limiter.available_tokens == math.inf


async def test_lowering_total_tokens_takes_nothing_back() -> None:
    limiter = CapacityLimiter(3)
    for name in "abc":
        await limiter.acquire_on_behalf_of(name)
    limiter.total_tokens = 1
    assert limiter.borrowed_tokens == 3
    assert limiter.available_tokens == -2
    async with anyio.create_task_group() as tg:
        tg.start_soon(limiter.acquire_on_behalf_of, "d")
        await settle()
        limiter.release_on_behalf_of("a")
        limiter.release_on_behalf_of("b")
        assert limiter.statistics().tasks_waiting == 1  # 1 borrowed of 1
        limiter.release_on_behalf_of("c")
        assert limiter.statistics().borrowers == ("d",)


async def test_infinite_then_finite_total_counts_every_borrower() -> None:
    limiter = CapacityLimiter(0)
    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(limiter.acquire_on_behalf_of, i)
        await settle()
        limiter.total_tokens = math.inf
        limiter.total_tokens = 2  # before the woken tasks have run
    assert limiter.borrowed_tokens == 3
    assert limiter.available_tokens == -1
    with pytest.raises(anyio.WouldBlock):
        limiter.acquire_on_behalf_of_nowait("late")


async def test_statistics_report_every_field() -> None:
    limiter = CapacityLimiter(1)
    await limiter.acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(limiter.acquire_on_behalf_of, "b")
        await settle()
        stats = limiter.statistics()
        assert stats.borrowed_tokens == 1
        assert stats.total_tokens == 1
        assert [id(b) for b in stats.borrowers] == [task_id()]
        assert stats.tasks_waiting == 1
        tg.cancel_scope.cancel()
    limiter.release()
    assert limiter.statistics() == anyio.CapacityLimiterStatistics(0, 1, (), 0)


async def test_uncontended_acquire_is_a_schedule_point(
    anyio_backend_name: str,
) -> None:
    limiter = CapacityLimiter(2)
    await assert_schedule_point(anyio_backend_name, limiter.acquire)
    await assert_schedule_point(
        anyio_backend_name, partial(limiter.acquire_on_behalf_of, "b")
    )
    assert limiter.borrowed_tokens == 2


async def test_acquire_in_a_cancelled_scope_raises_and_borrows_nothing() -> None:
    limiter = CapacityLimiter(1)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await limiter.acquire()
    assert scope.cancelled_caught
    with anyio.CancelScope() as scope:
        scope.cancel()
        await limiter.acquire_on_behalf_of("b")
    assert scope.cancelled_caught
    assert limiter.borrowed_tokens == 0


@pytest.mark.parametrize("source", CANCEL_SOURCES)
async def test_cancelled_acquire_borrows_nothing(
    source: str, anyio_backend_name: str
) -> None:
    skip_if_unsupported(source, anyio_backend_name)
    limiter = CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("holder")
    await cancel_while_blocked(source, partial(limiter.acquire_on_behalf_of, "b"))
    assert limiter.statistics().tasks_waiting == 0
    limiter.release_on_behalf_of("holder")
    assert limiter.borrowed_tokens == 0
    limiter.acquire_on_behalf_of_nowait("c")


@pytest.mark.usefixtures("asyncio_only")
async def test_granted_then_cancelled_acquire_passes_the_token_on() -> None:
    limiter = CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("holder")
    first = asyncio.ensure_future(limiter.acquire_on_behalf_of("first"))
    await settle()
    second = asyncio.ensure_future(limiter.acquire_on_behalf_of("second"))
    await settle()
    limiter.release_on_behalf_of("holder")  # grants "first" ...
    assert limiter.statistics().borrowers == ("first",)
    first.cancel()  # ... whose task is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await settle()
    assert second.done(), "the grant was lost"
    await second
    assert limiter.statistics().borrowers == ("second",)
    assert limiter.statistics().tasks_waiting == 0


@pytest.mark.usefixtures("asyncio_only")
async def test_granted_then_cancelled_acquire_returns_the_token() -> None:
    limiter = CapacityLimiter(1)
    await limiter.acquire_on_behalf_of("holder")
    waiter = asyncio.ensure_future(limiter.acquire())
    await settle()
    limiter.release_on_behalf_of("holder")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limiter.statistics() == anyio.CapacityLimiterStatistics(0, 1, (), 0)


async def test_a_wait_begun_in_a_cancelled_scope_raises_though_a_token_frees() -> None:
    # On asyncio AnyIO delivers a scope's cancellation made by the task
    # itself a loop iteration later; a token released in between must not
    # be granted to the call: AnyIO's limiter raises before it queues.
    limiter = CapacityLimiter(1)
    await limiter.acquire()
    go = anyio.Event()
    outcome: list[str] = []

    async def late() -> None:
        await go.wait()
        with anyio.CancelScope() as scope:
            scope.cancel()
            try:
                await limiter.acquire()
            except anyio.get_cancelled_exc_class():
                outcome.append("raised")
                raise
            outcome.append("returned")  # pragma: no cover (the fault)
        assert scope.cancelled_caught

    async with anyio.create_task_group() as tg:
        tg.start_soon(late)
        await anyio.wait_all_tasks_blocked()
        go.set()
        await anyio.lowlevel.checkpoint()  # late runs, then this task
        limiter.release()
    assert outcome == ["raised"]
    assert limiter.borrowed_tokens == 0


async def test_a_cancelled_acquire_raises_and_ends_holding_no_token(
    anyio_backend_name: str,
) -> None:
    # An uncontended acquire in a scope cancelled before the call, beside a
    # task that releases the token if it sees it borrowed.  Off Trio the
    # acquire borrows it for its checkpoint, and that release (which AnyIO
    # would refuse) succeeds: the acquire raises its cancellation, not the
    # RuntimeError a release of its own would meet.  On Trio, as AnyIO's
    # (Trio's own), it checks for cancellation first: nobody sees the token
    # borrowed.
    limiter = CapacityLimiter(1)
    borrower = object()
    caught, released = await cancelled_acquire_beside_a_release(
        partial(limiter.acquire_on_behalf_of, borrower),
        lambda: limiter.borrowed_tokens > 0,
        partial(limiter.release_on_behalf_of, borrower),
    )
    assert caught
    assert released == (anyio_backend_name != "trio")
    assert limiter.borrowed_tokens == 0
