"""AMQP 0-9-1 section 4.7 and basic rule 08: one channel (an AMQP 1.0 session), one queue, one consumer:
publication order, whatever each message's persistence."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure, holds

N = 8


class TestOrderPreserved(Case):
    requirement = "PUBLISH-ORDER-PRESERVED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        publisher = ctx.admin
        published = []
        for i in range(1, N + 1):
            mid = f"m{i}"
            publisher.publish(q, mid.encode(), message_id=mid, persistent=i % 2 == 0)
            published.append({"id": mid, "persistent": i % 2 == 0})
        session = ctx.session("consumer")
        held = ctx.take(session.consume(q, prefetch=100), N)
        session.ack(held[-1].tag, multiple=True)
        session.sync()
        return {"published": published, "delivered": [delivery_obs(d) for d in held]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        sent = [p["id"] for p in obs["published"]]
        got = [d["id"] for d in obs["delivered"]]
        return first_failure(
            holds(got == sent, expected=f"delivered in publication order {sent} (even ids persistent, odd transient)",
                  observed=f"delivered in order {got}", key="reordered" if sorted(got) == sorted(sent) else None),
            # a first delivery marked as a redelivery by its protocol's rules (0-9-1 redelivered; 1.0 header fields)
            all_redelivered(obs["delivered"], flag=False, signal=signal_of(profile, queue_type)),
        )
