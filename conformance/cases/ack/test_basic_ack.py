"""AMQP 0-9-1 basic.ack: the multiple flag (the LavinMQ seed's two examples), tag 0, and tag errors.

The broker-visible effect of an acknowledgement is judged after the channel closes: whatever was
not acknowledged comes back (redelivered), whatever was acknowledged does not (sentinel drain).
"""

from __future__ import annotations

from typing import Callable

from conformance.api import Delivery, Session
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import accepted, all_redelivered, channel_closed_with, returned_exactly
from conformance.kit.scenarios import one_held
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure

PRECONDITION_FAILED = 406


def ack_then_close(ctx: CaseContext, n: int, act: Callable[[Session, list[Delivery]], list[str]]) -> Obs:
    """Deliver ``n`` messages to one channel, let ``act`` acknowledge some, close, drain what returns."""
    q = ctx.queue()
    published = ctx.publish(q, n)
    session = ctx.session("consumer")
    held = ctx.take(session.consume(q, prefetch=100), n)
    acked = act(session, held)
    answer = ctx.channel_error(session.sync)
    session.close()
    ctx.await_consumers(q, 0)
    return {
        "published": published,
        "held": [delivery_obs(d) for d in held],
        "acked": acked,
        "channel": answer,
        "returned": [delivery_obs(d) for d in ctx.drain(q)],
    }


def judge_returns(obs: Obs, expected_back: list[str], what: str, signal: str) -> Verdict:
    return first_failure(
        accepted(obs["channel"], what="the acknowledgements"),
        returned_exactly(obs["returned"], expected_back, what=what),
        all_redelivered(obs["returned"], signal=signal),
    )


def seed_example(session: Session, held: list[Delivery], *, multiple: bool) -> list[str]:
    """LavinMQ seed: ack tag 1 alone so that tags 2..5 are outstanding, then ack tag 5."""
    session.ack(held[0].tag)
    session.ack(held[4].tag, multiple=multiple)
    return [held[0].message_id, held[4].message_id]


class TestAckMultipleUpToTag(Case):
    requirement = "ACK-MULTIPLE-UP-TO-TAG"
    configurations = ("priority", "delivery-limit")

    def scenario(self, ctx: CaseContext) -> Obs:
        return ack_then_close(ctx, 5, lambda s, held: seed_example(s, held, multiple=True))

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_returns(obs, [], "after ack(tag 5, multiple=true) with tags 2..5 outstanding and channel.close", signal_of(profile, queue_type))


class TestAckSingleOnlyTag(Case):
    requirement = "ACK-SINGLE-ONLY-TAG"

    def scenario(self, ctx: CaseContext) -> Obs:
        return ack_then_close(ctx, 5, lambda s, held: seed_example(s, held, multiple=False))

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        unacked = [d["id"] for d in obs["held"][1:4]]
        return judge_returns(obs, unacked, "after ack(tag 5, multiple=false) with tags 2..5 outstanding and channel.close", signal_of(profile, queue_type))


class TestAckMultipleZeroAll(Case):
    requirement = "ACK-MULTIPLE-ZERO-ALL"

    def scenario(self, ctx: CaseContext) -> Obs:
        def ack_all(s: Session, held: list[Delivery]) -> list[str]:
            s.ack(0, multiple=True)
            return [d.message_id or "" for d in held]

        return ack_then_close(ctx, 4, ack_all)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_returns(obs, [], "after ack(tag 0, multiple=true) and channel.close", signal_of(profile, queue_type))


class TestAckMultipleZeroNothingOutstanding(Case):
    """A consumer with nothing delivered yet sends basic.ack(0, multiple=true); then one message is
    published, and it must still be delivered on the channel."""

    requirement = "ACK-MULTIPLE-ZERO-NOTHING-OUTSTANDING"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        session = ctx.session("consumer")
        consumer = session.consume(q, prefetch=10)
        session.ack(0, multiple=True)
        obs: Obs = {"channel": ctx.channel_error(session.sync)}
        if obs["channel"]["closed"]:
            return obs
        ctx.publish(q, 1)
        obs["after"] = [delivery_obs(d) for d in ctx.take(consumer, 1)]
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = "basic.ack(0, multiple=true) with no delivery outstanding"
        if obs["channel"]["closed"]:
            return accepted(obs["channel"], what=what)
        return returned_exactly(obs["after"], ["m1"], what=f"delivered on the channel after {what}")


class TestAckUnknownTag(Case):
    requirement = "ACK-UNKNOWN-TAG-406"

    def scenario(self, ctx: CaseContext) -> Obs:
        session, held = one_held(ctx)
        bogus = held.tag + 1000
        return {"held_tag": held.tag, "acked_tag": bogus, "answer": ctx.channel_error(lambda: (session.ack(bogus), session.sync()))}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return channel_closed_with(obs["answer"], PRECONDITION_FAILED, what=f"basic.ack of never-delivered tag {obs['acked_tag']}")


class TestDoubleAck(Case):
    requirement = "ACK-DOUBLE-ACK-406"

    def scenario(self, ctx: CaseContext) -> Obs:
        session, held = one_held(ctx)
        first = ctx.channel_error(lambda: (session.ack(held.tag), session.sync()))
        second = ctx.channel_error(lambda: (session.ack(held.tag), session.sync())) if not first["closed"] else None
        return {"tag": held.tag, "first": first, "second": second}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        first = obs["first"]
        if first["closed"]:
            return accepted(first, what=f"first basic.ack of tag {obs['tag']}")
        return channel_closed_with(obs["second"], PRECONDITION_FAILED, what=f"second basic.ack of tag {obs['tag']}")
