"""Clients with a node list (seed 002 on a cluster): reconnect to the next node when theirs dies.

The AMQ JMS client is given a list of broker URIs (``failover:(uri1,uri2,...)``) and, when the
connection drops, reconnects to the next one: in-flight non-transacted sends are sent again, a
consumer's acknowledgement of a delivery from the dead connection does nothing, and duplicates are
the application's to filter by message id (seed 002, "Handling unacknowledged deliveries"). These
are that behaviour over the neutral API; the transacted side is
:class:`conformance.kit.clients.failover.FailoverProducer`, given :meth:`NodeList.connect`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from conformance.api import AckMode, Consumer, Delivery, Session
from conformance.errors import AdapterError, ConnectionLost, OperationTimeout
from conformance.nemesis.cluster import until_accepted


@dataclass
class NodeList:
    """Connect to the nodes in turn: the current one first, the next one after a failure."""

    open_session: Callable[[str], Session]
    nodes: list[str]
    index: int = 0
    #: Nodes connected to, in order (a failover shows as a change of node).
    used: list[str] = field(default_factory=list)

    @property
    def current(self) -> str:
        return self.nodes[self.index % len(self.nodes)]

    def failed(self) -> None:
        """The current node's connection died: the next connect starts with the next node."""
        self.index += 1

    def connect(self) -> Session:
        last: Exception | None = None
        for _ in range(2 * len(self.nodes)):
            node = self.current
            try:
                session = self.open_session(node)
            except (AdapterError, OSError) as exc:  # a dead node refuses: try the next one
                last = exc
                self.index += 1
                continue
            self.used.append(node)
            return session
        raise ConnectionLost(f"no node of {self.nodes} accepted a connection: {last}")


@dataclass
class ConfirmingProducer:
    """Non-transacted, with publisher confirms: a send in flight when the connection dies is sent
    again through the next node (so it may arrive twice, never zero times)."""

    nodes: NodeList
    queue: str
    max_reconnects: int = 6
    session: Session | None = None
    confirmed: list[str] = field(default_factory=list)
    #: Sends whose confirm never came because the connection died (each was then sent again).
    in_doubt: list[str] = field(default_factory=list)
    reconnects: int = 0
    #: Publishes the broker refused (nack) and the producer sent again over a fresh channel.
    refused: int = 0
    refused_window_s: float = 45.0

    def _open(self) -> Session:
        if self.session is None:
            self.session = self.nodes.connect()
            self.session.enable_confirms()
        return self.session

    def _reopen(self) -> Session:
        """A fresh session on the same node (a refused channel stays refused, see until_accepted)."""
        self.session = None
        return self._open()

    def send(self, message_id: str, body: bytes) -> None:
        while True:
            try:
                self.session, refused = until_accepted(
                    lambda s: s.publish(self.queue, body, message_id=message_id, persistent=True),
                    self._open(), self._reopen, time.monotonic() + self.refused_window_s)
                self.refused += refused
                self.confirmed.append(message_id)
                return
            except (ConnectionLost, OperationTimeout):
                if message_id not in self.in_doubt:
                    self.in_doubt.append(message_id)
                self.session = None
                self.nodes.failed()
                self.reconnects += 1
                if self.reconnects > self.max_reconnects:
                    raise


@dataclass
class DedupConsumer:
    """Manual-ack consumer that reconnects to the next node and filters duplicates by message id.

    ``raw`` is every delivery as it arrived (with the node it came through); :meth:`receive`
    returns only messages whose id it has not seen."""

    nodes: NodeList
    queue: str
    prefetch: int = 10
    max_reconnects: int = 6
    session: Session | None = None
    consumer: Consumer | None = None
    seen: set[str] = field(default_factory=set)
    raw: list[dict[str, object]] = field(default_factory=list)
    reconnects: int = 0

    def _open(self) -> Consumer:
        if self.consumer is None:
            self.session = self.nodes.connect()
            self.consumer = self.session.consume(self.queue, ack_mode=AckMode.MANUAL, prefetch=self.prefetch)
        return self.consumer

    def _lost(self) -> None:
        self.session = self.consumer = None
        self.nodes.failed()
        self.reconnects += 1
        if self.reconnects > self.max_reconnects:
            raise ConnectionLost(f"gave up after {self.max_reconnects} reconnects")

    def receive(self, timeout: float) -> Delivery:
        """The next message not seen before; OperationTimeout when none came within ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            try:
                d = self._open().next(max(0.0, end - time.monotonic()))
            except ConnectionLost:
                self._lost()
                continue
            self.raw.append({"id": d.message_id, "redelivered": d.redelivered, "node": self.nodes.current})
            self._ack(d)
            if d.message_id in self.seen:
                continue  # a duplicate, filtered by message id (seed 002)
            self.seen.add(d.message_id or "")
            return d

    def _ack(self, d: Delivery) -> None:
        """After a failover an ack of an old delivery does nothing (seed 002): a lost ack is dropped."""
        try:
            assert self.session is not None
            self.session.ack(d.tag)
        except ConnectionLost:
            self._lost()

    def close(self) -> None:
        if self.session is not None:
            try:
                self.session.close()
            except ConnectionLost:
                pass
            self.session = self.consumer = None
