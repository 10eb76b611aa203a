"""AMQP 0-9-1 basic.cancel: "This does not affect already delivered messages"."""

from __future__ import annotations

from conformance.api import Consumer, Delivery
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import accepted, all_redelivered, returned_exactly
from conformance.kit.redelivery import signal_of
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
        gone = {d["id"] for d in after_cancel}
        if any(d.message_id not in gone for d in held[1:]):  # a broker that requeued at the cancel has nothing left to return
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
            all_redelivered(obs["returned_after_close"], signal=signal_of(profile, queue_type)),
        )


class TestReconsumeSameTagInFlight(Case):
    """Cancel with five deliveries unacknowledged and five messages ready, re-subscribe on the same
    channel under the same consumer tag, ack the old deliveries by their tags, take the rest. The
    tag is free again once basic.cancel-ok arrived, so the re-subscription is a new consumer: the
    old deliveries still belong to the channel, and the queue owes the new one only the ready five."""

    requirement = "ACK-RECONSUME-SAME-TAG-IN-FLIGHT"
    configurations = ("priority", "delivery-limit")
    HELD = 5

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 2 * self.HELD)
        session = ctx.session("consumer")
        tag = f"reconsume-{q}"
        # A prefetch of HELD leaves the other messages ready in the queue, not half-delivered to a
        # client buffer the cancel would have to settle.
        consumer = session.consume(q, prefetch=self.HELD, tag=tag)
        held = ctx.take(consumer, self.HELD)
        consumer.cancel()  # cancel-ok: the tag names no consumer any more
        again: list[Consumer] = []
        rest: list[Delivery] = []

        def take_rest() -> None:
            # Everything the queue holds for the new consumer arrives before the sentinel.
            rest.extend(ctx.until_sentinel(again[0], q, 5.0))
            for d in [*rest, ctx.last_sentinel]:
                session.ack(d.tag)
            session.sync()

        # Each step on the channel, as the broker answered it; a step after a closed channel is None.
        steps = {
            "reconsume_answer": lambda: again.append(session.consume(q, prefetch=2 * self.HELD, tag=tag)),
            "ack_after_reconsume": lambda: ([session.ack(d.tag) for d in held], session.sync()),
            "reconsume_channel": take_rest,
        }
        answers: dict[str, Obs | None] = {}
        for name, step in steps.items():
            closed = any(a is None or a["closed"] for a in answers.values())
            answers[name] = None if closed else ctx.channel_error(step)
        session.close()
        return {
            "published": published,
            "consumer_tag": tag,
            "held": [delivery_obs(d) for d in held],
            **answers,
            "reconsumed": [delivery_obs(d) for d in rest],
            "returned_after_close": [delivery_obs(d) for d in ctx.drain(q)],
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        held_ids = [d["id"] for d in obs["held"]]
        ready_ids = [m for m in obs["published"] if m not in held_ids]
        old_tags = {d["tag"] for d in obs["held"]}
        new_tags = [d["tag"] for d in obs["reconsumed"]]
        reused = sorted({t for t in new_tags if t in old_tags or new_tags.count(t) > 1})
        steps = {
            "reconsume_answer": "basic.consume under the cancelled consumer's tag",
            "ack_after_reconsume": "basic.ack by tag of the deliveries held across basic.cancel and the re-consume",
            "reconsume_channel": "the re-subscribed consumer taking and acking the ready messages",
        }
        # A step is None when an earlier one had closed the channel: that one is judged.
        answered = [accepted(obs[k], what=what) for k, what in steps.items() if obs.get(k) is not None]
        return first_failure(
            *answered,
            returned_exactly(obs["reconsumed"], ready_ids, what="to the consumer re-subscribed under the same tag"),
            holds(
                not reused,
                expected="the re-subscribed consumer's deliveries carry delivery tags never used on the channel",
                observed=f"delivery tags reused: {fmt(reused)}" if reused else "fresh delivery tags",
                key="delivery-tag-reused" if reused else None,
            ),
            returned_exactly(obs["returned_after_close"], [], what="after channel.close, every message having been acked"),
        )
