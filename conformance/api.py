"""The protocol-neutral client API that cases are written against, and the adapter plugin interface.

An adapter maps these operations onto one client library and protocol (pika for AMQP 0-9-1,
python-qpid-proton for AMQP 1.0, the in-house client, ...). Cases never import a client library:
they speak in queues, deliveries, acknowledgements and faults, so one case runs through every
adapter whose protocol can express it. What a protocol cannot express raises
:class:`~conformance.errors.Unsupported`, which the runner reports as such, never as a pass.

Adapters are discovered through the ``conformance.adapters`` entry-point group.
"""

from __future__ import annotations

import abc
import enum
import time
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, ClassVar, Iterable

ADAPTER_GROUP = "conformance.adapters"


class AckMode(str, enum.Enum):
    """How the broker learns that a delivery was handled."""

    #: The client settles each delivery (basic.ack/nack/reject; AMQP 1.0 unsettled link).
    MANUAL = "manual"
    #: The broker settles at send (AMQP 0-9-1 no-ack; AMQP 1.0 pre-settled, at-most-once).
    AUTO = "auto"


class AckScope(str, enum.Enum):
    """The JMS seeds' client acknowledgement modes, expressed on one received delivery."""

    #: CLIENT_ACKNOWLEDGE: this delivery and every earlier one on the session (AMQP 0-9-1 multiple=true).
    CUMULATIVE = "cumulative"
    #: INDIVIDUAL_ACKNOWLEDGE: this delivery only.
    INDIVIDUAL = "individual"


@dataclass(frozen=True)
class QueueSpec:
    name: str
    #: Broker queue type as the profile names it ("classic", "quorum", ...).
    queue_type: str = "classic"
    durable: bool = True
    exclusive: bool = False
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueStats:
    #: Messages ready for delivery (not counting deliveries awaiting acknowledgement).
    ready: int
    #: None where the protocol cannot count consumers (AMQP 1.0 without a management backend).
    consumers: int | None
    #: How the counts were taken, when not by the protocol's own query (e.g. "AMQP 1.0 browse-drain").
    method: str = ""


@dataclass(frozen=True)
class ServerInfo:
    product: str
    version: str
    protocol: str
    #: Raw server properties as announced at connect time (no secrets: brokers don't send them).
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Delivery:
    """One message as a consumer (or get) received it, in neutral terms."""

    tag: int
    body: bytes
    message_id: str | None
    redelivered: bool
    #: Broker-reported count of earlier delivery attempts (x-delivery-count, AMQP 1.0 header), if any.
    delivery_count: int | None
    headers: dict[str, Any]
    persistent: bool | None
    consumer_tag: str | None = None
    queue: str | None = None
    #: Per-message TTL as the broker delivered it (0-9-1 expiration property), if any.
    expiration: str | None = None
    #: AMQP 1.0 header first-acquirer (None where the protocol has no such field).
    first_acquirer: bool | None = None
    #: The broker settled the delivery at send (AMQP 1.0 pre-settled transfer; 0-9-1 no-ack).
    presettled: bool | None = None
    received_at: float = field(default_factory=time.monotonic)

    def brief(self) -> str:
        return f"{self.message_id}(tag={self.tag}, redelivered={str(self.redelivered).lower()})"


@dataclass(frozen=True)
class PublisherEvent:
    """What the broker told a publisher about its own publishes, in arrival order: a publisher
    confirm (``ack`` or ``nack``: ``tag`` is the publish's sequence number on its session,
    ``multiple`` covers every tag up to it still unconfirmed), a ``return`` (``code``, ``text`` and
    the returned message's ``message_id``), or the reply to a round trip the client made among
    them (``sync-ok``, ``commit-ok``)."""

    kind: str
    tag: int = 0
    multiple: bool = False
    code: int = 0
    text: str = ""
    message_id: str | None = None

    def brief(self) -> str:
        if self.kind in ("ack", "nack"):
            return f"{self.kind}({self.tag}{', multiple' if self.multiple else ''})"
        if self.kind == "return":
            return f"return({self.message_id}, {self.code})"
        return self.kind


class Consumer(abc.ABC):
    """A subscription on one queue; deliveries are buffered in arrival order."""

    tag: str
    queue: str
    ack_mode: AckMode
    #: What the broker granted where it may differ from what was asked (AMQP 1.0 attach reply:
    #: snd-settle-mode, distribution-mode). Empty where the protocol grants nothing.
    granted: dict[str, str] = {}
    requested: dict[str, str] = {}
    #: Whether :meth:`cancel` leaves the deliveries already made held and settleable (AMQP 0-9-1
    #: basic.cancel "does not affect already delivered messages"). False where the protocol ends them
    #: with the subscription (an AMQP 1.0 closing detach: the source's default-outcome settles what
    #: the link held, messaging 3.5.3): a client that must settle them stops the flow first (:meth:`pause`,
    #: :meth:`drain`) and settles before it cancels.
    cancel_keeps_held: ClassVar[bool] = True

    @abc.abstractmethod
    def next(self, timeout: float) -> Delivery:
        """The next delivery, waiting at most ``timeout`` s (OperationTimeout otherwise)."""

    def take(self, n: int, timeout: float) -> list[Delivery]:
        """Exactly ``n`` deliveries within one overall deadline."""
        end = time.monotonic() + timeout
        return [self.next(max(0.0, end - time.monotonic())) for _ in range(n)]

    def drain(self, credit: int, timeout: float) -> list[Delivery]:
        """AMQP 1.0 drain: grant ``credit`` with drain set and return what arrived before the broker
        answered with the credit used up. Protocols without link credit raise Unsupported."""
        from conformance.errors import Unsupported

        raise Unsupported("this protocol has no link credit to drain")

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop the subscription (basic.cancel / link detach). Unacknowledged deliveries stay held."""

    def pause(self) -> None:
        """Stop further deliveries to this subscription while those already made stay held and
        settleable (capability consume.pause): 0-9-1 basic.cancel, AMQP 1.0 no more link credit.
        Protocols without such a stop raise Unsupported."""
        from conformance.errors import Unsupported

        raise Unsupported("this protocol cannot stop a subscription and keep its deliveries held")


class Session(abc.ABC):
    """An AMQP 0-9-1 channel or an AMQP 1.0 session: the scope of delivery tags and acknowledgements."""

    @abc.abstractmethod
    def declare_queue(self, spec: QueueSpec) -> str: ...

    @abc.abstractmethod
    def delete_queue(self, name: str) -> None: ...

    @abc.abstractmethod
    def queue_stats(self, name: str) -> QueueStats:
        """Broker-side counts, read synchronously (0-9-1: passive queue.declare)."""

    def purge_queue(self, name: str) -> int:
        """Remove every ready message of ``name``; the count the broker answered (0-9-1 purge-ok
        message-count). Protocols without a purge raise Unsupported."""
        from conformance.errors import Unsupported

        raise Unsupported("this protocol has no queue purge")

    def await_departure(self, queue: str) -> str | None:
        """Barrier for "every consumer of ``queue`` left" where consumers cannot be counted: return
        what proved it (the mechanism and the broker's answer), or None when :meth:`queue_stats`
        counts consumers and polling it is the barrier."""
        return None

    @abc.abstractmethod
    def enable_confirms(self) -> None:
        """From now on :meth:`publish` returns only once the broker has accepted the message."""

    @abc.abstractmethod
    def publish(
        self,
        queue: str,
        body: bytes,
        *,
        message_id: str | None = None,
        persistent: bool = False,
        headers: dict[str, Any] | None = None,
        expiration_ms: int | None = None,
        priority: int | None = None,
        exchange: str = "",
    ) -> None:
        """Send one message to ``queue`` (0-9-1: default exchange, routing key = queue);
        ``expiration_ms`` is the per-message TTL; ``priority`` the message priority (0-9);
        ``exchange``: publish to this exchange with ``queue`` as the routing key (AMQP 0-9-1; a
        protocol without exchanges raises Unsupported)."""

    def publish_pipelined(self, queue: str, messages: list[tuple[str, bytes]], *, mandatory: bool = False,
                          exchange: str = "", commit: bool = False, window: float = 5.0) -> list["PublisherEvent"]:
        """Publish ``messages`` (message id, body) back to back, without waiting for the broker
        between them, and return what the broker sent about them in arrival order.

        Without ``commit`` the session is in confirm mode (0-9-1 confirm.select on first use, its
        sequence numbers continuing across calls) and the call collects until each of these
        publishes is confirmed. With ``commit`` the session must be transactional: a round trip
        (``sync-ok``) after the last publish, then tx.commit (``commit-ok``) and another round trip,
        so a basic.return shows where it arrived. It waits at most ``window`` seconds: a confirm
        that never comes is absent from the list, not an error. ``mandatory``: the publishes ask
        for a basic.return when unroutable. A protocol without these raises Unsupported."""
        from conformance.errors import Unsupported

        raise Unsupported("this adapter has no pipelined publishing with publisher confirms")

    @abc.abstractmethod
    def consume(self, queue: str, *, ack_mode: AckMode = AckMode.MANUAL, prefetch: int | None = None,
                browse: bool = False, exclusive: bool = False, tag: str | None = None,
                arguments: dict[str, Any] | None = None) -> Consumer:
        """Subscribe. ``browse``: see messages without acquiring them (AMQP 1.0 distribution-mode copy);
        a protocol without browsing raises Unsupported. ``exclusive``: AMQP 0-9-1 basic.consume
        exclusive (only this consumer may access the queue); a protocol without it raises Unsupported.
        ``tag``: the consumer tag the client chooses (AMQP 0-9-1, e.g. to re-use a cancelled
        consumer's; ``""`` asks the broker to name the consumer, read back as ``Consumer.tag``); a
        protocol without client-chosen consumer tags raises Unsupported. ``arguments``: the
        consumer's arguments (AMQP 0-9-1 basic.consume arguments, e.g. x-priority)."""

    @abc.abstractmethod
    def get(self, queue: str, *, ack_mode: AckMode = AckMode.MANUAL, timeout: float = 5.0) -> Delivery | None:
        """Fetch one message synchronously; None when the queue is empty."""

    @abc.abstractmethod
    def ack(self, tag: int, *, multiple: bool = False) -> None: ...

    @abc.abstractmethod
    def nack(self, tag: int, *, multiple: bool = False, requeue: bool = True) -> None: ...

    @abc.abstractmethod
    def reject(self, tag: int, *, requeue: bool = True) -> None: ...

    def settle(self, tag: int, outcome: str, *, delivery_failed: bool = False, undeliverable_here: bool = False) -> None:
        """Settle with an explicit AMQP 1.0 outcome: accepted, released, rejected or modified."""
        from conformance.errors import Unsupported

        raise Unsupported("this adapter's protocol has no AMQP 1.0 outcomes")

    @abc.abstractmethod
    def recover(self, *, requeue: bool = True) -> None: ...

    @abc.abstractmethod
    def qos(self, prefetch: int, *, global_: bool = False, prefetch_size: int = 0) -> None:
        """basic.qos prefetch-count ``prefetch`` (0: no limit); ``prefetch_size``: the window in octets
        (AMQP 0-9-1; a protocol without it raises Unsupported for a non-zero value)."""

    @abc.abstractmethod
    def sync(self) -> None:
        """A round trip on this session: every operation sent before it has been processed by the broker.

        Raises :class:`~conformance.errors.ChannelClosed` if the broker closed the session meanwhile
        (e.g. 406 for an ack of an unknown tag), which is how asynchronous errors become observable.
        """

    # Exchanges and bindings (0-9-1; dead-letter routing needs them). Optional like transactions.

    def declare_exchange(self, name: str, kind: str = "direct") -> None:
        from conformance.errors import Unsupported

        raise Unsupported("this adapter cannot declare exchanges")

    def delete_exchange(self, name: str) -> None:
        from conformance.errors import Unsupported

        raise Unsupported("this adapter cannot delete exchanges")

    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None:
        from conformance.errors import Unsupported

        raise Unsupported("this adapter cannot bind queues")

    # Local transactions (0-9-1 tx class; AMQP 1.0 transaction coordinator). Optional: an adapter
    # whose protocol or broker has none keeps these defaults, and the case reports unsupported.

    def select_tx(self) -> None:
        """Make this session transactional: publishes and acks take effect only at :meth:`commit`."""
        from conformance.errors import Unsupported

        raise Unsupported("this adapter has no local transactions")

    def commit(self) -> None:
        """Commit the open transaction; returns once the broker confirmed it (tx.commit-ok)."""
        from conformance.errors import Unsupported

        raise Unsupported("this adapter has no local transactions")

    def rollback(self) -> None:
        from conformance.errors import Unsupported

        raise Unsupported("this adapter has no local transactions")

    @abc.abstractmethod
    def close(self) -> None:
        """Graceful close (channel.close / session end): the broker requeues unacknowledged deliveries."""

    @property
    @abc.abstractmethod
    def is_open(self) -> bool: ...

    def acknowledge(self, delivery: Delivery, scope: AckScope) -> None:
        """The JMS client-acknowledge modes; an adapter whose protocol differs overrides this."""
        self.ack(delivery.tag, multiple=scope is AckScope.CUMULATIVE)


class Connection(abc.ABC):
    server: ServerInfo

    @abc.abstractmethod
    def session(self) -> Session: ...

    @abc.abstractmethod
    def close(self) -> None:
        """Graceful close with the protocol's handshake."""

    @abc.abstractmethod
    def cut(self) -> None:
        """Abrupt disconnect: the socket is reset (RST) with no close handshake, as a crashed client would."""

    @property
    @abc.abstractmethod
    def is_open(self) -> bool: ...


class Adapter(abc.ABC):
    """A client plugin. Registered under ``conformance.adapters``; the core never names one."""

    #: Short name used on the command line and in results.
    name: ClassVar[str]
    #: Protocol tag carried into every result record ("amqp-0-9-1", "amqp-1.0").
    protocol: ClassVar[str]
    #: URL schemes this adapter can connect to.
    schemes: ClassVar[tuple[str, ...]]
    #: Operations this adapter's protocol can express, beyond the core (e.g. "recover", "nack").
    features: ClassVar[frozenset[str]] = frozenset()
    #: The target of a run that names none (a launcher name under ``conformance.targets``, or a URL);
    #: None: the user must give ``--target``. Checked at load (:func:`check_declared`).
    default_target: ClassVar[str | None] = None

    @abc.abstractmethod
    def connect(self, url: str, *, timeout: float = 10.0, name: str | None = None, op_timeout: float | None = None) -> Connection:
        """Open a connection. ``op_timeout`` bounds each later blocking operation (adapter default if None)."""

    def library_version(self) -> str:
        return "unknown"

    def declarable(self, server: ServerInfo, spec: QueueSpec) -> str | None:
        """Why a queue such as ``spec`` cannot be declared against ``server`` at all, when the adapter
        (or the admin backend it uses for that server) knows it before anything is sent; None when it
        can, or can only learn it from the broker's answer (a refusal on the wire is a verdict). The
        run poses no configured cell of such a queue (conformance.runner.posed)."""
        return None

    def server_capabilities(self, server: ServerInfo) -> frozenset[str] | None:
        """What this adapter can express against ``server`` (the run's probe), when that depends on the
        server: e.g. an AMQP 1.0 adapter whose queue administration goes through a backend chosen by
        the server adds what that backend can declare to its protocol's ``capabilities``. Default:
        the declared ``capabilities`` (None for an adapter that declares none)."""
        caps = getattr(self, "capabilities", None)
        return None if caps is None else frozenset(caps)


def adapters() -> dict[str, type[Adapter]]:
    from conformance.plugins import load_group

    return load_group(ADAPTER_GROUP)


def adapter_for(scheme: str, preferred: str | None = None, protocol: str | None = None) -> type[Adapter]:
    """The adapter the user named; else one for the URL scheme, speaking ``protocol`` when the target
    says which it speaks (an ``amqp://`` URL is AMQP 0-9-1 on one broker and AMQP 1.0 on another)."""
    from conformance.errors import UsageError

    if preferred:  # only the named plugin is imported: a broken one nobody selected cannot abort a run
        from importlib.metadata import entry_points

        from conformance.plugins import load_one

        chosen = load_one(ADAPTER_GROUP, preferred)
        if chosen is None:
            installed = sorted(ep.name for ep in entry_points(group=ADAPTER_GROUP))
            raise UsageError(f"unknown adapter {preferred!r}; installed: {', '.join(installed) or 'none'}")
        if not (isinstance(chosen, type) and issubclass(chosen, Adapter)):
            raise UsageError(f"plugin {preferred!r} in {ADAPTER_GROUP} is not an Adapter subclass ({chosen!r})")
        from conformance.catalogue.capabilities import adapter_capabilities

        adapter_capabilities(chosen)  # unknown capability names: one line naming the plugin, at load
        check_declared(chosen)
        return chosen
    found = adapters()
    candidates: Iterable[type[Adapter]] = [a for a in found.values() if scheme in a.schemes]
    if protocol:
        speaking = [a for a in candidates if a.protocol == protocol]
        if candidates and not speaking:
            raise UsageError(f"the target speaks {protocol}, and no installed adapter for {scheme!r} does "
                             f"(installed: {', '.join(f'{a.name} ({a.protocol})' for a in candidates)}); install one or name one with --adapter")
        candidates = speaking
    chosen = sorted(candidates, key=lambda a: a.name)
    if not chosen:
        raise UsageError(f"no installed adapter speaks {scheme!r}; installed: {', '.join(sorted(found)) or 'none'}")
    return chosen[0]


def check_declared(adapter: Any) -> None:
    """The adapter's ``default_target`` is None or names something installed: a typo in a
    third party's plugin is one line naming the plugin when it loads, not a failed launch later."""
    from conformance.errors import UsageError
    from conformance.targets import TARGET_GROUP

    value = getattr(adapter, "default_target", None)
    name = getattr(adapter, "name", adapter)
    if value is None:
        return
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"adapter {name!r}: default_target must be a launcher name or a URL, not {value!r}")
    if "://" in value:
        return
    launcher = value.partition(":")[0]
    if not entry_points(group=TARGET_GROUP, name=launcher):
        installed = ", ".join(sorted(ep.name for ep in entry_points(group=TARGET_GROUP))) or "none"
        raise UsageError(f"adapter {name!r}: default_target {value!r} is no installed launcher; installed: {installed}")
