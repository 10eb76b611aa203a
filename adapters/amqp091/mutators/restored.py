"""What a node restores of a durable queue after a restart or kill -9: operators reproducing what
clients of brokers that restored it wrong saw on the wire.

- queue-delete-ignored: a deleted durable queue that comes back (cloudamqp/lavinmq#209, "Deleted
  queues got recreated on server crash"). The queue.delete never reaches the broker; the client
  gets the delete-ok it would have had, message-count included (the proxy asks with a passive
  queue.declare in its place and answers its declare-ok as delete-ok), so the queue is still there
  after the fault, as on the affected broker.
- priority-cleared: a priority queue that orders its messages as if they had none
  (cloudamqp/lavinmq#434, a durable priority queue restored as a plain one; ARTEMIS-5032 for AMQP
  1.0). The priority property is removed from every publish on its way to the broker.

Which queues are durable is kept per mutation name, shared by every connection the process relays
(a queue is declared on one connection and deleted on another; adapters.amqp091.mutators.limits.shared).
"""

from __future__ import annotations

from typing import Any

from pamqp import commands

from adapters.amqp091.mutations import C, HeaderRewriter, P, S, decode, encode
from adapters.amqp091.mutators.limits import shared
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame


@operator("queue-delete-ignored", P, "answers queue.delete of a durable queue with queue.delete-ok (its message-count read by a passive queue.declare sent in its place) and never deletes it: the queue is still there after a restart or kill -9")
class QueueDeleteIgnored(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.answers: dict[int, int] = {}  # channel -> passive declares whose declare-ok becomes a delete-ok

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if sender is C and frame.name == "queue.declare":
            v = decode(frame)
            durable: set[str] = shared(self).setdefault("durable", set())
            if not v.passive and v.queue:
                (durable.add if v.durable else durable.discard)(v.queue)
        elif sender is C and frame.name == "queue.delete":
            v = decode(frame)
            if v.queue not in shared(self).get("durable", ()):
                return None
            if not v.nowait:
                self.answers[ch] = self.answers.get(ch, 0) + 1
            self.applied(f"queue.delete of durable queue {v.queue!r} on channel {ch} not forwarded (a passive queue.declare in its place)")
            return [encode(commands.Queue.Declare(queue=v.queue, passive=True, nowait=v.nowait), ch)]
        elif sender is S and frame.name == "queue.declare-ok" and self.answers.get(ch):
            self.answers[ch] -= 1
            return [encode(commands.Queue.DeleteOk(message_count=decode(frame).message_count), ch)]
        elif frame.name in ("channel.close", "channel.open-ok"):
            self.answers.pop(ch, None)
        return None


@operator("priority-cleared", P, "removes the priority property from every basic.publish (messages reach a priority queue without one and are delivered in publication order)")
class PriorityCleared(HeaderRewriter):
    sender = C

    def change(self, props: Any) -> str | None:
        if props.priority is None:
            return None
        before = props.priority
        props.priority = None
        return f"priority {before} removed"

