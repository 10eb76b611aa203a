"""Broker-level faults of a case: restart or kill -9 the node (conformance.nemesis.kinds), then wait for its queues to answer."""

from __future__ import annotations

import time

from conformance.api import QueueStats
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout, QueueUnavailable, TargetCannot
from conformance.kit.context.waits import Waits
from conformance.nemesis.kinds import KILL, RESTART, FaultKind, broker_kind, strike
from conformance.nemesis.replicas import CONFIRM_GAP_S, describe, reading


class BrokerFaults(Waits):
    """Only a launched target can be restarted or killed; every case after the fault gets the same window."""

    def restart_broker(self, *, kill: bool = False) -> None:
        """Broker-level fault: kill -9 (``kill=True``) or a graceful restart of the node, then wait
        until it accepts connections. Every connection the case had is dead afterwards; open new ones
        (``admin`` reconnects by itself)."""
        self.fault_broker(KILL if kill else RESTART)

    def fault_broker(self, kind: FaultKind | str) -> None:
        """Fire broker fault ``kind`` (conformance.nemesis.kinds) and heal it. The runner asks before
        the case runs whether the target can take the kinds the case names; a scenario that faults
        without naming its kind gets the same answer here."""
        k = broker_kind(kind)
        if not k.offered_by(self.target):
            raise TargetCannot(k.cannot_take(self.target))
        self._cut_all()
        strike(k, self.target, lambda op, detail: self.history.add("nemesis", op, detail))
        self.fault_at, self.fault_kind = time.monotonic(), k.name

    def recovery_left(self, window: float) -> float:
        """What remains of a recovery ``window`` counted from the end of the fault (a shared fault
        may have served other cases' observations first): every case gets the same window after
        the same fault, never a fresh one. At least one poll is always made."""
        if self.fault_at is None:
            return window
        return max(0.5, window - (time.monotonic() - self.fault_at))

    def await_queue(self, queue: str, timeout: float = 30.0) -> QueueStats:
        """After a broker restart: wait until ``queue`` answers again (a quorum queue elects a leader)."""
        last: list[QueueStats] = []
        refused: list[str] = []
        listing: list[bool | None] = []  # the broker's own answer, asked once (see _gone)

        def answers() -> bool:
            try:
                last[:] = [self.stats(queue)]
                return True
            except (ChannelClosed, ConnectionLost) as exc:
                self._admin = None
                if isinstance(exc, ChannelClosed):
                    refused[:] = [f"{exc.code} {exc.text}"]
                    self._gone(queue, exc, listing)
                return False

        deadline = time.monotonic() + timeout
        try:
            self.wait_for(answers, f"{queue} to answer after the restart", timeout)
        except OperationTimeout as exc:
            if refused:  # e.g. 404 NOT_FOUND: the broker is up and says the queue is gone
                raise OperationTimeout(f"{exc}; the broker's last answer: {refused[0]}") from None
            raise
        if self.fault_kind == KILL.name:
            self._await_replicas(queue, deadline)
        return last[0]

    def _gone(self, queue: str, exc: ChannelClosed, listing: list[bool | None]) -> None:
        """Ends the wait when the queue is gone for good, on two pieces of evidence: the protocol's
        404 (not-found, in every adapter's codes) and the broker's own metadata, asked once
        (Target.queue_known: on RabbitMQ the live queues and the durable ones not yet recovered),
        then a 404 again after that answer. A 404 alone is not enough: one was seen, once, from a
        broker whose queue answered afterwards; and a queue whose home node is
        down answers 404 too, while its record, which the listing shows, waits for that node. The
        reply text is never read (it is the broker's own wording). Without the capability the
        window decides, as before."""
        if exc.code != 404 or self.target is None:
            return
        if not listing:
            known = self.target.queue_known(queue)
            listing.append(known)
            if known is not None:
                self.history.add("node", "queue known", f"{queue}: " + ("listed by the broker (running, or durable and not yet recovered)"
                                                                          if known else "not listed by the broker, neither running nor durable"))
            return  # decided on the next answer, which comes after the broker's listing
        if listing[0] is False:
            raise OperationTimeout(f"the broker answered {exc.code} {exc.text} before and after its own queue listing "
                                   f"had no {queue} (neither running nor durable to recover): the queue is gone")

    def _await_replicas(self, queue: str, deadline: float) -> None:
        """After kill -9, a queue that answers a declare may still have no leader to serve it: ask
        the broker (when the target can) until a replica leads, or until its report says none can
        (conformance.nemesis.replicas), within the case's window. Only after a kill: a graceful restart
        hands leadership over cleanly, and each report costs a CLI round trip (~0.7 s)."""
        lost_at: float | None = None
        said = ""
        while True:
            replicas = self.target.queue_replicas(queue) if self.target is not None else None
            if replicas is None:  # no such capability, or not a replicated queue: the drain decides
                return
            state, text = reading(replicas), describe(replicas)
            if text != said:
                self.history.add("node", "queue replicas", f"{queue}: {text}")
                said = text
            now = time.monotonic()
            if state == "leader":
                return
            if state == "lost":
                lost_at = lost_at if lost_at is not None else now
                if now - lost_at >= CONFIRM_GAP_S:
                    raise QueueUnavailable(f"the broker reports no leader and no log in any replica of {queue}, "
                                           f"on polls {now - lost_at:.1f}s apart ({text}): nothing left to elect")
            else:
                lost_at = None
            if now >= deadline:
                return
            time.sleep(min(CONFIRM_GAP_S / 2, max(0.0, deadline - now)))  # allowed: polling the broker's report with a deadline (the window)
