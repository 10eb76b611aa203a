"""AMQP 1.0 mutation operators: the message header's first-acquirer and delivery-count, early settlement.

A transfer is a described performative followed by the message's sections; the header section
(descriptor 0x70: durable, priority, ttl, first-acquirer, delivery-count) comes first when present.
Operators re-encode only that section (python-qpid-proton's codec) and fix the frame size. A transfer
split over several frames (more=true) is left unchanged and the trace says so.
"""

from __future__ import annotations

import struct
from typing import Any

from adapters.amqp10.wire import performative_of
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, naming, operator
from conformance.nemesis.wire import Frame

P = "amqp-1.0"
C, S = Sender.CLIENT, Sender.SERVER
HEADER, ACCEPTED = 0x70, 0x24
DISPOSITION = 0x15
#: header section fields (spec 3.2.1) by position
FIRST_ACQUIRER, DELIVERY_COUNT = 3, 4


def kind(f: Frame) -> str:
    """The performative of a frame, whatever transaction name the codec gave it ("declared" is a
    disposition): operators rewrite performatives, transactional or not."""
    return performative_of(f.name)


def _data() -> Any:
    from proton import Data

    return Data()


def split(raw: bytes) -> tuple[bytes, Any, bytes]:
    """(frame head incl. extended header, the performative's fields, the payload after it)."""
    doff = raw[4] * 4
    body = raw[doff:]
    data = _data()
    used = data.decode(body)
    return raw[:doff], [_owned(v) for v in data.get_object().value or []], body[used:]


def _owned(value: Any) -> Any:
    """``value`` with every binary copied out of the codec's buffer: python-qpid-proton decodes a
    binary as a memoryview into its Data object's memory, which is reused once that object is gone
    (a delivery-tag or txn-id re-encoded from it would carry other bytes)."""
    from proton import Described

    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, Described):
        return Described(value.descriptor, _owned(value.value))
    if isinstance(value, list):
        return [_owned(v) for v in value]
    if isinstance(value, dict):
        return {_owned(k): _owned(v) for k, v in value.items()}
    return value


def frame(head: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(head) + len(body)) + head[4:] + body


def performative(code: int, fields: list[Any], channel: int) -> bytes:
    from proton import Described, ulong

    data = _data()
    data.put_object(Described(ulong(code), fields))
    return frame(struct.pack(">IBBH", 0, 2, 0, channel), data.encode())


@naming(P)
def connection_name(f: Frame) -> str | None:
    if f.name != "open":
        return None
    _, fields, _ = split(f.raw)
    props = fields[9] if len(fields) > 9 and isinstance(fields[9], dict) else {}
    name = {str(k): v for k, v in props.items()}.get("connection_name")
    return str(name) if name is not None else ""


class HeaderRewriter(Mutator):
    """Rewrites the header section of the transfers one peer sends (the broker's, by default)."""

    sender: Sender = S

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self._continuing: set[tuple[int, Any]] = set()  # (channel, handle) of a transfer split over frames

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not self.sender or kind(f) != "transfer":
            return None
        from proton import Described, ulong

        head, fields, payload = split(f.raw)
        raw_performative = f.raw[len(head) : len(f.raw) - len(payload)]
        link = (f.channel, fields[0])
        continued = link in self._continuing  # a later frame of a split transfer: its payload is body bytes
        if len(fields) > 5 and fields[5]:
            self._continuing.add(link)
            if not continued:
                self.skipped(f"transfer delivery-id {fields[1]} continues in another frame (more=true)")
            return None
        self._continuing.discard(link)
        if continued:
            return None
        header: list[Any] = [None] * 5
        rest = payload
        if payload[:3] == b"\x00\x53\x70":
            data = _data()
            used = data.decode(payload)
            header = list(data.get_object().value or []) + [None] * 5
            header = header[:5]
            rest = payload[used:]
        what = self.change(header)
        if what is None:
            return None
        data = _data()
        data.put_object(Described(ulong(HEADER), header))
        self.applied(f"transfer delivery-id {fields[1] if len(fields) > 1 else '?'}: {what}")
        return [frame(head, raw_performative + data.encode() + rest)]

    def change(self, header: list[Any]) -> str | None:
        raise NotImplementedError


@operator("first-acquirer-flipped", P, "inverts the header's first-acquirer on every transfer (first deliveries look redelivered, redeliveries look first)")
class FirstAcquirerFlipped(HeaderRewriter):
    def change(self, header: list[Any]) -> str | None:
        before = bool(header[FIRST_ACQUIRER])
        header[FIRST_ACQUIRER] = not before
        return f"first-acquirer {str(before).lower()} -> {str(not before).lower()}"


@operator("delivery-count-zeroed", P, "sets the header's delivery-count to 0 on every transfer (failed deliveries are not counted)")
class DeliveryCountZeroed(HeaderRewriter):
    def change(self, header: list[Any]) -> str | None:
        from proton import uint

        before = int(header[DELIVERY_COUNT] or 0)
        if before == 0:
            return None
        header[DELIVERY_COUNT] = uint(0)
        return f"delivery-count {before} -> 0"


@operator("delivery-count-bumped", P, "adds 1 to the header's delivery-count on every transfer the broker sends (first deliveries look failed before, a released message comes back counted)")
class DeliveryCountBumped(HeaderRewriter):
    def change(self, header: list[Any]) -> str | None:
        from proton import uint

        before = int(header[DELIVERY_COUNT] or 0)
        header[DELIVERY_COUNT] = uint(before + 1)
        return f"delivery-count {before} -> {before + 1}"


@operator("durable-cleared", P, "sends every durable message the client transfers as non-durable (header durable true -> false)")
class DurableCleared(HeaderRewriter):
    sender = C

    def change(self, header: list[Any]) -> str | None:
        if not header[0]:
            return None
        header[0] = False
        return "durable true -> false"


@operator("settled-early", P, "accepts and settles every unsettled transfer at the broker as soon as it is sent: a reliable link behaves as at-most-once")
class SettledEarly(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.client_channel: dict[int, int] = {}  # broker's outgoing channel -> client's
        self.early: dict[int, set[int]] = {}  # client channel -> delivery ids settled early

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is S and f.name == "begin":
            _, fields, _ = split(f.raw)
            if fields and fields[0] is not None:
                self.client_channel[f.channel] = int(fields[0])
            return None
        if sender is S and kind(f) == "transfer":
            return self.transfer(f)
        if sender is C and kind(f) == "disposition":
            return self.disposition(f)
        return None

    def transfer(self, f: Frame) -> list[bytes] | None:
        from proton import Described, uint, ulong

        _, fields, _ = split(f.raw)
        settled = len(fields) > 4 and bool(fields[4])
        delivery_id = fields[1] if len(fields) > 1 else None
        if settled or delivery_id is None:
            return None
        channel = self.client_channel.get(f.channel)
        if channel is None:
            self.skipped(f"transfer on channel {f.channel}: the session's begin was not seen")
            return None
        self.early.setdefault(channel, set()).add(int(delivery_id))
        accept = [True, uint(int(delivery_id)), None, True, Described(ulong(ACCEPTED), [])]
        self.io.to_server([performative(DISPOSITION, accept, channel)])
        self.applied(f"transfer delivery-id {delivery_id} accepted and settled at the broker on arrival")
        return None

    def disposition(self, f: Frame) -> list[bytes] | None:
        _, fields, _ = split(f.raw)
        if not fields or not fields[0]:  # role sender: not a receiver's settlement
            return None
        first = int(fields[1])
        last = int(fields[2]) if len(fields) > 2 and fields[2] is not None else first
        early = self.early.get(f.channel, set())
        ids = set(range(first, last + 1))
        if ids and ids <= early:
            early -= ids
            self.applied(f"disposition {first}..{last} from the client dropped: already settled")
            return []
        return None


ATTACH, TRANSFER = 0x12, 0x14
REJECTED, RELEASED = 0x25, 0x26
SETTLED_MODE, UNSETTLED_MODE = 1, 0
ROLE, SND_SETTLE_MODE = 2, 3


def rebuild(f: Frame, code: int, fields: list[Any]) -> bytes:
    """The frame with its performative re-encoded from ``fields`` and the payload kept."""
    from proton import Described, ulong

    head, _, payload = split(f.raw)
    data = _data()
    data.put_object(Described(ulong(code), fields))
    return frame(head, data.encode() + payload)


def _state_code(state: Any) -> int | None:
    descriptor = getattr(state, "descriptor", None)
    return int(descriptor) if descriptor is not None else None


def receiver_outcome(sender: Sender, f: Frame, outcome: int) -> list[Any] | None:
    """The fields of a receiver's disposition from the client with the given outcome, else None."""
    if sender is not C or kind(f) != "disposition":
        return None
    _, fields, _ = split(f.raw)
    if not fields or not fields[0] or len(fields) < 5 or _state_code(fields[4]) != outcome:
        return None
    return fields


@operator("accepts-dropped", P, "drops every disposition from a receiver that accepts deliveries (the broker never sees the acknowledgement)")
class AcceptsDropped(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        fields = receiver_outcome(sender, f, ACCEPTED)
        if fields is None:
            return None
        self.applied(f"disposition {fields[1]}..{fields[2] if fields[2] is not None else fields[1]} (accepted) not forwarded")
        return []


def receiver_disposition(sender: Sender, f: Frame) -> list[Any] | None:
    """The fields of a disposition a receiving client sends (role receiver), else None."""
    if sender is not C or f.name != "disposition":
        return None
    _, fields, _ = split(f.raw)
    if len(fields) < 2 or not fields[0] or fields[1] is None:
        return None
    return fields + [None] * (6 - len(fields))


@operator("disposition-range-narrowed", P, "sends a receiver's disposition of delivery-ids first..last as one of first alone: the broker settles the first delivery of the range, the others stay unsettled")
class DispositionRangeNarrowed(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        fields = receiver_disposition(sender, f)
        if fields is None or fields[2] is None or int(fields[2]) <= int(fields[1]):
            return None
        self.applied(f"disposition {fields[1]}..{fields[2]} sent as {fields[1]} alone")
        fields[2] = None
        return [rebuild(f, DISPOSITION, fields)]


@operator("disposition-range-widened", P, "sends a receiver's disposition of one delivery-id as a range from delivery-id 0 up to it: settling one delivery settles every earlier one of the session too")
class DispositionRangeWidened(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import uint

        fields = receiver_disposition(sender, f)
        if fields is None or int(fields[1]) == 0 or (fields[2] is not None and int(fields[2]) != int(fields[1])):
            return None
        self.applied(f"disposition {fields[1]} sent as 0..{fields[1]}")
        fields[1], fields[2] = uint(0), uint(int(fields[1]))
        return [rebuild(f, DISPOSITION, fields)]


class OutcomeSwap(Mutator):
    """Sends one terminal outcome of a receiver's disposition as another."""

    was: int = 0
    now: int = 0
    NAMES = {ACCEPTED: "accepted", REJECTED: "rejected", RELEASED: "released"}

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described, ulong

        fields = receiver_outcome(sender, f, self.was)
        if fields is None:
            return None
        fields[4] = Described(ulong(self.now), [])
        self.applied(f"disposition {fields[1]}: {self.NAMES[self.was]} sent as {self.NAMES[self.now]}")
        return [rebuild(f, DISPOSITION, fields)]


@operator("released-as-rejected", P, "sends the receiver's released outcome as rejected (a message to requeue is discarded)")
class ReleasedAsRejected(OutcomeSwap):
    was, now = RELEASED, REJECTED


@operator("rejected-as-released", P, "sends the receiver's rejected outcome as released (a message to discard comes back)")
class RejectedAsReleased(OutcomeSwap):
    was, now = REJECTED, RELEASED


@operator("unreliable-made-reliable", P, "attaches a pre-settled (unreliable) receiver as unsettled at the broker and shows the client settled transfers: the broker keeps what the client took as consumed")
class UnreliableMadeReliable(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.names: set[str] = set()

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import ubyte

        if f.name == "attach":
            _, fields, _ = split(f.raw)
            if len(fields) <= SND_SETTLE_MODE:
                return None
            receiver = bool(fields[ROLE]) if sender is C else not bool(fields[ROLE])
            if not receiver:
                return None
            name = str(fields[0])
            if sender is C and fields[SND_SETTLE_MODE] is not None and int(fields[SND_SETTLE_MODE]) == SETTLED_MODE:
                self.names.add(name)
                fields[SND_SETTLE_MODE] = ubyte(UNSETTLED_MODE)
                self.applied(f"attach {name!r}: snd-settle-mode settled sent as unsettled")
                return [rebuild(f, ATTACH, fields)]
            if sender is S and name in self.names:
                fields[SND_SETTLE_MODE] = ubyte(SETTLED_MODE)
                return [rebuild(f, ATTACH, fields)]
            return None
        if sender is S and kind(f) == "transfer" and self.names:
            _, fields, _ = split(f.raw)
            if len(fields) > 4 and not fields[4] and fields[1] is not None:
                fields[4] = True
                self.applied(f"transfer delivery-id {fields[1]} shown to the client as settled")
                return [rebuild(f, TRANSFER, fields)]
        return None


@operator("presettled-cleared", P, "shows the client the broker's pre-settled transfers as unsettled, so it may try to release or reject them")
class PresettledCleared(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or kind(f) != "transfer":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) > 4 and fields[4]:
            fields[4] = False
            self.applied(f"transfer delivery-id {fields[1]}: settled true -> false")
            return [rebuild(f, TRANSFER, fields)]
        return None
