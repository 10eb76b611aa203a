"""AMQP 0-9-1 operators on basic.cancel: what becomes of a cancelled consumer's deliveries.

basic.cancel "does not affect already delivered messages": the channel keeps them unacknowledged
until the client settles them or the channel closes. An operator here reproduces the wire symptom
of a broker that returned them to the queue at the cancel instead (cloudamqp/lavinmq#89).
"""

from __future__ import annotations

from typing import Any

from pamqp import commands

from adapters.amqp091.mutations import SETTLEMENTS, C, P, S, decode, encode
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

_SETTLE = {"basic.ack": commands.Basic.Ack, "basic.nack": commands.Basic.Nack, "basic.reject": commands.Basic.Reject}


@operator("cancel-requeues-unacked", P, "when basic.cancel-ok passes, nacks with requeue=true on the client's behalf every delivery the cancelled consumer holds unacknowledged (the queue redelivers them at once), and swallows the client's later settlement of those tags (the broker no longer knows them)")
class CancelRequeuesUnacked(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.no_ack: dict[int, dict[str, bool]] = {}  # channel -> consumer tag -> no_ack
        self.get_no_ack: dict[int, bool] = {}
        #: channel -> delivery tag -> the consumer tag it was delivered to ("" for basic.get), while
        #: the client has not settled it.
        self.held: dict[int, dict[int, str]] = {}
        self.requeued: dict[int, set[int]] = {}  # channel -> tags the proxy nacked for the client

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch, name = frame.channel, frame.name
        if name in ("channel.open-ok", "channel.close-ok"):
            for book in (self.no_ack, self.get_no_ack, self.held, self.requeued):
                book.pop(ch, None)
        elif sender is C and name == "basic.consume":
            v = decode(frame)
            self.no_ack.setdefault(ch, {})[v.consumer_tag] = bool(v.no_ack)
        elif sender is C and name == "basic.get":
            self.get_no_ack[ch] = bool(decode(frame).no_ack)
        elif sender is S and name == "basic.deliver":
            v = decode(frame)
            if not self.no_ack.get(ch, {}).get(v.consumer_tag, False):
                self.held.setdefault(ch, {})[v.delivery_tag] = v.consumer_tag
        elif sender is S and name == "basic.get-ok":
            if not self.get_no_ack.get(ch, False):
                self.held.setdefault(ch, {})[decode(frame).delivery_tag] = ""
        elif sender is S and name == "basic.cancel-ok":
            self.requeue(ch, decode(frame).consumer_tag)
        elif sender is C and name in SETTLEMENTS:
            return self.settle(frame)
        return None

    def requeue(self, ch: int, consumer_tag: str) -> None:
        held = self.held.get(ch, {})
        tags = sorted(t for t, owner in held.items() if owner == consumer_tag)
        if not tags:
            return
        self.io.to_server([encode(commands.Basic.Nack(delivery_tag=t, multiple=False, requeue=True), ch) for t in tags])
        for t in tags:
            del held[t]
        self.requeued.setdefault(ch, set()).update(tags)
        self.applied(f"basic.cancel-ok of {consumer_tag!r} on channel {ch}: its unacknowledged deliveries {tags} nacked with requeue=true")

    def settle(self, frame: Frame) -> list[bytes] | None:
        ch, v = frame.channel, decode(frame)
        held, gone = self.held.get(ch, {}), self.requeued.get(ch, set())
        multiple = bool(getattr(v, "multiple", False))
        if multiple:
            covered = sorted(t for t in {*held, *gone} if not v.delivery_tag or t <= v.delivery_tag)
        else:
            covered = [v.delivery_tag]
        if not any(t in gone for t in covered):
            for t in covered:
                held.pop(t, None)
            return None
        # The broker requeued these at the cancel: settling them again would be an unknown tag.
        keep = [t for t in covered if t in held]
        for t in covered:
            held.pop(t, None)
            gone.discard(t)
        out = []
        for t in keep:
            fields = {"delivery_tag": t, **({"requeue": v.requeue} if frame.name != "basic.ack" else {})}
            if frame.name != "basic.reject":
                fields["multiple"] = False
            out.append(encode(_SETTLE[frame.name](**fields), ch))
        self.applied(f"{frame.name} of tag(s) {[t for t in covered if t not in keep]} on channel {ch} swallowed: requeued at the cancel"
                     + (f"; forwarded for {keep}" if keep else ""))
        return out
