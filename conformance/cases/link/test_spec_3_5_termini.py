"""AMQP 1.0 messaging 3.5 (source and target), h2spec style: each case names the rule it checks.

3.5.3 outcomes: the outcomes the broker's source offers are valid outcome descriptors, and the
outcome it must support when it names none (accepted) settles a delivery for good.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds

#: The descriptors of the outcomes messaging 3.4 defines (3.4.2-3.4.5).
VALID = ("amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list")


class TestSourceOutcomesValid(Case):
    requirement = "LINK-SOURCE-OUTCOMES-VALID"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        session = ctx.session("receiver")
        receiver = session.receiver(q, credit=1)
        got = receiver.next(WAIT_S)
        session.ack(got.tag)
        session.sync()
        detach = receiver.detach(WAIT_S)
        return {"published": published, "outcomes": receiver.granted.get("outcomes"), "got": [delivery_obs(got)], "detach": detach,
                "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        offered = obs["outcomes"] or []
        bad = [o for o in offered if o not in VALID]
        return first_failure(
            holds(not bad, expected=f"the source's outcomes are outcome descriptors ({', '.join(VALID)})",
                  observed=f"outcomes {offered or 'not set'}", key=None if not bad else "invalid-outcome"),
            returned_exactly(obs["got"], obs["published"], what="on the link"),
            returned_exactly(obs["after"], [], what=f"after accepted (the source {'offering ' + ', '.join(offered) if offered else 'naming no outcomes'})"),
        )
