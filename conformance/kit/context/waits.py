"""A case's waits and barriers: polled broker conditions, sentinels, bounded takes and drains."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from conformance.api import AckMode, Consumer, Delivery, QueueStats
from conformance.errors import ChannelClosed, DeliveriesMissing, OperationTimeout, TargetCannot
from conformance.kit.context.queues import Queues
from conformance.kit.context.state import DELIVERY_WINDOW_S, WAIT_S, Obs, sentinel_body


class Waits(Queues):
    """Every wait is bounded and names what it waited for; a barrier proves a condition, never guesses a delay."""

    # -- waiting -----------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        """Poll a broker-side condition until it holds; OperationTimeout names what never happened."""
        start = time.monotonic()
        end = start + timeout
        polls = 1
        while not predicate():
            if time.monotonic() >= end:
                self.history.add("suite", "wait", what, error=f"not reached in {timeout:.1f}s ({polls} polls)")
                raise OperationTimeout(f"timed out after {timeout:.1f}s waiting for {what}")
            time.sleep(0.005)  # allowed: polling a broker condition with a deadline
            polls += 1
        self.history.add("suite", "wait", f"{what}: reached after {(time.monotonic() - start) * 1000:.1f}ms ({polls} polls)")

    def await_consumers(self, queue: str, n: int) -> QueueStats | None:
        """Barrier: the queue has processed consumer arrivals/departures (and their requeues).

        Where the protocol cannot count consumers (AMQP 1.0 without a management backend) a
        departure (``n == 0``) is awaited by the adapter's protocol barrier instead, and what proved
        it is recorded in the history; None is returned then, as there are no counts."""
        if n == 0:
            admin = self.admin
            how = getattr(admin, "_target", admin).await_departure(queue)
            if how is not None:
                self.history.add("suite", "barrier", f"{queue}: {how}")
                return None
        last: list[QueueStats] = []

        def check() -> bool:
            last[:] = [self.stats(queue)]
            if last[0].consumers is None:
                raise TargetCannot(f"waiting for {n} consumer(s) on {queue} needs a consumer count; {last[0].method or 'the broker gives none'}",
                                   kind="cannot-express")
            return last[0].consumers == n

        self.wait_for(check, f"{queue} to report {n} consumer(s)")
        self.history.add("suite", "stats", f"{queue} -> {last[0]}")
        return last[0]

    def until_sentinel(self, consumer: Consumer, queue: str, timeout: float = DELIVERY_WINDOW_S) -> list[Delivery]:
        """Barrier for a negative check: publish a sentinel to ``queue`` and return what ``consumer``
        receives before it. Whatever the broker held for delivery when the sentinel was enqueued is
        delivered ahead of it, so an empty list proves nothing more was pending."""
        sentinel = f"sentinel-{uuid.uuid4().hex[:8]}"
        self.admin.publish(queue, sentinel_body(sentinel), message_id=sentinel)
        out: list[Delivery] = []
        end = time.monotonic() + timeout
        while True:
            try:
                d = consumer.next(max(0.0, end - time.monotonic()))
            except OperationTimeout:  # the broker withheld the sentinel: an observation, judged as missing
                raise DeliveriesMissing(queue, len(out) + 1, [x.message_id or "" for x in out], timeout,
                                        [*(x.message_id or "" for x in out), sentinel]) from None
            if d.message_id == sentinel:
                self.last_sentinel = d
                return out
            out.append(d)

    def take(self, consumer: Consumer, n: int, *, window: float = DELIVERY_WINDOW_S,
             expected: list[str] | None = None, at_most: bool = False) -> list[Delivery]:
        """``n`` deliveries the broker owes ``consumer`` (messages already in its queue), within one
        explicit ``window``. Fewer is an observation, not the suite's error: DeliveriesMissing
        carries what arrived (and, given ``expected`` ids, what did not) to the verdict; with
        ``at_most`` they are simply returned (where fewer is itself what the verdict judges)."""
        out: list[Delivery] = []
        end = time.monotonic() + window
        while len(out) < n:
            try:
                out.append(consumer.next(max(0.0, end - time.monotonic())))
            except OperationTimeout:
                if at_most:
                    return out
                arrived = [d.message_id or "" for d in out]
                queue = getattr(consumer, "queue", None) or "the queue"
                self.history.add("suite", "take", f"{n} deliveries from {queue}",
                                 error=f"{len(out)} arrived within {window:g}s: {arrived}")
                raise DeliveriesMissing(queue, n, arrived, window, expected) from None
        return out

    def drain(self, queue: str, timeout: float = DELIVERY_WINDOW_S, *, op_timeout: float | None = None) -> list[Delivery]:
        """Everything deliverable from ``queue`` now, in delivery order, proven complete by a sentinel.

        Call it after a barrier (e.g. :meth:`await_consumers`) so requeues have happened. The drained
        deliveries and the sentinel are acknowledged one by one, so a later drain starts clean.
        """
        session = self.connect("drain", op_timeout=op_timeout).session()
        consumer = session.consume(queue, ack_mode=AckMode.MANUAL, prefetch=1000)
        out = self.until_sentinel(consumer, queue, timeout)
        for d in [*out, self.last_sentinel]:
            session.ack(d.tag)
        session.sync()
        session.close()
        return out

    @staticmethod
    def channel_error(fn: Callable[[], Any]) -> Obs:
        """Run ``fn`` and report how the broker answered: no error, or which channel/connection error."""
        try:
            fn()
        except ChannelClosed as exc:
            return {"closed": True, "code": exc.code, "text": exc.text, "hard": exc.hard}
        return {"closed": False, "code": None, "text": "", "hard": False}
