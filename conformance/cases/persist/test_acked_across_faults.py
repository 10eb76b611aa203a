"""Acknowledged and unacknowledged deliveries across a node restart and kill -9: what the broker
recorded of a consumer's acknowledgements is what survives (one fault of each kind serves every
such case, conformance.runner.shared_faults)."""

from __future__ import annotations

from conformance.cases.persist import RestartOrKill
from conformance.cases.persist.test_restart import how, recovered_deliveries, unavailable
from conformance.catalogue.profiles import Profile
from conformance.kit.case import CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same


class TestAckedStaysGone(RestartOrKill):
    requirement = "PERSIST-ACKED-STAYS-GONE"
    #: The acknowledgement records of a classic store (a quorum queue's acks are log entries, judged
    #: by the failover and delivery-limit cases).
    queue_types = ("classic",)

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        ids = ctx.publish(q, 4, prefix="held-", persistent=True)
        session = ctx.session("consumer")
        held = ctx.take(session.consume(q, prefetch=4), 4)
        acked = [held[0], held[2]]
        for d in acked:
            session.ack(d.tag)
        session.sync()  # a round trip after the acks: the broker has read them
        return {"variant": ctx.variant, "queue": q, "ids": ids, "acked": [d.message_id for d in acked]}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        kept = ("variant", "ids", "acked")
        return {**{k: prepared[k] for k in kept}, **recovered_deliveries(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        unacked = [m for m in obs["ids"] if m not in obs["acked"]]
        if obs["unavailable"]:
            return unavailable(obs, f"{fmt(unacked)} delivered again after {fault}")
        got = [d["id"] for d in obs["drained"]]
        back = [m for m in obs["acked"] if m in got]
        return first_failure(  # a loss first: it is never the documented redelivery of acked messages
            same(unacked, [m for m in got if m not in obs["acked"]], what=f"the unacknowledged deliveries, after {fault}"),
            holds(not back, expected=f"acknowledged {fmt(obs['acked'])} never delivered again after {fault}",
                  observed=f"acknowledged but back: {fmt(back)}" if back else f"came back {fmt(got)}",
                  key=f"acked-back-after-{obs['variant']}" if back else None),
        )
