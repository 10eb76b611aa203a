"""AMQP 0-9-1 basic.deliver 'redelivered': first deliveries, and what a lost consumer hands back.

Each scenario ends with a barrier (the queue reports the consumer gone) and a sentinel-proven drain,
so "came back" and "did not come back" are both decided, never sampled.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.redelivery import describe, expectation, is_amqp10, signal_of, wrong_on_first
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds


class TestFirstDeliveryNotRedelivered(Case):
    requirement = "ACK-FIRST-NOT-REDELIVERED"
    # Not single-active-consumer: its basic.get is refused on a RabbitMQ quorum queue by design
    # (rabbitmq-server#2167), which is no first-delivery flag.
    configurations = ("priority", "length-limit-reject", "length-limit-drop-head", "message-ttl", "delivery-limit", "queue-ttl")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 4)
        by_get = ctx.session("getter").get(q)
        consumer = ctx.session("consumer").consume(q, prefetch=10)
        got = [delivery_obs(d) for d in ctx.take(consumer, 3)]
        return {"published": published, "consumed": got, "fetched": [delivery_obs(by_get)] if by_get else []}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        firsts = obs["consumed"] + obs["fetched"]
        signal = signal_of(profile, queue_type)
        wrong = [w for w in (wrong_on_first(d, signal) for d in firsts) if w is not None]
        amqp10 = any(is_amqp10(d) for d in firsts)
        return first_failure(
            holds(len(obs["fetched"]) == 1, expected="basic.get returns the freshly published message", observed=f"basic.get returned {len(obs['fetched'])} message(s)"),
            holds(
                not wrong,
                expected="redelivered=false on every first delivery (basic.deliver and basic.get-ok)"
                + (f": {expectation(True, signal, True)}" if amqp10 else ""),
                observed=f"marked as delivered before on first delivery: {describe(wrong)}" if wrong else "not marked on any",
                key="redelivered=true-on-first" if wrong else None,
                spec=all(w.spec for w in wrong),
            ),
        )


def _returns_after_loss(ctx: CaseContext, how: str) -> Obs:
    q = ctx.queue()
    published = ctx.publish(q, 3)
    conn = ctx.connect("consumer")
    session = conn.session()
    held = [delivery_obs(d) for d in ctx.take(session.consume(q, prefetch=10), 3)]
    if how == "cut":
        conn.cut()
    else:
        session.close()
    ctx.await_consumers(q, 0)
    returned = [delivery_obs(d) for d in ctx.drain(q)]
    return {"published": published, "held": held, "returned": returned, "how": how}


def _judge_all_return(obs: Obs, what: str, signal: str) -> Verdict:
    return first_failure(
        returned_exactly(obs["returned"], [d["id"] for d in obs["held"]], what=what),
        all_redelivered(obs["returned"], signal=signal),
    )


class TestRedeliverOnConnectionLoss(Case):
    requirement = "ACK-REDELIVER-ON-CONNECTION-LOSS"
    configurations = ("priority", "length-limit-reject", "length-limit-drop-head", "message-ttl", "delivery-limit",
                      "single-active-consumer", "queue-ttl")

    def scenario(self, ctx: CaseContext) -> Obs:
        return _returns_after_loss(ctx, "cut")

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return _judge_all_return(obs, "after TCP reset of the consumer's connection, its 3 unacked deliveries", signal_of(profile, queue_type))


class TestRedeliverOnChannelClose(Case):
    requirement = "ACK-REDELIVER-ON-CHANNEL-CLOSE"

    def scenario(self, ctx: CaseContext) -> Obs:
        return _returns_after_loss(ctx, "channel.close")

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return _judge_all_return(obs, "after channel.close with 3 unacked deliveries", signal_of(profile, queue_type))


class TestAckedNeverRedelivered(Case):
    requirement = "ACK-ACKED-NEVER-REDELIVERED"
    configurations = ("priority", "message-ttl", "single-active-consumer", "queue-ttl")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 4)
        conn = ctx.connect("consumer")
        session = conn.session()
        held = ctx.take(session.consume(q, prefetch=10), 4)
        acked = [held[1], held[3]]
        for d in acked:
            session.ack(d.tag)
        session.sync()
        conn.cut()
        ctx.await_consumers(q, 0)
        return {
            "published": published,
            "held": [delivery_obs(d) for d in held],
            "acked": [d.message_id for d in acked],
            "returned": [delivery_obs(d) for d in ctx.drain(q)],
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        unacked = [d["id"] for d in obs["held"] if d["id"] not in obs["acked"]]
        back = [d["id"] for d in obs["returned"]]
        resurrected = [m for m in obs["acked"] if m in back]
        return first_failure(
            holds(
                not resurrected,
                expected=f"acked {fmt(obs['acked'])} never delivered again",
                observed=f"acked {fmt(resurrected)} delivered again after the cut" if resurrected else f"came back {fmt(back)}",
                key="acked-redelivered" if resurrected else None,
            ),
            returned_exactly(obs["returned"], unacked, what="after the cut, the unacked deliveries"),
        )
