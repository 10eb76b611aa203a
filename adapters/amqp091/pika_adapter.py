"""AMQP 0-9-1 adapter on pika's BlockingConnection (RabbitMQ, LavinMQ, any 0-9-1 broker).

Broker dialect (queue-type arguments, which header counts deliveries) comes from the profile, not
from here: the adapter only speaks the protocol. Every pika exception is translated into the
neutral ones so a case reads "channel closed 406" the same way through every adapter.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import socket
import struct
import time
from typing import Any, Callable, Iterator, TypeVar

import pika
import pika.exceptions as px
from pika.adapters.blocking_connection import BlockingChannel
from pika.adapters.utils.connection_workflow import AMQPConnectorException

from conformance.api import (
    AckMode,
    Adapter,
    Connection,
    Consumer,
    Delivery,
    PublisherEvent,
    QueueSpec,
    QueueStats,
    ServerInfo,
    Session,
)
from conformance.errors import (
    AdapterError,
    ChannelClosed,
    ConnectionLost,
    NoReply,
    OperationTimeout,
    PublishNotConfirmed,
    Unsupported,
)
from conformance.inflight import inflight

# pika logs every socket failure at ERROR with a traceback; this adapter translates each of those
# failures into the neutral API's errors (ConnectionLost, NoReply, ChannelClosed), which the case
# records. pika's own copy would only bury the verdict on the console.
logging.getLogger("pika").setLevel(logging.CRITICAL)

F = TypeVar("F", bound=Callable[..., Any])

#: Exchange every 0-9-1 server must have (spec 3.1.3.1); a passive declare of it is a cheap round trip.
BARRIER_EXCHANGE = "amq.direct"

#: Longest any single blocking operation may wait for the broker before the socket is cut. pika's
#: blocking calls have no deadline of their own, so without this a silent broker hangs the run. Well
#: under the case deadline, so a silent broker is named by the operation that stalled (and probed
#: for liveness) before the case deadline fires; a local broker answers any of these in milliseconds.
OP_TIMEOUT_S = 10.0

#: Adapter method -> (the AMQP 0-9-1 method it sends, the reply the blocking call waits for). An
#: expired wait is reported in these terms: "queue.declare: no queue.declare-ok within 10s".
OPS: dict[str, tuple[str, str]] = {
    "session": ("channel.open", "channel.open-ok"),
    "declare_queue": ("queue.declare", "queue.declare-ok"),
    "delete_queue": ("queue.delete", "queue.delete-ok"),
    "queue_stats": ("queue.declare (passive)", "queue.declare-ok"),
    "enable_confirms": ("confirm.select", "confirm.select-ok"),
    "publish": ("basic.publish", "basic.ack (publisher confirm)"),
    "consume": ("basic.consume", "basic.consume-ok"),
    "get": ("basic.get", "basic.get-ok or basic.get-empty"),
    "recover": ("basic.recover", "basic.recover-ok"),
    "qos": ("basic.qos", "basic.qos-ok"),
    "declare_exchange": ("exchange.declare", "exchange.declare-ok"),
    "delete_exchange": ("exchange.delete", "exchange.delete-ok"),
    "bind_queue": ("queue.bind", "queue.bind-ok"),
    "select_tx": ("tx.select", "tx.select-ok"),
    "commit": ("tx.commit", "tx.commit-ok"),
    "rollback": ("tx.rollback", "tx.rollback-ok"),
    "sync": ("exchange.declare (passive, a round trip)", "exchange.declare-ok"),
    "cancel": ("basic.cancel", "basic.cancel-ok"),
    "close": ("connection.close", "connection.close-ok"),
}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def translate(fn: F) -> F:
    """Map pika's exceptions onto the neutral ones, keeping the broker's code and text, and bound the
    call by the watchdog (calls that wait with their own deadline use :func:`translate_unwatched`)."""
    return _translate(fn, watch=True)


def translate_unwatched(fn: F) -> F:
    return _translate(fn, watch=False)


def _translate(fn: F, *, watch: bool) -> F:
    op, reply = OPS.get(fn.__name__, (fn.__name__, "reply"))

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        conn: PikaConnection = self.connection if hasattr(self, "connection") else self
        if conn.was_cut:
            raise ConnectionLost(conn.cut_reason)
        try:
            with conn.watchdog(conn.op_timeout if watch else None, op, reply), inflight(op, reply):
                return fn(self, *args, **kwargs)
        except px.ChannelClosedByBroker as exc:
            raise ChannelClosed(exc.reply_code, _text(exc.reply_text)) from exc
        except px.ConnectionClosedByBroker as exc:
            raise ChannelClosed(exc.reply_code, _text(exc.reply_text), hard=True) from exc
        except px.ChannelWrongStateError as exc:
            reason = getattr(getattr(self, "channel", None), "_closing_reason", None)
            if isinstance(reason, px.ChannelClosedByBroker):
                raise ChannelClosed(reason.reply_code, _text(reason.reply_text)) from exc
            raise AdapterError(f"channel is not open: {exc}") from exc
        except (px.StreamLostError, px.AMQPConnectionError, px.ConnectionWrongStateError, OSError) as exc:
            if conn.no_reply is not None:
                raise conn.no_reply from exc
            if conn.expired:
                raise ConnectionLost(conn.cut_reason) from exc
            raise ConnectionLost(f"connection lost: {exc!r}") from exc
        except (px.UnroutableError, px.NackError) as exc:
            raise PublishNotConfirmed(f"publish not confirmed: {exc}") from exc

    return wrapper  # type: ignore[return-value]


class PikaConsumer(Consumer):
    def __init__(self, session: "PikaSession", queue: str, ack_mode: AckMode, exclusive: bool = False,
                 tag: str | None = None, arguments: dict[str, Any] | None = None) -> None:
        self.session = session
        self.connection = session.connection
        self.queue = queue
        self.ack_mode = ack_mode
        self.buffer: collections.deque[Delivery] = collections.deque()
        auto = ack_mode is AckMode.AUTO
        if tag == "":
            self.tag = _consume_broker_named(session.channel, queue, self._on_message, auto, exclusive, arguments)
        else:
            self.tag = session.channel.basic_consume(
                queue, self._on_message, auto_ack=auto, exclusive=exclusive, consumer_tag=tag, arguments=arguments
            )

    def _on_message(self, _ch: BlockingChannel, method: Any, props: Any, body: bytes) -> None:
        self.buffer.append(to_delivery(method, props, body, self.queue, no_ack=self.ack_mode is AckMode.AUTO))

    @translate_unwatched  # bounded by its own deadline
    def next(self, timeout: float) -> Delivery:
        end = time.monotonic() + timeout
        while not self.buffer:
            left = end - time.monotonic()
            if left <= 0:
                raise OperationTimeout(f"no delivery from {self.queue} within {timeout:.1f}s")
            self.connection.pika.process_data_events(time_limit=min(left, 0.25))
        return self.buffer.popleft()

    @translate
    def cancel(self) -> None:
        self.session.channel.basic_cancel(self.tag)

    def pause(self) -> None:
        """basic.cancel: "does not affect already delivered messages" (they stay held on the channel)."""
        self.cancel()


def _internals(what: str, *pairs: tuple[Any, str]) -> None:
    """pika's public API cannot express ``what``, so the adapter uses pika's private attributes; a pika
    release without one of them makes the operation Unsupported (the adapter cannot express it), named,
    instead of an AttributeError inside a case. tests/adapters/test_pika_internals.py checks the installed pika."""
    missing = [name for obj, name in pairs if not hasattr(obj, name)]
    if missing:
        raise Unsupported(f"{what} needs pika internals this pika {pika.__version__} lacks: {', '.join(missing)}")


def _consume_broker_named(channel: BlockingChannel, queue: str, on_message: Any, auto_ack: bool, exclusive: bool,
                          arguments: dict[str, Any] | None) -> str:
    """basic.consume with an empty consumer-tag, so that the broker names the consumer (pika always
    names its own). The consumer is registered with pika's channel from basic.consume-ok, before any
    frame after it is dispatched, exactly as pika registers its own; the tag is the broker's word,
    so two consumers given the same tag share it here as they would on the wire."""
    import pika.adapters.blocking_connection as blocking

    what = "a broker-named consumer tag"
    _internals(what, (blocking, "_ConsumerInfo"), (channel, "_impl"), (channel, "_consumer_infos"),
               (channel, "_basic_consume_ok_result"), (channel, "_flush_output"), (channel, "_on_consumer_message_delivery"))
    _ConsumerInfo = blocking._ConsumerInfo
    impl = channel._impl
    _internals(what, (impl, "_rpc"), (impl, "_consumers"), (impl, "_consumers_with_noack"))
    named: list[str] = []

    def on_ok(frame: Any) -> None:
        tag = frame.method.consumer_tag
        named.append(tag)
        info = _ConsumerInfo(tag, auto_ack=auto_ack, on_message_callback=on_message)
        info.state = _ConsumerInfo.ACTIVE
        channel._consumer_infos[tag] = info
        impl._consumers[tag] = channel._on_consumer_message_delivery
        if auto_ack:
            impl._consumers_with_noack.add(tag)

    # pika's channel signals every consume-ok to its own one-shot result: take and reset it, as
    # pika's basic_consume does
    with channel._basic_consume_ok_result as ok_result:
        impl._rpc(pika.spec.Basic.Consume(queue=queue, consumer_tag="", no_ack=auto_ack, exclusive=exclusive,
                                          arguments=arguments or {}), on_ok, [pika.spec.Basic.ConsumeOk])
        channel._flush_output(lambda: bool(named) and ok_result.is_ready())
    return named[0]


def to_delivery(method: Any, props: Any, body: bytes, queue: str | None, *, no_ack: bool = False) -> Delivery:
    headers = dict(props.headers or {})
    count = headers.get("x-delivery-count")
    return Delivery(
        tag=method.delivery_tag,
        body=body,
        message_id=props.message_id,
        redelivered=bool(method.redelivered),
        delivery_count=int(count) if count is not None else None,
        headers=headers,
        persistent=None if props.delivery_mode is None else props.delivery_mode == 2,
        consumer_tag=getattr(method, "consumer_tag", None),
        queue=queue,
        expiration=props.expiration,
        presettled=no_ack,
    )


class PikaSession(Session):
    def __init__(self, connection: "PikaConnection") -> None:
        self.connection = connection
        self.channel: BlockingChannel = connection.pika.channel()

    @translate
    def declare_queue(self, spec: QueueSpec) -> str:
        ok = self.channel.queue_declare(
            spec.name,
            durable=spec.durable,
            exclusive=spec.exclusive,
            auto_delete=spec.auto_delete,
            arguments=dict(spec.arguments) or None,
        )
        return ok.method.queue

    @translate
    def delete_queue(self, name: str) -> None:
        self.channel.queue_delete(name)

    @translate
    def queue_stats(self, name: str) -> QueueStats:
        ok = self.channel.queue_declare(name, passive=True)
        return QueueStats(ready=ok.method.message_count, consumers=ok.method.consumer_count)

    @translate
    def purge_queue(self, name: str) -> int:
        return int(self.channel.queue_purge(name).method.message_count)

    @translate
    def enable_confirms(self) -> None:
        self.channel.confirm_delivery()

    @translate
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
        props = pika.BasicProperties(
            message_id=message_id,
            delivery_mode=pika.DeliveryMode.Persistent if persistent else pika.DeliveryMode.Transient,
            headers=headers,
            expiration=str(expiration_ms) if expiration_ms is not None else None,
            priority=priority,
        )
        self.channel.basic_publish(exchange, queue, body, properties=props, mandatory=True)

    @translate
    def consume(self, queue: str, *, ack_mode: AckMode = AckMode.MANUAL, prefetch: int | None = None,
                browse: bool = False, exclusive: bool = False, tag: str | None = None,
                arguments: dict[str, Any] | None = None) -> Consumer:
        if browse:
            raise Unsupported("AMQP 0-9-1 has no browsing consumer (no distribution mode copy)")
        if prefetch is not None:
            self.channel.basic_qos(prefetch_count=prefetch)
        return PikaConsumer(self, queue, ack_mode, exclusive, tag, arguments)

    @translate
    def get(self, queue: str, *, ack_mode: AckMode = AckMode.MANUAL, timeout: float = 5.0) -> Delivery | None:
        method, props, body = self.channel.basic_get(queue, auto_ack=ack_mode is AckMode.AUTO)
        return None if method is None else to_delivery(method, props, body, queue, no_ack=ack_mode is AckMode.AUTO)

    @translate
    def ack(self, tag: int, *, multiple: bool = False) -> None:
        self.channel.basic_ack(tag, multiple=multiple)

    @translate
    def nack(self, tag: int, *, multiple: bool = False, requeue: bool = True) -> None:
        self.channel.basic_nack(tag, multiple=multiple, requeue=requeue)

    @translate
    def reject(self, tag: int, *, requeue: bool = True) -> None:
        self.channel.basic_reject(tag, requeue=requeue)

    @translate
    def recover(self, *, requeue: bool = True) -> None:
        self.channel.basic_recover(requeue=requeue)

    @translate
    def qos(self, prefetch: int, *, global_: bool = False, prefetch_size: int = 0) -> None:
        self.channel.basic_qos(prefetch_size=prefetch_size, prefetch_count=prefetch, global_qos=global_)

    @translate
    def declare_exchange(self, name: str, kind: str = "direct") -> None:
        self.channel.exchange_declare(name, exchange_type=kind, durable=False, auto_delete=False)

    @translate
    def delete_exchange(self, name: str) -> None:
        self.channel.exchange_delete(name)

    @translate
    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None:
        self.channel.queue_bind(queue, exchange, routing_key=routing_key)

    @translate
    def select_tx(self) -> None:
        self.channel.tx_select()

    @translate
    def commit(self) -> None:
        self.channel.tx_commit()

    @translate
    def rollback(self) -> None:
        self.channel.tx_rollback()

    @translate
    def sync(self) -> None:
        self.channel.exchange_declare(BARRIER_EXCHANGE, passive=True)

    @translate_unwatched
    def publish_pipelined(self, queue: str, messages: list[tuple[str, bytes]], *, mandatory: bool = False,
                          exchange: str = "", commit: bool = False, window: float = 5.0) -> list[PublisherEvent]:
        # pika's blocking channel waits for each confirm, so the publishes go through its
        # asynchronous channel and the connection is pumped until the broker has answered them all
        _internals("pipelined publishing", (self.channel, "_impl"), (self.channel, "_closing_reason"))
        impl = self.channel._impl
        if not hasattr(self, "_events"):
            self._events: list[PublisherEvent] = []
            self._published = 0
            events = self._events

            def on_return(_ch: Any, method: Any, props: Any, _body: bytes) -> None:
                events.append(PublisherEvent("return", code=method.reply_code, text=_text(method.reply_text),
                                             message_id=props.message_id))

            impl.add_on_return_callback(on_return)
        events = self._events
        if not commit and not getattr(self, "_pipelined_confirms", False):
            selected: list[bool] = []
            impl.confirm_delivery(
                ack_nack_callback=lambda f: events.append(PublisherEvent(
                    "ack" if isinstance(f.method, pika.spec.Basic.Ack) else "nack", tag=f.method.delivery_tag,
                    multiple=bool(f.method.multiple))),
                callback=lambda _f: selected.append(True))
            self._pump(lambda: bool(selected), time.monotonic() + window)
            if not selected:
                raise NoReply(f"confirm.select: no confirm.select-ok within {window:.0f}s")
            self._pipelined_confirms = True
        start, first = len(events), self._published + 1
        for mid, body in messages:
            impl.basic_publish(exchange, queue, body, pika.BasicProperties(message_id=mid), mandatory=mandatory)
        self._published += len(messages)
        end = time.monotonic() + window
        if commit:
            def sync() -> None:
                impl.exchange_declare(BARRIER_EXCHANGE, passive=True, callback=lambda _f: events.append(PublisherEvent("sync-ok")))

            sync()
            impl.tx_commit(callback=lambda _f: events.append(PublisherEvent("commit-ok")))
            sync()
            self._pump(lambda: sum(e.kind == "sync-ok" for e in events[start:]) >= 2, end)
        else:
            self._pump(lambda: not _unconfirmed(events, first, self._published), end)
        return list(events[start:])

    def _pump(self, done: Callable[[], bool], end: float) -> None:
        while not done() and time.monotonic() < end:
            self.connection.pika.process_data_events(time_limit=min(0.05, max(0.0, end - time.monotonic())))
            if self.channel.is_closed and isinstance(self.channel._closing_reason, px.ChannelClosedByBroker):
                raise self.channel._closing_reason

    def close(self) -> None:
        if self.connection.was_cut or not self.channel.is_open:
            return
        try:
            self.channel.close()
        except (px.ChannelWrongStateError, px.StreamLostError, px.ConnectionWrongStateError):
            pass

    @property
    def is_open(self) -> bool:
        return not self.connection.was_cut and self.channel.is_open


def _unconfirmed(events: list[PublisherEvent], first: int, last: int) -> set[int]:
    """Sequence numbers first..last that no confirm among ``events`` covers yet."""
    left = set(range(first, last + 1))
    for e in events:
        if e.kind in ("ack", "nack"):
            left -= {t for t in left if t <= e.tag} if e.multiple else {e.tag}
    return left


class PikaConnection(Connection):
    def __init__(self, url: str, *, timeout: float, name: str | None, op_timeout: float = OP_TIMEOUT_S) -> None:
        self.op_timeout = op_timeout
        params = pika.URLParameters(url)
        params.connection_attempts = 1
        params.socket_timeout = timeout
        params.blocked_connection_timeout = timeout
        params.client_properties = {"connection_name": name or "conformance"}
        params.stack_timeout = timeout
        self.was_cut = False
        self.expired = False
        self.no_reply: NoReply | None = None
        self.cut_reason = "connection was cut by the suite"
        try:
            with inflight("connection.open", "connection.open-ok"):
                self.pika = pika.BlockingConnection(params)
        except px.ProbableAuthenticationError as exc:
            raise AdapterError(f"authentication refused: {exc!r}") from exc
        except (px.AMQPConnectionError, AMQPConnectorException, OSError) as exc:
            if _timed_out(exc):  # TCP accepted, the AMQP handshake never completed
                raise NoReply("connection.open", "connection.open-ok", timeout) from exc
            raise ConnectionLost(f"cannot connect: {exc!r}") from exc
        props = {k: _text(v) if isinstance(v, bytes) else v for k, v in self.pika._impl.server_properties.items()}
        self.server = ServerInfo(
            product=_text(props.get("product", "unknown")),
            version=_text(props.get("version", "unknown")),
            protocol=PikaAdapter.protocol,
            properties=props,
        )

    @translate
    def session(self) -> Session:
        return PikaSession(self)

    @contextlib.contextmanager
    def watchdog(self, seconds: float | None, op: str = "operation", reply: str = "reply") -> Iterator[None]:
        """Cut the socket if the wrapped operation has not returned within ``seconds``; the
        operation then raises :class:`NoReply` naming ``op`` and the ``reply`` that never came."""
        if seconds is None or self.was_cut or not self.pika.is_open:
            yield
            return

        def expire() -> None:
            # Runs inside pika's poll loop: closing the fd would silently drop it from epoll and the
            # loop would wait forever, so shut the socket down instead (RST on pika's own close):
            # pika wakes up, sees the stream end and raises, which translate() maps to ConnectionLost.
            self.expired = True
            self.no_reply = NoReply(op, reply, seconds)
            self.cut_reason = str(self.no_reply)
            sock = self._socket()
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        # The I/O loop's own timer: BlockingConnection.call_later would only run the callback inside
        # process_data_events, never inside a blocking call's wait (basic_consume, tx_commit, ...).
        ioloop = self.pika._impl.ioloop
        timer = ioloop.call_later(seconds, expire)
        try:
            yield
        finally:
            ioloop.remove_timeout(timer)

    def close(self) -> None:
        if self.was_cut or not self.pika.is_open:
            return
        try:
            with self.watchdog(5.0, *OPS["close"]):
                self.pika.close()
        except (px.ConnectionWrongStateError, px.StreamLostError, OSError):
            pass

    def cut(self) -> None:
        """RST the socket under pika: the broker sees a dead peer, not a connection.close."""
        if self.was_cut:
            return
        self.was_cut = True
        sock = self._socket()
        if sock is None:
            raise AdapterError("pika transport has no socket to cut")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def _socket(self) -> socket.socket | None:
        return getattr(getattr(self.pika._impl, "_transport", None), "_sock", None)

    @property
    def is_open(self) -> bool:
        return not self.was_cut and self.pika.is_open


def _timed_out(exc: BaseException) -> bool:
    """Whether pika's connection failure was a handshake deadline (not a refusal or a reset)."""
    text = repr(exc)
    return any(word in text for word in ("Timeout", "timed out", "timeout"))


class PikaAdapter(Adapter):
    name = "pika"
    protocol = "amqp-0-9-1"
    schemes = ("amqp", "amqps")
    default_target = "rabbitmq-local"
    features = frozenset({"nack", "recover", "multiple", "qos", "tx", "confirms"})
    #: What AMQP 0-9-1 can express (conformance/catalogue/data/capabilities.yaml): the requirements that apply.
    capabilities = frozenset({
        "get.empty-reply", "consume.exclusive", "consume.many-per-session", "consume.tags", "queue.exclusive", "prefetch.size", "publish.priority", "publish.pipelined", "publish.returns", "publish.empty-body",
        "frames.split-message", "publish.priority-levels",
        "abrupt-disconnect", "ack.auto", "ack.client-scopes", "ack.individual", "ack.multiple", "ack.range", "ack.tag-errors", "delivery-tag.numbered",
        "client-failover", "consumer-cancel.keeps-unacked", "content-frames", "exchanges", "frame-faults", "get",
        "nack.discard", "nack.multiple", "nack.requeue", "prefetch.broker-window", "prefetch.count", "prefetch.global", "publish.confirmed",
        "queue.arguments", "queue.durability", "queue.purge", "recover", "reject.discard", "reject.requeue", "session-close", "tx", "tx.ack",
        "tx.select-semantics", "tx.end-undeclared", "consume.pause",
    })

    def connect(self, url: str, *, timeout: float = 10.0, name: str | None = None, op_timeout: float | None = None) -> Connection:
        return PikaConnection(url, timeout=timeout, name=name, op_timeout=op_timeout or OP_TIMEOUT_S)

    def library_version(self) -> str:
        return f"pika {pika.__version__}"
