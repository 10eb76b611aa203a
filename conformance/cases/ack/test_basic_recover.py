"""AMQP 0-9-1 basic.recover: requeue=true returns the unacked deliveries to the queue, requeue=false
redelivers them to their original recipient; rule basic/recover/01, redelivered flag on all resent."""

from __future__ import annotations

from typing import Any

from conformance.api import AckMode
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import accepted, all_redelivered, ids_of, returned_exactly
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds


class TestRecoverRedelivers(Case):
    """The channel holds m1 fetched with basic.get and m2..m4 delivered to its consumer, m3 is
    acknowledged; basic.recover(requeue=true) must return m1, m2 and m4 (a basic.get delivery is an
    unacknowledged delivery of the channel too), each redelivered to the consumer."""

    requirement = "ACK-RECOVER-REDELIVERS"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 4)
        session = ctx.session("consumer")
        got = session.get(q, ack_mode=AckMode.MANUAL)
        consumer = session.consume(q, prefetch=10)
        held = ([got] if got is not None else []) + ctx.take(consumer, 3 if got is not None else 4)
        session.ack(held[2].tag)
        session.recover(requeue=True)
        again = ctx.take(consumer, len(held) - 1)
        # Anything recover wrongly resent (the acked message) arrives before this sentinel.
        extra = ctx.until_sentinel(consumer, q)
        return {
            "published": published,
            "held": [delivery_obs(d) for d in held],
            "acked": held[2].message_id,
            "returned": [delivery_obs(d) for d in again + extra],
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        unacked = [d["id"] for d in obs["held"] if d["id"] != obs["acked"]]
        return first_failure(
            returned_exactly(obs["returned"], unacked, what="after basic.recover(requeue=true), the unacked deliveries"),
            all_redelivered(obs["returned"], signal=signal_of(profile, queue_type)),
        )


class TestRecoverNoRequeue(Case):
    """Three deliveries held by consumer A, the second acknowledged; consumer B subscribes to the same
    queue on another connection, so a broker that requeued instead of redelivering to A could hand
    them to B. After basic.recover(requeue=false), A must get the two unacked ones back; then A is
    cancelled and a sentinel shows what B was given or what still waited in the queue."""

    requirement = "ACK-RECOVER-NO-REQUEUE"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        ctx.publish(q, 3)
        session = ctx.session("consumer")
        consumer = session.consume(q, prefetch=10)
        held = ctx.take(consumer, 3)
        other = ctx.session("other").consume(q, prefetch=10)
        session.ack(held[1].tag)
        obs: dict[str, Any] = {"held": [delivery_obs(d) for d in held], "acked": held[1].message_id}
        obs["answer"] = ctx.channel_error(lambda: session.recover(requeue=False))
        if obs["answer"]["closed"]:
            return obs
        again = ctx.take(consumer, 2, at_most=True)  # fewer: they went elsewhere or nowhere, judged below
        obs["again"] = [delivery_obs(d) for d in again]
        obs["open"] = ctx.channel_error(session.sync)
        consumer.cancel()
        obs["elsewhere"] = [delivery_obs(d) for d in ctx.until_sentinel(other, q)]
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = "basic.recover(requeue=false) with 2 deliveries unacked"
        unacked = [d["id"] for d in obs["held"] if d["id"] != obs["acked"]]
        if obs["answer"]["closed"]:
            return accepted(obs["answer"], what=what)
        elsewhere = ids_of(obs["elsewhere"])
        return first_failure(
            accepted(obs["open"], what=f"the consumer's channel after {what}"),
            returned_exactly(obs["again"], unacked, what=f"redelivered to the original consumer after {what}"),
            all_redelivered(obs["again"], signal=signal_of(profile, queue_type)),
            holds(not elsewhere, expected="no other consumer of the queue gets them, and none is left in the queue",
                  observed=f"given to the other consumer or left in the queue: {fmt(elsewhere)}" if elsewhere else "none elsewhere",
                  key="requeued" if elsewhere else None),
        )
