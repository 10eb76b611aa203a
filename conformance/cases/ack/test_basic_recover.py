"""AMQP 0-9-1 basic.recover (requeue=true): rule basic/recover/01, redelivered flag on all resent."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.verdicts import Verdict, first_failure


class TestRecoverRedelivers(Case):
    requirement = "ACK-RECOVER-REDELIVERS"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        session = ctx.session("consumer")
        consumer = session.consume(q, prefetch=10)
        held = ctx.take(consumer, 3)
        session.ack(held[1].tag)
        session.recover(requeue=True)
        again = ctx.take(consumer, 2)
        # Anything recover wrongly resent (the acked message) arrives before this sentinel.
        extra = ctx.until_sentinel(consumer, q)
        return {
            "published": published,
            "held": [delivery_obs(d) for d in held],
            "acked": held[1].message_id,
            "returned": [delivery_obs(d) for d in again + extra],
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        unacked = [d["id"] for d in obs["held"] if d["id"] != obs["acked"]]
        return first_failure(
            returned_exactly(obs["returned"], unacked, what="after basic.recover(requeue=true), the unacked deliveries"),
            all_redelivered(obs["returned"]),
        )
