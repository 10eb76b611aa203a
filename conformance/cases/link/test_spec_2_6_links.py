"""AMQP 1.0 transport 2.6 (links), h2spec style: each case names the rule it checks.

2.6.3/2.6.5: an attach to an address with no node behind it (one the broker does not create) is
answered by an attach with no terminus and at once a detach carrying the error. 2.6.12: the
delivery-tags of the deliveries a link holds unsettled are all different. Every wait ends on a
protocol event (the broker's attach, its detach, a transfer) or a short explicit deadline.
"""

from __future__ import annotations

import uuid

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import no_node_refused, returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds

#: The broker owes its attach and the detach that follows it at once ("MUST immediately detach").
PROMPT_S = 3.0


class TestAttachNoNode(Case):
    requirement = "LINK-ATTACH-NO-NODE-DETACHED"

    def scenario(self, ctx: CaseContext) -> Obs:
        session = ctx.session("receiver")
        absent = f"absent-{uuid.uuid4().hex[:10]}"  # never declared: no node behind its address
        answer = session.attach_answer(absent, PROMPT_S)
        ctx.history.add("receiver", "attach", f"{answer}")
        return {"answer": answer}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return no_node_refused(obs["answer"])


class TestDeliveryTagsUnique(Case):
    requirement = "LINK-DELIVERY-TAGS-UNIQUE"
    HELD = 5

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, self.HELD)
        session = ctx.session("receiver")
        receiver = session.receiver(q, credit=self.HELD)
        receiver.received(self.HELD, WAIT_S)  # all held unsettled together: each tag in use at once
        got = list(receiver.buffer)
        receiver.buffer.clear()
        tags = list(receiver.wire_tags)
        for d in got:
            session.ack(d.tag)
        session.sync()
        return {"published": published, "got": [delivery_obs(d) for d in got], "tags": tags}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        tags = obs["tags"]
        repeated = sorted({t for t in tags if tags.count(t) > 1})
        return first_failure(
            returned_exactly(obs["got"], obs["published"], what="held unsettled on the link"),
            holds(not repeated, expected=f"{len(tags)} distinct delivery-tags for the {len(tags)} deliveries held unsettled",
                  observed=f"delivery-tags {', '.join(tags)}" + (f" ({', '.join(repeated)} repeated)" if repeated else ""),
                  key=None if not repeated else "delivery-tag-repeated"),
        )


class TestAbortDiscarded(Case):
    requirement = "LINK-ABORTED-DISCARDED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        session = ctx.session("sender", via=ctx.proxy())  # the proxy's trace shows the transfers and the abort
        aborted = session.send_aborted(q, b"m-aborted", message_id="m-aborted", timeout=WAIT_S)
        # A whole message after it on the same link: once it is in the queue, the broker has dealt
        # with the aborted delivery before it (transfers of a link are ordered).
        session.enable_confirms()
        try:
            session.publish(q, b"m1", message_id="m1")
            then = "m1 accepted"
        except (ChannelClosed, ConnectionLost) as exc:
            then = f"m1 not taken: {exc}"[:300]
        return {"aborted": aborted, "then": then, "published": ["m1"], "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            holds(obs["aborted"] == "aborted", expected="the client's transfers, then its abort, reach the broker",
                  observed=obs["aborted"], key=None if obs["aborted"] == "aborted" else "abort-not-sent"),
            holds(obs["then"] == "m1 accepted", expected="a whole message after the aborted one is taken as before",
                  observed=obs["then"], key=None if obs["then"] == "m1 accepted" else "next-message-refused"),
            returned_exactly(obs["after"], obs["published"], what="in the queue after an aborted delivery and m1"),
        )
