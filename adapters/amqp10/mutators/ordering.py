"""AMQP 1.0 operators on the messages a broker sends a receiver: the order of a session's transfers
and a message split over several transfer frames. Each makes a healthy broker show, through the
proxy, what a client of a broker with the bug saw on the wire.
"""

from __future__ import annotations

from typing import Any

from adapters.amqp10.mutations import P, S, _data, _owned, frame, split
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

#: transfer fields (transport 2.7.5) by position
MORE = 5
HEADER = 0x70


def sections(payload: bytes) -> list[Any]:
    """The message sections of a transfer's payload, decoded (messaging 3.2), to read them: the codec
    returns an amqp-value whose body is itself described as that body alone."""
    out = []
    while payload:
        data = _data()
        used = data.decode(payload)
        out.append(_owned(data.get_object()))
        payload = payload[used:]
    return out


def _durable(parts: list[Any]) -> bool:
    for part in parts:
        descriptor = getattr(part, "descriptor", None)
        if descriptor is not None and not isinstance(descriptor, str) and int(descriptor) == HEADER:
            return bool((part.value or [None])[0])
        if descriptor == "amqp:header:list":
            return bool((part.value or [None])[0])
    return False


@operator("transient-overtakes-durable", P, "forwards the message of a non-durable transfer before the durable one the broker sent just before it on the same session (the two transfers keep their delivery-ids, their messages trade places)")
class TransientOvertakesDurable(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.held: dict[int, Frame] = {}  # broker's channel -> a durable transfer waiting for a transient one

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "transfer":
            return None
        head, fields, payload = split(f.raw)
        if len(fields) > MORE and fields[MORE]:
            return None
        try:
            durable = _durable(sections(payload))
        except Exception:  # not a whole message in this frame
            return None
        held = self.held.pop(f.channel, None)
        if held is None:
            if durable:
                self.held[f.channel] = f
                return []
            return None
        if durable:  # durable after durable: the newer one waits for a transient instead
            self.held[f.channel] = f
            return [held.raw]
        h_head, h_fields, h_payload = split(held.raw)
        h_performative = held.raw[len(h_head) : len(held.raw) - len(h_payload)]
        performative = f.raw[len(head) : len(f.raw) - len(payload)]
        self.applied(f"transient delivery-id {fields[1]}'s message forwarded before durable delivery-id {h_fields[1]}'s on channel {f.channel}")
        return [frame(h_head, h_performative + payload), frame(head, performative + h_payload)]


@operator("split-transfer-altered", P, "flips the last octet of the first frame of every message the broker sends split over several transfer frames (more=true): the reassembled body is not the one published")
class SplitTransferAltered(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "transfer":
            return None
        _, fields, payload = split(f.raw)
        # the first frame of a split message names its delivery-id; the ones continuing it need not
        if not (len(fields) > MORE and fields[MORE]) or fields[1] is None or not payload:
            return None
        self.applied(f"transfer delivery-id {fields[1]} (more=true): last of {len(payload)} payload octets flipped")
        return [f.raw[:-1] + bytes([f.raw[-1] ^ 0xFF])]
