"""The JMS seeds' CLIENT (cumulative) and INDIVIDUAL acknowledge modes, through the neutral API.

Five deliveries, acknowledge the third, then lose the connection: what comes back is the broker's
view of which deliveries that acknowledgement covered.
"""

from __future__ import annotations

from conformance.api import AckScope
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.verdicts import Verdict, first_failure


def acknowledge_third(ctx: CaseContext, scope: AckScope) -> Obs:
    q = ctx.queue()
    published = ctx.publish(q, 5)
    conn = ctx.connect("consumer")
    session = conn.session()
    held = ctx.take(session.consume(q, prefetch=10), 5)
    session.acknowledge(held[2], scope)
    session.sync()
    conn.cut()
    ctx.await_consumers(q, 0)
    return {"published": published, "held": [delivery_obs(d) for d in held], "acknowledged": held[2].message_id,
            "scope": scope.value, "returned": [delivery_obs(d) for d in ctx.drain(q)]}


class TestClientAcknowledgeCumulative(Case):
    requirement = "ACK-CLIENT-CUMULATIVE"

    def scenario(self, ctx: CaseContext) -> Obs:
        return acknowledge_third(ctx, AckScope.CUMULATIVE)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        later = [d["id"] for d in obs["held"][3:]]
        return first_failure(
            returned_exactly(obs["returned"], later, what="after CLIENT acknowledge of the 3rd of 5 and a cut"),
            all_redelivered(obs["returned"]),
        )


class TestClientAcknowledgeIndividual(Case):
    requirement = "ACK-CLIENT-INDIVIDUAL"

    def scenario(self, ctx: CaseContext) -> Obs:
        return acknowledge_third(ctx, AckScope.INDIVIDUAL)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        others = [d["id"] for d in obs["held"] if d["id"] != obs["acknowledged"]]
        return first_failure(
            returned_exactly(obs["returned"], others, what="after INDIVIDUAL acknowledge of the 3rd of 5 and a cut"),
            all_redelivered(obs["returned"]),
        )
