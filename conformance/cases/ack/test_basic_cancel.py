"""AMQP 0-9-1 basic.cancel: "This does not affect already delivered messages"."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import accepted, all_redelivered, returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds


class TestCancelKeepsUnacked(Case):
    requirement = "ACK-CANCEL-KEEPS-UNACKED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 2)
        session = ctx.session("consumer")
        consumer = session.consume(q, prefetch=10)
        held = ctx.take(consumer, 2)
        # basic.cancel-ok is the barrier: the queue has dropped the consumer. (Not the consumer count:
        # a quorum queue keeps counting a cancelled consumer while it still holds deliveries.)
        consumer.cancel()
        # A sentinel-proven drain by another consumer then sees anything the cancel requeued.
        after_cancel = [delivery_obs(d) for d in ctx.drain(q)]
        ack_answer = ctx.channel_error(lambda: (session.ack(held[0].tag), session.sync()))
        session.close()
        ctx.wait_for(lambda: ctx.stats(q).ready >= 1, "the channel close to requeue the unacked delivery")
        after_close = [delivery_obs(d) for d in ctx.drain(q)]
        return {
            "published": published,
            "held": [delivery_obs(d) for d in held],
            "acked_after_cancel": held[0].message_id,
            "requeued_by_cancel": after_cancel,
            "ack_after_cancel": ack_answer,
            "returned_after_close": after_close,
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        still_held = [d["id"] for d in obs["held"] if d["id"] != obs["acked_after_cancel"]]
        requeued = [d["id"] for d in obs["requeued_by_cancel"]]
        ack = obs["ack_after_cancel"]
        return first_failure(
            holds(
                not requeued,
                expected="basic.cancel requeues nothing: a drain after the cancel receives no message",
                observed=f"after basic.cancel the queue delivered {fmt(requeued)}" if requeued else "nothing requeued",
                key="cancel-requeued" if requeued else None,
            ),
            accepted(ack, what="basic.ack of a delivery held across basic.cancel"),
            returned_exactly(obs["returned_after_close"], still_held, what="after channel.close, the delivery still unacked"),
            all_redelivered(obs["returned_after_close"]),
        )
