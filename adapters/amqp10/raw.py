"""A frame-level AMQP 1.0 client for the few spec rules python-qpid-proton gives no way to exercise:
a flow with echo set, a flow pipelined before the broker's attach, a transfer with resume or with
more and aborted both set, settled only on a delivery's first transfer, an incomplete unsettled map,
a source filter, a disposition of a delivery the broker sent settled. Performatives are encoded and decoded with proton's codec (``Data``); only the
framing (transport 2.3) and the SASL exchange (security 5.3) are written here.

Every read has a deadline; nothing here logs the URL's credentials.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from proton import Data, Described, symbol, ubyte, uint, ulong

from adapters.amqp10.plain import plain as _plain
from conformance.errors import AdapterError, ConnectionLost, Unsupported

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
SOURCE, TARGET = 0x28, 0x29
NAMES = {OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer", DISPOSITION: "disposition",
         DETACH: "detach", END: "end", CLOSE: "close", SASL_MECHANISMS: "sasl-mechanisms", SASL_OUTCOME: "sasl-outcome"}
WINDOW = 2048


def _encode(code: int, fields: list[Any]) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    return data.encode()


def message(body: bytes, message_id: str) -> bytes:
    """An encoded message as the proton adapter sends one (messaging 3.2)."""
    from proton import Message

    return Message(body=body, id=message_id, durable=False).encode()


class Frame:
    """One received performative: its name, fields (as proton decoded them) and payload."""

    def __init__(self, code: int, fields: list[Any], payload: bytes, channel: int) -> None:
        self.code, self.fields, self.payload, self.channel = code, fields, payload, channel
        self.name = NAMES.get(code, f"0x{code:x}")

    def field(self, i: int) -> Any:
        return self.fields[i] if len(self.fields) > i else None

    def brief(self) -> str:
        shown = ", ".join(f"{_plain(v)}" for v in self.fields[:11])
        return f"{self.name}({shown})" + (f" +{len(self.payload)} bytes" if self.payload else "")


class RawConnection:
    """One connection with one session (channel 0), driven frame by frame."""

    def __init__(self, url: str, timeout: float, name: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme == "amqps":
            raise Unsupported("the frame-level client speaks plain TCP only (no TLS)")
        self.timeout = timeout
        self.frames: list[Frame] = []  # every frame received, in order
        self.log: list[str] = []  # both directions, briefly (no credentials)
        try:
            self.sock = socket.create_connection((parts.hostname, parts.port or 5672), timeout=timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {parts.hostname}:{parts.port or 5672}: {exc}") from None
        self._buf = b""
        self._sasl(unquote(parts.username or ""), unquote(parts.password or ""))
        self.sock.sendall(AMQP_HEADER)
        if self._read_exact(8) != AMQP_HEADER:
            raise AdapterError("the broker did not answer the AMQP 1.0 protocol header")
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        # connection_name in the open's properties, as the proton adapter sends it: how the self-test
        # tells which requirement a connection belongs to.
        props_out = {symbol("connection_name"): name} if name else None
        self.send(OPEN, [f"conformance-raw-{int(time.time() * 1000) % 100000}", f"vhost:{vhost}" if vhost != "/" else parts.hostname, uint(65536),
                         None, None, None, None, None, None, props_out])
        props = {str(k): v for k, v in dict(self.expect("open").field(9) or {}).items()}
        product, version = str(props.get("product", "")), str(props.get("version", ""))
        major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
        #: As the proton adapter addresses a queue (ProtonConnection.address): RabbitMQ's plugin by prefix.
        self._prefix = ("/queues/" if major >= 4 else "/amq/queue/") if product.lower() == "rabbitmq" else ""
        self.next_outgoing_id = 0
        self.next_incoming_id = 0
        self.send(BEGIN, [None, uint(0), uint(WINDOW), uint(WINDOW)])
        self.next_incoming_id = int(self.expect("begin").field(1) or 0)

    # -- framing ---------------------------------------------------------------------------------

    def _read_exact(self, n: int, deadline: float | None = None) -> bytes:
        deadline = deadline or time.monotonic() + self.timeout
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError from None
            except OSError as exc:
                raise ConnectionLost(f"connection lost: {exc}") from None
            if not chunk:
                raise ConnectionLost("the broker closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read_frame(self, deadline: float) -> Frame | None:
        head = self._read_exact(8, deadline)
        size, doff, _kind, channel = struct.unpack(">IBBH", head)
        rest = self._read_exact(size - 8, deadline)
        body = rest[doff * 4 - 8:]
        if not body:
            return None  # an empty frame (heartbeat)
        data = Data()
        used = data.decode(body)
        obj = data.get_object()
        return Frame(int(obj.descriptor), list(obj.value or []), body[used:], channel)

    def send(self, code: int, fields: list[Any], payload: bytes = b"", *, kind: int = 0) -> None:
        body = _encode(code, fields) + payload
        self.sock.sendall(struct.pack(">IBBH", 8 + len(body), 2, kind, 0) + body)
        self.log.append(f"-> {NAMES.get(code, hex(code))}({', '.join(str(_plain(f)) for f in fields[:11])})" + (f" +{len(payload)} bytes" if payload else ""))

    def read(self, until: Any = None, timeout: float | None = None) -> list[Frame]:
        """Frames received until ``until(frame)`` is true (that frame included) or ``timeout``;
        never raises on the timeout: what came is what the caller judges."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        got: list[Frame] = []
        while True:
            try:
                f = self._read_frame(deadline)
            except TimeoutError:
                return got
            if f is None:
                continue
            self.frames.append(f)
            got.append(f)
            if f.name == "transfer":
                self.next_incoming_id += 1
            self.log.append(f"<- {f.brief()}")
            if until is not None and until(f):
                return got
            if f.name in ("end", "close"):
                return got

    def expect(self, name: str) -> Frame:
        got = self.read(lambda f: f.name == name)
        if not got or got[-1].name != name:
            raise AdapterError(f"expected {name} from the broker, got {[f.name for f in got] or 'nothing'}")
        return got[-1]

    def _sasl(self, user: str, password: str) -> None:
        self.sock.sendall(SASL_HEADER)
        if self._read_exact(8) != SASL_HEADER:
            raise AdapterError("the broker did not answer the SASL protocol header")
        mechs = self.read(lambda f: f.code == SASL_MECHANISMS)
        offered = [str(m) for m in (_plain(mechs[-1].field(0)) if mechs else []) or []] if mechs else []
        if isinstance(offered, str):
            offered = [offered]
        if user and "PLAIN" in offered:
            self.send(SASL_INIT, [symbol("PLAIN"), f"\0{user}\0{password}".encode()], kind=1)
            self.log[-1] = "-> sasl-init(PLAIN, ***)"
        elif "ANONYMOUS" in offered:
            self.send(SASL_INIT, [symbol("ANONYMOUS"), b""], kind=1)
        else:
            raise AdapterError(f"no SASL mechanism in common (offered {offered})")
        outcome = self.read(lambda f: f.code == SASL_OUTCOME)
        if not outcome or int(outcome[-1].field(0) or 0) != 0:
            raise AdapterError("SASL authentication refused")

    def address(self, queue: str) -> str:
        from urllib.parse import quote

        return self._prefix + (quote(queue, safe="") if self._prefix == "/queues/" else queue)

    @staticmethod
    def message(body: bytes, message_id: str) -> bytes:
        return message(body, message_id)

    @staticmethod
    def selector_filter(selector: str) -> dict[Any, Any]:
        """A filter-set (messaging 3.5.8) with one JMS selector filter (the AMQP filter registry)."""
        return {symbol("selector"): Described(symbol("apache.org:selector-filter:string"), selector)}

    @staticmethod
    def source_filter(attach: Frame) -> list[dict[str, Any]] | None:
        """The filter-set of an attach's source as data: per entry, its key and value and their types."""
        source = attach.field(5)
        fields = list(getattr(source, "value", None) or [])
        if len(fields) < 8 or fields[7] is None:
            return None
        out = []
        for k, v in dict(fields[7]).items():
            kt = "symbol" if isinstance(k, symbol) else type(k).__name__
            vt = "null" if v is None else "described" if hasattr(v, "descriptor") else type(v).__name__
            out.append({"key": str(k), "key-type": kt, "value": str(_plain(v))[:120], "value-type": vt})
        return out

    # -- performatives -------------------------------------------------------------------------

    def attach(self, name: str, handle: int, *, receiver: bool, address: str | None, snd_settle_mode: int = 0,
               filter_: dict[Any, Any] | None = None, unsettled: dict[Any, Any] | None = None, incomplete: bool = False) -> None:
        source = Described(ulong(SOURCE), [address if receiver else None, None, None, None, None, None, None, filter_])
        target = Described(ulong(TARGET), [None if receiver else address])
        self.send(ATTACH, [name, uint(handle), receiver, ubyte(snd_settle_mode), ubyte(0), source, target, unsettled, incomplete,
                           None if receiver else uint(0)])

    def flow(self, handle: int | None, *, delivery_count: int | None, link_credit: int | None, echo: bool = False, drain: bool = False) -> None:
        self.send(FLOW, [uint(self.next_incoming_id), uint(WINDOW), uint(self.next_outgoing_id), uint(WINDOW), None if handle is None else uint(handle),
                         None if delivery_count is None else uint(delivery_count), None if link_credit is None else uint(link_credit),
                         None, drain, echo])

    def transfer(self, handle: int, delivery_id: int | None, tag: bytes | None, payload: bytes, *, settled: bool | None = None,
                 more: bool = False, resume: bool = False, aborted: bool = False) -> None:
        self.send(TRANSFER, [uint(handle), None if delivery_id is None else uint(delivery_id), tag, uint(0) if tag is not None else None,
                             settled, more, None, None, resume, aborted], payload)
        self.next_outgoing_id += 1  # transfer-ids count frames (transport 2.5.6)

    def disposition(self, first: int, outcome: str, *, settled: bool = True) -> None:
        """A receiver's disposition (transport 2.7.6) of delivery-id ``first`` with the outcome
        released or rejected (messaging 3.4.4, 3.4.3), whatever the sender did with the delivery:
        also one the sender settled at send, which proton's engine has forgotten and never settles."""
        code = {"released": 0x26, "rejected": 0x25, "accepted": 0x24}[outcome]
        self.send(DISPOSITION, [True, uint(first), uint(first), settled, Described(ulong(code), [])])

    def detach(self, handle: int) -> None:
        self.send(DETACH, [uint(handle), True])

    def close(self) -> None:
        try:
            self.send(CLOSE, [])
            self.read(lambda f: f.name == "close", timeout=1.0)
        except (OSError, ConnectionLost, AdapterError):
            pass
        finally:
            self.sock.close()
