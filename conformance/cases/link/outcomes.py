"""Settling a receiver's delivery with an outcome that returns the message to the queue (AMQP 1.0
messaging 3.4.4 released, 3.4.5 modified), and the source's offer of outcomes (3.5.3)."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, OperationTimeout, TargetCannot
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds

#: How long a message the outcome returns to the queue may take to come back to the link.
BACK_S = 3.0


MODIFIED = "amqp:modified:list"


def offers_modified(receiver: object) -> None:
    """Messaging 3.5.3: the source's outcomes field names the outcomes a receiver may choose. A
    source that lists its outcomes without modified declines it in the protocol's own way."""
    offered = receiver.granted.get("outcomes")  # type: ignore[attr-defined]
    if offered and MODIFIED not in offered:
        receiver.detach(BACK_S)  # type: ignore[attr-defined]
        raise TargetCannot(f"the broker's source offers the outcomes {', '.join(offered)}, not modified",
                           kind="refused", refusal=f"attach source outcomes {', '.join(offered)} (no {MODIFIED})")


def next_or_none(consumer: object, timeout: float) -> Obs | None:
    """The next delivery as plain data, or None when none came (the broker kept or lost it)."""
    try:
        return delivery_obs(consumer.next(timeout))  # type: ignore[attr-defined]
    except (OperationTimeout, ChannelClosed):
        return None


class ReturnedOutcome(Case):
    """Take the message, settle it with the outcome, grant one more credit: it comes back."""

    outcome = "released"
    failed = False

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        session = ctx.session("receiver")
        receiver = session.receiver(q, credit=1)
        if self.outcome == "modified":
            offers_modified(receiver)
        first = receiver.next(WAIT_S)
        session.settle(first.tag, self.outcome, delivery_failed=self.failed)
        receiver.grant(1)
        again = next_or_none(receiver, BACK_S)
        if again is not None:
            session.ack(again["tag"])
        receiver.detach(BACK_S)
        return {"published": published, "outcome": self.outcome, "delivery_failed": self.failed,
                "first": [delivery_obs(first)], "again": [again] if again else []}

    def count_check(self, before: int, after: int) -> tuple[bool, str]:
        raise NotImplementedError

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = obs["outcome"] + ("(delivery-failed=true)" if obs["delivery_failed"] else "")
        checks = [returned_exactly(obs["first"], obs["published"], what="the first delivery"),
                  returned_exactly(obs["again"], obs["published"], what=f"after the receiver settled it {what}")]
        if obs["again"]:
            before = int(obs["first"][0].get("delivery_count") or 0)
            after = int(obs["again"][0].get("delivery_count") or 0)
            ok, expected = self.count_check(before, after)
            checks.append(holds(ok, expected=expected, observed=f"delivery-count {before} on the first delivery, {after} after {what}",
                                key=None if ok else "delivery-count-" + ("incremented" if after > before else "unchanged" if after == before else "lowered")))
        return first_failure(*checks)
