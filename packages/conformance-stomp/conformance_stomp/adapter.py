"""STOMP 1.2 adapter on stomp.py: the neutral API (conformance/api.py) mapped onto STOMP frames.

Mapping (the JMS seeds read directly onto STOMP):

* consume MANUAL = ``ack:client-individual`` (INDIVIDUAL), AUTO = ``ack:auto``; CLIENT (cumulative)
  acknowledgement is :meth:`StompSession.acknowledge` with :attr:`AckScope.CUMULATIVE`, sent as one
  ACK per delivery up to it (how a JMS client's CLIENT mode settles on an individual-ack wire);
* ack = ACK, nack/reject = NACK (what NACK does is the broker's: the dialect gives the headers
  that ask for discarding; a broker that dead-letters on NACK is observed, not hidden);
* transactions = BEGIN / COMMIT / ABORT, a new transaction begun after each, like 0-9-1 tx.select;
* prefetch = the broker's SUBSCRIBE header (dialect: ``prefetch-count``, ``activemq.prefetchSize``);
* every synchronous step is a RECEIPT: sync = BEGIN+ABORT of a throw-away transaction with a
  receipt (frames of one connection are handled in order, so the receipt proves the ones before);
  confirms = a receipt on every SEND;
* cut = the socket closed with SO_LINGER 0 (RST), no DISCONNECT; close = DISCONNECT with receipt.

A STOMP connection is its own acknowledgement scope: :meth:`StompConnection.session` returns a
view on it, and closing that session is a graceful DISCONNECT. An ERROR frame ends the connection
(STOMP 1.2 "ERROR"): it becomes :class:`ChannelClosed` with ``hard=True`` and code 0 (STOMP has no
codes; the ``message`` header is the text). Every wait has a deadline; a missing RECEIPT is
:class:`NoReply` naming the frame and the receipt, and the connection is cut.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import uuid
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import stomp

from conformance.api import AckMode, AckScope, Adapter, Connection, Consumer, Delivery, QueueSpec, QueueStats, ServerInfo, Session
from conformance.errors import (
    AdapterError,
    ChannelClosed,
    ConnectionLost,
    NoReply,
    OperationTimeout,
    SettlementRefused,
    Unsupported,
)
from conformance.inflight import inflight
from conformance_stomp.admin import admin_for
from conformance_stomp.dialect import Dialect, dialect_for

PROTOCOL = "stomp-1.2"
#: Put in every subscription buffer when the connection fails, after the frames already received.
_GONE = object()
#: Default bound of any one wait for the broker (a RECEIPT, CONNECTED), as for the other adapters.
OP_TIMEOUT_S = 10.0
#: How long a connection waits for CONNECTED unless the caller says otherwise.
CONNECT_TIMEOUT_S = 10.0


class _Listener(stomp.ConnectionListener):
    """Routes frames from stomp.py's receiver thread: MESSAGE to its subscription's buffer, RECEIPT
    to its waiter, ERROR and loss to the connection's state."""

    def __init__(self, conn: "StompConnection") -> None:
        self.conn = conn

    def on_connected(self, frame: Any) -> None:
        self.conn._connected_headers = dict(frame.headers)
        self.conn._connected.set()

    def on_message(self, frame: Any) -> None:
        buf = self.conn._buffers.get(frame.headers.get("subscription", ""))
        if buf is not None:
            buf.put(frame)

    def on_receipt(self, frame: Any) -> None:
        ev = self.conn._receipts.get(frame.headers.get("receipt-id", ""))
        if ev is not None:
            ev.set()

    def on_error(self, frame: Any) -> None:
        body = frame.body.decode(errors="replace") if isinstance(frame.body, bytes) else str(frame.body or "")
        text = " ".join(f"{frame.headers.get('message', '')} {body}".split())
        self.conn._fail(ChannelClosed(0, f"STOMP ERROR: {text}", hard=True))

    def on_disconnected(self) -> None:
        self.conn._fail(ConnectionLost(self.conn.cut_reason or "connection lost (socket closed)"))


class StompConsumer(Consumer):
    def __init__(self, session: "StompSession", queue_name: str, ack_mode: AckMode, prefetch: int | None, *, browse: bool = False) -> None:
        self.session = session
        self.queue = queue_name
        self.ack_mode = ack_mode
        self.tag = f"sub-{uuid.uuid4().hex[:8]}"
        self.requested = {"ack": "auto" if ack_mode is AckMode.AUTO else "client-individual"}
        self.granted = {}
        self.buffer: queue.Queue[Any] = queue.Queue()
        conn = session.connection
        headers: dict[str, str] = {}
        header = conn.dialect["prefetch-header"]
        if prefetch is not None and header:
            headers[str(header)] = str(prefetch)
        if browse:
            headers["browser"] = "true"
        conn._buffers[self.tag] = self.buffer
        conn.request("SUBSCRIBE", lambda r: conn.stomp.subscribe(conn.dialect.destination(queue_name), id=self.tag,
                                                                   ack=self.requested["ack"], headers={**headers, "receipt": r}))

    def next(self, timeout: float) -> Delivery:
        conn = self.session.connection
        try:
            frame = self.buffer.get(timeout=max(0.0, timeout))
        except queue.Empty:
            if conn.failure is not None:
                raise conn.failure from None
            raise OperationTimeout(f"no MESSAGE on subscription {self.tag} ({self.queue}) within {timeout:g}s") from None
        if frame is _GONE:  # the connection failed: every waiting consumer wakes at once, no polling
            self.buffer.put(_GONE)
            raise conn.failure or ConnectionLost("connection lost")
        return self.session._delivery(frame, self)

    def cancel(self) -> None:
        conn = self.session.connection
        conn.request("UNSUBSCRIBE", lambda r: conn.stomp.unsubscribe(self.tag, headers={"receipt": r}))


class StompSession(Session):
    """A view on the connection (STOMP's only acknowledgement scope)."""

    def __init__(self, connection: "StompConnection") -> None:
        self.connection = connection
        self._tags: dict[int, tuple[str, StompConsumer]] = {}
        self._next_tag = 0
        self._confirms = False
        self._tx: str | None = None
        self._default_prefetch: int | None = None
        self._closed = False

    # -- deliveries ------------------------------------------------------------------------------
    def _delivery(self, frame: Any, consumer: StompConsumer) -> Delivery:
        h = dict(frame.headers)
        d = self.connection.dialect
        self._next_tag += 1
        if consumer.ack_mode is AckMode.MANUAL:
            self._tags[self._next_tag] = (h.get("ack") or h.get("message-id", ""), consumer)
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body or "").encode()
        count = h.get("x-delivery-count")
        return Delivery(
            tag=self._next_tag,
            body=body,
            message_id=h.get(str(d["message-id-header"])),
            redelivered=str(h.get(str(d["redelivered-header"]), "false")).lower() == "true",
            delivery_count=int(count) if count and count.isdigit() else None,
            headers=h,
            persistent=str(h.get("persistent", "")).lower() == "true" if "persistent" in h else None,
            consumer_tag=consumer.tag,
            queue=consumer.queue,
            expiration=h.get(str(d["expiration-header"])) if d["expiration-header"] else None,
            presettled=consumer.ack_mode is AckMode.AUTO,
        )

    def _ack_id(self, tag: int, what: str) -> str:
        if tag not in self._tags:
            raise SettlementRefused(f"{what} of delivery {tag}: not a delivery of a client-individual subscription held by this "
                                    f"session (auto-acknowledged deliveries were settled by the broker at send)")
        return self._tags.pop(tag)[0]

    def ack(self, tag: int, *, multiple: bool = False) -> None:
        if multiple:
            raise Unsupported("STOMP ACK has no multiple flag (0-9-1 delivery-tag arithmetic); use acknowledge(CUMULATIVE)")
        ack_id = self._ack_id(tag, "ACK")
        c = self.connection
        c.send("ACK", lambda: c.stomp.ack(ack_id, transaction=self._tx))

    def acknowledge(self, delivery: Delivery, scope: AckScope) -> None:
        """INDIVIDUAL: one ACK. CUMULATIVE (JMS CLIENT): this delivery and every earlier one held from
        the same subscription, one ACK each, in delivery order."""
        if scope is AckScope.INDIVIDUAL:
            self.ack(delivery.tag)
            return
        for tag in sorted(t for t, (_, cons) in self._tags.items() if t <= delivery.tag and cons.tag == delivery.consumer_tag):
            self.ack(tag)

    def nack(self, tag: int, *, multiple: bool = False, requeue: bool = True) -> None:
        if multiple:
            raise Unsupported("STOMP NACK has no multiple flag")
        ack_id = self._ack_id(tag, "NACK")
        extra = {} if requeue else dict(self.connection.dialect["nack-discard-headers"] or {})
        c = self.connection
        c.send("NACK", lambda: c.stomp.nack(ack_id, transaction=self._tx, **extra))

    def reject(self, tag: int, *, requeue: bool = True) -> None:
        self.nack(tag, requeue=requeue)

    def recover(self, *, requeue: bool = True) -> None:
        raise Unsupported("STOMP has no recover: unacknowledged messages return only when the connection ends or on NACK")

    def qos(self, prefetch: int, *, global_: bool = False) -> None:
        if global_:
            raise Unsupported("STOMP prefetch is a SUBSCRIBE header: there is no connection-wide prefetch")
        self._default_prefetch = prefetch or None

    # -- queues ----------------------------------------------------------------------------------
    def declare_queue(self, spec: QueueSpec) -> str:
        return self.connection.admin.declare_queue(spec, self)

    def delete_queue(self, name: str) -> None:
        self.connection.admin.delete_queue(name)

    def queue_stats(self, name: str) -> QueueStats:
        return self.connection.admin.queue_stats(name)

    def await_departure(self, queue: str) -> str | None:
        return self.connection.admin.departure_barrier(queue)

    # -- publishing ------------------------------------------------------------------------------
    def enable_confirms(self) -> None:
        self._confirms = True

    def publish(self, queue: str, body: bytes, *, message_id: str | None = None, persistent: bool = False,
                headers: dict[str, Any] | None = None, expiration_ms: int | None = None) -> None:
        c = self.connection
        h = {str(k): str(v) for k, v in (headers or {}).items()}
        if message_id is not None:
            h[str(c.dialect["message-id-header"])] = message_id
        h["persistent"] = "true" if persistent else "false"
        if expiration_ms is not None:
            if not c.dialect["expiration-header"]:
                raise Unsupported(f"no per-message TTL header known for {c.server.product} over STOMP")
            h[str(c.dialect["expiration-header"])] = str(expiration_ms)
        if self._tx is not None:
            h["transaction"] = self._tx
        dest = c.dialect.destination(queue)
        if self._confirms and self._tx is None:
            c.request("SEND", lambda r: c.stomp.send(dest, body, headers={**h, "receipt": r}))
        else:
            c.send("SEND", lambda: c.stomp.send(dest, body, headers=h))

    def consume(self, queue: str, *, ack_mode: AckMode = AckMode.MANUAL, prefetch: int | None = None, browse: bool = False,
                exclusive: bool = False, tag: str | None = None, arguments: dict[str, Any] | None = None) -> Consumer:
        if browse:
            raise Unsupported("STOMP 1.2 has no browsing subscription")
        if exclusive:
            raise Unsupported("STOMP 1.2 has no exclusive subscription (SUBSCRIBE has no such header)")
        if tag is not None:
            raise Unsupported("STOMP 1.2 subscription ids are the client's own per connection; no broker-named or re-used consumer tag")
        if arguments:
            raise Unsupported("STOMP 1.2 SUBSCRIBE carries no consumer arguments")
        return StompConsumer(self, queue, ack_mode, prefetch if prefetch is not None else self._default_prefetch)

    def browser(self, queue: str) -> StompConsumer:
        """A browsing subscription (ActiveMQ ``browser:true``): what the broker holds, ending in a
        ``browser:end`` MESSAGE. Not :meth:`consume`'s ``browse``: STOMP 1.2 has none; only the
        admin's counter (conformance_stomp.admin) uses the broker's extension."""
        return StompConsumer(self, queue, AckMode.AUTO, None, browse=True)

    def get(self, queue: str, *, ack_mode: AckMode = AckMode.MANUAL, timeout: float = 5.0) -> Delivery | None:
        raise Unsupported("STOMP has no synchronous fetch (basic.get): messages arrive on subscriptions only")

    # -- transactions ----------------------------------------------------------------------------
    def _begin(self) -> None:
        tx = f"tx-{uuid.uuid4().hex[:8]}"
        c = self.connection
        c.request("BEGIN", lambda r: c.stomp.begin(tx, headers={"receipt": r}))
        self._tx = tx

    def select_tx(self) -> None:
        if self._tx is None:
            self._begin()

    def commit(self) -> None:
        if self._tx is None:
            raise AdapterError("COMMIT without a transaction (select_tx first)")
        tx, c = self._tx, self.connection
        c.request("COMMIT", lambda r: c.stomp.commit(tx, headers={"receipt": r}))
        self._tx = None
        self._begin()

    def rollback(self) -> None:
        if self._tx is None:
            raise AdapterError("ABORT without a transaction (select_tx first)")
        tx, c = self._tx, self.connection
        c.request("ABORT", lambda r: c.stomp.abort(tx, headers={"receipt": r}))
        self._tx = None
        self._begin()

    # -- barriers and lifecycle ------------------------------------------------------------------
    def sync(self) -> None:
        c = self.connection
        tx = f"sync-{uuid.uuid4().hex[:8]}"
        c.send("BEGIN", lambda: c.stomp.begin(tx))
        c.request("ABORT (sync)", lambda r: c.stomp.abort(tx, headers={"receipt": r}))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.connection.close()

    @property
    def is_open(self) -> bool:
        return not self._closed and self.connection.is_open


class StompConnection(Connection):
    def __init__(self, url: str, *, timeout: float, name: str | None, op_timeout: float) -> None:
        raw = getattr(url, "reveal", lambda: str(url))()
        parts = urlsplit(raw)
        self.options = dict(parse_qsl(parts.query))
        self.url = raw
        self.op_timeout = op_timeout
        self.failure: BaseException | None = None
        self.cut_reason = ""
        self._buffers: dict[str, queue.Queue[Any]] = {}
        self._receipts: dict[str, threading.Event] = {}
        self._connected = threading.Event()
        self._connected_headers: dict[str, str] = {}
        self._closed = False
        self._admin: Any = None
        self.stomp = stomp.Connection12([(parts.hostname or "127.0.0.1", parts.port or 61613)], heartbeats=(0, 0),
                                        auto_decode=False, reconnect_attempts_max=1, timeout=timeout,
                                        vhost=self.options.get("host", unquote(parts.path.lstrip("/")) or "/"))
        self.stomp.set_listener("conformance", _Listener(self))
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        try:
            with inflight("CONNECT", "CONNECTED"):
                # conformance-name: which case and actor (the self-test's probe reads it off the wire)
                self.stomp.connect(user or None, password or None, wait=False, headers={"conformance-name": name or "conformance"})
                if not self._connected.wait(timeout):
                    self._kill(f"CONNECT: no CONNECTED within {timeout:g}s")
                    raise NoReply("CONNECT", "CONNECTED", timeout)
        except stomp.exception.ConnectFailedException as exc:
            raise ConnectionLost(f"STOMP connect to {parts.hostname}:{parts.port} failed: {exc!r}") from None
        if self.failure is not None:
            raise self.failure
        server = self._connected_headers.get("server", "unknown/unknown")
        product, _, version = server.partition("/")
        self.server = ServerInfo(product=product, version=version.split()[0] if version else "", protocol=PROTOCOL,
                                 properties={"server": server, "version": self._connected_headers.get("version", "")})
        self.dialect: Dialect = dialect_for(product, self.options)

    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = admin_for(self)
        return self._admin

    def another(self, purpose: str) -> StompConnection:
        """A new connection to the same URL, for the admin's counters and barriers."""
        return StompConnection(self.url, timeout=CONNECT_TIMEOUT_S, name=f"conformance stomp {purpose}", op_timeout=self.op_timeout)

    # -- frames ----------------------------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        for ev in list(self._receipts.values()):
            ev.set()
        for buf in list(self._buffers.values()):
            buf.put(_GONE)
        self._connected.set()

    def _check(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise ConnectionLost(self.cut_reason or "connection closed")

    def send(self, frame: str, fn: Any) -> None:
        """A frame with no reply awaited (the next RECEIPT orders it)."""
        self._check()
        try:
            fn()
        except (stomp.exception.NotConnectedException, OSError) as exc:
            raise ConnectionLost(f"{frame}: connection lost ({exc!r})") from None

    def request(self, frame: str, fn: Any) -> None:
        """A frame with a receipt header, waited for: the STOMP synchronous round trip."""
        self._check()
        rid = f"r-{uuid.uuid4().hex[:10]}"
        ev = threading.Event()
        self._receipts[rid] = ev
        try:
            with inflight(frame, f"RECEIPT {rid}"):
                try:
                    fn(rid)
                except (stomp.exception.NotConnectedException, OSError) as exc:
                    raise ConnectionLost(f"{frame}: connection lost ({exc!r})") from None
                if not ev.wait(self.op_timeout):
                    self._kill(f"{frame}: no RECEIPT within {self.op_timeout:g}s")
                    raise NoReply(frame, f"RECEIPT (receipt-id {rid})", self.op_timeout)
        finally:
            self._receipts.pop(rid, None)
        self._check()

    # -- lifecycle -------------------------------------------------------------------------------
    def session(self) -> Session:
        self._check()
        return StompSession(self)

    def _kill(self, reason: str) -> None:
        """Close the socket with RST (SO_LINGER 0): no DISCONNECT, as a crashed client."""
        self.cut_reason = reason
        sock = getattr(self.stomp.transport, "socket", None)
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass
        self._fail(ConnectionLost(reason))
        self._closed = True
        self._close_admin()

    def cut(self) -> None:
        if not self._closed:
            self._kill("connection cut by the suite (socket reset, no DISCONNECT)")

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self.failure is None:
                self.request("DISCONNECT", lambda r: self.stomp.disconnect(receipt=r))
        except (ConnectionLost, ChannelClosed):
            pass
        finally:
            self._closed = True
            self.cut_reason = self.cut_reason or "connection closed"
            self._close_socket()
            self._close_admin()

    def _close_socket(self) -> None:
        """Close our end after DISCONNECT (FIN); stomp.py's receiver thread ends on EOF. Not
        ``transport.stop()``, which waits for that thread without a deadline."""
        sock = getattr(self.stomp.transport, "socket", None)
        if sock is None:
            return
        for step in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
            try:
                step()
            except OSError:
                pass

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            admin.close()

    @property
    def is_open(self) -> bool:
        return not self._closed and self.failure is None


class StompAdapter(Adapter):
    name = "stomp"
    protocol = PROTOCOL
    schemes = ("stomp",)
    #: A run that names no target: a private RabbitMQ node with its bundled STOMP plugin (RabbitMQ is
    #: installed wherever the suite is; ActiveMQ Classic is one more package).
    default_target = "rabbitmq-stomp"
    #: What STOMP 1.2 can express (conformance/catalogue/data/capabilities.yaml); the broker's gaps are in its profile.
    capabilities = frozenset({
        "abrupt-disconnect", "ack.auto", "ack.client-scopes", "ack.individual", "nack.requeue", "nack.discard",
        "reject.discard", "publish.confirmed", "session-close", "tx", "tx.ack",
    })

    def connect(self, url: str, *, timeout: float = CONNECT_TIMEOUT_S, name: str | None = None, op_timeout: float | None = None) -> Connection:
        return StompConnection(url, timeout=timeout, name=name, op_timeout=op_timeout or OP_TIMEOUT_S)

    def library_version(self) -> str:
        from importlib.metadata import version

        return f"stomp.py {version('stomp-py')}"
