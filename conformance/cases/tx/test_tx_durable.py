"""A committed transaction survives kill -9 of the broker (a broker-level fault, run alone)."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import ids_of
from conformance.kit.scenarios import unavailable_key
from conformance.kit.verdicts import Verdict, fmt, holds, same
from conformance.nemesis.kinds import KILL, FaultKind

#: How long the restarted broker has to serve the queue again (boot already finished).
RECOVERY_S = 15.0


class TestCommittedSurvivesKill(Case):
    requirement = "TX-COMMIT-DURABLE"
    disrupts_broker = True

    def broker_fault(self, variant: str | None) -> FaultKind:
        return KILL

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        producer = ctx.session("producer")
        producer.select_tx()
        ids = ctx.publish(q, 3, prefix="durable-", persistent=True, session=producer)
        producer.commit()
        return {"queue": q, "tx_ids": ids}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        q, ids = prepared["queue"], prepared["tx_ids"]
        try:
            ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
            drained = [delivery_obs(d) for d in ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))]
            unavailable = None
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            drained, unavailable = [], f"{type(exc).__name__}: {exc}"
        return {"tx_ids": ids, "drained": drained, "unavailable": unavailable}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if obs["unavailable"]:
            return holds(
                False,
                expected=f"{fmt(obs['tx_ids'])} delivered after the restart",
                observed=f"the queue could not be consumed after kill -9 and start ({obs['unavailable']})",
                key=unavailable_key(obs["unavailable"], kill=True),
            )
        return same(obs["tx_ids"], ids_of(obs["drained"]), what="persistent committed messages after kill -9 and restart")
