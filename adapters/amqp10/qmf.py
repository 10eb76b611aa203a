"""Queue administration of the Qpid C++ broker (qpidd) over AMQP 1.0: QMF v2 map messages.

qpidd is managed the way ``qpid-config --protocol amqp1.0`` and qpid-cpp's own AMQP 1.0 client
(management/python/lib/qmf/client.py, ``BrokerAgent``) do it: a request message to the address
``qmf.default.direct`` with a reply-to (a dynamic receiving node), application properties
``qmf.opcode`` (``_method_request`` or ``_query_request``), ``x-amqp-0-10.app-id`` = ``qmf2`` and
``method`` = ``request``, subject ``broker``; the answer carries the request's correlation-id and
``qmf.opcode`` ``_method_response``, ``_query_response`` (a list of objects, more messages to come
while ``partial`` is set) or ``_exception`` (``_values`` error_code and error_text).

* queues, exchanges and bindings: method ``create`` / ``delete`` on the broker object
  ``org.apache.qpid.broker:broker:amqp-broker`` with arguments type, name, properties (qpid-cpp
  src/qpid/broker/Broker.cpp createObject / deleteObject; a binding is named
  ``exchange/queue/key``). The neutral declaration maps onto qpidd's queue options by the data in
  ``qmf-arguments.yaml`` beside this module: qpidd takes unknown options silently, so whatever is not
  mapped there is refused here, never sent (see :func:`queue_properties`).
* counts: a query of the queue object ``org.apache.qpid.broker:queue:<name>``, whose statistics
  qpidd keeps as the queue changes (src/qpid/broker/Queue.cpp). Its ``msgDepth`` counts every message
  on the queue, acquired ones held unsettled included (seen on 1.39.0: 5 with 2 of them held), so
  *ready* is what was made available and not taken since: enqueues - acquires + releases - the
  messages discarded without being acquired (expired: ``discardsTtl``, dropped by a ring queue:
  ``discardsRing``), every one of which qpidd counts where it happens (Queue.cpp getNextMessage,
  purgeExpired, purge, release; LossyQueue.cpp checkDepth). A count that is not between 0 and
  ``msgDepth`` is not given at all (:class:`~conformance.errors.TargetCannot`). ``consumerCount``
  counts every subscription qpidd counts, browsing ones included (Queue::consume).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from proton import Message

from conformance import yamlio
from conformance.api import QueueSpec, QueueStats
from conformance.errors import AdapterError, ChannelClosed, ConnectionLost, OperationTimeout, TargetCannot
from conformance.unsupported import CANNOT_EXPRESS

AGENT_ADDRESS = "qmf.default.direct"
BROKER_OBJECT = "org.apache.qpid.broker:broker:amqp-broker"
QUEUE_OBJECT = "org.apache.qpid.broker:queue:"
EXCHANGE_OBJECT = "org.apache.qpid.broker:exchange:"
ARGUMENTS_FILE = Path(__file__).with_name("qmf-arguments.yaml")
#: How long a consumer's departure may take to show in qpidd's counts before the generic consumer
#: wait (which names what it waited for) takes over.
DEPARTURE_S = 5.0
POLL_S = 0.005

#: qpid exception names (the prefix of a QMF error_text, qpid/framing/reply_exceptions.h) as the
#: AMQP 0-9-1 reply codes cases compare against, as the AMQP 1.0 adapter maps error conditions.
EXCEPTION_CODES = {
    "not-found": 404,
    "unauthorized-access": 403,
    "resource-locked": 405,
    "object already exists": 405,
    "precondition-failed": 406,
    "invalid-argument": 406,
    "resource-limit-exceeded": 506,
    "not-allowed": 530,
    "not-implemented": 540,
    "unknown object type": 503,
}


class QmfError(Exception):
    """An ``_exception`` answer: qpidd refused the request (error_text in its own words)."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"QMF exception {code}: {text}")
        self.code = code
        self.text = text

    @property
    def reply_code(self) -> int:
        prefix = self.text.split(":", 1)[0].strip()
        return EXCEPTION_CODES.get(prefix, 541)


# -- messages -----------------------------------------------------------------------------------


def request(opcode: str, body: dict[str, Any], *, reply_to: str, correlation_id: str) -> Message:
    """A QMF v2 request as qpid-cpp's AMQP 1.0 client builds it (qmf/client.py ``BrokerAgent._request``)."""
    return Message(body=body, subject="broker", address=AGENT_ADDRESS, reply_to=reply_to, correlation_id=correlation_id,
                   properties={"method": "request", "qmf.opcode": opcode, "x-amqp-0-10.app-id": "qmf2"})


def method_request(method: str, arguments: dict[str, Any], *, reply_to: str, correlation_id: str,
                   object_name: str = BROKER_OBJECT) -> Message:
    body = {"_object_id": {"_object_name": object_name}, "_method_name": method, "_arguments": arguments}
    return request("_method_request", body, reply_to=reply_to, correlation_id=correlation_id)


def query_request(object_name: str, *, reply_to: str, correlation_id: str) -> Message:
    body = {"_what": "OBJECT", "_object_id": {"_object_name": object_name}}
    return request("_query_request", body, reply_to=reply_to, correlation_id=correlation_id)


def plain(value: Any) -> Any:
    """A QMF value with its strings as str: qpidd sends 0-10 str16 values as AMQP 1.0 binary."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Answer:
    opcode: str
    body: Any
    partial: bool


def parse_answer(msg: Message) -> Answer:
    """The opcode and plain body of a response; an ``_exception`` raises :class:`QmfError`."""
    props = plain(dict(msg.properties or {}))
    opcode = str(props.get("qmf.opcode", ""))
    body = plain(msg.body)
    if opcode == "_exception":
        values = body.get("_values", {}) if isinstance(body, dict) else {}
        raise QmfError(int(values.get("error_code", 0)), str(values.get("error_text", body)))
    if opcode not in ("_method_response", "_query_response"):
        raise AdapterError(f"QMF answered with opcode {opcode!r} (properties {props})")
    return Answer(opcode, body, "partial" in props)


def queue_counts(name: str, values: dict[str, Any]) -> QueueStats:
    """Ready messages and consumers from a queue object's values (see the module's docstring)."""
    need = ("msgDepth", "msgTotalEnqueues", "acquires", "releases", "discardsTtl", "discardsRing", "consumerCount")
    missing = [k for k in need if k not in values]
    if missing:
        raise TargetCannot(f"counting {name} through QMF: the queue object has no {', '.join(missing)}", kind=CANNOT_EXPRESS)
    v = {k: int(values[k]) for k in need}
    ready = v["msgTotalEnqueues"] - v["acquires"] + v["releases"] - v["discardsTtl"] - v["discardsRing"]
    if not 0 <= ready <= v["msgDepth"]:
        raise TargetCannot(f"counting {name} through QMF: enqueues {v['msgTotalEnqueues']} - acquires {v['acquires']} + releases "
                           f"{v['releases']} - discarded {v['discardsTtl'] + v['discardsRing']} = {ready} ready, outside 0..msgDepth "
                           f"{v['msgDepth']}: the statistics do not add up, so the count is not known", kind=CANNOT_EXPRESS)
    held = v["msgDepth"] - ready
    return QueueStats(ready=ready, consumers=v["consumerCount"],
                      method=f"QMF query of {name}: msgDepth {v['msgDepth']} ({held} acquired), consumerCount {v['consumerCount']}")


# -- the argument mapping (data: qmf-arguments.yaml) --------------------------------------------------


@cache
def mapping() -> dict[str, Any]:
    data = yamlio.safe_load(ARGUMENTS_FILE.read_text())
    if data.get("schema") != "conformance.qmf-arguments/1":
        raise AdapterError(f"{ARGUMENTS_FILE.name}: unknown schema {data.get('schema')!r}")
    for section in ("flags", "arguments"):
        for key, entry in data[section].items():
            kinds = [k for k in ("property", "absent", "differs") if k in entry]
            if len(kinds) != 1 or not entry.get("source"):
                raise AdapterError(f"{ARGUMENTS_FILE.name}: {section}.{key} needs exactly one of property/absent/differs, and a source")
    return data


def _refuse(what: str, entry: dict[str, Any] | None) -> TargetCannot:
    if entry is None:
        return TargetCannot(f"qpidd: no mapping of {what} onto a qpidd queue option ({ARGUMENTS_FILE.name} names none), "
                            "and qpidd would take it silently and ignore it", kind=CANNOT_EXPRESS)
    word = "has no such feature" if "absent" in entry else "has only a different one"
    return TargetCannot(f"qpidd {word} for {what}: {entry.get('absent') or entry.get('differs')} [{entry['source']}]",
                        kind=CANNOT_EXPRESS)


def queue_properties(spec: QueueSpec) -> dict[str, Any]:
    """qpidd's ``create`` properties for ``spec``; an argument or flag without a mapping of the same
    meaning raises :class:`TargetCannot` (cannot-express) saying what qpidd has instead."""
    data = mapping()
    flags, arguments = data["flags"], data["arguments"]
    props: dict[str, Any] = {}
    for flag in ("exclusive", "auto_delete"):
        if getattr(spec, flag):
            entry = flags.get(flag)
            if entry is None or "property" not in entry:
                raise _refuse(f"a queue declared {flag.replace('_', '-')}", entry)
            props[entry["property"]] = True
    props[flags["durable"]["property"]] = bool(spec.durable)
    given = dict(spec.arguments)
    for key, value in given.items():
        entry = arguments.get(key)
        if entry is None or "property" not in entry:
            raise _refuse(f"the queue argument {key}={value!r}", entry)
    for key, value in given.items():
        entry = arguments[key]
        if "values" in entry:
            if value not in entry["values"]:
                raise TargetCannot(f"qpidd has no {entry['property']} for {key}={value!r} (it maps only "
                                   f"{', '.join(map(str, entry['values']))}) [{entry['source']}]", kind=CANNOT_EXPRESS)
            props[entry["property"]] = entry["values"][value]
            continue
        if "at_least" in entry:
            if not isinstance(value, int) or value < entry["at_least"]:
                raise TargetCannot(f"qpidd has no {entry['property']} of the same meaning as {key}={value!r}: the mapping holds from "
                                   f"{entry['at_least']} ({entry['same_when']}) [{entry['source']}]", kind=CANNOT_EXPRESS)
            props[entry["property"]] = entry["value"]
        else:
            props[entry["property"]] = value
        for other, default in (entry.get("requires") or {}).items():
            if other not in given:
                props[arguments[other]["property"]] = arguments[other]["values"][default]
    return props


# -- the backend -------------------------------------------------------------------------------


class QmfAdmin:
    """Queue administration and counts for qpidd through its QMF agent, on a connection of its own
    (python-qpid-proton's BlockingConnection: every wait bounded by the admin's op_timeout)."""

    name = "qmf"
    counts = True
    #: What this backend declares (conformance/catalogue/data/capabilities.yaml).
    capabilities = frozenset({"queue.arguments", "exchanges", "queue.durability", "queue.purge"})

    @staticmethod
    def declarable(spec: QueueSpec) -> str | None:
        """Why qpidd cannot have a queue such as ``spec`` (qmf-arguments.yaml), known before anything is sent."""
        try:
            queue_properties(spec)
        except TargetCannot as exc:
            return str(exc)
        return None

    def __init__(self, url: str, *, op_timeout: float | None) -> None:
        self._url = url
        self._timeout = op_timeout or 30.0
        self._conn: Any = None
        self._sender: Any = None
        self._receiver: Any = None

    # -- plumbing -------------------------------------------------------------------------------

    def _open(self) -> None:
        from proton.utils import BlockingConnection

        parts = urlsplit(self._url)
        kwargs: dict[str, Any] = {"allowed_mechs": "PLAIN" if parts.username else "ANONYMOUS"}
        if parts.username:
            kwargs.update(user=unquote(parts.username), password=unquote(parts.password or ""))
        scheme = "amqp"
        if parts.scheme == "amqps":
            from urllib.parse import parse_qs

            from adapters.amqp10.tls import tls_client  # the adapter's own TLS rules (peer name verified)

            kwargs["ssl_domain"] = tls_client(parse_qs(parts.query))
            scheme = "amqps"
        try:
            from proton import symbol

            from conformance.nemesis.mutations import ADMIN_CONNECTION_PREFIX

            # named as the suite's administration: a self-test's mutation leaves this connection alone
            kwargs["properties"] = {symbol("connection_name"): f"{ADMIN_CONNECTION_PREFIX} (qmf)"}
            self._conn = BlockingConnection(f"{scheme}://{parts.hostname}:{parts.port or 5672}", timeout=self._timeout, **kwargs)
            self._sender = self._conn.create_sender(AGENT_ADDRESS)
            self._receiver = self._conn.create_receiver(None, dynamic=True, credit=100)
        except Exception as exc:  # noqa: BLE001 - proton's connection, link and timeout errors alike
            self.close()
            raise ConnectionLost(f"QMF session to {parts.hostname}:{parts.port}: {type(exc).__name__}: {exc}") from None

    def _call(self, msg_of: Any) -> list[Any]:
        """Send one request (``msg_of(reply_to, correlation_id)``) and gather its answer's bodies."""
        if self._conn is None:
            self._open()
        cid = uuid.uuid4().hex
        from proton import Timeout

        try:
            self._sender.send(msg_of(self._receiver.remote_source.address, cid))
            out: list[Any] = []
            while True:
                msg = self._receiver.receive(timeout=self._timeout)
                self._receiver.accept()
                if msg.correlation_id != cid:
                    continue  # the late answer to an earlier request that timed out
                answer = parse_answer(msg)
                out.append(answer.body)
                if not answer.partial:
                    return out
        except Timeout:
            self.close()
            raise OperationTimeout(f"timed out after {self._timeout:.1f}s waiting for qpidd's QMF answer") from None
        except (QmfError, AdapterError):
            raise
        except Exception as exc:  # noqa: BLE001 - the connection went away under the request
            self.close()
            raise ConnectionLost(f"QMF request to qpidd: {type(exc).__name__}: {exc}") from None

    def _method(self, method: str, arguments: dict[str, Any]) -> None:
        self._call(lambda reply_to, cid: method_request(method, arguments, reply_to=reply_to, correlation_id=cid))

    def _object(self, object_name: str) -> dict[str, Any] | None:
        """An object's values, None when qpidd has no such object."""
        bodies = self._call(lambda reply_to, cid: query_request(object_name, reply_to=reply_to, correlation_id=cid))
        found = [o for body in bodies for o in (body or [])]
        return dict(found[0].get("_values", {})) if found else None

    def _create(self, kind: str, name: str, properties: dict[str, Any]) -> QmfError | None:
        """Create; qpidd's refusal is returned (the caller decides what an existing object means)."""
        try:
            self._method("create", {"type": kind, "name": name, "properties": properties, "strict": True})
        except QmfError as exc:
            return exc
        return None

    @staticmethod
    def _closed(what: str, exc: QmfError) -> ChannelClosed:
        return ChannelClosed(exc.reply_code, f"{what}: QMF exception {exc.text}")

    # -- QueueAdmin -----------------------------------------------------------------------------

    def declare_queue(self, spec: QueueSpec) -> str:
        if spec.queue_type not in ("classic", "default"):
            raise TargetCannot(f"qpidd has one kind of queue; a {spec.queue_type} queue cannot be declared", kind=CANNOT_EXPRESS)
        props = queue_properties(spec)
        refused = self._create("queue", spec.name, props)
        if refused is None:
            return spec.name
        if refused.text.startswith("object already exists"):
            have = self._object(QUEUE_OBJECT + spec.name) or {}
            same = (bool(have.get("durable")) == props["durable"] and bool(have.get("autoDelete")) == bool(props.get("auto-delete"))
                    and {k: v for k, v in (have.get("arguments") or {}).items()} == {k: v for k, v in props.items() if k.startswith("qpid.")})
            if same:
                return spec.name  # declared again as it is: as idempotent as queue.declare
        raise self._closed(f"QMF create queue {spec.name} with {props}", refused)

    def delete_queue(self, name: str) -> None:
        try:
            self._method("delete", {"type": "queue", "name": name, "options": {}})
        except QmfError as exc:
            if exc.reply_code != 404:  # deleting a queue that is gone already is done
                raise self._closed(f"QMF delete queue {name}", exc) from None

    def _queue(self, name: str) -> dict[str, Any]:
        values = self._object(QUEUE_OBJECT + name)
        if values is None:
            raise ChannelClosed(404, f"NOT_FOUND - no queue '{name}' (QMF query of {QUEUE_OBJECT}{name} answered no object)")
        return values

    def queue_stats(self, name: str) -> QueueStats:
        return queue_counts(name, self._queue(name))

    def purge_queue(self, name: str) -> int:
        """Method ``purge`` (request 0: every message) on the queue object; qpidd's answer carries no
        count, so the count is what its own statistic ``discardsPurge`` ("Messages discarded due to
        management purge", src/qpid/broker/management-schema.xml; Queue::purge counts each message it
        removes) grew by across the call: the broker's figure, as purge-ok's message-count is."""
        before = int(self._queue(name).get("discardsPurge") or 0)
        try:
            self._call(lambda reply_to, cid: method_request("purge", {"request": 0, "filter": {}}, reply_to=reply_to,
                                                            correlation_id=cid, object_name=QUEUE_OBJECT + name))
        except QmfError as exc:
            raise self._closed(f"QMF purge of queue {name}", exc) from None
        return int(self._queue(name).get("discardsPurge") or 0) - before

    def departure_barrier(self, name: str) -> str | None:
        """qpidd cancels a departing link's subscription before it releases the deliveries the link
        held (src/qpid/broker/amqp/Outgoing.cpp ``detached``: queue->cancel, then release of each),
        so a consumer count of 0 alone could be read between the two: the barrier is a count of 0 with
        no message left acquired (ready = msgDepth). None when that is not seen within DEPARTURE_S (the
        generic consumer wait then says what it waited for)."""
        start = time.monotonic()
        polls = 0
        while time.monotonic() - start < DEPARTURE_S:
            polls += 1
            values = self._queue(name)
            stats = queue_counts(name, values)
            if stats.consumers == 0 and stats.ready == int(values["msgDepth"]):
                return (f"{stats.method}: no consumer and nothing acquired, after {(time.monotonic() - start) * 1000:.1f}ms "
                        f"({polls} polls)")
            time.sleep(POLL_S)  # allowed: polling a broker condition with a deadline
        return None

    def declare_exchange(self, name: str, kind: str) -> None:
        refused = self._create("exchange", name, {"exchange-type": kind, "durable": False})
        if refused is None:
            return
        if refused.text.startswith("object already exists"):
            have = self._object(EXCHANGE_OBJECT + name) or {}
            if have.get("type") == kind:
                return
        raise self._closed(f"QMF create exchange {name} of type {kind}", refused)

    def delete_exchange(self, name: str) -> None:
        try:
            self._method("delete", {"type": "exchange", "name": name})
        except QmfError as exc:
            if exc.reply_code != 404:
                raise self._closed(f"QMF delete exchange {name}", exc) from None

    def bind_queue(self, queue: str, exchange: str, routing_key: str) -> None:
        if any("/" in part for part in (queue, exchange, routing_key)) or not exchange:
            # qpidd names a binding exchange/queue/key (Broker.cpp BindingIdentifier)
            raise TargetCannot(f"a QMF binding name cannot hold {exchange!r}/{queue!r}/{routing_key!r} "
                               "(a '/' in a part, or the default exchange)", kind=CANNOT_EXPRESS)
        refused = self._create("binding", f"{exchange}/{queue}/{routing_key}", {})
        if refused is not None:
            raise self._closed(f"QMF create binding {exchange}/{queue}/{routing_key}", refused)

    def close(self) -> None:
        conn, self._conn, self._sender, self._receiver = self._conn, None, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a connection that is already gone
                pass
