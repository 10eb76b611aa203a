"""basic.reject (AMQP 0-9-1): requeue returns the one message, redelivered; no requeue discards it."""

from __future__ import annotations

from conformance.api import Delivery, Session
from conformance.case import Case, CaseContext, Obs
from conformance.checkers import settled_as_expected as judge
from conformance.profile import Profile
from conformance.scenarios import ids_at as ids, settle_and_watch
from conformance.verdict import Verdict


class TestRejectRequeue(Case):
    requirement = "NACK-REJECT-REQUEUE"

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> tuple[list[str], list[str]]:
            s.reject(held[1].tag, requeue=True)
            return ids(held, 1), []

        return settle_and_watch(ctx, 3, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge(obs, "reject(tag 2, requeue=true) with tags 1..3 outstanding")


class TestRejectDiscard(Case):
    requirement = "NACK-REJECT-DISCARD"

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> tuple[list[str], list[str]]:
            s.reject(held[1].tag, requeue=False)
            return [], ids(held, 1)

        return settle_and_watch(ctx, 3, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge(obs, "reject(tag 2, requeue=false) without a dead-letter exchange")
