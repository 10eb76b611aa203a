"""AMQP 0-9-1 class tx, publishes: invisible until commit, gone on loss or rollback, all there after commit-ok.

Each "gone" is proven, not sampled: a tether consumer on the producer's channel shows the broker has
torn the channel down, then a sentinel-proven drain shows what the queue holds.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.errors import ConnectionLost
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import ids_of
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same
from conformance.nemesis.faults import Action, Moment
from conformance.nemesis.points import fault_at


class TestUncommittedInvisible(Case):
    requirement = "TX-PUBLISH-INVISIBLE-UNTIL-COMMIT"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        producer = ctx.session("producer")
        producer.select_tx()
        ids = ctx.publish(q, 3, prefix="t", persistent=True, session=producer)
        producer.sync()  # the broker has processed the publishes
        consumer = ctx.session("consumer").consume(q, prefetch=100)
        before = [delivery_obs(d) for d in ctx.until_sentinel(consumer, q)]
        producer.commit()
        early = [d for d in before if d["id"] in ids]  # a faulty broker's early deliveries do not come twice
        after = [delivery_obs(d) for d in ctx.take(consumer, len(ids) - len(early), at_most=True)]  # fewer is judged
        return {"tx_ids": ids, "before_commit": before, "after_commit": after}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        early = ids_of(obs["before_commit"])
        return first_failure(
            holds(
                not early,
                expected="no message of the open transaction is delivered before tx.commit",
                observed=f"delivered before commit: {fmt(early)}" if early else "nothing delivered before commit",
                key="visible-before-commit" if early else None,
            ),
            same(obs["tx_ids"], ids_of(obs["after_commit"]), what="deliveries after tx.commit-ok"),
        )


class TestUncommittedDiscarded(Case):
    requirement = "TX-PUBLISH-DISCARDED-ON-LOSS"
    #: cut: the client's socket is reset; fin: the proxy closes both sides with FIN where tx.commit
    #: would have gone; rollback: tx.rollback, then a new transaction on the same channel commits.
    variants = ("cut", "fin", "rollback")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        proxy = ctx.proxy() if ctx.variant == "fin" else None
        conn = ctx.connect("producer", via=proxy)
        producer = conn.session()
        tether = ctx.tether(producer)
        producer.select_tx()
        ids = ctx.publish(q, 3, prefix="t", persistent=True, session=producer)
        producer.sync()
        later: list[str] = []
        if ctx.variant == "rollback":
            producer.rollback()
            later = ctx.publish(q, 1, prefix="after-rollback-", persistent=True, session=producer)
            producer.commit()
        else:
            if ctx.variant == "cut":
                conn.cut()
            else:
                assert proxy is not None
                fault = proxy.arm(fault_at(proxy.protocol, "commit", action=Action.FIN))
                try:
                    producer.commit()
                except ConnectionLost:
                    pass
                ctx.expect_fired(fault)
            ctx.await_consumers(tether, 0)
        drained = [delivery_obs(d) for d in ctx.drain(q)]
        return {"variant": ctx.variant, "tx_ids": ids, "committed_later": later, "drained": drained}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        got = ids_of(obs["drained"])
        leaked = [m for m in got if m in obs["tx_ids"]]
        how = {"cut": "after the connection was reset", "fin": "after the connection closed (FIN) before tx.commit", "rollback": "after tx.rollback"}[obs["variant"]]
        return first_failure(
            holds(
                not leaked,
                expected=f"none of {fmt(obs['tx_ids'])} is ever delivered {how}",
                observed=f"delivered {fmt(leaked)} {how}" if leaked else f"none delivered {how}",
                key="uncommitted-delivered" if leaked else None,
            ),
            same(obs["committed_later"], got, what="queue content (only the later, committed transaction)"),
        )


class TestCommittedVisible(Case):
    requirement = "TX-PUBLISH-VISIBLE-AFTER-COMMIT"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        proxy = ctx.proxy()
        producer = ctx.session("producer", via=proxy)
        tether = ctx.tether(producer)
        producer.select_tx()
        ids = ctx.publish(q, 3, prefix="t", persistent=True, session=producer)
        # The connection dies the moment commit-ok has reached the client.
        fault = proxy.arm(fault_at(proxy.protocol, "commit-answer", moment=Moment.AFTER))
        producer.commit()
        ctx.expect_fired(fault)
        ctx.await_consumers(tether, 0)
        drained = [delivery_obs(d) for d in ctx.drain(q)]
        return {"tx_ids": ids, "drained": drained}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return same(obs["tx_ids"], ids_of(obs["drained"]), what="queue content after tx.commit-ok and a connection reset")
