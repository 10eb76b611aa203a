"""AMQP 1.0 framing (core spec 2.3): size, doff, type, channel, then a described performative.

Frame boundaries and the performative's descriptor are read here; the fields of a performative are
decoded with python-qpid-proton's codec when it is installed (traces only).
"""

from __future__ import annotations

import struct

from conformance.nemesis.wire import BufferedCodec, Frame, MalformedFrame

MAX_FRAME = 64 * 1024 * 1024
_HEAD = struct.Struct(">IBBH")

PERFORMATIVES = {
    0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer",
    0x15: "disposition", 0x16: "detach", 0x17: "end", 0x18: "close",
    0x40: "sasl-mechanisms", 0x41: "sasl-init", 0x42: "sasl-challenge", 0x43: "sasl-response", 0x44: "sasl-outcome",
}
SYMBOLIC = {f"amqp:{v}:list": v for v in PERFORMATIVES.values()}
#: Per performative, the list positions worth a trace line (spec 2.7 field order). SASL payloads
#: (sasl-init initial-response, sasl-response) carry credentials and are never rendered.
KEY_FIELDS = {
    "open": ("container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out"),
    "begin": ("remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max"),
    "attach": ("name", "handle", "role", "snd-settle-mode", "rcv-settle-mode"),
    "flow": ("next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window", "handle", "delivery-count", "link-credit", "available", "drain", "echo"),
    "transfer": ("handle", "delivery-id", "delivery-tag", "message-format", "settled", "more"),
    "disposition": ("role", "first", "last", "settled", "state"),
    "detach": ("handle", "closed", "error"),
    "end": ("error",),
    "close": ("error",),
    "sasl-mechanisms": ("sasl-server-mechanisms",),
    "sasl-outcome": ("code",),
}


def performative(body: bytes | memoryview) -> str:
    """The name of the described performative at the start of a frame body."""
    if len(body) < 3 or body[0] != 0x00:
        raise MalformedFrame("frame body does not start with a described performative")
    code = body[1]
    if code == 0x53:  # smallulong
        value = body[2]
    elif code == 0x80 and len(body) >= 10:  # ulong
        value = int.from_bytes(body[2:10], "big")
    elif code == 0xA3:  # sym8
        sym = bytes(body[3 : 3 + body[2]]).decode("ascii", "replace")
        if sym in SYMBOLIC:
            return SYMBOLIC[sym]
        raise MalformedFrame(f"unknown performative {sym!r}")
    else:
        raise MalformedFrame(f"unsupported descriptor constructor 0x{code:02x}")
    if value not in PERFORMATIVES:
        raise MalformedFrame(f"unknown performative code 0x{value:x}")
    return PERFORMATIVES[value]


def describe(raw: bytes) -> str:
    body = raw[raw[4] * 4 :]
    name = performative(body)
    if name == "sasl-response":
        return "response=***"
    try:
        from proton import Data
    except ImportError:  # the amqp10 extra is not installed: names only
        return ""
    data = Data()
    consumed = data.decode(body)
    fields = list(getattr(data.get_object(), "value", None) or [])
    if name == "sasl-init":
        return (f"mechanism={_show('', fields[0])} " if fields else "") + "initial-response=***"
    labels = KEY_FIELDS.get(name, ())
    bits = [f"{label}={_show(label, fields[i])}" for i, label in enumerate(labels) if i < len(fields) and fields[i] is not None]
    if name == "transfer":
        bits.append(f"payload={len(body) - consumed} bytes")
    return " ".join(bits)


def _describe_header(raw: bytes) -> str:
    return {0: "amqp", 2: "tls", 3: "sasl"}.get(raw[4], str(raw[4])) + " " + ".".join(str(b) for b in raw[5:8])


class Amqp10Codec(BufferedCodec):
    protocol = "amqp-1.0"
    frame_names = frozenset({*PERFORMATIVES.values(), "protocol-header", "empty"})

    @classmethod
    def matches(cls, header: bytes) -> bool:
        """The client's first bytes are an AMQP 1.0 protocol header (plain, TLS or SASL layer)."""
        return len(header) >= 8 and header[:4] == b"AMQP" and header[4] in (0, 2, 3) and header[5:8] == b"\x01\x00\x00"

    def feed(self, data: bytes) -> list[Frame]:
        buf = self._buf
        buf += data
        out: list[Frame] = []
        pos = 0
        n = len(buf)
        while n - pos >= 8:
            if buf[pos : pos + 4] == b"AMQP":
                out.append(Frame(bytes(buf[pos : pos + 8]), "protocol-header", 0, _describe_header))
                pos += 8
                continue
            size, doff, kind, channel = _HEAD.unpack_from(buf, pos)
            if size < 8 or size > MAX_FRAME:
                raise MalformedFrame(f"frame size {size} out of range (offset {pos})")
            if doff < 2 or doff * 4 > size:
                raise MalformedFrame(f"data offset {doff} invalid for a {size}-byte frame (offset {pos})")
            if kind not in (0, 1):
                raise MalformedFrame(f"frame type {kind} is neither AMQP (0) nor SASL (1) (offset {pos})")
            if pos + size > n:
                break
            raw = bytes(buf[pos : pos + size])
            body = memoryview(raw)[doff * 4 :]
            if len(body) == 0:
                out.append(Frame(raw, "empty", channel))
            else:
                out.append(Frame(raw, performative(body), channel, describe))
            pos += size
        del buf[:pos]
        return out


#: Delivery states and outcomes (spec 3.4, transactions 4.5) by descriptor code.
STATES = {0x23: "received", 0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: "modified", 0x33: "declared", 0x34: "transactional-state"}
ENUMS = {
    "role": {False: "sender", True: "receiver"},
    "snd-settle-mode": {0: "unsettled", 1: "settled", 2: "mixed"},
    "rcv-settle-mode": {0: "first", 1: "second"},
    "code": {0: "ok", 1: "auth", 2: "sys", 3: "sys-perm", 4: "sys-temp"},
}


def _show(label: str, value: object) -> str:
    """A field as a protocol engineer reads it: plain numbers and symbols, tags in hex, outcomes by name."""
    if label in ENUMS and value in ENUMS[label]:
        return ENUMS[label][value]  # type: ignore[index]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return repr(str(value))
    descriptor = getattr(value, "descriptor", None)
    if descriptor is not None and hasattr(value, "value"):  # Described
        inner = getattr(value, "value")
        state = STATES.get(int(descriptor)) if isinstance(descriptor, int) else None
        if state is not None:
            return state + (f"{_show('', inner)}" if inner else "")
        return f"{descriptor}:{_show('', inner)}"
    elements = getattr(value, "elements", None)
    if elements is not None:  # Array
        return "[" + ", ".join(_show("", e) for e in elements) + "]"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_show("", e) for e in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_show('', k)}: {_show('', v)}" for k, v in value.items()) + "}"
    return repr(value)
