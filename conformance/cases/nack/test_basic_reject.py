"""basic.reject (AMQP 0-9-1): requeue returns the one message to the queue, but not to the same channel
(rule basic/reject/requeue/01); no requeue discards it."""

from __future__ import annotations

from conformance.api import Delivery, Session
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import accepted, all_redelivered, held_ids, returned_exactly
from conformance.kit.checkers import settled_as_expected as judge
from conformance.kit.scenarios import settle_and_watch
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Outcome, Verdict, first_failure, holds


class TestRejectRequeue(Case):
    requirement = "NACK-REJECT-REQUEUE"

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> None:
            s.reject(held[1].tag, requeue=True)

        return settle_and_watch(ctx, 3, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = "reject(tag 2, requeue=true) with tags 1..3 outstanding"
        (rejected,) = held_ids(obs, 1)
        everything = held_ids(obs, 0, 1, 2)
        if any(d["id"] == rejected for d in obs["back"]):
            # The rule is broken; the key names the one documented way of breaking it (back at once,
            # once, redelivered, the others still held), so any other behaviour stays a plain failure.
            rest = first_failure(
                accepted(obs["channel"], what=what),
                returned_exactly(obs["back"], [rejected], what=f"redelivered at once after {what}"),
                all_redelivered(obs["back"], signal=signal_of(profile, queue_type)),
                returned_exactly(obs["remaining"], [m for m in everything if m != rejected], what=f"left in the queue after {what} and channel.close"),
            )
            if rest.outcome is not Outcome.PASS:
                return rest
            return holds(False, expected=f"after {what}: the rejected {rejected} is not delivered again on the same channel "
                                         "(basic/reject/requeue/01: MUST NOT)",
                         observed=f"{rejected} delivered again on the same channel, before the channel closed",
                         key="redelivered-same-channel")
        return first_failure(
            accepted(obs["channel"], what=what),
            returned_exactly(obs["back"], [], what=f"delivered again on the same channel after {what}"),
            returned_exactly(obs["remaining"], everything, what=f"in the queue after {what} and channel.close (the rejected one requeued)"),
        )


class TestRejectDiscard(Case):
    requirement = "NACK-REJECT-DISCARD"

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> None:
            s.reject(held[1].tag, requeue=False)

        return settle_and_watch(ctx, 3, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge(obs, "reject(tag 2, requeue=false) without a dead-letter exchange", gone=(1,))
