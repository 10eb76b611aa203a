"""Queue administration for the AMQP 1.0 adapter.

AMQP 1.0 has no queue.declare: nodes are the broker's business. The cases still need queues of a
given type with given arguments, and queue statistics for their barriers, so the adapter delegates
administration to a backend chosen from the server it talks to. Every message operation under test
(transfer, flow, disposition, detach, disconnect) stays on AMQP 1.0; only setup and counters go
through the backend, the way a broker team's own tests create queues through management.

Backends:

* ``amqp091``: RabbitMQ serves AMQP 0-9-1 on the same port (the protocol header picks), so queues
  of every type are declared, counted and deleted over a side 0-9-1 session.
* ``qmf``: the Qpid C++ broker (qpidd) is managed by QMF v2 map messages over AMQP 1.0 itself
  (:mod:`adapters.amqp10.qmf`): queues with qpidd's own options where they mean what the neutral
  arguments mean, exchanges, bindings, and counts from its queue statistics.
* ``amqp-1.0``: the broker creates nodes on attach (Artemis auto-create, Broker-J node auto-creation
  policies, the Qpid Proton example broker). A plain queue "exists" by being addressed; typed
  queues are unsupported. Counting comes from the protocol itself (:class:`ProtocolCounter`): ready
  messages by draining a browsing (distribution-mode copy) link when the broker grants one, and a
  consumer's departure by an ordering barrier (a fresh connection's attach round trip), because
  AMQP 1.0 has no way to count another connection's links.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from adapters.amqp10.qmf import QmfAdmin
from conformance.api import Adapter, QueueSpec, QueueStats
from conformance.errors import ChannelClosed, OperationTimeout, TargetCannot, Unsupported

#: How long a browsing link's drain may take to be answered before counting is declared impossible.
DRAIN_ANSWER_S = 2.0
#: Credit of the counting drain: more messages than any case ever queues.
COUNT_CREDIT = 10_000


class QueueAdmin(Protocol):
    name: str
    #: The backend reads queue counters (ready, consumers).
    counts: bool
    #: What the backend lets the adapter express besides the protocol's own capabilities
    #: (conformance/catalogue/data/capabilities.yaml): typed queues with arguments, exchanges, ...
    capabilities: frozenset[str]

    def declare_queue(self, spec: QueueSpec) -> str: ...
    def delete_queue(self, name: str) -> None: ...
    def queue_stats(self, name: str) -> QueueStats: ...
    def departure_barrier(self, name: str) -> str | None: ...
    def purge_queue(self, name: str) -> int: ...
    def declare_exchange(self, name: str, kind: str) -> None: ...
    def delete_exchange(self, name: str) -> None: ...
    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None: ...
    def close(self) -> None: ...


class Amqp091Admin:
    """A lazily opened AMQP 0-9-1 session on the same URL, for setup and counters only."""

    name = "amqp091"
    counts = True
    capabilities = frozenset({"queue.arguments", "exchanges", "queue.durability", "queue.purge"})

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
        if spec.exclusive:
            # 0-9-1 makes a queue exclusive to the connection that declares it: here the side session's,
            # never the AMQP 1.0 connection the case works on
            raise TargetCannot("an exclusive queue would belong to the admin's AMQP 0-9-1 side connection, not to the AMQP 1.0 "
                               "connection the case uses (AMQP 1.0 has no queue.declare to make it exclusive with)", kind="cannot-express")
        return str(self._s().declare_queue(spec))

    def delete_queue(self, name: str) -> None:
        self._s().delete_queue(name)

    def queue_stats(self, name: str) -> QueueStats:
        stats: QueueStats = self._s().queue_stats(name)
        return stats

    def departure_barrier(self, name: str) -> str | None:
        return None  # the consumer count itself is the barrier

    def purge_queue(self, name: str) -> int:
        return int(self._s().purge_queue(name))  # queue.purge; purge-ok message-count

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


class ProtocolCounter:
    """For brokers that create a node when it is first addressed and offer no management backend.

    Nothing but plain queues can be administered; the counts come from AMQP 1.0 itself:

    * ready messages: a receiving link asking for distribution-mode copy is attached *without
      credit*; only if the broker's attach reply grants copy is credit given, with drain set, and
      the deliveries that arrive before the broker's flow (credit used up) are counted. Nothing is
      acquired, so counting changes nothing. A broker that does not grant copy, or never answers
      the drain, cannot be counted this way: the error says which step failed and what the broker
      answered (acquiring and releasing to count would alter what the case observes).
    * consumers: AMQP 1.0 cannot see another connection's links. A departure (a consumer's
      connection cut or closed) is awaited by an ordering barrier instead: a fresh connection's
      open, begin, attach and detach on the queue's address, all answered by the broker after the
      departing connection was gone. That is ordering evidence, not a count, and it is recorded so.

    Both open connections of their own through ``adapter``, the AMQP 1.0 adapter whose connection
    owns this admin (it hands itself over, so this module never imports it).
    """

    name = "amqp-1.0"
    counts = False
    capabilities: frozenset[str] = frozenset()  # plain queues only: a node exists by being addressed

    def __init__(self, product: str, url: str, *, op_timeout: float | None, adapter: type[Adapter]) -> None:
        self._product = product
        self._url = url
        self._op_timeout = op_timeout
        self._adapter = adapter
        #: Why ready messages cannot be counted on this broker, once found out (asked once per admin).
        self._uncountable: str | None = None

    def _connect(self, purpose: str) -> Any:
        return self._adapter().connect(self._url, name=f"conformance amqp-1.0 {purpose}", op_timeout=self._op_timeout)

    def declare_queue(self, spec: QueueSpec) -> str:
        if spec.arguments or spec.queue_type not in ("classic", "default"):
            raise Unsupported(f"declaring a {spec.queue_type} queue with arguments {spec.arguments} needs a queue admin for {self._product}")
        return spec.name

    def delete_queue(self, name: str) -> None:
        return None

    def queue_stats(self, name: str) -> QueueStats:
        if self._uncountable is not None:
            raise TargetCannot(self._uncountable, kind="cannot-express")
        conn = self._connect("counter")
        try:
            session = conn.session()
            try:
                browser = session.browser(name)
            except ChannelClosed as exc:
                self._uncountable = f"counting ready messages of {name} over AMQP 1.0: the broker refused a browsing link ({exc.text})"
                raise TargetCannot(self._uncountable, kind="cannot-express") from None
            granted = browser.granted.get("distribution-mode")
            if granted != "copy":
                self._uncountable = (f"counting ready messages over AMQP 1.0 needs a browsing link: asked distribution-mode copy, "
                                     f"{self._product} granted {granted} (acquiring to count would take the messages)")
                raise TargetCannot(self._uncountable, kind="cannot-express")
            seen, answered = self._browse_drain(browser)
            if not answered:
                self._uncountable = (f"counting ready messages over AMQP 1.0: {self._product} granted a browsing link but never "
                                     f"answered a drain of {COUNT_CREDIT} credit within {DRAIN_ANSWER_S:.0f}s (no flow with credit 0)")
                raise TargetCannot(self._uncountable, kind="cannot-express")
            # A broker may echo copy and still acquire (RabbitMQ's 3.x plugin does): a second browser,
            # while the first still holds its deliveries unsettled, must see the same messages.
            again, answered = self._browse_drain(session.browser(name))
            if len(again) != len(seen):
                self._uncountable = (f"counting ready messages over AMQP 1.0: {self._product} granted distribution-mode copy, "
                                     f"but a second browser saw {len(again)} of the {len(seen)} messages the first one holds"
                                     f"{'' if answered else ' (its drain unanswered)'}: its browsing acquires, so it cannot count")
                raise TargetCannot(self._uncountable, kind="cannot-express")
            return QueueStats(ready=len(seen), consumers=None, method=f"AMQP 1.0 browse-drain of {name}")
        finally:
            conn.close()

    def _browse_drain(self, browser: Any) -> tuple[list[Any], bool]:
        """What a drain of a browsing link brought, and whether the broker answered it (credit 0)."""
        try:
            return list(browser.drain(COUNT_CREDIT, DRAIN_ANSWER_S)), True
        except OperationTimeout:
            got = list(browser.buffer)
            browser.buffer.clear()
            return got, False
        except ChannelClosed as exc:
            self._uncountable = f"counting ready messages over AMQP 1.0: {self._product} ended the session on a drain of a browsing link ({exc.text})"
            raise TargetCannot(self._uncountable, kind="cannot-express") from None

    def departure_barrier(self, name: str) -> str | None:
        start = time.monotonic()
        conn = self._connect("barrier")
        try:
            session = conn.session()
            session.sync_on(name)
        finally:
            conn.close()
        return (f"no consumer count over AMQP 1.0 on {self._product} (no management backend): ordering barrier = a new "
                f"connection's open/begin/attach/detach on {name}, answered in {(time.monotonic() - start) * 1000:.1f}ms")

    def purge_queue(self, name: str) -> int:
        raise Unsupported(f"AMQP 1.0 has no queue purge, and no admin backend purges queues on {self._product}")

    def declare_exchange(self, name: str, kind: str) -> None:
        raise Unsupported(f"exchanges are not an AMQP 1.0 notion on {self._product}")

    def delete_exchange(self, name: str) -> None:
        raise Unsupported(f"exchanges are not an AMQP 1.0 notion on {self._product}")

    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None:
        raise Unsupported(f"bindings are not an AMQP 1.0 notion on {self._product}")

    def close(self) -> None:
        return None


#: The backend for each server, by the product its AMQP 1.0 open announces; any other server gets
#: the protocol counter.
BACKENDS: dict[str, type[Amqp091Admin] | type[QmfAdmin]] = {"rabbitmq": Amqp091Admin, "qpid-cpp": QmfAdmin}


#: What a backend that reads a queue's consumer count adds: many receiving links of one session on
#: one queue, judged by the count (AMQP 1.0 itself cannot count another connection's links).
COUNTED_CONSUMERS = frozenset({"consume.many-per-session"})


def backend_capabilities(product: str) -> frozenset[str]:
    """What the admin backend for ``product`` adds to the AMQP 1.0 adapter's capabilities."""
    backend = BACKENDS.get(product.lower())
    if backend is None:
        return ProtocolCounter.capabilities
    return backend.capabilities | (COUNTED_CONSUMERS if backend.counts else frozenset())


def declarable(product: str, spec: QueueSpec) -> str | None:
    """Why the admin backend for ``product`` cannot declare ``spec`` at all (None: it can, or only
    the broker's answer tells: RabbitMQ's side session sends every argument and reads the refusal)."""
    check = getattr(BACKENDS.get(product.lower()), "declarable", None)
    return check(spec) if callable(check) else None


def admin_for(product: str, url: str, *, op_timeout: float | None, adapter: type[Adapter]) -> QueueAdmin:
    """The backend for the server the AMQP 1.0 ``adapter`` connected to."""
    backend = BACKENDS.get(product.lower())
    if backend is not None:
        return backend(url, op_timeout=op_timeout)
    return ProtocolCounter(product, url, op_timeout=op_timeout, adapter=adapter)
