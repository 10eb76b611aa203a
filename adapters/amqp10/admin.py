"""Queue administration for the AMQP 1.0 adapter.

AMQP 1.0 has no queue.declare: nodes are the broker's business. The cases still need queues of a
given type with given arguments, and queue statistics for their barriers, so the adapter delegates
administration to a backend chosen from the server it talks to. Every message operation under test
(transfer, flow, disposition, detach, disconnect) stays on AMQP 1.0; only setup and counters go
through the backend, the way a broker team's own tests create queues through management.

Backends:

* ``amqp091``: RabbitMQ serves AMQP 0-9-1 on the same port (the protocol header picks), so queues
  of every type are declared, counted and deleted over a side 0-9-1 session.
* ``none``: the broker creates nodes on attach (Artemis auto-create, Broker-J node auto-creation
  policies). A plain queue "exists" by being addressed; typed queues and counters are unsupported.
"""

from __future__ import annotations

from typing import Any, Protocol

from conformance.api import QueueSpec, QueueStats
from conformance.errors import Unsupported


class QueueAdmin(Protocol):
    name: str
    #: The backend reads queue counters (ready, consumers).
    counts: bool

    def declare_queue(self, spec: QueueSpec) -> str: ...
    def delete_queue(self, name: str) -> None: ...
    def queue_stats(self, name: str) -> QueueStats: ...
    def declare_exchange(self, name: str, kind: str) -> None: ...
    def delete_exchange(self, name: str) -> None: ...
    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None: ...
    def close(self) -> None: ...


class Amqp091Admin:
    """A lazily opened AMQP 0-9-1 session on the same URL, for setup and counters only."""

    name = "amqp091"
    counts = True

    def __init__(self, url: str, *, op_timeout: float | None) -> None:
        self._url = url
        self._op_timeout = op_timeout
        self._conn: Any = None
        self._session: Any = None

    def _s(self) -> Any:
        if self._session is None or not self._session.is_open:
            from adapters.amqp091.pika_adapter import PikaAdapter

            if self._conn is not None:
                self.close()
            self._conn = PikaAdapter().connect(self._url, name="conformance amqp-1.0 admin", op_timeout=self._op_timeout)
            self._session = self._conn.session()
        return self._session

    def declare_queue(self, spec: QueueSpec) -> str:
        return str(self._s().declare_queue(spec))

    def delete_queue(self, name: str) -> None:
        self._s().delete_queue(name)

    def queue_stats(self, name: str) -> QueueStats:
        stats: QueueStats = self._s().queue_stats(name)
        return stats

    def declare_exchange(self, name: str, kind: str) -> None:
        self._s().declare_exchange(name, kind)

    def delete_exchange(self, name: str) -> None:
        self._s().delete_exchange(name)

    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None:
        self._s().bind_queue(queue, exchange, routing_key)

    def close(self) -> None:
        conn, self._conn, self._session = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                conn.cut()


class NodeOnAttachAdmin:
    """For brokers that create a node when it is first addressed; nothing else can be administered."""

    name = "none"
    counts = False

    def __init__(self, product: str) -> None:
        self._product = product

    def declare_queue(self, spec: QueueSpec) -> str:
        if spec.arguments or spec.queue_type not in ("classic", "default"):
            raise Unsupported(f"declaring a {spec.queue_type} queue with arguments {spec.arguments} needs a queue admin for {self._product}")
        return spec.name

    def delete_queue(self, name: str) -> None:
        return None

    def queue_stats(self, name: str) -> QueueStats:
        raise Unsupported(f"queue counters need a management backend for {self._product} (AMQP 1.0 itself has none)")

    def declare_exchange(self, name: str, kind: str) -> None:
        raise Unsupported(f"exchanges are not an AMQP 1.0 notion on {self._product}")

    def delete_exchange(self, name: str) -> None:
        raise Unsupported(f"exchanges are not an AMQP 1.0 notion on {self._product}")

    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None:
        raise Unsupported(f"bindings are not an AMQP 1.0 notion on {self._product}")

    def close(self) -> None:
        return None


def admin_for(product: str, url: str, *, op_timeout: float | None) -> QueueAdmin:
    if product.lower() == "rabbitmq":
        return Amqp091Admin(url, op_timeout=op_timeout)
    return NodeOnAttachAdmin(product)
