"""Subscriptions: 0-9-1 basic.consume's exclusive flag against existing consumers; 16 consumers per queue (0-9-1 basic.consume, 1.0 receiving links)."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import channel_closed_with
from conformance.kit.verdicts import Verdict, first_failure, holds

ACCESS_REFUSED = 403
CONSUMERS = 16


class TestConsumeExclusiveRefused(Case):
    requirement = "ACK-CONSUME-EXCLUSIVE-REFUSED"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        owner = ctx.session("consumer")
        consumer = owner.consume(q, prefetch=10)
        ctx.await_consumers(q, 1)
        rival = ctx.session("exclusive-consumer")
        answer = ctx.channel_error(lambda: (rival.consume(q, exclusive=True), rival.sync()))
        published = ctx.publish(q, 1)
        got = ctx.take(consumer, 1)[0]
        owner.ack(got.tag)
        owner.sync()
        return {"answer": answer, "published": published, "owner_got": got.message_id}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            channel_closed_with(obs["answer"], ACCESS_REFUSED, what="exclusive basic.consume on a queue with a consumer on another connection"),
            holds(obs["owner_got"] == obs["published"][0],
                  expected=f"the existing consumer still gets {obs['published'][0]}",
                  observed=f"the existing consumer got {obs['owner_got']}"),
        )


class TestSixteenConsumers(Case):
    requirement = "ACK-SIXTEEN-CONSUMERS"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        session = ctx.session("consumers")
        answers = []
        for _ in range(CONSUMERS):
            answer = ctx.channel_error(lambda: session.consume(q, prefetch=10))
            answers.append(answer)
            if answer["closed"]:
                break
        stats = ctx.await_consumers(q, CONSUMERS) if all(not a["closed"] for a in answers) else ctx.stats(q)
        return {"asked": "attach of a receiving link" if ctx.adapter.protocol == "amqp-1.0" else "basic.consume",
                "accepted": sum(not a["closed"] for a in answers), "refusal": next((a for a in answers if a["closed"]), None),
                "reported": stats.consumers if stats is not None else None}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        refusal = obs["refusal"]
        observed = f"{obs['accepted']} {obs.get('asked', 'basic.consume')} accepted" + (f", then closed with {refusal['code']} {refusal.get('text', '')}".rstrip() if refusal else "")
        return holds(obs["accepted"] == CONSUMERS and obs["reported"] == CONSUMERS,
                     expected=f"{CONSUMERS} consumers on one queue: all accepted, the queue reports {CONSUMERS}",
                     observed=f"{observed}; the queue reports {obs['reported']}")
