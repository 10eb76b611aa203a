"""basic.nack (RabbitMQ extension): single and multiple, requeue and discard (the LavinMQ seed's ack
examples with nack in place of ack), tag 0, and unknown tags.

What a negative acknowledgement did is judged on what the broker sends back before a sentinel
(requeued deliveries come back at once, redelivered) and on what the queue still holds once the
channel is closed (discarded deliveries never reappear).
"""

from __future__ import annotations

from conformance.api import Delivery, Session
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import channel_closed_with
from conformance.kit.checkers import settled_as_expected as judge
from conformance.kit.scenarios import one_held, settle_and_watch
from conformance.kit.verdicts import Verdict

PRECONDITION_FAILED = 406


class TestNackSingleRequeue(Case):
    requirement = "NACK-SINGLE-REQUEUE"
    configurations = ("priority", "length-limit-reject", "delivery-limit", "single-active-consumer", "queue-ttl")

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> None:
            s.nack(held[2].tag, requeue=True)

        return settle_and_watch(ctx, 5, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge(obs, "nack(tag 3, multiple=false, requeue=true) with tags 1..5 outstanding", back=(2,))


class TestNackMultipleRequeue(Case):
    requirement = "NACK-MULTIPLE-REQUEUE"
    configurations = ("priority", "delivery-limit")

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> None:
            s.ack(held[0].tag)  # the seed's first step: tags 2..5 stay outstanding
            s.nack(held[3].tag, multiple=True, requeue=True)

        return settle_and_watch(ctx, 5, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge(obs, "ack(tag 1), then nack(tag 4, multiple=true, requeue=true) with tags 2..5 outstanding", back=(1, 2, 3), gone=(0,))


class TestNackMultipleZeroAll(Case):
    requirement = "NACK-MULTIPLE-ZERO-ALL"

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> None:
            s.ack(held[0].tag)
            s.nack(0, multiple=True, requeue=True)

        return settle_and_watch(ctx, 4, settle)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge(obs, "ack(tag 1), then nack(tag 0, multiple=true, requeue=true) with tags 2..4 outstanding", back=(1, 2, 3), gone=(0,))


class TestNackDiscard(Case):
    requirement = "NACK-DISCARD"
    variants = ("single", "multiple")

    def scenario(self, ctx: CaseContext) -> Obs:
        def settle(s: Session, held: list[Delivery]) -> None:
            s.nack(held[2].tag, multiple=ctx.variant != "single", requeue=False)

        return {**settle_and_watch(ctx, 5, settle), "variant": ctx.variant}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        single = obs["variant"] == "single"
        how = "nack(tag 3, requeue=false)" if single else "nack(tag 3, multiple=true, requeue=false)"
        return judge(obs, f"{how} without a dead-letter exchange", gone=(2,) if single else (0, 1, 2))


class TestNackUnknownTag(Case):
    requirement = "NACK-UNKNOWN-TAG-406"
    variants = ("nack", "reject")

    def scenario(self, ctx: CaseContext) -> Obs:
        session, held = one_held(ctx)
        bogus = held.tag + 1000
        op = (lambda: session.nack(bogus, requeue=True)) if ctx.variant == "nack" else (lambda: session.reject(bogus, requeue=True))
        return {"variant": ctx.variant, "tag": bogus, "answer": ctx.channel_error(lambda: (op(), session.sync()))}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return channel_closed_with(obs["answer"], PRECONDITION_FAILED, what=f"basic.{obs['variant']} of never-delivered tag {obs['tag']}")
