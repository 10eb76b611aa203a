"""AMQP 0-9-1 mutation operators: each violates one rule of the spec or of a vendor extension.

Frames are decoded and re-encoded with pamqp only when their name matches, so the relay's hot path
stays a dict lookup. Operators that remove or add deliveries keep delivery tags consistent: the
client never acks a tag the broker did not issue, and the broker never waits for a reply the client
was not asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pamqp import body as pamqp_body
from pamqp import commands
from pamqp import frame as pamqp_frame

from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, naming, operator
from conformance.nemesis.wire import Frame

P = "amqp-0-9-1"
C, S = Sender.CLIENT, Sender.SERVER
DELIVERIES = ("basic.deliver", "basic.get-ok")
SETTLEMENTS = ("basic.ack", "basic.nack", "basic.reject")
FRAME_OVERHEAD = 8


def decode(frame: Frame) -> Any:
    return pamqp_frame.unmarshal(frame.raw)[2]


def encode(value: Any, channel: int) -> bytes:
    return pamqp_frame.marshal(value, channel)


@naming(P)
def connection_name(frame: Frame) -> str | None:
    if frame.name != "connection.start-ok":
        return None
    props = decode(frame).client_properties or {}
    name = props.get("connection_name")
    return name.decode() if isinstance(name, bytes) else str(name) if name is not None else ""


class FieldRewriter(Mutator):
    """Rewrites one method's fields in place: subclasses name the frames and change the value."""

    sender: Sender = S
    frames: tuple[str, ...] = ()

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not self.sender or frame.name not in self.frames:
            return None
        value = decode(frame)
        what = self.change(value)
        if what is None:
            return None
        if what == "":  # swallowed
            self.applied(f"{frame.name} on channel {frame.channel} not forwarded")
            return []
        self.applied(f"{frame.name} on channel {frame.channel}: {what}")
        return [encode(value, frame.channel)]

    def change(self, value: Any) -> str | None:
        """Mutate ``value``; return what changed, "" to swallow the frame, None to leave it."""
        raise NotImplementedError


def _flip(value: Any, attr: str, to: bool) -> str | None:
    if bool(getattr(value, attr)) is to:
        return None
    setattr(value, attr, to)
    return f"{attr} {not to} -> {to} (delivery_tag {getattr(value, 'delivery_tag', '?')})"


class FlagFlipped(FieldRewriter):
    """Sets one boolean field of a method to ``to`` (the operators registered from FLAG_FLIPS)."""

    attr: str = ""
    to: bool = False

    def change(self, value: Any) -> str | None:
        return _flip(value, self.attr, self.to)


#: name -> (who sends the frames, which methods, field, value it is forced to, description)
FLAG_FLIPS: dict[str, tuple[Sender, tuple[str, ...], str, bool, str]] = {
    "redelivered-cleared": (S, DELIVERIES, "redelivered", False, "clears the redelivered flag on every redelivery (basic.deliver, basic.get-ok)"),
    "redelivered-set": (S, DELIVERIES, "redelivered", True, "sets the redelivered flag on every first delivery (basic.deliver, basic.get-ok)"),
    "ack-multiple-cleared": (C, ("basic.ack",), "multiple", False, "turns multiple=true into multiple=false on the client's basic.ack"),
    "ack-multiple-set": (C, ("basic.ack",), "multiple", True, "turns multiple=false into multiple=true on the client's basic.ack"),
    "nack-multiple-cleared": (C, ("basic.nack",), "multiple", False, "turns multiple=true into multiple=false on the client's basic.nack"),
    "requeue-cleared": (C, ("basic.nack", "basic.reject"), "requeue", False,
                        "turns requeue=true into requeue=false on basic.nack and basic.reject (requeue becomes discard)"),
    "requeue-set": (C, ("basic.nack", "basic.reject"), "requeue", True,
                    "turns requeue=false into requeue=true on basic.nack and basic.reject (discard becomes requeue)"),
    "exclusive-cleared": (C, ("basic.consume", "queue.declare"), "exclusive", False,
                          "turns exclusive=true into exclusive=false on the client's basic.consume and queue.declare (an exclusive consumer or private queue becomes shared)"),
}
for _name, (_sender, _frames, _attr, _to, _text) in FLAG_FLIPS.items():
    operator(_name, P, _text)(type(f"FlagFlipped[{_name}]", (FlagFlipped,),
                                   {"sender": _sender, "frames": _frames, "attr": _attr, "to": _to}))


@operator("acks-dropped", P, "drops every basic.ack from the client (the broker never sees the acknowledgement)")
class AcksDropped(FieldRewriter):
    sender, frames = C, ("basic.ack",)

    def change(self, value: Any) -> str | None:
        return ""


@operator("multiple-acks-dropped", P, "drops the client's basic.ack frames that have multiple=true")
class MultipleAcksDropped(FieldRewriter):
    sender, frames = C, ("basic.ack",)

    def change(self, value: Any) -> str | None:
        return "" if value.multiple else None


@operator("rejects-dropped", P, "drops every basic.nack and basic.reject from the client")
class RejectsDropped(FieldRewriter):
    sender, frames = C, ("basic.nack", "basic.reject")

    def change(self, value: Any) -> str | None:
        return ""


@operator("no-ack-cleared", P, "turns no-ack=true into false on basic.consume and basic.get (an auto-ack consumer's deliveries stay unacked)")
class NoAckCleared(FieldRewriter):
    sender, frames = C, ("basic.consume", "basic.get")

    def change(self, value: Any) -> str | None:
        if not value.no_ack:
            return None
        value.no_ack = False
        return "no_ack True -> False"


@operator("prefetch-raised", P, "raises basic.qos prefetch-count by one (a prefetch of 0, unlimited, becomes 1)")
class PrefetchRaised(FieldRewriter):
    sender, frames = C, ("basic.qos",)

    def change(self, value: Any) -> str | None:
        before = value.prefetch_count
        value.prefetch_count = before + 1
        return f"prefetch_count {before} -> {value.prefetch_count}"


@operator("qos-global-flipped", P, "flips the global flag of basic.qos (a per-consumer limit becomes per-channel and the reverse)")
class QosGlobalFlipped(FieldRewriter):
    sender, frames = C, ("basic.qos",)

    def change(self, value: Any) -> str | None:
        value.global_ = not value.global_
        return f"global {not value.global_} -> {value.global_}"


@operator("argument-stripped", P, "removes one argument (default x-delivery-limit) from queue.declare", default_param="x-delivery-limit")
class ArgumentStripped(FieldRewriter):
    sender, frames = C, ("queue.declare",)

    def change(self, value: Any) -> str | None:
        args = value.arguments or {}
        if self.param not in args:
            return None
        removed = args.pop(self.param)
        value.arguments = args
        return f"argument {self.param}={removed!r} removed from queue {value.queue!r}"


@operator("argument-refused", P, "refuses a queue.declare carrying one argument (default x-delivery-limit) with channel.close 406, as a broker without the feature does", default_param="x-delivery-limit")
class ArgumentRefused(Mutator):
    """Closes the channel on both sides at once: the client gets the broker's refusal, the broker a
    channel.close in place of the declare, and each side's close-ok is swallowed."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.pending: dict[Sender, set[int]] = {C: set(), S: set()}

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if frame.name == "channel.close-ok" and frame.channel in self.pending[sender]:
            self.pending[sender].discard(frame.channel)
            return []
        if sender is not C or frame.name != "queue.declare":
            return None
        value = decode(frame)
        if self.param not in (value.arguments or {}):
            return None
        ch = frame.channel
        text = f"PRECONDITION_FAILED - invalid arg '{self.param}' (refused by mutation)"
        self.pending[C].add(ch)
        self.pending[S].add(ch)
        self.io.to_client([encode(commands.Channel.Close(406, text, 50, 10), ch)])
        self.applied(f"queue.declare of {value.queue!r} with {self.param} refused with 406 on channel {ch}")
        return [encode(commands.Channel.Close(200, "closed by mutation", 0, 0), ch)]


_METHOD_ID = {"basic.ack": 80, "basic.reject": 90, "basic.nack": 120}


@operator("cancelled-consumer-forgotten", P, "after basic.cancel-ok, refuses the settlement of a delivery the cancelled consumer still holds with channel.close 406 unknown delivery tag (the channel lost the consumer's delivery state)")
class CancelledConsumerForgotten(ArgumentRefused):
    """A channel that drops a cancelled consumer's deliveries with the consumer (RabbitMQ quorum
    queue consumers cancelled or re-registered with deliveries in flight): the channel is closed on
    both sides, as ArgumentRefused does, and the broker returns what the consumer held."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.owner: dict[int, dict[int, str]] = {}  # channel -> delivery tag -> consumer tag
        self.cancelled: dict[int, set[str]] = {}

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if frame.name == "channel.close-ok" and frame.channel in self.pending[sender]:
            self.pending[sender].discard(frame.channel)
            return []
        ch = frame.channel
        if sender is S and frame.name == "basic.deliver":
            v = decode(frame)
            self.owner.setdefault(ch, {})[v.delivery_tag] = v.consumer_tag
        elif sender is S and frame.name == "basic.cancel-ok":
            self.cancelled.setdefault(ch, set()).add(decode(frame).consumer_tag)
        elif sender is S and frame.name == "channel.open-ok":
            self.owner.pop(ch, None)
            self.cancelled.pop(ch, None)
        elif sender is C and frame.name in SETTLEMENTS:
            v = decode(frame)
            owners = self.owner.get(ch, {})
            multiple = getattr(v, "multiple", False)
            tags = [t for t in owners if t <= v.delivery_tag or not v.delivery_tag] if multiple else [v.delivery_tag]
            if not any(owners.get(t) in self.cancelled.get(ch, ()) for t in tags):
                for t in tags:
                    owners.pop(t, None)
            else:
                self.pending[C].add(ch)
                self.pending[S].add(ch)
                text = f"PRECONDITION_FAILED - unknown delivery tag {v.delivery_tag} (refused by mutation)"
                self.io.to_client([encode(commands.Channel.Close(406, text, 60, _METHOD_ID[frame.name]), ch)])
                self.applied(f"{frame.name} delivery_tag {v.delivery_tag} of a cancelled consumer on channel {ch} refused with 406")
                return [encode(commands.Channel.Close(200, "closed by mutation", 0, 0), ch)]
        return None


@operator("durable-flipped", P, "flips the durable flag of classic queue declarations (durable queues lose their messages on restart, transient ones survive)")
class DurableFlipped(FieldRewriter):
    sender, frames = C, ("queue.declare",)

    def change(self, value: Any) -> str | None:
        kind = (value.arguments or {}).get("x-queue-type", "classic")
        if value.passive or kind != "classic":
            return None
        value.durable = not value.durable
        return f"durable {not value.durable} -> {value.durable} on queue {value.queue!r}"


class HeaderRewriter(Mutator):
    """Rewrites the properties of content headers from one peer."""

    sender: Sender = S

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not self.sender or frame.name != "content-header":
            return None
        value = decode(frame)
        what = self.change(value.properties)
        if not what:
            return None
        self.applied(f"content-header on channel {frame.channel}: {what}")
        return [encode(value, frame.channel)]

    def change(self, props: Any) -> str | None:
        raise NotImplementedError


@operator("persistence-dropped", P, "publishes every persistent message as transient (delivery-mode 2 -> 1)")
class PersistenceDropped(HeaderRewriter):
    sender = C

    def change(self, props: Any) -> str | None:
        if props.delivery_mode != 2:
            return None
        props.delivery_mode = 1
        return "delivery_mode 2 -> 1"


@operator("persistence-forced", P, "publishes every transient message as persistent (delivery-mode 1 -> 2)")
class PersistenceForced(HeaderRewriter):
    sender = C

    def change(self, props: Any) -> str | None:
        if props.delivery_mode == 2:
            return None
        before = props.delivery_mode
        props.delivery_mode = 2
        return f"delivery_mode {before} -> 2"


def _headers(props: Any) -> dict[str, Any]:
    return dict(props.headers or {})


@operator("delivery-count-removed", P, "removes the x-delivery-count header from deliveries")
class DeliveryCountRemoved(HeaderRewriter):
    def change(self, props: Any) -> str | None:
        h = _headers(props)
        if "x-delivery-count" not in h:
            return None
        old = h.pop("x-delivery-count")
        props.headers = h
        return f"x-delivery-count={old} removed"


@operator("delivery-count-falsified", P, "adds one to the x-delivery-count header of deliveries")
class DeliveryCountFalsified(HeaderRewriter):
    def change(self, props: Any) -> str | None:
        h = _headers(props)
        if "x-delivery-count" not in h:
            return None
        old = h["x-delivery-count"]
        h["x-delivery-count"] = int(old) + 1
        props.headers = h
        return f"x-delivery-count {old} -> {h['x-delivery-count']}"


@operator("first-delivery-counted", P, "adds x-delivery-count 0 to every first delivery (redelivered=false) that carries none, by basic.deliver and basic.get-ok alike")
class FirstDeliveryCounted(HeaderRewriter):
    """A broker that stamps the delivery counter on a message never returned before (RabbitMQ
    quorum queues before 3.12 on basic.get, LavinMQ before 2.2 on every first delivery)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.first: dict[int, bool] = {}  # channel -> the delivery whose header comes next is a first one

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is S and frame.name in DELIVERIES:
            self.first[frame.channel] = not decode(frame).redelivered
            return None
        if sender is S and frame.name == "content-header" and not self.first.pop(frame.channel, False):
            return None  # a redelivery, or the content of a basic.return
        return super().rewrite(sender, frame)

    def change(self, props: Any) -> str | None:
        h = _headers(props)
        if "x-delivery-count" in h:
            return None
        h["x-delivery-count"] = 0
        props.headers = h
        return "x-delivery-count 0 added to a first delivery"


@operator("x-death-removed", P, "removes x-death and x-first-death-*/x-last-death-* headers from dead-lettered deliveries")
class XDeathRemoved(HeaderRewriter):
    def change(self, props: Any) -> str | None:
        h = _headers(props)
        gone = sorted(k for k in h if k == "x-death" or k.startswith(("x-first-death-", "x-last-death-")))
        if not gone:
            return None
        for k in gone:
            h.pop(k)
        props.headers = h
        return f"removed {', '.join(gone)}"


@operator("x-death-falsified", P, "adds one to every count in the x-death header and swaps its reason (rejected <-> expired)")
class XDeathFalsified(HeaderRewriter):
    SWAP = {"rejected": "expired", "expired": "rejected", "maxlen": "rejected", "delivery_limit": "rejected"}

    def change(self, props: Any) -> str | None:
        h = _headers(props)
        deaths = h.get("x-death")
        if not isinstance(deaths, list) or not deaths:
            return None
        changed = []
        for d in deaths:
            if isinstance(d, dict):
                d["count"] = int(d.get("count", 0)) + 1
                reason = d.get("reason")
                reason = reason.decode() if isinstance(reason, bytes) else reason
                d["reason"] = self.SWAP.get(str(reason), "rejected")
                changed.append(f"{reason}->{d['reason']} count {d['count']}")
        props.headers = h
        return "x-death " + "; ".join(changed)


# -- transactions --------------------------------------------------------------------------------

class TxSwap(Mutator):
    """Sends one transaction verb for another and renames the broker's reply back, per channel."""

    verb: str = ""
    instead: str = ""
    METHODS = {"tx.commit": commands.Tx.Commit, "tx.rollback": commands.Tx.Rollback,
               "tx.commit-ok": commands.Tx.CommitOk, "tx.rollback-ok": commands.Tx.RollbackOk}

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.pending: dict[int, int] = {}

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is C and frame.name == self.verb:
            self.pending[frame.channel] = self.pending.get(frame.channel, 0) + 1
            self.applied(f"{self.verb} on channel {frame.channel} sent as {self.instead}")
            return [encode(self.METHODS[self.instead](), frame.channel)]
        if sender is S and frame.name == f"{self.instead}-ok" and self.pending.get(frame.channel):
            self.pending[frame.channel] -= 1
            return [encode(self.METHODS[f"{self.verb}-ok"](), frame.channel)]
        return None


@operator("tx-rollback-commits", P, "sends tx.rollback as tx.commit (the rolled-back work is committed) and answers rollback-ok")
class TxRollbackCommits(TxSwap):
    verb, instead = "tx.rollback", "tx.commit"


@operator("tx-commit-rolls-back", P, "sends tx.commit as tx.rollback (the committed work is discarded) and answers commit-ok")
class TxCommitRollsBack(TxSwap):
    verb, instead = "tx.commit", "tx.rollback"


@operator("tx-bypassed", P, "never forwards tx.select, tx.commit or tx.rollback and answers them itself: a transaction's publishes and acks take effect at once, outside it")
class TxBypassed(Mutator):
    REPLIES = {"tx.select": commands.Tx.SelectOk, "tx.commit": commands.Tx.CommitOk, "tx.rollback": commands.Tx.RollbackOk}

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not C or frame.name not in self.REPLIES:
            return None
        self.applied(f"{frame.name} on channel {frame.channel} not forwarded; answered {frame.name}-ok")
        self.io.to_client([encode(self.REPLIES[frame.name](), frame.channel)])
        return []


@operator("purge-swallowed", P, "never forwards queue.purge and answers queue.purge-ok itself (message-count 0): a purge that removes nothing")
class PurgeSwallowed(Mutator):
    """A broker whose purge leaves the messages in place: they are delivered again afterwards (after
    a restart too), as LavinMQ 2.9's requeued messages were (cloudamqp/lavinmq#2247)."""

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not C or frame.name != "queue.purge":
            return None
        self.applied(f"queue.purge on channel {frame.channel} not forwarded; answered queue.purge-ok")
        self.io.to_client([encode(commands.Queue.PurgeOk(message_count=0), frame.channel)])
        return []


@operator("tx-publish-dropped", P, "inside a transaction, discards the Nth publish (default 2nd) of every transaction: tx.commit then commits only part of it", default_param="2")
class TxPublishDropped(Mutator):
    """A broker whose commit is not atomic: one publish of each transaction never reaches the queue
    while the rest do. Publishes carry no confirm in a transaction, so nothing needs renumbering."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.transacted: set[int] = set()
        self.count: dict[int, int] = {}  # channel -> publishes in the open transaction
        self.assembler = Assembler(("basic.publish",))

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not C:
            return None
        ch = frame.channel
        if frame.name == "tx.select":
            self.transacted.add(ch)
            return None
        if frame.name in ("tx.commit", "tx.rollback"):
            self.count[ch] = 0
            return None
        if ch not in self.transacted:
            return None
        part, msg = self.assembler.feed(frame)
        if not part:
            return None
        if msg is None:
            return []  # held until the publish is complete, then forwarded or discarded whole
        self.count[ch] = n = self.count.get(ch, 0) + 1
        if n == _nth(self.param):
            self.applied(f"publish #{n} of the transaction on channel {ch} discarded")
            return []
        return msg.frames


# -- whole deliveries (method + header + bodies) ------------------------------------------------

@dataclass
class Message:
    """One delivery or publish as frames: the method, its content header and body frames."""

    method: Frame
    value: Any
    frames: list[bytes] = field(default_factory=list)
    size: int | None = None
    received: int = 0

    @property
    def complete(self) -> bool:
        return self.size is not None and self.received >= self.size


class Assembler:
    """Groups a method with its content frames per channel, for operators that act on messages."""

    def __init__(self, methods: tuple[str, ...]) -> None:
        self.methods = methods
        self.open: dict[int, Message] = {}

    def feed(self, frame: Frame) -> tuple[bool, Message | None]:
        """(is part of a watched message, the message when this frame completed it)."""
        if frame.name in self.methods:
            msg = Message(frame, decode(frame), [frame.raw])
            self.open[frame.channel] = msg
            return True, None
        msg = self.open.get(frame.channel)
        if msg is None or frame.name not in ("content-header", "content-body"):
            return False, None
        msg.frames.append(frame.raw)
        if frame.name == "content-header":
            msg.size = decode(frame).body_size
        else:
            msg.received += len(frame.raw) - FRAME_OVERHEAD
        if msg.complete:
            del self.open[frame.channel]
            return True, msg
        return True, None


class DeliveryOperator(Mutator):
    """Acts on whole deliveries from the broker and keeps the channel's acknowledgement state."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.assembler = Assembler(DELIVERIES)
        self.no_ack_tags: dict[int, dict[str, bool]] = {}  # channel -> consumer tag -> no_ack
        self.get_no_ack: dict[int, bool] = {}
        self.seen = 0

    def manual(self, channel: int, msg: Message) -> bool:
        """Whether the client must ack ``msg`` (not an auto-ack consumer or get)."""
        if msg.method.name == "basic.get-ok":
            return not self.get_no_ack.get(channel, False)
        return not self.no_ack_tags.get(channel, {}).get(msg.value.consumer_tag, False)

    def hidden(self, channel: int, msg: Message, verb: str, note: str = "") -> list[bytes]:
        """Keep ``msg`` from the client: a consumer sees nothing; a basic.get, whose client waits for
        an answer, is answered basic.get-empty (the stream stays a valid conversation)."""
        tag = msg.value.delivery_tag
        if msg.method.name == "basic.get-ok":
            self.applied(f"basic.get-ok delivery_tag {tag} (redelivered) on channel {channel} answered as basic.get-empty{note}")
            return [encode(commands.Basic.GetEmpty(), channel)]
        self.applied(f"{msg.method.name} delivery_tag {tag} (redelivered) on channel {channel} {verb}{note}")
        return []

    def watch_client(self, frame: Frame) -> None:
        if frame.name == "basic.consume":
            v = decode(frame)
            self.no_ack_tags.setdefault(frame.channel, {})[v.consumer_tag] = bool(v.no_ack)
        elif frame.name == "basic.get":
            self.get_no_ack[frame.channel] = bool(decode(frame).no_ack)

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is C:
            if frame.name in ("basic.consume", "basic.get"):
                self.watch_client(frame)
            return self.client_frame(frame)
        part, msg = self.assembler.feed(frame)
        if not part:
            return self.other_server_frame(frame)
        if msg is None:
            return []  # held until the message is complete
        return self.message(frame.channel, msg)

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        return None

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        return None

    def message(self, channel: int, msg: Message) -> list[bytes]:
        return msg.frames


def _nth(param: str | None) -> int:
    try:
        return max(1, int(param or 1))
    except ValueError:
        return 1


@operator("delivery-swallowed", P, "loses the first redelivery (redelivered=true) on each connection: the client never sees it and the broker is told it was acked")
class DeliverySwallowed(DeliveryOperator):
    def message(self, channel: int, msg: Message) -> list[bytes]:
        if self.seen or not msg.value.redelivered:
            return msg.frames
        self.seen += 1
        tag = msg.value.delivery_tag
        if self.manual(channel, msg):
            self.io.to_server([encode(commands.Basic.Ack(delivery_tag=tag, multiple=False), channel)])
        return self.hidden(channel, msg, "swallowed", " (acked to the broker)")


@operator("delivery-duplicated", P, "delivers the Nth basic.deliver (default 1st) of each connection twice, the copy under a fresh tag", default_param="1")
class DeliveryDuplicated(DeliveryOperator):
    FRESH = 1 << 40

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.copies: dict[tuple[int, int], int] = {}  # (channel, fresh tag) -> original tag
        self.settled: set[tuple[int, int]] = set()  # (channel, original tag) settled by the client
        self.highest: dict[int, int] = {}

    def message(self, channel: int, msg: Message) -> list[bytes]:
        tag = msg.value.delivery_tag
        self.highest[channel] = max(self.highest.get(channel, 0), tag)
        if msg.method.name != "basic.deliver":
            return msg.frames  # one basic.get has one answer: a second get-ok would be unsolicited
        self.seen += 1
        if self.seen != _nth(self.param):
            return msg.frames
        fresh = self.FRESH + len(self.copies) + 1
        self.copies[(channel, fresh)] = tag
        copy = decode(msg.method)
        copy.delivery_tag = fresh
        self.applied(f"{msg.method.name} delivery_tag {tag} on channel {channel} delivered again as delivery_tag {fresh}")
        return [*msg.frames, encode(copy, channel), *msg.frames[1:]]

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in SETTLEMENTS or not self.copies:
            return None
        v = decode(frame)
        ch, tag = frame.channel, v.delivery_tag
        multiple = bool(getattr(v, "multiple", False))
        original = self.copies.get((ch, tag))
        if original is None:
            for (c, _), orig in self.copies.items():
                if c == ch and (tag == orig or (multiple and (tag == 0 or tag >= orig))):
                    if (c, orig) in self.settled and tag == orig and not multiple:
                        self.applied(f"{frame.name} of delivery_tag {tag} dropped: its copy was already settled")
                        return []
                    self.settled.add((c, orig))
            return None
        if multiple:
            v.delivery_tag = self.highest.get(ch, original)
            self.applied(f"{frame.name} multiple of copy tag {tag} sent as delivery_tag {v.delivery_tag}")
            for (c, _), orig in self.copies.items():
                if c == ch:
                    self.settled.add((c, orig))
            return [encode(v, ch)]
        if (ch, original) in self.settled:
            self.applied(f"{frame.name} of copy tag {tag} dropped: delivery_tag {original} already settled")
            return []
        self.settled.add((ch, original))
        v.delivery_tag = original
        self.applied(f"{frame.name} of copy tag {tag} sent as delivery_tag {original}")
        return [encode(v, ch)]


class _HoldsOneDelivery(DeliveryOperator):
    """Holds one basic.deliver per channel so that a later one can overtake it. A held delivery is
    never lost: it goes out in order after HOLD_S, or just before any other server frame on its
    channel (a get-ok, a close), and the wire trace says the mutation was not applied."""

    HOLD_S = 0.5
    #: How the skipped notes name the held delivery and the one that was to overtake it.
    HELD = "delivery_tag"
    OVERTAKER = "delivery"

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.held: dict[int, Message] = {}

    def hold(self, channel: int, msg: Message) -> list[bytes]:
        self.held[channel] = msg
        self.io.later(self.HOLD_S, lambda: self.release(channel))
        return []

    def release(self, channel: int) -> None:
        held = self.held.pop(channel, None)
        if held is not None:
            self.skipped(f"no {self.OVERTAKER} followed {self.HELD} {held.value.delivery_tag} on channel {channel}; forwarded in order")
            self.io.to_client(held.frames)

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        held = self.held.pop(frame.channel, None)
        if held is None:
            return None
        self.skipped(f"{frame.name} followed {self.HELD} {held.value.delivery_tag} on channel {frame.channel}; forwarded in order")
        return [*held.frames, frame.raw]


@operator("deliveries-reordered", P, "swaps the first redelivered basic.deliver on each channel with the delivery after it (a requeued message loses its position)")
class DeliveriesReordered(_HoldsOneDelivery):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.done: set[int] = set()

    def message(self, channel: int, msg: Message) -> list[bytes]:
        held = self.held.pop(channel, None)
        if held is not None:
            self.applied(f"delivery_tag {msg.value.delivery_tag} forwarded before delivery_tag {held.value.delivery_tag} on channel {channel}")
            return [*msg.frames, *held.frames]
        if channel in self.done or not msg.value.redelivered or msg.method.name != "basic.deliver":
            return msg.frames  # a basic.get-ok held back would hold the client's basic.get
        self.done.add(channel)
        return self.hold(channel, msg)


@operator("transient-overtakes-persistent", P, "forwards a transient basic.deliver before the persistent one delivered just before it on the same channel (persistent and transient messages take different paths)")
class TransientOvertakesPersistent(_HoldsOneDelivery):
    HELD = "persistent delivery_tag"
    OVERTAKER = "transient delivery"

    def message(self, channel: int, msg: Message) -> list[bytes]:
        if msg.method.name != "basic.deliver":
            return msg.frames
        persistent = _delivery_mode(msg) == 2
        held = self.held.pop(channel, None)
        if held is not None:
            if persistent:  # persistent after persistent: the newer one waits for a transient instead
                self.hold(channel, msg)
                return held.frames
            self.applied(f"transient delivery_tag {msg.value.delivery_tag} forwarded before persistent delivery_tag {held.value.delivery_tag} on channel {channel}")
            return [*msg.frames, *held.frames]
        return self.hold(channel, msg) if persistent else msg.frames


def _delivery_mode(msg: Message) -> int | None:
    if len(msg.frames) < 2:
        return None
    header = pamqp_frame.unmarshal(msg.frames[1])[2]
    return getattr(header.properties, "delivery_mode", None)


@operator("first-get-tag-zeroed", P, "answers a channel's first basic.get with delivery_tag 0 instead of 1, and maps the client's settlement of tag 0 (multiple=false) back to 1")
class FirstGetTagZeroed(Mutator):
    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is S and frame.name == "basic.get-ok":
            value = decode(frame)
            if value.delivery_tag != 1:
                return None
            value.delivery_tag = 0
            self.applied(f"basic.get-ok on channel {frame.channel}: delivery_tag 1 -> 0")
            return [encode(value, frame.channel)]
        if sender is C and frame.name in SETTLEMENTS:
            value = decode(frame)
            if value.delivery_tag != 0 or getattr(value, "multiple", False):
                return None
            value.delivery_tag = 1
            return [encode(value, frame.channel)]
        return None


@operator("first-get-ok-emptied", P, "answers a channel's first basic.get-ok of a never-delivered message as basic.get-empty (the broker keeps the message unacked until the channel closes)")
class FirstGetOkEmptied(DeliveryOperator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.done: set[int] = set()

    def message(self, channel: int, msg: Message) -> list[bytes]:
        if msg.method.name != "basic.get-ok" or msg.value.redelivered or channel in self.done:
            return msg.frames
        self.done.add(channel)
        self.applied(f"basic.get-ok delivery_tag {msg.value.delivery_tag} on channel {channel} answered as basic.get-empty")
        return [encode(commands.Basic.GetEmpty(), channel)]


@operator("reply-code-shifted", P, "adds one to the reply code of every channel.close the broker sends for a soft error 403-406 (the right exception, the wrong code)")
class ReplyCodeShifted(FieldRewriter):
    sender, frames = S, ("channel.close",)

    def change(self, value: Any) -> str | None:
        if value.reply_code not in (403, 404, 405, 406):
            return None
        value.reply_code += 1
        return f"reply_code {value.reply_code - 1} -> {value.reply_code}"


# -- publishes ----------------------------------------------------------------------------------

@operator("confirmed-publish-lost", P, "on a channel in confirm mode, discards the Nth persistent publish (default 2nd) and confirms it to the client", default_param="2")
class ConfirmedPublishLost(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.confirming: set[int] = set()
        self.seq: dict[int, int] = {}  # channel -> publishes so far (the confirm sequence)
        self.persistent: dict[int, int] = {}
        self.lost: dict[int, list[int]] = {}  # channel -> client sequence numbers discarded
        self.assembler = Assembler(("basic.publish",))

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is S:
            return self.confirm(frame)
        if frame.name == "confirm.select":
            self.confirming.add(frame.channel)
            return None
        if frame.channel not in self.confirming:
            return None
        part, msg = self.assembler.feed(frame)
        if not part:
            return None
        if msg is None:
            return []  # held until the publish is complete: its header says whether it is persistent
        ch = frame.channel
        self.seq[ch] = seq = self.seq.get(ch, 0) + 1
        if decode_header(msg).delivery_mode == 2:
            self.persistent[ch] = self.persistent.get(ch, 0) + 1
            if self.persistent[ch] == _nth(self.param):
                self.lost.setdefault(ch, []).append(seq)
                self.io.to_client([encode(commands.Basic.Ack(delivery_tag=seq, multiple=False), ch)])
                self.applied(f"persistent publish #{seq} on channel {ch} discarded and confirmed to the client")
                return []
        return msg.frames

    def confirm(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in ("basic.ack", "basic.nack") or not self.lost.get(frame.channel):
            return None
        v = decode(frame)
        shift = 0
        for seq in sorted(self.lost[frame.channel]):  # broker seq b is client seq b + (discarded before it)
            if seq <= v.delivery_tag + shift:
                shift += 1
        if not shift:
            return None
        v.delivery_tag += shift
        return [encode(v, frame.channel)]


def decode_header(msg: Message) -> Any:
    return pamqp_frame.unmarshal(msg.frames[1])[2].properties


@operator("torn-publish-completed", P, "when a client vanishes in the middle of a message, completes the body with filler and hands the torn message to the broker")
class TornPublishCompleted(Mutator):
    """Only whole frames pass the proxy, so the broker never holds part of a frame: a body frame the
    client left half sent is withheld whole, and the filler replaces it. The filler is cut into body
    frames no larger than the frame-max the client agreed (connection.tune-ok), which the broker
    enforces."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.assembler = Assembler(("basic.publish",))
        self.frame_max = 0  # 0: no limit agreed (yet)

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is C:
            if frame.name == "connection.tune-ok":
                self.frame_max = decode(frame).frame_max
            self.assembler.feed(frame)
        return None

    def closing(self, sender: Sender) -> list[bytes]:
        if sender is not C:
            return []
        out = []
        step = self.frame_max - FRAME_OVERHEAD if self.frame_max > FRAME_OVERHEAD else None
        for channel, msg in self.assembler.open.items():
            if msg.size is None:
                continue
            missing = msg.size - msg.received
            sizes = [min(step, missing - i) for i in range(0, missing, step)] if step else [missing]
            out += [pamqp_frame.marshal(pamqp_body.ContentBody(b"\x00" * n), channel) for n in sizes]
            self.applied(f"torn publish on channel {channel} completed with {missing} filler bytes in {len(sizes)} body frame(s)")
        self.assembler.open.clear()
        return out



# -- content framing edges, and hostile modes that stall the suite rather than break a rule -------

class _ConfirmRenumbering(Mutator):
    """Keeps publisher confirms consistent for the client when publishes are discarded: the broker
    numbers only what it received, so its confirms are shifted past the discarded sequence numbers
    (which the client never sees confirmed)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.confirming: set[int] = set()
        self.seq: dict[int, int] = {}
        self.lost: dict[int, list[int]] = {}

    def publish_seq(self, channel: int) -> int:
        self.seq[channel] = self.seq.get(channel, 0) + 1
        return self.seq[channel]

    def confirm(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in ("basic.ack", "basic.nack") or not self.lost.get(frame.channel):
            return None
        v = decode(frame)
        shift = 0
        for seq in sorted(self.lost[frame.channel]):
            if seq <= v.delivery_tag + shift:
                shift += 1
        if not shift:
            return None
        v.delivery_tag += shift
        return [encode(v, frame.channel)]


@operator("empty-body-ignored", P, "discards every publish whose body is empty (content header body-size 0, no body frames): never routed, never confirmed, as a broker seen in the field did")
class EmptyBodyIgnored(_ConfirmRenumbering):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.assembler = Assembler(("basic.publish",))

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is S:
            return self.confirm(frame)
        if frame.name == "confirm.select":
            self.confirming.add(frame.channel)
            return None
        part, msg = self.assembler.feed(frame)
        if not part:
            return None
        if msg is None:
            return []  # held until the publish is complete: its header says the body size
        ch = frame.channel
        seq = self.publish_seq(ch) if ch in self.confirming else 0
        if msg.size:
            return msg.frames
        if seq:
            self.lost.setdefault(ch, []).append(seq)
        self.applied(f"publish with an empty body on channel {ch} discarded" + (f" (confirm #{seq} never sent)" if seq else ""))
        return []


@operator("body-frames-swapped", P, "swaps the first two body frames of a delivery whose body spans several frames (the broker reassembles a large body out of order)")
class BodyFramesSwapped(DeliveryOperator):
    def message(self, channel: int, msg: Message) -> list[bytes]:
        bodies = msg.frames[2:]
        if len(bodies) < 2 or len(bodies[0]) != len(bodies[1]) or bodies[0] == bodies[1]:
            return msg.frames
        self.applied(f"{msg.method.name} delivery_tag {msg.value.delivery_tag} on channel {channel}: body frames 1 and 2 swapped")
        return [msg.frames[0], msg.frames[1], bodies[1], bodies[0], *bodies[2:]]


@operator("deliveries-withheld", P, "withholds every redelivery (redelivered=true) from the client: the broker counts it delivered and unacked, the consumer never sees it (a broker that never makes an expected delivery)")
class DeliveriesWithheld(DeliveryOperator):
    def message(self, channel: int, msg: Message) -> list[bytes]:
        if not msg.value.redelivered:
            return msg.frames
        return self.hidden(channel, msg, "withheld")


@operator("silent-after", P, "after the Nth frame from clients (default 400, counted over every connection) the target stops answering: every frame both ways is swallowed, TCP stays open and new connections are accepted but never answered", default_param="400")
class SilentAfter(Mutator):
    """A broker that stops answering (seen after a channel error): TCP still accepts, nothing comes
    back. The count is shared by every connection through the proxy, so the whole target goes quiet."""

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        m = self.mutation
        seen = getattr(m, "silent_frames", 0)
        if sender is C:
            seen += 1
            setattr(m, "silent_frames", seen)
        if seen < _nth(self.param):
            return None
        if not getattr(m, "silent_noted", False):
            setattr(m, "silent_noted", True)
            self.applied(f"target silent from client frame #{seen} ({frame.name} on channel {frame.channel}) on")
        else:
            m.count()
        return []
