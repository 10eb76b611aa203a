"""AMQP 0-9-1 consumers: what a queue owes the consumer that remains when another goes away (single
active consumer, exclusive and auto-delete queues among the configurations), consumer priorities on
a single-active-consumer queue, and consumer tags the broker names."""

from __future__ import annotations

import time

from conformance.api import Consumer, Delivery
from conformance.catalogue.configurations import split
from conformance.catalogue.profiles import Profile
from conformance.errors import OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

SAC = "x-single-active-consumer"


def _configured(queue_type: str | None) -> tuple[bool, bool]:
    """(single active consumer, exclusive) for a cell's configuration."""
    _, config = split(queue_type)
    if config is None:
        return False, False
    return bool(config.arguments.get(SAC)), bool(config.declare.get("exclusive"))


class TestLossHandsOver(Case):
    """A holds three deliveries, B subscribes after them (so nothing is ready for B on any queue
    kind); A is lost. On an exclusive queue both consumers are channels of the owner's connection
    (no other connection may consume) and A's loss is its channel's close; elsewhere A's connection
    is reset. (No consumer count as a barrier: a quorum queue counts only the active one of single
    active consumers.)"""

    requirement = "ACK-LOSS-HANDS-OVER"
    configurations = ("single-active-consumer", "exclusive", "auto-delete", "queue-ttl")
    HELD = 3
    #: A reset connection's deliveries are returned as soon as the broker reads the reset.
    WINDOW_S = 2.0

    def scenario(self, ctx: CaseContext) -> Obs:
        sac, exclusive = _configured(ctx.queue_type)
        owner = ctx.connect("owner") if exclusive else None
        q = ctx.queue(on=owner.session() if owner is not None else None)
        published = ctx.publish(q, self.HELD)
        a_conn = owner if owner is not None else ctx.connect("consumer-a")
        a_session = a_conn.session()
        a = a_session.consume(q, prefetch=10)
        held = ctx.take(a, self.HELD)
        b_session = (owner if owner is not None else ctx.connect("consumer-b")).session()
        b = b_session.consume(q, prefetch=10)
        if sac:
            # The active consumer has room for both: on a single-active-consumer queue they are A's,
            # where a queue dealing round-robin would give B one (A's take then misses it).
            late = ctx.publish(q, 2, prefix="late")
            published += late
            held += ctx.take(a, len(late), expected=late)
        if owner is not None:
            a_session.close()
        else:
            a_conn.cut()
        # B is owed A's deliveries (whatever the queue's kind): taking them is the barrier that A's
        # loss was processed, the sentinel after them the proof that nothing more is on its way.
        ids = [d.message_id or "" for d in held]
        got = ctx.take(b, len(held), window=self.WINDOW_S, expected=ids)
        got += ctx.until_sentinel(b, q)
        for d in [*got, ctx.last_sentinel]:
            b_session.ack(d.tag)
        b_session.sync()
        return {
            "published": published,
            "held": [delivery_obs(d) for d in held],
            "taken_over": [delivery_obs(d) for d in got],
            "how": "channel.close" if owner is not None else "connection reset",
            "sac": sac,
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        held = [d["id"] for d in obs["held"]]
        return first_failure(
            returned_exactly(obs["taken_over"], held, what=f"to the remaining consumer after A's {obs['how']}, A's unacked deliveries"),
            all_redelivered(obs["taken_over"], signal=signal_of(profile, queue_type)),
        )


class TestSacPriorityNothingWithheld(Case):
    """Both consumers are channels of one connection, as a client running a low- and a high-priority
    worker would have them. The window is short and explicit: every message was published before
    either consumer subscribed, so each is owed at once."""

    requirement = "ACK-SAC-PRIORITY-NOTHING-WITHHELD"
    MESSAGES = 3
    WINDOW_S = 2.0

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue({SAC: True})
        published = ctx.publish(q, self.MESSAGES)
        conn = ctx.connect("consumers")
        low_session, high_session = conn.session(), conn.session()
        low = low_session.consume(q, prefetch=1, arguments={"x-priority": 0})
        first = ctx.take(low, 1)[0]
        low_session.nack(first.tag, requeue=True)
        again = ctx.take(low, 1)[0]  # held while the higher-priority consumer arrives
        high = high_session.consume(q, prefetch=10, arguments={"x-priority": 100})
        low_session.nack(again.tag, requeue=True)
        acked: list[Obs] = []
        end = time.monotonic() + self.WINDOW_S
        pending = set(published)
        while pending and time.monotonic() < end:
            for who, session, consumer in (("low", low_session, low), ("high", high_session, high)):
                d = _next_or_none(consumer, 0.05)
                if d is None:
                    continue
                session.ack(d.tag)
                pending.discard(d.message_id or "")
                acked.append({**delivery_obs(d), "by": who})
        low_session.sync()
        high_session.sync()
        conn.close()
        return {
            "published": published,
            "requeued": [delivery_obs(first), delivery_obs(again)],
            "acked": acked,
            "window_s": self.WINDOW_S,
            "left": [delivery_obs(d) for d in ctx.drain(q)],
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        acked = [d["id"] for d in obs["acked"]]
        missing = [m for m in obs["published"] if m not in acked]
        twice = sorted({m for m in acked if acked.count(m) > 1})
        return first_failure(
            holds(
                not missing,
                expected=f"every message delivered and acknowledged within {obs['window_s']:g}s after the x-priority 100 consumer subscribed",
                observed=f"never delivered again: {fmt(missing)} (acknowledged: {fmt(acked)})" if missing else f"acknowledged {fmt(acked)}",
                key="sac-priority-withheld" if missing else None,
            ),
            holds(not twice, expected="each message acknowledged once", observed=f"delivered and acknowledged twice: {fmt(twice)}" if twice else "once each"),
            returned_exactly(obs["left"], [], what="after both consumers closed, every message having been acknowledged"),
        )


def _next_or_none(consumer: Consumer, timeout: float) -> Delivery | None:
    try:
        return consumer.next(timeout)
    except OperationTimeout:
        return None


class TestConsumerTagsBrokerNamed(Case):
    requirement = "ACK-CONSUMER-TAGS-BROKER-NAMED"
    queue_types = (None,)
    CONSUMERS = 3

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        session = ctx.session("consumers")
        consumers = [session.consume(q, prefetch=10, tag="") for _ in range(self.CONSUMERS)]
        tags = [str(c.tag) for c in consumers]
        if len(set(tags)) < len(tags) or not all(tags):
            # Decided: a cancel by a repeated tag cannot name one consumer.
            return {"tags": tags, "published": [], "last_got": []}
        for c in consumers[:-1]:
            c.cancel()
        ctx.await_consumers(q, 1)
        published = ctx.publish(q, 2)
        last = consumers[-1]
        got = ctx.until_sentinel(last, q)
        for d in [*got, ctx.last_sentinel]:
            session.ack(d.tag)
        session.sync()
        return {
            "tags": tags,
            "published": published,
            "last_got": [{**delivery_obs(d), "consumer_tag": d.consumer_tag} for d in got],
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        tags = obs["tags"]
        repeated = sorted({t for t in tags if tags.count(t) > 1})
        return first_failure(
            holds(
                all(tags) and not repeated,
                expected=f"{len(tags)} distinct, non-empty consumer tags from basic.consume-ok for basic.consume with an empty tag",
                observed=f"consume-ok tags {fmt(tags)}" + (f": {fmt(repeated)} repeated" if repeated else ""),
                key="consumer-tag-repeated" if repeated or not all(tags) else None,
            ),
            returned_exactly(obs["last_got"], obs["published"], what=f"to the consumer {tags[-1]!r} left after cancelling the others"),
            holds(
                all(d.get("consumer_tag") == tags[-1] for d in obs["last_got"]),
                expected=f"every delivery to the remaining consumer carries its tag {tags[-1]!r}",
                observed=f"consumer tags on its deliveries: {fmt(sorted({str(d.get('consumer_tag')) for d in obs['last_got']}))}",
            ),
        )
