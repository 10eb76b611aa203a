"""AMQP 0-9-1 domain delivery-tag, rule non-zero: the server never uses delivery tag 0."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, holds


class TestDeliveryTagNonZero(Case):
    requirement = "ACK-DELIVERY-TAG-NON-ZERO"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        """The first tags of a fresh channel, by basic.get-ok and by basic.deliver (tag 0 would be
        the first one a server counting from zero hands out)."""
        q = ctx.queue()
        published = ctx.publish(q, 3)
        session = ctx.session("consumer")
        got = session.get(q)
        delivered = ctx.take(session.consume(q, prefetch=10), 2)
        tags = [{"via": "basic.get-ok", "id": got.message_id, "tag": got.tag}] if got is not None else []
        tags += [{"via": "basic.deliver", "id": d.message_id, "tag": d.tag} for d in delivered]
        return {"published": published, "tags": tags}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        zero = [t for t in obs["tags"] if t["tag"] == 0]
        seen = ", ".join(f"{t['via']} {t['id']} tag {t['tag']}" for t in obs["tags"]) or "no deliveries"
        return holds(not zero and len(obs["tags"]) == len(obs["published"]),
                     expected=f"{len(obs['published'])} deliveries on a fresh channel, every delivery tag > 0",
                     observed=seen, key="tag-zero" if zero else None)
