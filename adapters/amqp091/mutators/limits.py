"""Delivery limits, prefetch, basic.recover and transactions: operators reproducing what clients of
brokers with bugs there saw on the wire.

Queues are declared on one connection (the case's admin) and consumed on others, so what a queue
is (its x-delivery-limit, its x-queue-type) and how often a message was delivered are kept per
mutation name, shared by every connection the process relays (:func:`shared`; the self-test's probe
runs a copy of each operator per connection, and they must share it too); the rest is per connection.
"""

from __future__ import annotations

import time
from typing import Any

from pamqp import commands

from adapters.amqp091.mutations import (
    SETTLEMENTS,
    C,
    DeliveryOperator,
    Message,
    P,
    S,
    decode,
    decode_header,
    encode,
)
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

#: The reply LavinMQ's read loop sends when a frame handler raises (cloudamqp/lavinmq#669's log).
LAVINMQ_541 = "INTERNAL_ERROR - Unexpected error, please report"
#: class and method ids of the frames the operators refuse.
IDS = {"basic.recover": (60, 110), "basic.ack": (60, 80), "basic.nack": (60, 120), "basic.reject": (60, 90),
       "basic.get": (60, 70), "tx.commit": (90, 20)}


#: The settlements that can be multiple (basic.reject cannot), for splitting one into single ones.
_MULTIPLE = {"basic.ack": commands.Basic.Ack, "basic.nack": commands.Basic.Nack}

_SHARED: dict[str, dict[str, Any]] = {}


def shared(op: Mutator) -> dict[str, Any]:
    """State every connection of one mutation shares (queue names are unique to a case, so cases
    never see each other's; a worker runs one case at a time)."""
    return _SHARED.setdefault(op.mutation.name, {})


class Tracker(DeliveryOperator):
    """A connection's delivery state as the client sees it: which queue a consumer tag or a
    basic.get reads, the manual-ack deliveries still outstanding per channel (acks made in an open
    transaction stay outstanding until tx.commit), which channels are transacted; and closing a
    channel or the whole connection on both sides, as a broker that failed would."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.consumer_queue: dict[tuple[int, str], str] = {}
        self.pending_consume: dict[int, list[str]] = {}
        self.get_queue: dict[int, str] = {}
        self.delivered_from: dict[tuple[int, int], str] = {}  # (channel, tag) -> queue
        self.outstanding: dict[int, set[int]] = {}
        self.tx_settled: dict[int, set[int]] = {}
        self.transacted: set[int] = set()
        self.shutting = False
        self.closing_channels: dict[Sender, set[int]] = {C: set(), S: set()}

    # -- failing like a broker ----------------------------------------------------------------

    def close_connection(self, frame: Frame, code: int, text: str) -> list[bytes]:
        """Answer ``frame`` with connection.close ``code``; the broker gets a clean close in its place."""
        cls, method = IDS.get(frame.name, (0, 0))
        self.shutting = True
        self.io.to_client([encode(commands.Connection.Close(code, text, cls, method), 0)])
        return [encode(commands.Connection.Close(200, "closed by mutation", 0, 0), 0)]

    def close_channel(self, frame: Frame, code: int, text: str) -> list[bytes]:
        """Answer ``frame`` with channel.close ``code``; the broker gets a clean channel.close in its
        place (it returns the channel's unacked deliveries to their queues)."""
        cls, method = IDS.get(frame.name, (0, 0))
        ch = frame.channel
        self.closing_channels[C].add(ch)
        self.closing_channels[S].add(ch)
        self.io.to_client([encode(commands.Channel.Close(code, text, cls, method), ch)])
        return [encode(commands.Channel.Close(200, "closed by mutation", 0, 0), ch)]

    # -- the relay ----------------------------------------------------------------------------

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if self.shutting:
            return []  # the connection is going: nothing more either way but the closing handshake, swallowed
        ch = frame.channel
        if ch in self.closing_channels[sender]:
            if frame.name == "channel.close-ok":
                self.closing_channels[sender].discard(ch)
                self.forget(ch)
            return []  # what was in flight on the closing channel
        if sender is S and frame.name == "basic.consume-ok" and self.pending_consume.get(ch):
            tag = decode(frame).consumer_tag
            queue = self.pending_consume[ch].pop(0)
            if queue is not None:
                self.consumer_queue[(ch, tag)] = queue
        out = super().rewrite(sender, frame)
        if sender is C:
            self.book(frame)
        elif frame.name == "channel.close-ok" or frame.name == "channel.open-ok":
            self.forget(ch)
        return out

    def forget(self, ch: int) -> None:
        self.outstanding.pop(ch, None)
        self.tx_settled.pop(ch, None)
        self.transacted.discard(ch)
        self.get_queue.pop(ch, None)

    def book(self, frame: Frame) -> None:
        """The client's frame, taken into the state after the operator decided about it."""
        ch, name = frame.channel, frame.name
        if name == "basic.consume":
            v = decode(frame)
            if v.consumer_tag:
                self.consumer_queue[(ch, v.consumer_tag)] = v.queue
            self.pending_consume.setdefault(ch, []).append(None if v.consumer_tag else v.queue)
        elif name == "basic.get":
            self.get_queue[ch] = decode(frame).queue
        elif name == "tx.select":
            self.transacted.add(ch)
        elif name == "tx.commit":
            self.outstanding.get(ch, set()).difference_update(self.tx_settled.pop(ch, set()))
        elif name == "tx.rollback":
            self.tx_settled.pop(ch, None)
        elif name == "basic.recover" and decode(frame).requeue:
            self.outstanding.pop(ch, None)
        elif name in SETTLEMENTS:
            v = decode(frame)
            held = self.outstanding.get(ch, set())
            multiple = bool(getattr(v, "multiple", False))
            tags = {t for t in held if v.delivery_tag == 0 or t <= v.delivery_tag} if multiple else {v.delivery_tag} & held
            if ch in self.transacted:
                self.tx_settled.setdefault(ch, set()).update(tags)
            else:
                held.difference_update(tags)
        elif name == "channel.close":
            self.forget(ch)

    def message(self, channel: int, msg: Message) -> list[bytes]:
        queue = self.get_queue.get(channel) if msg.method.name == "basic.get-ok" \
            else self.consumer_queue.get((channel, msg.value.consumer_tag))
        manual = self.manual(channel, msg)
        if manual:
            self.outstanding.setdefault(channel, set()).add(msg.value.delivery_tag)
            if queue is not None:
                self.delivered_from[(channel, msg.value.delivery_tag)] = queue
        return self.delivery(channel, msg, queue, manual)

    def delivery(self, channel: int, msg: Message, queue: str | None, manual: bool) -> list[bytes]:
        return msg.frames


# -- basic.recover and transactional acks (cloudamqp/lavinmq#2206) -------------------------------

@operator("recover-crashes", P, "answers basic.recover(requeue=false) on a channel holding unacked deliveries with connection.close 541 INTERNAL_ERROR (the connection dies instead of redelivering)")
class RecoverCrashes(Tracker):
    """LavinMQ 2.9's basic.recover(requeue=false) re-enters the channel's checked unacked lock while
    redelivering to a live consumer; the deadlock error reaches the read loop, which closes the whole
    connection with 541 (cloudamqp/lavinmq#2206, defect 1)."""

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name != "basic.recover" or decode(frame).requeue or not self.outstanding.get(frame.channel):
            return None
        self.applied(f"basic.recover(requeue=false) on channel {frame.channel} answered with connection.close 541")
        return self.close_connection(frame, 541, LAVINMQ_541)


@operator("tx-ack-all-crashes", P, "answers a transactional basic.ack/nack(delivery_tag 0, multiple=true) with nothing outstanding with connection.close 541 INTERNAL_ERROR (an ack-all no-op kills the connection)")
class TxAckAllCrashes(Tracker):
    """LavinMQ 2.9's transactional ack or nack of tag 0 with multiple set reads the last entry of an
    empty unacked deque; the IndexError closes the connection with 541, where the same frame outside
    a transaction is a no-op (cloudamqp/lavinmq#2206, defect 2)."""

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in ("basic.ack", "basic.nack") or frame.channel not in self.transacted:
            return None
        v = decode(frame)
        if v.delivery_tag != 0 or not v.multiple or self.outstanding.get(frame.channel):
            return None
        self.applied(f"transactional {frame.name}(0, multiple=true) with nothing outstanding on channel {frame.channel} answered with connection.close 541")
        return self.close_connection(frame, 541, LAVINMQ_541)


@operator("recover-skips-gets", P, "leaves the channel's basic.get deliveries out of basic.recover(requeue=true): the broker's redelivery of each is kept from the client, so it stays unacked on the channel until the channel closes")
class RecoverSkipsGets(Tracker):
    """LavinMQ before 1.0.0-beta.6 returned only the live consumers' deliveries on
    basic.recover(requeue=true): a message fetched with basic.get stayed unacknowledged on the
    channel (cloudamqp/lavinmq#398). A healthy broker requeues it and delivers it again; the proxy
    keeps that redelivery from the client, so the broker holds it as delivered and unacked."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.got: dict[int, dict[int, str]] = {}  # channel -> basic.get tag -> message-id
        self.skip: dict[int, set[str]] = {}

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "basic.recover" and decode(frame).requeue:
            held = self.outstanding.get(frame.channel, set())
            mids = {mid for tag, mid in self.got.pop(frame.channel, {}).items() if tag in held}
            if mids:
                self.skip.setdefault(frame.channel, set()).update(mids)
        return None

    def delivery(self, channel: int, msg: Message, queue: str | None, manual: bool) -> list[bytes]:
        mid = decode_header(msg).message_id
        if msg.method.name == "basic.get-ok":
            if manual and mid is not None:
                self.got.setdefault(channel, {})[msg.value.delivery_tag] = str(mid)
            return msg.frames
        if msg.value.redelivered and mid is not None and str(mid) in self.skip.get(channel, set()):
            self.skip[channel].discard(str(mid))
            return self.hidden(channel, msg, "kept from the client", f" (message {mid} was fetched by basic.get before basic.recover)")
        return msg.frames


@operator("recover-strands-tx-acked", P, "after basic.recover(requeue=true) on a channel whose open transaction acknowledged a delivery, sends the client's tx.rollback as tx.commit and answers rollback-ok: the acknowledged message never comes back")
class RecoverStrandsTxAcked(Tracker):
    """LavinMQ's basic.recover(requeue=true) skips the deliveries acknowledged in the open
    transaction and then clears them from the channel anyway: a rollback cannot bring them back and
    they are never requeued (cloudamqp/lavinmq#2206, defect 3). To the client the message is gone,
    as if the rollback had committed the acknowledgement, which is what the proxy makes happen."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.stranded: set[int] = set()
        self.renamed: dict[int, int] = {}

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if frame.name == "basic.recover" and decode(frame).requeue and self.tx_settled.get(ch):
            self.stranded.add(ch)
        elif frame.name == "tx.commit":
            self.stranded.discard(ch)
        elif frame.name == "tx.rollback" and ch in self.stranded:
            self.stranded.discard(ch)
            self.renamed[ch] = self.renamed.get(ch, 0) + 1
            self.applied(f"tx.rollback on channel {ch} after basic.recover with acks in the transaction sent as tx.commit")
            return [encode(commands.Tx.Commit(), ch)]
        return None

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "tx.commit-ok" and self.renamed.get(frame.channel):
            self.renamed[frame.channel] -= 1
            return [encode(commands.Tx.RollbackOk(), frame.channel)]
        return None


# -- concurrent commits (QPID-8309) ---------------------------------------------------------------

@operator("concurrent-commit-fails", P, "answers a tx.commit sent while another connection's tx.commit awaits its commit-ok with connection.close 541 (the later of two concurrent commits fails)")
class ConcurrentCommitFails(Tracker):
    """Qpid Broker-J before 7.1.3 failed one of two transactions committed at the same time with
    "Cannot commit transaction with state 'DISCHARGING'" (QPID-8309); the client's commit gets no
    commit-ok, its connection is closed with an internal error. Only commits in flight together
    race: a commit is in flight from the moment it reaches the proxy until its commit-ok reaches the
    client (or a channel or connection close), or its connection goes. So that clients released
    together race even when their commits reach the proxy one after another, a commit-ok is held
    back (at most HOLD_S) while another connection has a transaction open that could commit, and
    released as soon as a second commit has been failed."""

    #: A commit unanswered by the broker for this long is not racing anything.
    STALE_S = 1.0
    #: The longest a commit-ok waits for a concurrent commit (a lone commit is answered late, never lost).
    HOLD_S = 2.0

    def in_flight(self) -> dict[tuple[int, int], list[Any]]:
        """(operator id, channel) -> [sent at, operator, held commit-ok frame or None]."""
        return shared(self).setdefault("commits", {})

    def live(self) -> dict[int, ConcurrentCommitFails]:
        return shared(self).setdefault("connections", {})

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name == "tx.select":
            self.live()[id(self)] = self
        if frame.name != "tx.commit" or frame.channel not in self.transacted:
            return None
        commits, now = self.in_flight(), time.monotonic()
        racing = [k for k, (t, _, held) in commits.items() if k[0] != id(self) and (held is not None or now - t < self.STALE_S)]
        if not racing:
            commits[(id(self), frame.channel)] = [now, self, None]
            return None
        self.applied(f"tx.commit on channel {frame.channel} sent while {len(racing)} other commit(s) awaited commit-ok: answered with connection.close 541")
        out = self.close_connection(frame, 541, "INTERNAL_ERROR - Cannot commit transaction with state 'DISCHARGING'")
        for k in racing:
            self.release(k)
        return out

    def release(self, key: tuple[int, int]) -> None:
        """Send a held commit-ok on (if it is still held) and end that commit's flight."""
        entry = self.in_flight().get(key)
        if entry is not None and entry[2] is not None:
            del self.in_flight()[key]
            entry[1].io.to_client([entry[2]])

    def others_open(self) -> bool:
        return any(op is not self and op.transacted and not op.shutting for op in self.live().values())

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        key = (id(self), frame.channel)
        if frame.name == "tx.commit-ok" and key in self.in_flight() and self.others_open():
            self.in_flight()[key][2] = frame.raw
            self.io.later(self.HOLD_S, lambda: self.release(key))
            self.io.note(f"tx.commit-ok on channel {frame.channel} held (at most {self.HOLD_S:g}s) for a concurrent commit")
            return []
        if frame.name in ("tx.commit-ok", "channel.close"):
            self.in_flight().pop(key, None)
        elif frame.name == "connection.close":
            self.closing(S)
        return None

    def closing(self, sender: Sender) -> list[bytes]:
        commits = self.in_flight()
        for k in [k for k in commits if k[0] == id(self)]:
            del commits[k]
        self.live().pop(id(self), None)
        return []


# -- delivery limits (cloudamqp/lavinmq#976, rabbitmq/rabbitmq-server#2330) ----------------------

class LimitTracker(Tracker):
    """Also knows every queue declared with x-delivery-limit (on any connection) and how many times
    each of its messages (by message-id) has been delivered, over every connection."""

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is C and frame.name == "queue.declare":
            v = decode(frame)
            limit = (v.arguments or {}).get("x-delivery-limit")
            if isinstance(limit, int) and not v.passive:
                shared(self).setdefault("limits", {})[v.queue] = limit
        return super().rewrite(sender, frame)

    def counted(self, queue: str | None, msg: Message) -> tuple[int, int] | None:
        """(this delivery's number, the queue's limit) for a delivery from a delivery-limited queue."""
        limit = shared(self).get("limits", {}).get(queue or "")
        mid = decode_header(msg).message_id
        if limit is None or mid is None:
            return None
        counts: dict[tuple[str, str], int] = shared(self).setdefault("deliveries", {})
        key = (str(queue), str(mid))
        counts[key] = counts.get(key, 0) + 1
        return counts[key], limit


@operator("delivery-limit-early", P, "removes a message from a delivery-limited queue at its Nth delivery (N = x-delivery-limit): the client gets the delivery, the broker a basic.reject(requeue=false), and the client's own return of it is swallowed")
class DeliveryLimitEarly(LimitTracker):
    """LavinMQ before 2.4.0 checked the limit when about to deliver (delivery count >= limit), so
    limit N allowed N deliveries where the limit means N+1, and the message was dead-lettered at the
    next delivery attempt (cloudamqp/lavinmq#976). Here the Nth delivery is rejected without requeue
    as it is handed out: after it the client finds the queue without the message, however it
    returns it (nack, reject, or losing its connection)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.removed: set[tuple[int, int]] = set()

    def delivery(self, channel: int, msg: Message, queue: str | None, manual: bool) -> list[bytes]:
        n = self.counted(queue, msg) if manual else None
        if n is not None and n[0] == n[1]:
            tag = msg.value.delivery_tag
            self.removed.add((channel, tag))
            self.io.to_server([encode(commands.Basic.Reject(delivery_tag=tag, requeue=False), channel)])
            self.applied(f"delivery {n[0]} of {n[1]} allowed (delivery_tag {tag}, queue {queue!r}) rejected to the broker without requeue")
        return msg.frames

    def forget(self, ch: int) -> None:
        super().forget(ch)
        self.removed -= {k for k in self.removed if k[0] == ch}  # a new channel numbers its tags afresh

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in SETTLEMENTS:
            return None
        ch, v = frame.channel, decode(frame)
        if not getattr(v, "multiple", False):
            if (ch, v.delivery_tag) not in self.removed:
                return None
            self.removed.discard((ch, v.delivery_tag))
            self.applied(f"{frame.name} of delivery_tag {v.delivery_tag} swallowed: the message was already removed")
            return []
        # A multiple settlement covering a removed tag would name a tag the broker no longer knows
        # (406): it is split into single settlements of the others, as the broker would have applied it.
        covers = lambda t: not v.delivery_tag or t <= v.delivery_tag
        gone = sorted(t for c, t in self.removed if c == ch and covers(t))
        if not gone:
            return None
        settled_in_tx = self.tx_settled.get(ch, set())
        keep = sorted(t for t in self.outstanding.get(ch, set()) if covers(t) and t not in gone and t not in settled_in_tx)
        self.removed -= {(ch, t) for t in gone}
        fields = {} if frame.name == "basic.ack" else {"requeue": v.requeue}
        self.applied(f"{frame.name}(multiple=true) of delivery_tag {v.delivery_tag} on channel {ch}: removed tag(s) {gone} left out"
                     + (f", sent as single settlements of {keep}" if keep else ", nothing else to settle"))
        return [encode(_MULTIPLE[frame.name](delivery_tag=t, multiple=False, **fields), ch) for t in keep]


@operator("limit-return-crashes", P, "when a message fetched by basic.get from a delivery-limited queue is returned once more than the limit allows, closes the channel with 541 INTERNAL_ERROR instead of removing the message (the broker gets a clean channel.close and keeps it)")
class LimitReturnCrashes(LimitTracker):
    """RabbitMQ 3.8.0-3.8.3: a quorum queue crashed when the basic.get consumer of a message reached
    the delivery limit (rabbitmq/rabbitmq-server#2330); the client's channel fails and the message
    is still in the queue, never dropped or dead-lettered."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.over: set[tuple[int, int]] = set()

    def delivery(self, channel: int, msg: Message, queue: str | None, manual: bool) -> list[bytes]:
        n = self.counted(queue, msg) if manual and msg.method.name == "basic.get-ok" else None
        if n is not None and n[0] > n[1]:
            self.over.add((channel, msg.value.delivery_tag))
        return msg.frames

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in ("basic.nack", "basic.reject"):
            return None
        v = decode(frame)
        if (frame.channel, v.delivery_tag) not in self.over or not v.requeue:
            return None
        self.over.discard((frame.channel, v.delivery_tag))
        self.applied(f"{frame.name}(requeue=true) of delivery_tag {v.delivery_tag} over the delivery limit on channel {frame.channel}: channel closed with 541")
        return self.close_channel(frame, 541, "INTERNAL_ERROR")
