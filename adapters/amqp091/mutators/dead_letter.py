"""AMQP 0-9-1 operators reproducing dead-lettering bugs as a client sees them: a dead letter dropped
as a false cycle, a queue TTL never applied to an unread queue, the rejection that dead-letters a
message answered by a crash, application headers lost on the copy, copies pushed out of a
length-limited queue dead-lettered newest first."""

from __future__ import annotations

from typing import Any

from pamqp import commands
from pamqp import frame as pamqp_frame

from adapters.amqp091.mutations import (
    DELIVERIES,
    SETTLEMENTS,
    ArgumentStripped,
    DeliveryOperator,
    HeaderRewriter,
    Message,
    P,
    _headers,
    decode,
    encode,
)
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

C, S = Sender.CLIENT, Sender.SERVER
_METHOD_ID = {"basic.ack": 80, "basic.reject": 90, "basic.nack": 120}
DEATH_HEADERS = ("x-death", "x-first-death-", "x-last-death-")


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _properties(msg: Message) -> Any:
    return pamqp_frame.unmarshal(msg.frames[1])[2].properties if len(msg.frames) > 1 else None


def _deaths(props: Any) -> list[dict[str, Any]]:
    deaths = (_headers(props) if props is not None else {}).get("x-death")
    return [d for d in deaths if isinstance(d, dict)] if isinstance(deaths, list) else []


class _QueueOfDelivery(DeliveryOperator):
    """Knows which queue each delivery comes from: a consumer's (basic.consume, its consume-ok) or
    the channel's last basic.get."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.consuming: dict[int, str] = {}  # channel -> queue of the basic.consume awaiting its consume-ok
        self.queues: dict[str, str] = {}  # consumer tag -> queue
        self.getting: dict[int, str] = {}  # channel -> queue of its last basic.get

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "basic.consume":
            v = decode(frame)
            self.consuming[frame.channel] = v.queue
            if v.consumer_tag:
                self.queues[v.consumer_tag] = v.queue
        elif frame.name == "basic.get":
            self.getting[frame.channel] = decode(frame).queue
        return None

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "basic.consume-ok" and frame.channel in self.consuming:
            self.queues[decode(frame).consumer_tag] = self.consuming.pop(frame.channel)
        return None

    def queue_of(self, channel: int, msg: Message) -> str | None:
        if msg.method.name == "basic.get-ok":
            return self.getting.get(channel)
        return self.queues.get(msg.value.consumer_tag)


@operator("dead-letter-cycle-dropped", P, "drops every dead-lettered delivery whose x-death already names the queue it is delivered from (a message that came back round a dead-letter cycle), acking it to the broker: a false cycle detection")
class DeadLetterCycleDropped(_QueueOfDelivery):
    """A broker that drops a message dead-lettered back into a queue it died in before, although
    a rejection in the cycle makes it no loop (LavinMQ 2.3-2.4, cloudamqp/lavinmq#1134; RabbitMQ
    3.13.0-3.13.2, rabbitmq/rabbitmq-server#11159): the client never sees it come back."""

    def message(self, channel: int, msg: Message) -> list[bytes]:
        queue = self.queue_of(channel, msg)
        if queue is None or not any(_text(d.get("queue")) == queue for d in _deaths(_properties(msg))):
            return msg.frames
        tag = msg.value.delivery_tag
        if self.manual(channel, msg):
            self.io.to_server([encode(commands.Basic.Ack(delivery_tag=tag, multiple=False), channel)])
        self.applied(f"{msg.method.name} delivery_tag {tag} from {queue!r} on channel {channel}: x-death names {queue!r}, dropped (acked to the broker)")
        if msg.method.name == "basic.get-ok":
            return [encode(commands.Basic.GetEmpty(), channel)]
        return []


@operator("repeat-expiry-dropped", P, "drops every dead-lettered delivery whose x-death counts a second expiry from one queue (an expired entry with count 2 or more), acking it to the broker: loop detection firing where there is no loop")
class RepeatExpiryDropped(DeliveryOperator):
    """A broker whose dead-letter loop detection drops a message the second time it expires from the
    same queue, whatever else its history holds (LavinMQ before 2.5.0, cloudamqp/lavinmq#1134, fixed
    by #1206): the copy that second expiry should make never reaches the client."""

    def message(self, channel: int, msg: Message) -> list[bytes]:
        again = [d for d in _deaths(_properties(msg)) if _text(d.get("reason")) == "expired" and int(d.get("count") or 0) >= 2]
        if not again:
            return msg.frames
        tag = msg.value.delivery_tag
        if self.manual(channel, msg):
            self.io.to_server([encode(commands.Basic.Ack(delivery_tag=tag, multiple=False), channel)])
        self.applied(f"{msg.method.name} delivery_tag {tag} on channel {channel}: second expiry from {_text(again[0].get('queue'))!r}, dropped (acked to the broker)")
        if msg.method.name == "basic.get-ok":
            return [encode(commands.Basic.GetEmpty(), channel)]
        return []


@operator("first-death-exchange-removed", P, "removes the x-first-death-exchange header from dead-lettered deliveries (x-death and the other death headers kept)")
class FirstDeathExchangeRemoved(HeaderRewriter):
    """A broker that leaves x-first-death-exchange off a dead letter (RabbitMQ 4.1.0,
    rabbitmq/rabbitmq-server#15385, open)."""

    def change(self, props: Any) -> str | None:
        h = _headers(props)
        if "x-death" not in h or "x-first-death-exchange" not in h:
            return None
        h.pop("x-first-death-exchange")
        props.headers = h
        return "x-first-death-exchange removed from a dead-lettered delivery"


@operator("queue-ttl-ignored", P, "removes x-message-ttl from queue.declare: the queue never expires its messages by queue TTL, so an unread queue neither drops nor dead-letters them", default_param="x-message-ttl")
class QueueTtlIgnored(ArgumentStripped):
    """A classic queue with a queue message TTL and no consumer that keeps its messages past the TTL
    (RabbitMQ 3.12.11+, rabbitmq/rabbitmq-server#10692: only a basic.get made it expire them); a
    client that never reads sees exactly this. argument-stripped of x-message-ttl, under the name
    the corpus entries and expectations give it."""


class _DeadLetteringCrashes(Mutator):
    """A basic.reject or basic.nack with requeue=false of a chosen delivery never reaches the broker
    as such: the client's channel is closed with 541 INTERNAL_ERROR (the queue crashed while
    dead-lettering) and the broker's with 200, so the message goes back to its queue and no copy is
    dead-lettered. Each side's close-ok is swallowed."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.pending: dict[Sender, set[int]] = {C: set(), S: set()}
        self.chosen: dict[int, dict[int, str]] = {}  # channel -> delivery tag -> why it crashes
        self.tag = 0  # the delivery tag choose() decided about

    def choose(self, channel: int, frame: Frame) -> str | None:
        """For a server frame: why the delivery it starts would crash its dead-lettering, or None."""
        raise NotImplementedError

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if frame.name == "channel.close-ok" and ch in self.pending[sender]:
            self.pending[sender].discard(ch)
            return []
        if sender is S:
            if frame.name == "channel.open-ok":
                self.chosen.pop(ch, None)
            why = self.choose(ch, frame)
            if why:
                self.chosen.setdefault(ch, {})[self.tag] = why
            return None
        if frame.name not in SETTLEMENTS or frame.name == "basic.ack":
            return self.client(frame)
        v = decode(frame)
        why = self.chosen.get(ch, {}).get(v.delivery_tag)
        if v.requeue or why is None or getattr(v, "multiple", False):
            return None
        self.pending[C].add(ch)
        self.pending[S].add(ch)
        text = "INTERNAL_ERROR - queue crashed while dead-lettering (by mutation)"
        self.io.to_client([encode(commands.Channel.Close(541, text, 60, _METHOD_ID[frame.name]), ch)])
        self.applied(f"{frame.name}(requeue=false) of delivery_tag {v.delivery_tag} ({why}) on channel {ch} answered with channel.close 541")
        return [encode(commands.Channel.Close(200, "closed by mutation", 0, 0), ch)]

    def client(self, frame: Frame) -> list[bytes] | None:
        return None


@operator("requeued-dead-letter-crash", P, "answers basic.reject/basic.nack with requeue=false of a redelivered message (one returned to its queue before) with channel.close 541 INTERNAL_ERROR; the message goes back to its queue and no copy is dead-lettered")
class RequeuedDeadLetterCrash(_DeadLetteringCrashes):
    """A quorum queue that crashes dead-lettering a message it had requeued (RabbitMQ 3.10.0-3.10.4,
    rabbitmq/rabbitmq-server#4940)."""

    def choose(self, channel: int, frame: Frame) -> str | None:
        if frame.name not in DELIVERIES:
            return None
        v = decode(frame)
        self.tag = v.delivery_tag
        return "redelivered" if v.redelivered else None


@operator("republished-dead-letter-crash", P, "answers basic.reject/basic.nack with requeue=false of a message its connection published with an x-death header (a dead letter re-published) with channel.close 541 INTERNAL_ERROR; the message goes back to its queue and no copy is dead-lettered")
class RepublishedDeadLetterCrash(_DeadLetteringCrashes):
    """A queue that crashes dead-lettering a message that carries a client's death history, as
    RabbitMQ 4.0.0-4.0.4 did ({badkey, x-last-death-exchange}, rabbitmq/rabbitmq-server#12935) for a
    message re-published with x-death under 3.13 and dead-lettered after the upgrade."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.publishing: set[int] = set()
        self.republished: set[str] = set()  # message ids this connection published with x-death
        self.delivering: dict[int, int] = {}  # channel -> delivery tag whose content header comes next

    def client(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "basic.publish":
            self.publishing.add(frame.channel)
        elif frame.name == "content-header" and frame.channel in self.publishing:
            self.publishing.discard(frame.channel)
            props = decode(frame).properties
            if _deaths(props) and props.message_id:
                self.republished.add(_text(props.message_id))
        return None

    def choose(self, channel: int, frame: Frame) -> str | None:
        if frame.name in DELIVERIES:
            self.delivering[channel] = decode(frame).delivery_tag
            return None
        if frame.name != "content-header" or channel not in self.delivering:
            return None
        self.tag = self.delivering.pop(channel)
        mid = decode(frame).properties.message_id
        return "re-published with x-death" if mid is not None and _text(mid) in self.republished else None


@operator("republished-x-death-ignored", P, "removes x-death and the x-first-death-*/x-last-death-* headers from the client's publishes: the broker never sees the death history a client re-publishes, so the next death starts a history of its own (count 1)")
class RepublishedXDeathIgnored(HeaderRewriter):
    """A broker that ignores the x-death header of a re-published dead letter (RabbitMQ 3.13.0-3.13.2,
    rabbitmq/rabbitmq-server#11331 and #10709, fixed by #11339 in 3.13.3; by design from 4.0)."""

    sender = C

    def change(self, props: Any) -> str | None:
        h = _headers(props)
        gone = sorted(k for k in h if str(k) == "x-death" or str(k).startswith(("x-first-death-", "x-last-death-")))
        if "x-death" not in gone:
            return None
        props.headers = {k: v for k, v in h.items() if k not in gone}
        return f"removed {', '.join(gone)} from a publish"


@operator("max-length-ignored", P, "removes x-max-length from queue.declare: the queue never overflows, so it neither pushes out (dead-letters) its oldest messages nor refuses new ones", default_param="x-max-length")
class MaxLengthIgnored(ArgumentStripped):
    """argument-stripped of x-max-length, under the name the corpus entries and expectations give it."""


@operator("dead-letter-headers-stripped", P, "removes the application headers (every header not starting with x-) from dead-lettered deliveries (those carrying x-death)")
class DeadLetterHeadersStripped(HeaderRewriter):
    """A broker that loses a message's own headers when it dead-letters it (LavinMQ before 1.2.3,
    cloudamqp/lavinmq#572, through amq-protocol's table)."""

    def change(self, props: Any) -> str | None:
        h = _headers(props)
        if "x-death" not in h:
            return None
        gone = sorted(k for k in h if not str(k).startswith("x-"))
        if not gone:
            return None
        props.headers = {k: v for k, v in h.items() if str(k).startswith("x-")}
        return f"removed {', '.join(gone)} from a dead-lettered delivery"


@operator("dead-letters-reversed", P, "delivers consecutive dead-lettered messages of reason maxlen (pushed out of a length-limited queue) newest first: their contents are reversed under the same delivery tags")
class DeadLettersReversed(DeliveryOperator):
    """A quorum queue whose drop-head overflow dead-letters the pushed-out messages in reverse order
    (RabbitMQ 4.2.0, rabbitmq/rabbitmq-server#14926): the dead-letter queue holds them newest first.
    Consecutive basic.deliver frames of such copies are held and released, reversed, before the next
    other delivery or frame on the channel, or after HOLD_S."""

    HOLD_S = 0.3

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.held: dict[int, list[Message]] = {}

    def release(self, channel: int) -> list[bytes]:
        held = self.held.pop(channel, [])
        if len(held) < 2:
            if held:
                self.skipped(f"one maxlen dead letter on channel {channel}; nothing to reverse")
            return [raw for m in held for raw in m.frames]
        contents = [m.frames[1:] for m in reversed(held)]
        self.applied(f"{len(held)} maxlen dead letters on channel {channel} (delivery_tag {held[0].value.delivery_tag}..{held[-1].value.delivery_tag}) delivered newest first")
        return [raw for m, content in zip(held, contents) for raw in (m.frames[0], *content)]

    def later(self, channel: int) -> None:
        out = self.release(channel)
        if out:
            self.io.to_client(out)

    def message(self, channel: int, msg: Message) -> list[bytes]:
        deaths = _deaths(_properties(msg))
        if msg.method.name == "basic.deliver" and deaths and _text(deaths[0].get("reason")) == "maxlen":
            if channel not in self.held:
                self.io.later(self.HOLD_S, lambda: self.later(channel))
            self.held.setdefault(channel, []).append(msg)
            return []
        return [*self.release(channel), *msg.frames]

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        if not self.held.get(frame.channel):
            return None
        return [*self.release(frame.channel), frame.raw]
