"""AMQP 0-9-1 operators made for soaks (``conformance soak --mutation``): a broker wrong at a rate,
or across a failover, which no single conformance case sees but a soak's checkers must.

They register with ``scope="soak"``: the self-test never runs them (no requirement of the
catalogue is theirs to break; conformance.soak.wire_mutations says which checker must catch each).
Like the self-test's operators they keep the stream valid for the client: confirm sequence numbers
and delivery tags are renumbered so the client never settles a tag the broker did not issue and
never waits for a confirm that does not come. State shared by a proxy's connections (a rate
counted over all of them, what a lost connection left behind) lives in ``Mutation.state``.
"""

from __future__ import annotations

import random
from typing import Any

from pamqp import commands

from adapters.amqp091.mutations import SETTLEMENTS, Assembler, DeliveryOperator, Message, P, decode, encode
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

C, S = Sender.CLIENT, Sender.SERVER


def rate_and_seed(param: str | None, default_rate: int = 1000) -> tuple[int, int]:
    """``N`` or ``N/SEED`` (one in N, the positions seeded by SEED; seed 0 without one)."""
    rate, _, seed = (param or "").partition("/")
    try:
        n = max(1, int(rate or default_rate))
    except ValueError:
        n = default_rate
    try:
        s = int(seed or 0)
    except ValueError:
        s = 0
    return n, s


def lost_position(rate: int, seed: int, block: int) -> int:
    """Which publish (1-based, counted over every connection) of block ``block`` (0-based: publishes
    ``block*rate+1 .. (block+1)*rate``) is lost: one seeded position per block of ``rate``."""
    return block * rate + random.Random(f"{seed}:{block}").randrange(rate) + 1


@operator("confirmed-publish-lost-1-in", P,
          "loses one in N (default 1,000) publishes on channels in confirm mode, counted over every connection through the proxy, "
          "at seeded positions (param N/SEED): the publish is discarded and confirmed to the client; the broker's later confirms "
          "on that channel are renumbered", default_param="1000", scope="soak")
class ConfirmedPublishLostRate(Mutator):
    """A broker that confirms a publish and never enqueues it, now and then.

    Why on the publishing side, not by swallowing a delivery toward a consumer: a swallowed delivery
    (acked upstream on the client's behalf) would hit whatever message comes next, often a
    redelivery of one the consumer already saw (nothing lost) or an unconfirmed plain publish (a
    loss the broker may make), and it puts a forged ack among the client's own settlements on the
    channel. Dropping the publish and forging its confirm loses exactly what the broker took
    responsibility for. The cost is renumbering: the broker numbers the confirms of a channel by
    the publishes it got, one fewer after each loss, so every later broker ack/nack tag on the
    channel is raised by the losses at or below it (a multiple=true ack then also covers the forged
    one, which a client takes as already settled). The forged confirm goes out at once; the broker
    may confirm earlier publishes after it (AMQP 0-9-1 confirms are not ordered).
    """

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.rate, self.seed = rate_and_seed(self.param)
        self.confirming: set[int] = set()
        self.seq: dict[int, int] = {}       # channel -> publishes so far on it (the client's confirm sequence)
        self.lost: dict[int, list[int]] = {}  # channel -> client sequence numbers discarded
        self.assembler = Assembler(("basic.publish",))

    def _next_is_lost(self) -> tuple[bool, int]:
        st = self.mutation.state
        st["n"] = n = st.get("n", 0) + 1
        block = (n - 1) // self.rate
        if st.get("block") != block:
            st["block"], st["target"] = block, lost_position(self.rate, self.seed, block)
        return n == st["target"], n

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if sender is S:
            return self.confirm(frame)
        if frame.name == "channel.open":  # a channel number used again starts a new sequence
            self.confirming.discard(ch)
            self.seq.pop(ch, None)
            self.lost.pop(ch, None)
            return None
        if frame.name == "confirm.select":
            self.confirming.add(ch)
            return None
        if ch not in self.confirming:
            return None
        part, msg = self.assembler.feed(frame)
        if not part:
            return None
        if msg is None:
            return []  # held until the publish is complete, then forwarded or discarded whole
        self.seq[ch] = seq = self.seq.get(ch, 0) + 1
        lost, n = self._next_is_lost()
        if not lost:
            return msg.frames
        self.lost.setdefault(ch, []).append(seq)
        self.io.to_client([encode(commands.Basic.Ack(delivery_tag=seq, multiple=False), ch)])
        self.applied(f"confirm-mode publish #{n} through the proxy (#{seq} on channel {ch}) discarded and confirmed to the client")
        return []

    def confirm(self, frame: Frame) -> list[bytes] | None:
        if frame.name not in ("basic.ack", "basic.nack") or not self.lost.get(frame.channel):
            return None
        v = decode(frame)
        shift = 0
        for seq in sorted(self.lost[frame.channel]):  # broker seq b is client seq b + (discarded at or before it)
            if seq <= v.delivery_tag + shift:
                shift += 1
        if not shift:
            return None
        v.delivery_tag += shift
        return [encode(v, frame.channel)]


class _Channel:
    """One channel's deliveries as :class:`AckedRedeliveredAfterFailover` follows them."""

    KEEP = 4  # answered acks kept per channel (one is replayed; a few spare)

    def __init__(self) -> None:
        self.unsettled: dict[int, Message] = {}  # broker tag -> delivery not yet settled
        self.sent: list[Message] = []            # acked, nothing sent after the ack yet
        self.asked: list[Message] = []           # acked, then a request the broker has not answered yet
        self.answered: list[Message] = []        # acked, and the broker answered a request sent after the ack
        self.injected: list[int] = []            # client tags of copies the proxy delivered (the broker never issued them)

    def to_client_tag(self, tag: int) -> int:
        return tag + len(self.injected)

    def to_broker_tag(self, tag: int) -> int:
        return tag - sum(1 for t in self.injected if t < tag)


@operator("acked-redelivered-after-failover", P,
          "after a connection is lost (no connection.close from its client: a cut, a broker restart), delivers again, to the next "
          "consumer a later connection serves, one message that connection's client had acked and seen the broker answer after "
          "(redelivered=true, under the next delivery tag of the channel; later tags renumbered)", scope="soak")
class AckedRedeliveredAfterFailover(DeliveryOperator):
    """A broker that forgets acks across a failover: what a consumer acked before its connection
    was lost comes back to the consumer after it, as a redelivery.

    Only an ack the broker surely had is replayed, judged on the wire as the soak's queue checker
    judges it in the history: after the basic.ack the client sent another request on the channel
    (a basic.cancel, the barrier's exchange.declare) and the broker answered it, so the ack came
    first. The copy takes the channel's next delivery tag, and every later broker tag on the
    channel goes to the client one higher (and comes back one lower), so tags stay contiguous; the
    client's settlement of a copy is not forwarded (the broker never issued its tag).
    """

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.channels: dict[int, _Channel] = {}
        self.orderly = False  # the client sent connection.close: its end is no failover
        self.conns: list[Any] = self.mutation.state.setdefault("connections", [])
        self.conns.append(self)
        self.mutation.state.setdefault("replays", [])

    def chan(self, ch: int) -> _Channel:
        c = self.channels.get(ch)
        if c is None:
            c = self.channels[ch] = _Channel()
        return c

    # -- what a lost connection leaves -------------------------------------------------------------

    def replay_candidate(self) -> Message | None:
        """The earliest answered ack of the connection, when it acked another one after it (so the
        history's ack is followed by a later ok ack of the same consumer)."""
        for c in self.channels.values():
            if len(c.answered) + len(c.asked) + len(c.sent) >= 2 and c.answered:
                return c.answered[0]
        return None

    def _harvest(self) -> None:
        st = self.mutation.state
        for other in list(self.conns):
            if other is self or not getattr(other.io, "closed", False):
                continue
            self.conns.remove(other)
            if other.orderly:
                continue
            msg = other.replay_candidate()
            if msg is not None:
                st["replays"].append((other.io.conn, msg))

    # -- the stream ----------------------------------------------------------------------------------

    def client_frame(self, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if frame.name == "connection.close":
            self.orderly = True
            return None
        if frame.name == "channel.open":
            self.channels.pop(ch, None)
            return None
        c = self.channels.get(ch)
        if c is None or frame.name in ("content-header", "content-body", "heartbeat", "basic.publish"):
            return None
        if frame.name not in SETTLEMENTS:  # a request: the broker's answer to it proves it had what came before
            c.asked += c.sent
            c.sent = []
            return None
        v = decode(frame)
        tag, multiple = v.delivery_tag, bool(getattr(v, "multiple", False))
        copies = set(c.injected)
        if tag in copies and not multiple:
            self.applied(f"{frame.name} of copy tag {tag} on channel {ch} not forwarded (the broker never issued it)")
            return []
        broker_tag = c.to_broker_tag(tag)
        if multiple and tag and broker_tag <= 0:
            self.applied(f"{frame.name} multiple up to copy tag {tag} on channel {ch} not forwarded (no broker tag below it)")
            return []
        if multiple:  # up to the tag; tag 0: every outstanding one
            settled = [t for t in c.unsettled if not tag or t <= broker_tag]
        else:
            settled = [broker_tag] if broker_tag in c.unsettled else []
        for t in settled:
            msg = c.unsettled.pop(t)
            if frame.name == "basic.ack" and len(c.answered) + len(c.asked) + len(c.sent) < c.KEEP:
                c.sent.append(msg)
        if broker_tag == tag:
            return None
        v.delivery_tag = broker_tag
        return [encode(v, ch)]

    def other_server_frame(self, frame: Frame) -> list[bytes] | None:
        c = self.channels.get(frame.channel)
        if c is not None and frame.name not in ("content-header", "content-body", "heartbeat", "basic.ack", "basic.nack", "basic.return"):
            c.answered += c.asked  # the broker answered: what was acked before the request, it had
            c.asked = []
        return None

    def message(self, channel: int, msg: Message) -> list[bytes]:
        c = self.chan(channel)
        if self.manual(channel, msg):
            c.unsettled[msg.value.delivery_tag] = msg
        out = msg.frames
        if c.injected:
            v = decode(msg.method)
            v.delivery_tag = c.to_client_tag(v.delivery_tag)
            out = [encode(v, channel), *msg.frames[1:]]
        if msg.method.name != "basic.deliver" or not self.manual(channel, msg):
            return out
        self._harvest()
        replays = self.mutation.state["replays"]
        if not replays:
            return out
        lost_conn, old = replays.pop(0)
        copy = decode(old.method)
        copy.delivery_tag = c.to_client_tag(msg.value.delivery_tag) + 1
        copy.consumer_tag = msg.value.consumer_tag
        copy.redelivered = True
        c.injected.append(copy.delivery_tag)
        self.applied(f"delivery_tag {old.value.delivery_tag} acked on lost conn#{lost_conn} delivered again on channel {channel} "
                     f"as delivery_tag {copy.delivery_tag} (redelivered=true)")
        return [*out, encode(copy, channel), *old.frames[1:]]

