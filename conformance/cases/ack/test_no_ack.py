"""AMQP 0-9-1 basic.consume no-ack (the seeds' unreliable link / NO_ACKNOWLEDGE): at-most-once."""

from __future__ import annotations

from conformance.api import AckMode
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure


class TestAutoAckRemovedOnDelivery(Case):
    requirement = "ACK-AUTO-REMOVED-ON-DELIVERY"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        conn = ctx.connect("consumer")
        got = ctx.take(conn.session().consume(q, ack_mode=AckMode.AUTO), 3)
        conn.cut()
        ctx.await_consumers(q, 0)
        return {"published": published, "received": [delivery_obs(d) for d in got], "returned": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["received"], obs["published"], what="the no-ack consumer's deliveries"),
            all_redelivered(obs["received"], flag=False, signal=signal_of(profile, queue_type)),
            returned_exactly(obs["returned"], [], what="after the no-ack consumer's connection was cut"),
        )
