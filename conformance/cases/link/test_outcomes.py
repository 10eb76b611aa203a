"""What each outcome a receiver settles with does to the message (AMQP 1.0 messaging 3.4): modified
returns it, counted; undeliverable-here keeps it from the link that refused it.

Accepted, released and rejected are judged over AMQP 1.0 by the ACK and NACK requirements (an ack is
the accepted outcome, a nack with requeue the released one: NACK-SINGLE-REQUEUE, a reject without
requeue the rejected one). Each case uses one receiving link
with credit granted one message at a time, so where a message goes next is the broker's choice.
"""

from __future__ import annotations

from conformance.cases.link.outcomes import BACK_S, ReturnedOutcome, next_or_none, offers_modified
from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds



class TestOutcomeModifiedFailed(ReturnedOutcome):
    requirement = "LINK-OUTCOME-MODIFIED-FAILED"
    outcome = "modified"
    failed = True

    def count_check(self, before: int, after: int) -> tuple[bool, str]:
        return after == before + 1, f"delivery-count incremented by modified(delivery-failed=true): {before} -> {before + 1}"


class TestOutcomeUndeliverableHere(Case):
    requirement = "LINK-OUTCOME-UNDELIVERABLE-HERE"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 2)
        session = ctx.session("receiver")
        receiver = session.receiver(q, credit=1)
        offers_modified(receiver)
        first = receiver.next(WAIT_S)
        session.settle(first.tag, "modified", undeliverable_here=True)
        receiver.grant(2)
        # Whatever the link gets until the next message: the refused one must not be among them.
        later: list[Obs] = []
        while (d := next_or_none(receiver, BACK_S)) is not None:
            later.append(d)
            if d["id"] != first.message_id:
                session.ack(d["tag"])
                break
        # The broker's detach answer follows every transfer it sent on the link: nothing more can come.
        detach = receiver.detach(BACK_S)
        later += [delivery_obs(d) for d in receiver.buffer]
        return {"published": published, "first": [delivery_obs(first)], "later_on_link": later, "detach": detach,
                "others": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        refused = obs["first"][0]["id"] if obs["first"] else None
        back = [d for d in obs["later_on_link"] if d["id"] == refused]
        rest = [m for m in obs["published"] if m != refused]
        return first_failure(
            returned_exactly(obs["first"], obs["published"][:1], what="the first delivery"),
            holds(not back, expected=f"{refused} never again on the link that settled it modified(undeliverable-here=true)",
                  observed=f"{refused} came back to that link {len(back)} time(s)" if back else f"{refused} not back on that link",
                  key="redelivered-to-modifying-link" if back else None),
            returned_exactly([d for d in obs["later_on_link"] if d["id"] != refused], rest, what="the link's next message"),
            returned_exactly(obs["others"], [refused] if refused else [], what="for another receiver after the modifying link detached"),
        )
