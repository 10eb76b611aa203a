"""Queue administration and counting for the STOMP adapter, chosen by the dialect's ``stats`` entry.

STOMP 1.2 has no queue declare, delete or statistics: destinations are the server's business. The
cases still need queues of a type and barriers, so, as the AMQP 1.0 adapter does, setup and counters
go through a backend while every message operation under test stays on STOMP:

* ``amqp-0-9-1``: the broker serves AMQP 0-9-1 beside STOMP (RabbitMQ): queues of every type are
  declared, counted (passive queue.declare: ready and consumers) and deleted over a side connection
  on the port named by the URL option ``amqp-port``, through the installed ``pika`` adapter plugin.
* ``browse``: the broker creates a queue when it is first addressed and lets a subscription browse
  it (ActiveMQ ``browser:true``): the count is what a browser sees before ``browser:end``, i.e. every
  message not yet acknowledged (held ones included), and a consumer's departure is awaited by an
  ordering barrier (a fresh connection's SUBSCRIBE/UNSUBSCRIBE answered by RECEIPT), since STOMP
  cannot see another connection's subscriptions.
* ``none``: as ``browse`` without counts (cases needing counts are unsupported by the adapter).

A backend gets the STOMP connection it serves and opens any further one through it
(``conn.another``), so this module never imports the adapter that creates it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from conformance.api import AckMode, QueueSpec, QueueStats
from conformance.errors import OperationTimeout, TargetCannot, Unsupported

#: How long one browse may take before counting is declared impossible.
BROWSE_S = 5.0


class _Created:
    """Plain queues created by addressing them (SUBSCRIBE then UNSUBSCRIBE, both receipted)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def declare_queue(self, spec: QueueSpec, session: Any) -> str:
        if spec.arguments or spec.queue_type not in ("classic", "default"):
            raise Unsupported(f"declaring a {spec.queue_type} queue with arguments {spec.arguments} over STOMP on "
                              f"{self.conn.server.product}: no queue admin for it (dialect stats={self.conn.dialect['stats']})")
        session.consume(spec.name, ack_mode=AckMode.MANUAL).cancel()
        return spec.name

    def delete_queue(self, name: str) -> None:
        return None  # STOMP cannot delete a destination; a launched broker's data goes with its directory

    def departure_barrier(self, name: str) -> str | None:
        start = time.monotonic()
        other = self.conn.another("barrier")
        try:
            other.session().consume(name, ack_mode=AckMode.MANUAL).cancel()
        finally:
            other.close()
        return (f"no consumer count over STOMP on {self.conn.server.product}: ordering barrier = a new connection's "
                f"CONNECT, SUBSCRIBE and UNSUBSCRIBE on {name}, receipted in {(time.monotonic() - start) * 1000:.1f}ms")

    def queue_stats(self, name: str) -> QueueStats:
        raise Unsupported(f"STOMP has no queue statistics and the dialect of {self.conn.server.product} names no way to count")

    def close(self) -> None:
        return None


class BrowseCounter(_Created):
    def queue_stats(self, name: str) -> QueueStats:
        other = self.conn.another("counter")
        try:
            browser = other.session().browser(name)
            seen = 0
            end = time.monotonic() + BROWSE_S
            while True:
                try:
                    d = browser.next(max(0.0, end - time.monotonic()))
                except OperationTimeout:
                    raise TargetCannot(f"counting {name} by a browsing SUBSCRIBE: no MESSAGE with browser:end within {BROWSE_S:g}s",
                                       kind="cannot-express") from None
                if d.headers.get("browser") == "end":
                    return QueueStats(ready=seen, consumers=None,
                                      method=f"STOMP browse of {name} (unacknowledged messages, held ones included)")
                seen += 1
        finally:
            other.close()


class Amqp091Side:
    """Setup and counters over AMQP 0-9-1 on the same broker (the pika adapter plugin)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        port = conn.options.get("amqp-port")
        if not port:
            raise TargetCannot(f"{conn.server.product} counts over AMQP 0-9-1, but the STOMP URL has no amqp-port option",
                               kind="cannot-express")
        parts = urlsplit(conn.url)
        netloc = parts.netloc.rsplit(":", 1)[0] + f":{port}"
        self.url = urlunsplit(("amqp", netloc, "/" + conn.options.get("vhost", "%2F"), "", ""))
        self._c: Any = None
        self._s: Any = None

    def _session(self) -> Any:
        if self._s is None or not self._s.is_open:
            from conformance.api import adapter_for

            self.close()
            self._c = adapter_for("amqp", "pika")().connect(self.url, name="conformance stomp admin", op_timeout=self.conn.op_timeout)
            self._s = self._c.session()
        return self._s

    def declare_queue(self, spec: QueueSpec, session: Any) -> str:
        return str(self._session().declare_queue(spec))

    def delete_queue(self, name: str) -> None:
        self._session().delete_queue(name)

    def queue_stats(self, name: str) -> QueueStats:
        stats: QueueStats = self._session().queue_stats(name)
        return stats

    def departure_barrier(self, name: str) -> str | None:
        return None  # the consumer count is the barrier

    def close(self) -> None:
        c, self._c, self._s = self._c, None, None
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing a side connection never masks a verdict
                c.cut()


def admin_for(conn: Any) -> Any:
    kind = conn.dialect["stats"]
    if kind == "amqp-0-9-1":
        return Amqp091Side(conn)
    if kind == "browse":
        return BrowseCounter(conn)
    return _Created(conn)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
