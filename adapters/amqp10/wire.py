"""AMQP 1.0 framing (core spec 2.3): size, doff, type, channel, then a described performative.

Frame boundaries and the performative's descriptor are read here; the fields of a performative are
decoded with python-qpid-proton's codec for traces, and for the few frames whose name depends on
them (below).

Frame names. A frame is named by its performative ("attach", "transfer", "disposition", ...), except
the frames of a transaction (transactions, core spec section 4), which a fault must be able to tell
from ordinary traffic:

- a transfer on a link whose target is a coordinator (a *control*) is named by the message it
  carries: ``declare``, ``discharge`` (fail=false: commit) or ``discharge(fail)`` (rollback);
- the disposition that answers a control is named by the control and its outcome: ``declared``
  (declare answered with the declared outcome), otherwise ``<control>-<outcome>``:
  ``discharge-accepted`` (the commit done), ``discharge(fail)-accepted``, ``declare-rejected``,
  ``discharge-rejected`` (a transaction-error), ``declare-accepted`` (a coordinator that is not
  one), ``<control>-no-outcome`` (settled without a state);
- a transfer on an ordinary link whose state is transactional-state (work inside a transaction) is
  ``transfer(txn)``, every frame of it (more=true continuations too); a disposition whose state is
  transactional-state is ``disposition(txn)``.

Which link is a coordinator and which delivery a disposition answers are per-connection facts seen
in both directions (attach on one peer's channel and handle, the disposition on the other peer's
channel, joined by begin's remote-channel), so the two codecs of one connection share a
:class:`Conversation`. Until a coordinator link is attached on a connection no transfer or
disposition is decoded (no transactional state can exist before a declare), so ordinary traffic
costs nothing more than its performative's descriptor.
"""

from __future__ import annotations

import struct
from pathlib import Path

from conformance.nemesis.wire import BufferedCodec, Frame, MalformedFrame

MAX_FRAME = 64 * 1024 * 1024
_HEAD = struct.Struct(">IBBH")

PERFORMATIVES = {
    0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer",
    0x15: "disposition", 0x16: "detach", 0x17: "end", 0x18: "close",
    0x40: "sasl-mechanisms", 0x41: "sasl-init", 0x42: "sasl-challenge", 0x43: "sasl-response", 0x44: "sasl-outcome",
}
SYMBOLIC = {f"amqp:{v}:list": v for v in PERFORMATIVES.values()}
#: Transaction frame names (see the module's docstring), by the control they belong to.
CONTROLS = ("declare", "discharge", "discharge(fail)")
OUTCOME_NAMES = ("accepted", "rejected", "released", "modified", "received", "no-outcome")
TX_NAMES = frozenset({*CONTROLS, "declared", "transfer(txn)", "disposition(txn)",
                      *(f"{c}-{o}" for c in CONTROLS for o in (*OUTCOME_NAMES, "declared"))})
#: Per performative, the list positions worth a trace line (spec 2.7 field order). SASL payloads
#: (sasl-init initial-response, sasl-response) carry credentials and are never rendered.
KEY_FIELDS = {
    "open": ("container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out"),
    "begin": ("remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max"),
    "attach": ("name", "handle", "role", "snd-settle-mode", "rcv-settle-mode", "source", "target", "unsettled", "incomplete-unsettled", "initial-delivery-count"),
    "flow": ("next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window", "handle", "delivery-count", "link-credit", "available", "drain", "echo"),
    "transfer": ("handle", "delivery-id", "delivery-tag", "message-format", "settled", "more", "rcv-settle-mode", "state", "resume", "aborted", "batchable"),
    "disposition": ("role", "first", "last", "settled", "state"),
    "detach": ("handle", "closed", "error"),
    "end": ("error",),
    "close": ("error",),
    "sasl-mechanisms": ("sasl-server-mechanisms",),
    "sasl-outcome": ("code",),
}
#: Flags a trace line shows only when set: the rare frames (a resumed or aborted transfer, an
#: incomplete unsettled map) must be visible, and a plain frame's explicit false adds nothing.
QUIET_WHEN_FALSE = frozenset({"incomplete-unsettled", "resume", "aborted", "batchable"})


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
    bits = [f"{label}={_show(label, fields[i])}" for i, label in enumerate(labels)
            if i < len(fields) and fields[i] is not None and not (label in QUIET_WHEN_FALSE and fields[i] is False)]
    if name == "transfer":
        bits.append(f"payload={len(body) - consumed} bytes")
    return " ".join(bits)


def _describe_header(raw: bytes) -> str:
    return {0: "amqp", 2: "tls", 3: "sasl"}.get(raw[4], str(raw[4])) + " " + ".".join(str(b) for b in raw[5:8])


#: Descriptor codes the naming reads (transport 2.7, messaging 3.2 and 3.5, transactions 4.5).
ATTACH, TRANSFER, DISPOSITION, DETACH, END = 0x12, 0x14, 0x15, 0x16, 0x17
BEGIN = 0x11
AMQP_VALUE, COORDINATOR, DECLARE, DISCHARGE, DECLARED, TRANSACTIONAL_STATE = 0x77, 0x30, 0x31, 0x32, 0x33, 0x34
#: Symbolic descriptors (core spec 1.5: a descriptor is a ulong code or its symbol) of the types read here.
DESCRIPTOR_SYMBOLS = {
    "amqp:amqp-value:binary": AMQP_VALUE, "amqp:coordinator:list": COORDINATOR, "amqp:declare:list": DECLARE,
    "amqp:discharge:list": DISCHARGE, "amqp:declared:list": DECLARED, "amqp:transactional-state:list": TRANSACTIONAL_STATE,
    "amqp:received:list": 0x23, "amqp:accepted:list": 0x24, "amqp:rejected:list": 0x25, "amqp:released:list": 0x26,
    "amqp:modified:list": 0x27, "amqp:source:list": 0x28, "amqp:target:list": 0x29,
}
CLIENT, SERVER = "client", "server"


def descriptor_code(value: object) -> int | None:
    """The numeric descriptor of a decoded described value (a symbolic one mapped), else None."""
    descriptor = getattr(value, "descriptor", None)
    if descriptor is None:
        return None
    if isinstance(descriptor, int):
        return int(descriptor)
    return DESCRIPTOR_SYMBOLS.get(str(descriptor))


def fields_of(body: bytes | memoryview) -> tuple[list, int]:
    """The performative's fields as a list (positions of spec 2.7) and the bytes it took."""
    from proton import Data

    data = Data()
    used = data.decode(bytes(body))
    return list(getattr(data.get_object(), "value", None) or []), used


def _field(fields: list, i: int) -> object:
    return fields[i] if len(fields) > i else None


def amqp_value(payload: bytes) -> tuple[bool, object]:
    """(True, the decoded value) of a message's amqp-value section (messaging 3.2.8), else (False, None).

    The sections are walked by their descriptors; the value is decoded on its own (proton's
    get_object folds a described value nested in a described section into one level)."""
    from proton import Data

    rest = payload
    while len(rest) > 2 and rest[0] == 0x00:
        code, head = _section_descriptor(rest)
        if code is None:
            return False, None
        data = Data()
        used = data.decode(rest[head:])
        if code == AMQP_VALUE:
            return True, data.get_object()
        if used <= 0:
            return False, None
        rest = rest[head + used :]
    return False, None


def _section_descriptor(raw: bytes) -> tuple[int | None, int]:
    """The descriptor code of the described value at ``raw`` and the length of its descriptor."""
    constructor = raw[1]
    if constructor == 0x53:  # smallulong
        return raw[2], 3
    if constructor == 0x80:  # ulong
        return int.from_bytes(raw[2:10], "big"), 10
    if constructor == 0xA3:  # sym8
        end = 3 + raw[2]
        return DESCRIPTOR_SYMBOLS.get(raw[3:end].decode("ascii", "replace")), end
    return None, 0


def control_of(payload: bytes) -> str | None:
    """"declare", "discharge" or "discharge(fail)" for a message whose amqp-value section is a
    transaction control (transactions 4.5.1, 4.5.2); None for anything else."""
    found, body = amqp_value(payload)
    code = descriptor_code(body) if found else None
    if code == DECLARE:
        return "declare"
    if code == DISCHARGE:
        fail = _field(list(getattr(body, "value", None) or []), 1)
        return "discharge(fail)" if fail else "discharge"
    return None


def outcome_name(state: object) -> str:
    if state is None:
        return "no-outcome"
    code = descriptor_code(state)
    return STATES.get(code, f"0x{code:x}") if code is not None else "no-outcome"


class Conversation:
    """What the two codecs of one connection learn together: the coordinator links, the controls in
    flight (by the sending peer's channel and delivery-id), and which channel of one peer is which of
    the other's (begin's remote-channel)."""

    def __init__(self) -> None:
        #: A coordinator link was attached: transfers and dispositions are decoded from now on.
        self.transactional = False
        self.coordinators: set[tuple[str, int, int]] = set()  # (side, channel, handle)
        self.controls: dict[tuple[str, int], dict[int, str]] = {}  # (side, channel) -> delivery-id -> control
        self.peer_channel: dict[tuple[str, int], int] = {}  # (side, channel) -> the other side's channel
        #: Name of a multi-frame transfer in progress, for its continuation frames.
        self.continuing: dict[tuple[str, int, int], str] = {}

    def name(self, side: str, channel: int, name: str, body: memoryview) -> str:
        if name == "begin":
            remote = _field(fields_of(body)[0], 0)
            if remote is not None:
                other = SERVER if side == CLIENT else CLIENT
                self.peer_channel[(side, channel)] = int(remote)  # type: ignore[call-overload]
                self.peer_channel[(other, int(remote))] = channel  # type: ignore[call-overload]
        elif name == "attach":
            fields = fields_of(body)[0]
            if not _field(fields, 2) and descriptor_code(_field(fields, 6)) == COORDINATOR:  # role sender, target a coordinator
                self.coordinators.add((side, channel, int(fields[1])))
                self.transactional = True
        elif not self.transactional:
            return name
        elif name == "transfer":
            return self._transfer(side, channel, body)
        elif name == "disposition":
            return self._disposition(side, channel, body)
        elif name == "detach":
            handle = _field(fields_of(body)[0], 0)
            if handle is not None:
                self.coordinators.discard((side, channel, int(handle)))  # type: ignore[call-overload]
        elif name == "end":
            self.coordinators = {c for c in self.coordinators if c[:2] != (side, channel)}
            self.controls.pop((side, channel), None)
        return name

    def _transfer(self, side: str, channel: int, body: memoryview) -> str:
        fields, used = fields_of(body)
        handle = int(fields[0])
        key = (side, channel, handle)
        named = self.continuing.get(key)
        if named is None:
            if key in self.coordinators:
                named = control_of(bytes(body[used:])) or "transfer"
                delivery = _field(fields, 1)
                if named != "transfer" and delivery is not None:
                    self.controls.setdefault((side, channel), {})[int(delivery)] = named  # type: ignore[call-overload]
            else:
                named = "transfer(txn)" if descriptor_code(_field(fields, 7)) == TRANSACTIONAL_STATE else "transfer"
        if _field(fields, 5):  # more=true: the next frame on this link continues the delivery
            self.continuing[key] = named
        else:
            self.continuing.pop(key, None)
        return named

    def _disposition(self, side: str, channel: int, body: memoryview) -> str:
        fields = fields_of(body)[0]
        state = _field(fields, 4)
        if _field(fields, 0):  # role receiver: it settles the other peer's transfers
            other = SERVER if side == CLIENT else CLIENT
            sent = self.controls.get((other, self.peer_channel.get((side, channel), -1)))
            if sent:
                first = int(fields[1])
                last = int(fields[2]) if _field(fields, 2) is not None else first
                answered = [d for d in sent if first <= d <= last]
                if answered:
                    control = sent[answered[0]]
                    if _field(fields, 3):  # settled: the control is done
                        for d in answered:
                            del sent[d]
                    outcome = outcome_name(state)
                    return "declared" if control == "declare" and outcome == "declared" else f"{control}-{outcome}"
        return "disposition(txn)" if descriptor_code(state) == TRANSACTIONAL_STATE else "disposition"


def describe_control(raw: bytes) -> str:
    """A control transfer's trace line: its fields and the declare or discharge it carries."""
    body = raw[raw[4] * 4 :]
    line = describe(raw)
    _, used = fields_of(body)
    _, control = amqp_value(bytes(body[used:]))
    values = list(getattr(control, "value", None) or [])
    if descriptor_code(control) == DISCHARGE:
        return f"{line} discharge txn-id={_show('', _field(values, 0))} fail={_show('', bool(_field(values, 1)))}"
    return f"{line} declare" + (f" global-id={_show('', values[0])}" if values and values[0] is not None else "")


class Amqp10Codec(BufferedCodec):
    protocol = "amqp-1.0"
    #: The protocol's frame of each fault point (conformance/nemesis/points.py).
    fault_points = Path(__file__).with_name("fault_points.yaml")
    frame_names = frozenset({*PERFORMATIVES.values(), "protocol-header", "empty", *TX_NAMES})

    def __init__(self, conversation: Conversation | None = None, side: str = CLIENT) -> None:
        super().__init__()
        #: Shared with the codec of the other direction of the same connection (see the module docstring).
        self.conversation = conversation if conversation is not None else Conversation()
        self.side = side

    @classmethod
    def pair(cls) -> tuple["Amqp10Codec", "Amqp10Codec"]:
        """The client's and the server's codec of one connection, sharing what they learn."""
        conversation = Conversation()
        return cls(conversation, CLIENT), cls(conversation, SERVER)

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
        conversation, side = self.conversation, self.side
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
                name = performative(body)
                if kind == 0 and (conversation.transactional or name in ("begin", "attach")):
                    try:
                        name = conversation.name(side, channel, name, body)
                    except Exception:  # noqa: BLE001 - an undecodable performative keeps its plain name; the peer judges it
                        pass
                out.append(Frame(raw, name, channel, describe_control if name in CONTROLS else describe))
            pos += size
        del buf[:pos]
        return out


def performative_of(name: str) -> str:
    """The performative a frame name stands for ("declared" -> "disposition", "transfer(txn)" -> "transfer")."""
    if name in CONTROLS or name == "transfer(txn)":
        return "transfer"
    if name in TX_NAMES:
        return "disposition"
    return name


#: Delivery states and outcomes (spec 3.4, transactions 4.5) by descriptor code.
STATES = {0x23: "received", 0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: "modified", 0x33: "declared", 0x34: "transactional-state"}
#: Other described types a trace names (messaging 3.5, transactions 4.5).
TYPES = {0x28: "source", 0x29: "target", 0x30: "coordinator", 0x31: "declare", 0x32: "discharge", 0x1D: "error"}
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
        code = descriptor_code(value)
        state = STATES.get(code) if code is not None else None
        if state is not None:
            return state + (f"{_show('', inner)}" if inner else "")
        if code in (0x28, 0x29):  # source, target: the address is what a reader needs
            address = inner[0] if isinstance(inner, list) and inner else None
            return f"{TYPES[code]}({_show('', address)})"
        if code in TYPES:
            return f"{TYPES[code]}{_show('', inner)}"
        return f"{descriptor}:{_show('', inner)}"
    elements = getattr(value, "elements", None)
    if elements is not None:  # Array
        return "[" + ", ".join(_show("", e) for e in elements) + "]"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_show("", e) for e in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_show('', k)}: {_show('', v)}" for k, v in value.items()) + "}"
    return repr(value)
