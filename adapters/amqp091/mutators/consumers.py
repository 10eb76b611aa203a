"""AMQP 0-9-1 operators on consumers: how a broker names them, what it owes the consumer that
remains or comes back after another went away, and when a queue whose consumer left expires.

Each reproduces the wire symptom of a documented broker bug: a repeated broker-generated consumer
tag (QPID-8571), a re-subscribed consumer's first delivery that never reaches the client while the
broker counts it unacknowledged (rabbitmq-server#9158), a waiting consumer that never gets the lost
consumer's deliveries (rabbitmq-server#5460), deliveries that stop when a higher-priority consumer
arrives (rabbitmq-server#14141), a queue deleted as soon as its consumer left instead of x-expires
later (cloudamqp/lavinmq#924). A withheld delivery stays unacknowledged at the broker, so it comes
back when the channel closes, as it would on the affected broker.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pamqp import commands

from adapters.amqp091.mutations import C, DeliveryOperator, Message, S, decode, encode
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

P = "amqp-0-9-1"


class _ConsumerBook:
    """Which queue each consumer tag of a connection consumes from, from basic.consume and its -ok
    (answered in order on each channel)."""

    def __init__(self) -> None:
        self.asked: dict[int, deque[tuple[str, dict[str, Any]]]] = {}
        self.queue_of: dict[tuple[int, str], str] = {}
        self.args_of: dict[tuple[int, str], dict[str, Any]] = {}

    def watch(self, sender: Sender, frame: Frame) -> tuple[int, str] | None:
        """The (channel, tag) a basic.consume-ok just registered, else None."""
        ch = frame.channel
        if sender is C and frame.name == "basic.consume":
            v = decode(frame)
            self.asked.setdefault(ch, deque()).append((v.queue, dict(v.arguments or {})))
        elif sender is S and frame.name == "basic.consume-ok":
            asked = self.asked.get(ch)
            if asked:
                queue, args = asked.popleft()
                key = (ch, decode(frame).consumer_tag)
                self.queue_of[key] = queue
                self.args_of[key] = args
                return key
        elif sender is S and frame.name == "channel.open-ok":
            self.asked.pop(ch, None)
        return None


@operator("consumer-tag-repeated", P, "answers the second and later basic.consume with an empty consumer-tag on a channel with the tag the broker generated for the first, and delivers their messages under it (non-unique broker-generated consumer tags)")
class ConsumerTagRepeated(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.empty: dict[int, deque[bool]] = {}
        self.first: dict[int, str] = {}
        self.alias: dict[tuple[int, str], str] = {}

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if sender is C and frame.name == "basic.consume":
            self.empty.setdefault(ch, deque()).append(not decode(frame).consumer_tag)
        elif sender is S and frame.name == "basic.consume-ok":
            asked = self.empty.get(ch)
            if not asked or not asked.popleft():
                return None
            v = decode(frame)
            first = self.first.setdefault(ch, v.consumer_tag)
            if first == v.consumer_tag:
                return None
            self.alias[(ch, v.consumer_tag)] = first
            self.applied(f"basic.consume-ok on channel {ch}: consumer tag {v.consumer_tag!r} -> {first!r} (the first one's)")
            v.consumer_tag = first
            return [encode(v, ch)]
        elif sender is S and frame.name == "basic.deliver":
            v = decode(frame)
            first = self.alias.get((ch, v.consumer_tag))
            if first is not None:
                v.consumer_tag = first
                return [encode(v, ch)]
        elif sender is S and frame.name == "channel.open-ok":
            self.empty.pop(ch, None)
            self.first.pop(ch, None)
        return None


class _Withholding(DeliveryOperator):
    """Keeps chosen basic.deliver frames from the client, unacknowledged at the broker."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.book = _ConsumerBook()

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        registered = self.book.watch(sender, frame)
        if registered is not None:
            self.registered(registered)
        return super().rewrite(sender, frame)

    def registered(self, key: tuple[int, str]) -> None:
        pass

    def message(self, channel: int, msg: Message) -> list[bytes]:
        if msg.method.name != "basic.deliver" or not self.withhold(channel, msg):
            return msg.frames
        v = msg.value
        self.applied(f"basic.deliver delivery_tag {v.delivery_tag} (consumer {v.consumer_tag!r}, redelivered={bool(v.redelivered)}) "
                     f"on channel {channel} withheld from the client, unacknowledged at the broker")
        return []

    def withhold(self, channel: int, msg: Message) -> bool:
        raise NotImplementedError


@operator("reconsume-first-withheld", P, "after a basic.cancel-ok on a channel, withholds from the client the first never-delivered basic.deliver to a consumer subscribed later on that channel; the broker counts it unacknowledged (a re-subscribed consumer that never gets a message)")
class ReconsumeFirstWithheld(_Withholding):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.cancelled: set[int] = set()
        self.later: set[tuple[int, str]] = set()
        self.done: set[int] = set()

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "basic.cancel-ok":
            self.cancelled.add(frame.channel)
        elif frame.name == "channel.open-ok":
            self.cancelled.discard(frame.channel)
            self.done.discard(frame.channel)
        return None

    def registered(self, key: tuple[int, str]) -> None:
        if key[0] in self.cancelled:
            self.later.add(key)

    def withhold(self, channel: int, msg: Message) -> bool:
        v = msg.value
        if channel in self.done or v.redelivered or (channel, v.consumer_tag) not in self.later:
            return False
        self.done.add(channel)
        return True


@operator("takeover-withheld", P, "withholds from the client every redelivered basic.deliver to a consumer that has had no first delivery on its channel (a consumer taking over the deliveries of one that went away); the broker counts them unacknowledged")
class TakeoverWithheld(_Withholding):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.fed: set[tuple[int, str]] = set()

    def withhold(self, channel: int, msg: Message) -> bool:
        v = msg.value
        key = (channel, v.consumer_tag)
        if not v.redelivered:
            self.fed.add(key)
            return False
        return key not in self.fed


@operator("priority-consumer-halts", P, "once a basic.consume with a higher x-priority than an earlier consumer of the same queue on the connection is answered, withholds every later basic.deliver from that queue on the connection; the broker counts them unacknowledged (delivery halts when a higher-priority consumer arrives)")
class PriorityConsumerHalts(_Withholding):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.halted: set[str] = set()

    def registered(self, key: tuple[int, str]) -> None:
        queue = self.book.queue_of[key]
        prio = _priority(self.book.args_of[key])
        earlier = [_priority(self.book.args_of[k]) for k, q in self.book.queue_of.items() if q == queue and k != key]
        if earlier and prio > max(earlier):
            self.halted.add(queue)

    def withhold(self, channel: int, msg: Message) -> bool:
        return self.book.queue_of.get((channel, msg.value.consumer_tag)) in self.halted


def _priority(args: dict[str, Any]) -> int:
    try:
        return int(args.get("x-priority", 0))
    except (TypeError, ValueError):
        return 0


@operator("queue-deleted-at-cancel", P, "deletes a queue this connection declared with x-expires as soon as basic.cancel-ok removes the connection's last consumer of it (queue.delete sent by the proxy, its delete-ok swallowed): the queue goes with its consumer instead of x-expires later")
class QueueDeletedAtCancel(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.book = _ConsumerBook()
        self.expiring: set[str] = set()
        self.pending: dict[int, int] = {}

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        self.book.watch(sender, frame)
        ch = frame.channel
        if sender is C and frame.name == "queue.declare":
            v = decode(frame)
            if not v.passive and v.queue and "x-expires" in (v.arguments or {}):
                self.expiring.add(v.queue)
        elif sender is S and frame.name == "queue.delete-ok" and self.pending.get(ch):
            self.pending[ch] -= 1
            return []
        elif sender is S and frame.name == "basic.cancel-ok":
            queue = self.book.queue_of.pop((ch, decode(frame).consumer_tag), None)
            if queue in self.expiring and queue not in self.book.queue_of.values():
                self.expiring.discard(queue)
                self.pending[ch] = self.pending.get(ch, 0) + 1
                self.io.to_server([encode(commands.Queue.Delete(queue=queue), ch)])
                self.applied(f"queue {queue!r} (x-expires) deleted on channel {ch} as its last consumer's basic.cancel-ok passed")
        return None
