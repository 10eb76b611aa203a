"""AMQP 0-9-1 framing (spec 4.2.3): type, channel, size, payload, 0xCE; decoded with pamqp.

Method names come from the class and method ids at the start of the payload, looked up in pamqp's
index, so naming a frame costs a dict lookup; pamqp decodes the full frame only for traces.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from pamqp import commands
from pamqp import frame as pamqp_frame

from conformance.nemesis.wire import BufferedCodec, Frame, MalformedFrame

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = 0xCE
METHOD, HEADER, BODY, HEARTBEAT = 1, 2, 3, 8
#: Far above any frame_max a broker negotiates (RabbitMQ caps it at 128 KiB by default).
MAX_FRAME = 64 * 1024 * 1024

_HEAD = struct.Struct(">BHI")
_IDS = struct.Struct(">HH")
#: Fields never rendered: SASL responses carry the password.
SECRET_FIELDS = {"response"}
#: Fields too bulky for a trace line.
BULKY_FIELDS = {"server_properties", "client_properties", "mechanisms", "locales", "arguments"}


def _spec_name(pamqp_name: str) -> str:
    """'Tx.CommitOk' -> 'tx.commit-ok' (the spec's spelling)."""
    cls, _, method = pamqp_name.partition(".")
    return f"{cls.lower()}.{re.sub(r'(?<!^)(?=[A-Z])', '-', method).lower()}"


NAMES: dict[int, str] = {index: _spec_name(cls.name) for index, cls in commands.INDEX_MAPPING.items()}


def describe(raw: bytes) -> str:
    _, _, value = pamqp_frame.unmarshal(raw)
    if raw[0] == HEADER:
        p = value.properties
        bits = [f"body_size={value.body_size}"]
        for name in ("message_id", "delivery_mode", "correlation_id", "expiration"):
            if getattr(p, name, None) is not None:
                bits.append(f"{name}={getattr(p, name)!r}")
        if getattr(p, "headers", None):
            bits.append(f"headers={sorted(p.headers)!r}")
        return " ".join(bits)
    bits = []
    for name in getattr(type(value), "__slots__", ()):
        if name in BULKY_FIELDS:
            continue
        shown = "***" if name in SECRET_FIELDS else repr(getattr(value, name, None))
        bits.append(f"{name}={shown}")
    return " ".join(bits)


class Amqp091Codec(BufferedCodec):
    protocol = "amqp-0-9-1"
    #: The protocol's frame of each fault point (conformance/nemesis/points.py).
    fault_points = Path(__file__).with_name("fault_points.yaml")
    frame_names = frozenset({*NAMES.values(), "protocol-header", "content-header", "content-body", "heartbeat"})

    @classmethod
    def matches(cls, header: bytes) -> bool:
        """The client's first bytes are AMQP 0-9-1's protocol header."""
        return header[:4] == b"AMQP" and header[4:8] == PROTOCOL_HEADER[4:8]

    def feed(self, data: bytes) -> list[Frame]:
        buf = self._buf
        buf += data
        out: list[Frame] = []
        pos = 0
        n = len(buf)
        while n - pos >= 7:
            if buf[pos] == 0x41 and buf[pos : pos + 4] == b"AMQP":  # protocol header (either side)
                if n - pos < 8:
                    break
                out.append(Frame(bytes(buf[pos : pos + 8]), "protocol-header", 0, _describe_header))
                pos += 8
                continue
            kind, channel, size = _HEAD.unpack_from(buf, pos)
            if kind not in (METHOD, HEADER, BODY, HEARTBEAT):
                raise MalformedFrame(f"frame type {kind} is not an AMQP 0-9-1 frame type (offset {pos})")
            if size > MAX_FRAME:
                raise MalformedFrame(f"frame size {size} exceeds {MAX_FRAME} (offset {pos})")
            end = pos + 7 + size + 1
            if end > n:
                break
            if buf[end - 1] != FRAME_END:
                raise MalformedFrame(f"frame end byte 0x{buf[end - 1]:02x}, expected 0xce (offset {pos})")
            raw = bytes(buf[pos:end])
            if kind == METHOD:
                if size < 4:
                    raise MalformedFrame(f"method frame of {size} bytes has no class/method id")
                index = (raw[7] << 24) | (raw[8] << 16) | (raw[9] << 8) | raw[10]
                name = NAMES.get(index)
                if name is None:
                    cls, meth = _IDS.unpack_from(raw, 7)
                    raise MalformedFrame(f"unknown method {cls}.{meth} (offset {pos})")
                out.append(Frame(raw, name, channel, describe))
            elif kind == HEADER:
                out.append(Frame(raw, "content-header", channel, describe))
            elif kind == BODY:
                out.append(Frame(raw, "content-body", channel, _describe_body))
            else:
                out.append(Frame(raw, "heartbeat", channel))
            pos = end
        del buf[:pos]
        return out


def _describe_body(raw: bytes) -> str:
    return f"{len(raw) - 8} bytes"


def _describe_header(raw: bytes) -> str:
    return " ".join(str(b) for b in raw[4:8])
