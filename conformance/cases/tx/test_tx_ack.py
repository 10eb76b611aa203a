"""AMQP 0-9-1 class tx, acknowledgements: dropped with an uncommitted transaction, final once
committed (an ack of every outstanding tag too), and neither applied nor redelivered by tx.rollback."""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import ConnectionLost
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import accepted, all_redelivered, ids_of, returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.faults import Moment
from conformance.nemesis.points import fault_at


class TestUncommittedAcksDropped(Case):
    requirement = "TX-ACK-DROPPED-ON-LOSS"
    #: commit-withheld: acks sent, tx.commit held back at the proxy and the connection reset;
    #: no-commit: acks sent, the client's socket reset before it ever commits.
    variants = ("commit-withheld", "no-commit")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        proxy = ctx.proxy() if ctx.variant == "commit-withheld" else None
        conn = ctx.connect("consumer", via=proxy)
        session = conn.session()
        session.select_tx()
        held = ctx.take(session.consume(q, prefetch=10), 3)
        for d in held[:2]:
            session.ack(d.tag)
        session.sync()  # the broker has the two acks, inside the transaction
        if proxy is not None:
            fault = proxy.arm(fault_at(proxy.protocol, "commit"))
            try:
                session.commit()
            except ConnectionLost:
                pass
            ctx.expect_fired(fault)
        else:
            conn.cut()
        ctx.await_consumers(q, 0)
        returned = [delivery_obs(d) for d in ctx.drain(q)]
        return {"published": published, "acked_in_tx": [d.message_id for d in held[:2]], "returned": returned}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["returned"], obs["published"], what=f"after losing the connection with acks of {fmt(obs['acked_in_tx'])} uncommitted"),
            all_redelivered(obs["returned"]),
        )


class TestCommittedAcksFinal(Case):
    requirement = "TX-ACK-COMMITTED-FINAL"
    configurations = ("priority", "delivery-limit")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        proxy = ctx.proxy()
        session = ctx.session("consumer", via=proxy)
        session.select_tx()
        held = ctx.take(session.consume(q, prefetch=10), 3)
        for d in held[:2]:
            session.ack(d.tag)
        fault = proxy.arm(fault_at(proxy.protocol, "commit-answer", moment=Moment.AFTER))
        session.commit()
        ctx.expect_fired(fault)
        ctx.await_consumers(q, 0)
        returned = [delivery_obs(d) for d in ctx.drain(q)]
        return {"published": published, "acked": [d.message_id for d in held[:2]], "unacked": [held[2].message_id], "returned": returned}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["returned"], obs["unacked"], what="after commit-ok of two acks and a connection reset"),
            all_redelivered(obs["returned"]),
        )


class TestRollbackDoesNotRedeliver(Case):
    requirement = "TX-ROLLBACK-NO-REDELIVERY"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        session = ctx.session("consumer")
        session.select_tx()
        consumer = session.consume(q, prefetch=10)
        held = ctx.take(consumer, 3)
        for d in held:
            session.ack(d.tag)
        session.rollback()
        # Anything rollback sent again would arrive ahead of this sentinel.
        after_rollback = [delivery_obs(d) for d in ctx.until_sentinel(consumer, q)]
        assert ctx.last_sentinel is not None
        session.ack(ctx.last_sentinel.tag)
        session.commit()
        consumer.cancel()
        session.close()  # the rolled-back acks are void: closing must return all three
        ctx.await_consumers(q, 0)
        returned = [delivery_obs(d) for d in ctx.drain(q)]
        return {"published": published, "after_rollback": after_rollback, "returned": returned}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        early = ids_of(obs["after_rollback"])
        return first_failure(
            holds(
                not early,
                expected="tx.rollback redelivers nothing by itself",
                observed=f"redelivered right after rollback: {fmt(early)}" if early else "nothing redelivered after rollback",
                key="redelivered-at-rollback" if early else None,
            ),
            returned_exactly(obs["returned"], obs["published"], what="after rollback of their acks and a channel close"),
            all_redelivered(obs["returned"]),
        )


class TestAckAllCommit(Case):
    """Inside a transaction, basic.ack(0, multiple=true) then tx.commit: with three deliveries held
    ("outstanding") every one is acknowledged at the commit; with none ("none") the ack is a no-op.
    Either way commit-ok comes back and the channel stays open (a second transaction publishes one
    message and commits, and it is in the queue); then the channel closes and nothing comes back."""

    requirement = "TX-ACK-ALL-COMMIT"
    variants = ("outstanding", "none")
    configurations = ("priority", "delivery-limit")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3) if ctx.variant == "outstanding" else []
        session = ctx.session("consumer")
        session.select_tx()
        held = ctx.take(session.consume(q, prefetch=10), 3) if published else []
        obs: dict[str, Any] = {"variant": ctx.variant, "held": [d.message_id for d in held]}
        session.ack(0, multiple=True)
        obs["commit"] = ctx.channel_error(session.commit)
        if obs["commit"]["closed"]:
            return obs
        later = ctx.publish(q, 1, prefix="after-commit-", session=session)
        obs["second"] = ctx.channel_error(session.commit)
        session.close()
        ctx.await_consumers(q, 0)
        obs["later"] = later
        obs["remaining"] = [delivery_obs(d) for d in ctx.drain(q)]
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = f"basic.ack(0, multiple=true) in a transaction with {len(obs['held']) or 'no'} deliveries outstanding, then tx.commit"
        if obs["commit"]["closed"]:
            return accepted(obs["commit"], what=what)
        return first_failure(
            accepted(obs["second"], what=f"a second transaction (one publish, tx.commit) after {what}"),
            returned_exactly(obs["remaining"], obs["later"], what=f"in the queue after {what}, a second transaction and channel.close"),
        )


class TestAckPendingAcrossRecover(Case):
    """m1 and m2 delivered to a transacted consumer; m1 acknowledged inside the open transaction;
    basic.recover(requeue=true); tx.rollback; channel.close. The rollback voids m1's ack, so both
    messages must be in the queue afterwards, each once (whether recover resent m1 is the broker's
    business: it was acknowledged, if only provisionally)."""

    requirement = "TX-ACK-PENDING-ACROSS-RECOVER"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 2)
        session = ctx.session("consumer")
        session.select_tx()
        consumer = session.consume(q, prefetch=10)
        held = ctx.take(consumer, 2)
        session.ack(held[0].tag)
        session.recover(requeue=True)
        answer = ctx.channel_error(session.rollback)
        if not answer["closed"]:
            consumer.cancel()
        session.close()
        ctx.await_consumers(q, 0)
        return {"published": published, "acked_in_tx": held[0].message_id, "rollback": answer,
                "remaining": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = f"ack of {obs['acked_in_tx']} in a transaction, basic.recover(requeue=true), tx.rollback"
        return first_failure(
            accepted(obs["rollback"], what=what),
            returned_exactly(obs["remaining"], obs["published"], what=f"in the queue after {what} and channel.close"),
        )
