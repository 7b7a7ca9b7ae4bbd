"""Model test: random sends, receives (awaited, a turn of ``async for``, or
``receive_many``), closes (also of endpoints that tasks are blocked on),
clones and cancellations over several tasks, checked step by step against
a model queue.

Each step starts one operation (in its own task when it may block) or acts
from the test task, then waits until every task is blocked again, so the
channel is quiescent and the model can say exactly what every call has
returned, what is buffered and who is still waiting: no item lost, none
duplicated, FIFO, blocked calls served in arrival order, closing and the
single sides as specified.  On asyncio the steps also include the
grant-then-cancel races: an item granted to a receiver that is cancelled in
the same step goes to the next receiver or back to the front of the buffer,
before the end of the stream if the last sender closes in that step too; a
sender whose item is taken as it is cancelled returns normally.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import astuple, dataclass, field
from functools import partial
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from anyio_prims.channels import ChannelStatistics

from ._support import CHANNELS, WITH_MEMORY, Call, make, settle

pytestmark = pytest.mark.anyio

MANY_SENDERS = ("mpsc", "mpmc", "memory")
MANY_RECEIVERS = ("spmc", "mpmc", "memory")


@dataclass
class Pending:
    """A call the model says is blocked."""

    call: Call
    endpoint: int
    item: Any = None
    #: a ``receive_many(max_items)`` when set, else a receive
    max_items: int | None = None


@dataclass
class Model:
    capacity: float
    single_sender: bool
    single_receiver: bool
    buffer: deque[Any] = field(default_factory=deque)
    senders_open: list[bool] = field(default_factory=lambda: [True])
    receivers_open: list[bool] = field(default_factory=lambda: [True])
    parked_senders: deque[Pending] = field(default_factory=deque)
    parked_receivers: deque[Pending] = field(default_factory=deque)
    #: what each finished call must have ended with
    expected: dict[int, tuple[str, Any]] = field(default_factory=dict)
    #: (receiver, item) granted by sends, in order (for the races)
    grants: list[tuple[Pending, Any]] = field(default_factory=list)
    #: parked receives granted an item in this step, and the item, in the
    #: order granted: a ``receive_many`` among them takes more when its
    #: task resumes (see :meth:`resume_many`)
    in_flight: list[tuple[Pending, Any]] = field(default_factory=list)

    def finish(self, call: Call, outcome: str, value: Any = None) -> None:
        self.expected[id(call)] = (outcome, value)

    def receivers_left(self) -> bool:
        return any(self.receivers_open)

    def senders_left(self) -> bool:
        return any(self.senders_open)

    # The outcome of a send/receive started now: ("returned", value),
    # ("raised", name), or None when the call blocks.
    def send(self, endpoint: int, item: Any) -> tuple[str, Any] | None:
        if not self.senders_open[endpoint]:
            return ("raised", "ClosedResourceError")
        if not self.receivers_left():
            return ("raised", "BrokenResourceError")
        if self.single_sender and self.parked_senders:
            return ("raised", "BusyResourceError")
        if self.parked_receivers:
            receiver = self.parked_receivers.popleft()
            self.hand(receiver, item)
            self.grants.append((receiver, item))
            return ("returned", None)
        if len(self.buffer) < self.capacity:
            self.buffer.append(item)
            return ("returned", None)
        return None

    def receive(self, endpoint: int) -> tuple[str, Any] | None:
        if not self.receivers_open[endpoint]:
            return ("raised", "ClosedResourceError")
        if self.single_receiver and self.parked_receivers:
            return ("raised", "BusyResourceError")
        if self.buffer:
            item = self.buffer.popleft()
            if len(self.buffer) < self.capacity and self.parked_senders:
                sender = self.parked_senders.popleft()
                self.buffer.append(sender.item)
                self.finish(sender.call, "returned", None)
            return ("returned", item)
        if self.parked_senders:
            sender = self.parked_senders.popleft()
            self.finish(sender.call, "returned", None)
            return ("returned", sender.item)
        if not self.senders_left():
            return ("raised", "EndOfStream")
        return None

    def receive_many(self, endpoint: int, max_items: int) -> tuple[str, Any]:
        """The outcome of a ``receive_many(max_items)`` that does not block:
        the first item as ``receive()``, then as many more as are there now,
        each taken as ``receive()`` would (so parked senders move up)."""
        first = self.receive(endpoint)
        assert first is not None, "only for a call that does not block"
        if first[0] != "returned":
            return first
        items = [first[1]]
        while len(items) < max_items and (self.buffer or self.parked_senders):
            more = self.receive(endpoint)
            assert more is not None
            items.append(more[1])
        return ("returned", items)

    def hand(self, receiver: Pending, item: Any) -> None:
        """Grant ``item`` to a parked receive: a receive returns it, unless
        a ``receive_many`` granted in the same step takes it first (see
        :meth:`resume_many`)."""
        if receiver.max_items is None:
            self.finish(receiver.call, "returned", item)
        self.in_flight.append((receiver, item))

    def resume_many(self) -> None:
        """The receives granted an item in this step resume, in the order
        granted (the game keeps a ``receive_many`` the only one granted in
        a step on Trio, which runs them in any order).

        Each takes the oldest item not yet delivered, so a ``receive_many``
        that takes more takes first the items granted to the receives
        behind it, which move on to the next ones: it takes as many as
        are free (buffered, not granted), up to its ``max_items``.  No
        sender is parked while receivers are."""
        in_flight, self.in_flight = self.in_flight, []
        if all(receiver.max_items is None for receiver, _ in in_flight):
            return
        assert not self.parked_senders
        queue = deque(item for _, item in in_flight)
        queue.extend(self.buffer)
        reserved = len(in_flight)
        for receiver, _ in in_flight:
            reserved -= 1
            items = [queue.popleft()]
            if receiver.max_items is None:
                self.finish(receiver.call, "returned", items[0])
                continue
            while (
                len(items) < receiver.max_items
                and self.receivers_open[receiver.endpoint]
                and len(queue) > reserved
            ):
                items.append(queue.popleft())
            event(f"a parked receive_many took {len(items)} of {receiver.max_items}")
            if len(in_flight) > 1:
                event("a parked receive_many resumed with other receives")
            self.finish(receiver.call, "returned", items)
        self.buffer = queue

    def cancel(self, pending: Pending) -> None:
        for queue in (self.parked_senders, self.parked_receivers):
            if pending in queue:
                queue.remove(pending)
        self.finish(pending.call, "cancelled")

    def give_back(self, item: Any) -> None:
        if not self.receivers_left():
            return
        if self.parked_receivers:
            self.hand(self.parked_receivers.popleft(), item)
        else:
            self.buffer.appendleft(item)

    def close_sender(self, endpoint: int) -> None:
        if not self.senders_open[endpoint]:
            return
        self.senders_open[endpoint] = False
        for pending in [p for p in self.parked_senders if p.endpoint == endpoint]:
            self.parked_senders.remove(pending)
            self.finish(pending.call, "raised", "ClosedResourceError")
        if not self.senders_left():
            while self.parked_receivers:
                pending = self.parked_receivers.popleft()
                self.finish(pending.call, "raised", "EndOfStream")

    def close_receiver(self, endpoint: int) -> None:
        if not self.receivers_open[endpoint]:
            return
        self.receivers_open[endpoint] = False
        for pending in [p for p in self.parked_receivers if p.endpoint == endpoint]:
            self.parked_receivers.remove(pending)
            self.finish(pending.call, "raised", "ClosedResourceError")
        if not self.receivers_left():
            while self.parked_senders:
                pending = self.parked_senders.popleft()
                self.finish(pending.call, "raised", "BrokenResourceError")
            self.buffer.clear()


def outcome_of(call: Call) -> tuple[str, Any] | None:
    if call.outcome is None:
        return None
    if call.outcome == "raised":
        return ("raised", type(call.error).__name__)
    if call.outcome == "returned":
        return ("returned", call.result)
    return ("cancelled", None)


async def first_item(receiver: Any) -> Any:
    """The item one turn of ``async for`` yields; the end of the iteration
    raises ``EndOfStream``, as ``receive()`` does, for the model."""
    async for item in receiver:
        return item
    raise anyio.EndOfStream


def close_event(side: str, is_open: list[bool], ep: int) -> str:
    """The hypothesis event of closing endpoint ``ep`` of one side."""
    if not is_open[ep]:
        return f"closed a closed {side}"
    if sum(is_open) > 1:
        return f"closed a {side}, another open"
    return f"closed the last {side}"


def nowait_outcome(operation: Any) -> tuple[str, Any]:
    try:
        return ("returned", operation())
    except Exception as exc:
        return ("raised", type(exc).__name__)


#: Step kinds.  Closing the last open endpoint of a side ends most games:
#: the close steps do it for some picks only (see each).
STEPS = [
    "receive",
    "send",
    "race_receive",
    "race_send",
    "clone_receiver",
    "receive_nowait",
    "receive_many",
    "async_for",
    "send_nowait",
    "send_nowait_burst",
    "cancel",
    "clone_sender",
    "close_sender",
    "close_receiver",
    "close_parked",
]


class Game:
    """One channel, the model of it, and the calls made so far."""

    def __init__(
        self,
        flavour: str,
        capacity: float,
        on_asyncio: bool,
        tg: Any,
        strict: bool = False,
    ) -> None:
        self.flavour = flavour
        self.on_asyncio = on_asyncio
        # Plain asyncio cancellation can cancel a granted wait (the races).
        self.source = "asyncio_task_cancel" if on_asyncio else "anyio_cancel_scope"
        self.tg = tg
        tx, rx = (
            CHANNELS[flavour](capacity, strict=True)
            if strict and flavour != "memory"
            else make(flavour, capacity)
        )
        self.senders: list[Any] = [tx]
        self.receivers: list[Any] = [rx]
        self.model = Model(
            capacity,
            single_sender=flavour == "spmc",
            single_receiver=flavour == "mpsc",
        )
        self.pending: list[Pending] = []
        self.calls: list[Call] = []
        self.next_item = 0

    def new_item(self) -> int:
        self.next_item += 1
        return self.next_item

    def send(self, pick: int) -> bool:
        ep = pick % len(self.senders)
        item = self.new_item()
        expect = self.model.send(ep, item)
        call = Call(lambda: self.senders[ep].send(item), self.source)
        self.calls.append(call.start(self.tg))
        if expect is None:
            parked = Pending(call, ep, item)
            self.model.parked_senders.append(parked)
            self.pending.append(parked)
        else:
            self.model.finish(call, *expect)
        return True

    def receive(self, pick: int, through_async_for: bool = False) -> bool:
        ep = pick % len(self.receivers)
        expect = self.model.receive(ep)
        if expect is None and not self.on_asyncio and self.many_parked():
            return False  # see receive_many()
        receiver = self.receivers[ep]
        operation = (
            partial(first_item, receiver) if through_async_for else receiver.receive
        )
        call = Call(operation, self.source)
        self.calls.append(call.start(self.tg))
        if expect is None:
            parked = Pending(call, ep)
            self.model.parked_receivers.append(parked)
            self.pending.append(parked)
        else:
            self.model.finish(call, *expect)
        return True

    async def receive_many(self, pick: int) -> bool:
        """``receive_many(1 + pick % 4)`` (the drop-in streams have none):
        it takes what is there, up to that many, and senders parked behind
        the buffer move up.

        With no receiver parked, the test task first gives it something to
        take (a receiver woken meanwhile could run before or after the call
        on Trio): for picks 0-3 with nothing there, one to three items sent
        without waiting; for picks 4-7, a bounded buffer filled and up to
        two senders parked behind it.  Where there is still nothing to take
        (receivers parked already, or no bound), the call parks; a later
        step's send grants it an item, and it takes more when it resumes
        (:meth:`Model.resume_many`).  On Trio, which runs the tasks woken
        together in any order, such a call parks only where no receive is
        parked, and no receive parks behind it, so that what it takes is
        never a matter of that order."""
        if self.flavour == "memory":
            return False
        model = self.model
        started = False
        if not model.parked_receivers and pick < 4:
            if self.would_park_receiver(pick):
                for _ in range(1 + pick % 3):
                    self.send_nowait(pick)
        elif not model.parked_receivers and model.capacity != math.inf:
            for _ in range(int(model.capacity) - len(model.buffer)):
                self.send_nowait(pick)
            while len(model.parked_senders) < 2 and self.would_park_sender(pick):
                self.send(pick)
                await settle()
                started = True
        ep = pick % len(self.receivers)
        max_items = 1 + pick % 4
        if self.would_park_receiver(pick):
            if not self.on_asyncio and model.parked_receivers:
                return started
            event(f"receive_many({max_items}) parked")
            call = Call(
                partial(self.receivers[ep].receive_many, max_items), self.source
            )
            self.calls.append(call.start(self.tg))
            parked = Pending(call, ep, max_items=max_items)
            model.parked_receivers.append(parked)
            self.pending.append(parked)
            return True
        senders_parked = len(model.parked_senders)
        expect = model.receive_many(ep, max_items)
        if expect[0] == "returned":
            event(f"receive_many took {len(expect[1])} of {max_items}")
            if len(model.parked_senders) < senders_parked:
                event("receive_many woke a parked sender")
        call = Call(partial(self.receivers[ep].receive_many, max_items), self.source)
        self.calls.append(call.start(self.tg))
        model.finish(call, *expect)
        return True

    def async_for(self, pick: int) -> bool:
        """A receive as one turn of ``async for`` (its own fast path)."""
        return self.receive(pick, through_async_for=True)

    def send_nowait(self, pick: int) -> bool:
        ep = pick % len(self.senders)
        item = self.new_item()
        expect = self.model.send(ep, item) or ("raised", "WouldBlock")
        assert nowait_outcome(lambda: self.senders[ep].send_nowait(item)) == expect
        return True

    def send_nowait_burst(self, pick: int) -> bool:
        """Two or three sends in one step: the receivers parked are woken
        together, and Trio may run them in any order."""
        for _ in range(2 + pick % 2):
            self.send_nowait(pick)
        return True

    def receive_nowait(self, pick: int) -> bool:
        ep = pick % len(self.receivers)
        expect = self.model.receive(ep) or ("raised", "WouldBlock")
        assert nowait_outcome(self.receivers[ep].receive_nowait) == expect
        return True

    def cancel(self, pick: int) -> bool:
        live = [p for p in self.pending if p.call.outcome is None]
        live = [p for p in live if id(p.call) not in self.model.expected]
        if not live:
            return False
        victim = live[pick % len(live)]
        self.model.cancel(victim)
        victim.call.cancel()
        return True

    def close_sender(self, pick: int) -> bool:
        ep = pick % len(self.senders)
        model = self.model
        if sum(model.senders_open) - model.senders_open[ep] == 0 and pick < 5:
            return False  # closing the last sender ends most games: less often
        event(close_event("sender", model.senders_open, ep))
        model.close_sender(ep)
        self.senders[ep].close()
        return True

    def close_receiver(self, pick: int) -> bool:
        ep = pick % len(self.receivers)
        model = self.model
        if sum(model.receivers_open) - model.receivers_open[ep] == 0 and pick < 5:
            return False  # closing the last receiver ends most games: less often
        event(close_event("receiver", model.receivers_open, ep))
        model.close_receiver(ep)
        self.receivers[ep].close()
        return True

    async def close_parked(self, pick: int) -> bool:
        """Close endpoints while calls are blocked: an odd pick closes
        senders, an even one receivers.

        Picks 0-5 park a call on the side closed (two for picks 4-5) if need
        be, and close the endpoint one of them is blocked on: its calls
        raise ``ClosedResourceError`` (the last open endpoint of a side only
        for picks 4-5, which ends the other side's blocked calls too).
        Picks 6-7 park two calls on the other side if need be, and close
        every endpoint of this one: parked receives end the stream, parked
        sends break."""
        model = self.model
        closing_sender = pick % 2 == 1
        across = pick >= 6
        parks_sender = closing_sender != across
        parked = model.parked_senders if parks_sender else model.parked_receivers
        would_park = (
            self.would_park_sender if parks_sender else self.would_park_receiver
        )
        started = False
        while len(parked) < 1 + pick // 4 and would_park(pick):
            if not (self.send if parks_sender else self.receive)(pick):
                break
            await settle()
            started = True
        if not parked:
            return started
        side = "sender" if closing_sender else "receiver"
        if across:
            event(f"closed every {side} with {len(parked)} parked on the other side")
            if closing_sender:
                for ep, sender in enumerate(self.senders):
                    model.close_sender(ep)
                    sender.close()
            else:
                for ep, receiver in enumerate(self.receivers):
                    model.close_receiver(ep)
                    receiver.close()
            return True
        ep = parked[(pick // 2) % len(parked)].endpoint
        is_open = model.senders_open if closing_sender else model.receivers_open
        if sum(is_open) == 1 and pick < 4:
            return started
        event(f"closed a {side} with {sum(p.endpoint == ep for p in parked)} parked")
        if closing_sender:
            model.close_sender(ep)
            self.senders[ep].close()
        else:
            model.close_receiver(ep)
            self.receivers[ep].close()
        return True

    def clone_sender(self, pick: int) -> bool:
        ep = pick % len(self.senders)
        if self.flavour not in MANY_SENDERS or not self.model.senders_open[ep]:
            return False
        self.senders.append(self.senders[ep].clone())
        self.model.senders_open.append(True)
        return True

    def clone_receiver(self, pick: int) -> bool:
        ep = pick % len(self.receivers)
        if self.flavour not in MANY_RECEIVERS or not self.model.receivers_open[ep]:
            return False
        self.receivers.append(self.receivers[ep].clone())
        self.model.receivers_open.append(True)
        return True

    async def race_receive(self, pick: int) -> bool:
        """Park receivers if need be, then send 1 to 3 items, the first to
        the head receiver, maybe receive without waiting from the test task,
        maybe close that sender, and cancel the head receiver, all in one
        step."""
        model = self.model
        if not self.on_asyncio or self.many_parked():
            return False  # the items a parked receive_many takes: not modelled
        wanted = 1 + pick % 2 if self.flavour in MANY_RECEIVERS else 1
        while len(model.parked_receivers) < wanted and self.would_park_receiver(pick):
            assert self.receive(pick)
            await settle()
        ep = pick % len(self.senders)
        if not model.parked_receivers or not model.senders_open[ep]:
            return False
        head = model.parked_receivers[0]
        items = [self.new_item() for _ in range(1 + pick % 3)]
        model.grants.clear()
        expected_sends = [
            model.send(ep, item) or ("raised", "WouldBlock") for item in items
        ]
        granted = model.grants[:]
        # A receive in the window takes the oldest item not delivered, a
        # granted one: each granted receiver moves up to the next one's
        # item, and the last to the item that receive would take otherwise.
        take = self.flavour in MANY_RECEIVERS and pick % 4 == 1
        take_ep = (pick // 4) % len(self.receivers)
        expected_take: tuple[str, Any] | None = None
        if take:
            expected_take = model.receive(take_ep) or ("raised", "WouldBlock")
            if expected_take[0] == "returned" and granted:
                event("a receive took an item while grants were in flight")
                items_now = [item for _, item in granted]
                after_granted = expected_take[1]
                expected_take = ("returned", items_now[0])
                items_now = [*items_now[1:], after_granted]
                granted = [
                    (receiver, item)
                    for (receiver, _), item in zip(granted, items_now, strict=True)
                ]
                for receiver, item in granted:
                    model.finish(receiver.call, "returned", item)
        if granted and granted[0][0] is head:
            event(f"receiver cancelled after {len(granted)} grant(s)")
            # In-flight receivers pass the items down; the last one
            # displaced goes on to the next receiver or the buffer.
            model.finish(head.call, "cancelled")
            got_items = [item for _, item in granted]
            for (later, _), item in zip(granted[1:], got_items[:-1], strict=True):
                model.finish(later.call, "returned", item)
            model.give_back(got_items[-1])
        else:
            model.cancel(head)
        # Closing the last sender in that step: the item given back still
        # comes before the end of the stream, whoever is parked.
        close = pick in (3, 6)  # 3: two parked, one item, so one stays parked
        if close:
            event("sender closed as a receiver was cancelled after its grant")
            model.close_sender(ep)
        sends: list[tuple[str, Any]] = []
        takes: list[tuple[str, Any]] = []

        def grant() -> None:
            sender = self.senders[ep]
            for item in items:
                sends.append(nowait_outcome(partial(sender.send_nowait, item)))
            if take:
                takes.append(nowait_outcome(self.receivers[take_ep].receive_nowait))
            if close:
                sender.close()

        head.call.grant_then_cancel(grant)
        assert sends == expected_sends
        assert takes == ([] if expected_take is None else [expected_take])
        return True

    async def race_send(self, pick: int) -> bool:
        """Park a sender if need be, then take its item and cancel it in one
        step: the send has delivered, so it returns normally."""
        model = self.model
        if not self.on_asyncio:
            return False
        if not model.parked_senders and self.would_park_sender(pick):
            self.send(pick)
            await settle()
        ep = pick % len(self.receivers)
        if not model.parked_senders or not model.receivers_open[ep]:
            return False
        head = model.parked_senders[0]
        expect = model.receive(ep)
        if id(head.call) in model.expected:
            event("sender cancelled after its item was taken")
        else:
            # The item went to the buffer's last free place only: the
            # sender was still waiting, so it is cancelled.
            model.cancel(head)
        got: list[tuple[str, Any]] = []
        head.call.grant_then_cancel(
            lambda: got.append(nowait_outcome(self.receivers[ep].receive_nowait))
        )
        assert got == [expect]
        return True

    def many_parked(self) -> bool:
        """Whether a ``receive_many`` is parked."""
        return any(p.max_items is not None for p in self.model.parked_receivers)

    def would_park_receiver(self, pick: int) -> bool:
        model = self.model
        ep = pick % len(self.receivers)
        return (
            model.receivers_open[ep]
            and model.senders_left()
            and not model.buffer
            and not model.parked_senders
            and not (model.single_receiver and model.parked_receivers)
        )

    def would_park_sender(self, pick: int) -> bool:
        model = self.model
        ep = pick % len(self.senders)
        return (
            model.senders_open[ep]
            and model.receivers_left()
            and not model.parked_receivers
            and len(model.buffer) >= model.capacity
            and not (model.single_sender and model.parked_senders)
        )

    async def finish(self) -> None:
        """Cancel what still waits; check what is left; close everything."""
        model = self.model
        for parked in self.pending:
            if id(parked.call) not in model.expected:
                model.cancel(parked)
                parked.call.cancel()
        await settle()
        check(model, self.calls, self.senders[0])
        if model.receivers_left():
            ep = model.receivers_open.index(True)
            left = []
            while True:
                try:
                    left.append(self.receivers[ep].receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            assert left == list(model.buffer)
        for endpoint in self.senders + self.receivers:
            endpoint.close()


# A send on a closed sender clone while a receiver is parked: the awaited
# send's own handoff path, which a run's random games may miss.
_CLOSED_CLONE_SENDS = [
    ("clone_sender", 0),
    ("receive", 0),
    ("close_sender", 5),  # the clone
    ("send", 1),  # ClosedResourceError; the receiver stays parked
    ("send", 0),
]

# A turn of ``async for`` on a closed receiver clone with an item buffered:
# its own fast path, which a run's random games may miss.
_CLOSED_CLONE_ASYNC_FOR = [
    ("clone_receiver", 0),
    ("close_receiver", 1),  # the clone
    ("send_nowait", 0),
    ("async_for", 1),  # ClosedResourceError; the item stays
    ("receive", 0),
]

# A ``receive_many(4)`` parked with no bound (pick 7), then three items
# sent in one step: it is granted the first and takes the other two when it
# resumes.
_PARKED_MANY_TAKES_MORE = [
    ("receive_many", 7),
    ("send_nowait_burst", 1),
    ("receive", 0),
]

# A receive parked ahead of a ``receive_many(2)`` (pick 1, receivers
# parked already), then three items in one step: one to each, and the
# third to the ``receive_many`` when it resumes; the receive that comes
# after parks.
_PARKED_MANY_BEHIND_A_RECEIVE = [
    ("clone_receiver", 0),
    ("receive", 0),
    ("receive_many", 1),
    ("send_nowait_burst", 1),
    ("receive", 1),
]

# A ``receive_many(2)`` parked with no bound (pick 5) and a receive parked
# behind it, then three items in one step (asyncio): the receive_many
# resumes first and takes the two oldest, the one granted to the receive
# too, which gets the third.
_MANY_AHEAD_OF_ONE = [
    ("receive_many", 5),
    ("receive", 0),
    ("send_nowait_burst", 1),
    ("receive", 0),
]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    flavour=st.sampled_from(WITH_MEMORY),
    capacity=st.sampled_from([0, 0, 1, 2, math.inf]),
    strict=st.booleans(),
    steps=st.lists(
        st.tuples(st.sampled_from(STEPS), st.integers(0, 7)), min_size=8, max_size=30
    ),
)
@example(flavour="mpsc", capacity=0, strict=False, steps=_CLOSED_CLONE_SENDS)
@example(flavour="mpmc", capacity=1, strict=False, steps=_CLOSED_CLONE_SENDS)
@example(flavour="spmc", capacity=2, strict=False, steps=_CLOSED_CLONE_ASYNC_FOR)
@example(flavour="mpsc", capacity=math.inf, strict=False, steps=_PARKED_MANY_TAKES_MORE)
@example(flavour="mpmc", capacity=0, strict=True, steps=_PARKED_MANY_BEHIND_A_RECEIVE)
@example(flavour="spmc", capacity=2, strict=False, steps=_PARKED_MANY_BEHIND_A_RECEIVE)
@example(flavour="mpmc", capacity=math.inf, strict=False, steps=_MANY_AHEAD_OF_ONE)
async def test_channel_behaves_as_the_model_queue(
    anyio_backend_name: str,
    flavour: str,
    capacity: float,
    strict: bool,
    steps: list[tuple[str, int]],
) -> None:
    # Each step is a kind and a number that picks the endpoint (or the call
    # to cancel), modulo how many there are.  ``strict`` makes every call of
    # the three flavours a checkpoint (the drop-in streams' always are):
    # the outcomes stay the model's.
    async with anyio.create_task_group() as tg:
        game = Game(flavour, capacity, anyio_backend_name == "asyncio", tg, strict)
        for kind, pick in steps:
            done = getattr(game, kind)(pick)
            if not isinstance(done, bool):
                done = await done
            if done:
                game.model.resume_many()
                await settle()
                check(game.model, game.calls, game.senders[0])
        await game.finish()


def check(model: Model, calls: list[Call], endpoint: Any) -> None:
    for call in calls:
        assert outcome_of(call) == model.expected.get(id(call)), "a call's outcome"
    raw = endpoint.statistics()
    stats = astuple(raw) if isinstance(raw, ChannelStatistics) else tuple(raw)
    assert stats[0] == len(model.buffer), "items buffered"
    assert stats[2:] == (
        sum(model.senders_open),
        sum(model.receivers_open),
        len(model.parked_senders),
        len(model.parked_receivers),
    ), "endpoints and waiters"
