"""A reconnecting transacted producer and consumer with the AMQ JMS (Qpid JMS) failover rules.

From seed 002 (Red Hat AMQ JMS 7.1, "Handling unacknowledged deliveries") and Qpid JMS
JmsLocalTransactionContext: when the connection drops, the open transaction is failed ("in doubt");
the client reconnects, and the next commit rolls back and raises TransactionRolledBack. A commit in
flight when the connection dropped fails the same way, even if the broker did commit it. The
application then resends (producer) or reprocesses (consumer) the transaction's messages; duplicates
are told apart by message id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from conformance.api import AckMode, Consumer, Delivery, Session
from conformance.errors import ConformanceError, ConnectionLost


class TransactionRolledBack(ConformanceError):
    """The transaction failed (connection loss) and has been rolled back; resend or reprocess it."""

    def __init__(self, ids: list[str], why: str) -> None:
        super().__init__(f"Transaction failed and has been rolled back ({why}): {', '.join(ids) or 'no messages'}")
        self.ids = ids


@dataclass
class _Failover:
    connect: Callable[[], Session]
    max_reconnects: int = 10
    session: Session | None = None
    in_doubt: bool = False
    reconnects: int = 0
    events: list[str] = field(default_factory=list)

    def _open(self) -> Session:
        if self.session is None:
            if self.reconnects > self.max_reconnects:
                raise ConnectionLost(f"gave up after {self.max_reconnects} reconnects")
            self.session = self.connect()
            self.session.select_tx()
            self._after_open(self.session)
        return self.session

    def _after_open(self, session: Session) -> None:
        pass

    def close(self) -> None:
        """Leave: the broker returns whatever this client still holds unacknowledged."""
        if self.session is not None:
            try:
                self.session.close()
            except ConnectionLost:
                pass
            self.session = None

    def _lost(self, where: str, *, had_work: bool = True) -> None:
        """The connection is gone: reconnect lazily; the open transaction fails if it had any work."""
        self.session = None
        self.reconnects += 1
        self.in_doubt = self.in_doubt or had_work
        self.events.append(f"connection lost during {where}" + ("; transaction in doubt" if had_work else "; nothing in the transaction"))


@dataclass
class FailoverProducer(_Failover):
    queue: str = ""
    #: Sends of the open transaction, (message id, body), for the application to resend on failure.
    pending: list[tuple[str, bytes]] = field(default_factory=list)

    def send(self, message_id: str, body: bytes) -> None:
        """Send in the open transaction; a send interrupted by connection loss is sent again after reconnect."""
        self.pending.append((message_id, body))
        try:
            self._open().publish(self.queue, body, message_id=message_id, persistent=True)
        except ConnectionLost:
            self._lost(f"send of {message_id}", had_work=len(self.pending) > 1)
            self._open().publish(self.queue, body, message_id=message_id, persistent=True)

    def commit(self) -> None:
        ids = [m for m, _ in self.pending]
        if self.in_doubt:
            self._rollback_quietly()
            raise TransactionRolledBack(ids, "connection lost inside the transaction")
        try:
            self._open().commit()
        except ConnectionLost:
            self._lost("commit")
            self.in_doubt = False
            self.pending = []
            raise TransactionRolledBack(ids, "connection lost with the commit in flight") from None
        self.pending = []

    def _rollback_quietly(self) -> None:
        self.in_doubt = False
        self.pending = []
        try:
            self._open().rollback()
        except ConnectionLost:
            self._lost("rollback")
            self.in_doubt = False


@dataclass
class FailoverConsumer(_Failover):
    queue: str = ""
    prefetch: int = 10
    consumer: Consumer | None = None
    #: Deliveries received in the open transaction.
    pending: list[Delivery] = field(default_factory=list)

    def _after_open(self, session: Session) -> None:
        self.consumer = session.consume(self.queue, ack_mode=AckMode.MANUAL, prefetch=self.prefetch)

    def receive(self, timeout: float) -> Delivery:
        try:
            self._open()
            assert self.consumer is not None
            d = self.consumer.next(timeout)
        except ConnectionLost:
            self._lost("receive", had_work=bool(self.pending))
            self._open()
            assert self.consumer is not None
            d = self.consumer.next(timeout)
        self.pending.append(d)
        return d

    def ack(self, d: Delivery) -> None:
        """Acknowledge in the open transaction; after a connection loss this is a silent no-op (seed 002)."""
        if self.in_doubt:
            return
        try:
            self._open().ack(d.tag)
        except ConnectionLost:
            self._lost(f"ack of {d.message_id}")

    def commit(self) -> None:
        ids = [d.message_id or "?" for d in self.pending]
        self.pending = []
        if self.in_doubt:
            self.in_doubt = False
            # Roll back by closing the session: the broker returns every unacknowledged delivery,
            # including those prefetched into this client's buffer (0-9-1 tx.rollback alone would
            # neither void the buffer nor redeliver anything).
            if self.session is not None:
                self.session.close()
                self.session = None
            raise TransactionRolledBack(ids, "connection lost inside the transaction")
        try:
            self._open().commit()
        except ConnectionLost:
            self._lost("commit")
            self.in_doubt = False
            raise TransactionRolledBack(ids, "connection lost with the commit in flight") from None
