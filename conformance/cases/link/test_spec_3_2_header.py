"""AMQP 1.0 messaging 3.2.1 (header), h2spec style: each case names the rule it checks.

ttl: a message that reached the broker with a ttl leaves it with the reduced ttl (what is left of
its life), never a longer one and never none, so that a message looping between nodes dies.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds


class TestTtlReduced(Case):
    requirement = "LINK-HEADER-TTL-REDUCED"
    TTL_MS = 600_000  # far longer than the case: the message cannot expire before it is read

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        session = ctx.session("publisher")
        session.enable_confirms()  # over AMQP 1.0 the publish returns on the broker's accepted outcome
        mid = "m1"
        session.publish(q, mid.encode(), message_id=mid, expiration_ms=self.TTL_MS)
        receiver = ctx.session("receiver").receiver(q, credit=1)
        got = receiver.next(WAIT_S)
        return {"published": [mid], "sent_ttl": self.TTL_MS, "got": [delivery_obs(got)], "ttl": got.expiration}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        ttl, sent = obs["ttl"], obs["sent_ttl"]
        reduced = ttl is not None and 0 < int(ttl) <= sent
        return first_failure(
            returned_exactly(obs["got"], obs["published"], what="on the link"),
            holds(reduced, expected=f"the header's ttl is what is left of the {sent} ms it was sent with (0 < ttl <= {sent})",
                  observed="no ttl in the header" if ttl is None else f"ttl {ttl} ms",
                  key=None if reduced else "ttl-missing" if ttl is None else "ttl-not-reduced"),
        )
