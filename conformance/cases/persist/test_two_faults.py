"""Persistent messages across two faults in a row: a graceful restart, then a kill -9 of the node
that reloaded them. In a whole run it rides both shared faults (prepared before the run's restart,
checked between, observed after its kill: conformance.runner.shared_faults.two_faults); alone it
restarts and kills the node itself."""

from __future__ import annotations

from conformance.cases.persist.test_restart import RECOVERY_S, recovered, unavailable
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same
from conformance.nemesis.kinds import KILL, RESTART, FaultKind


class TestSurvivesRestartThenKill(Case):
    requirement = "PERSIST-SURVIVES-RESTART-THEN-KILL"
    disrupts_broker = True
    #: A classic store reloads its messages at a start; a quorum queue after kill -9 also costs a leader wait.
    queue_types = ("classic",)

    def broker_fault(self, variant: str | None) -> FaultKind:
        return KILL

    def broker_faults(self, variant: str | None) -> tuple[FaultKind, ...]:
        return (RESTART, KILL)

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        return {"variant": "restart-then-kill", "queue": q, "ids": ctx.publish(q, 3, prefix="twice-", persistent=True)}

    def between(self, ctx: CaseContext, prepared: Obs) -> Obs:
        """After the restart: the queue answers again, its messages reloaded and left queued."""
        try:
            stats = ctx.await_queue(prepared["queue"], timeout=ctx.recovery_left(RECOVERY_S))
            return {**prepared, "after_restart": stats.ready, "between": None}
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            return {**prepared, "after_restart": None, "between": f"{type(exc).__name__}: {exc}"}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        kept = ("variant", "ids", "after_restart", "between")
        return {**{k: prepared.get(k) for k in kept}, **recovered(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = "after a restart and then a kill -9 and start"
        if obs["between"]:
            return unavailable({**obs, "unavailable": obs["between"]}, f"{fmt(obs['ids'])} queued after the restart", kill=False)
        if obs["unavailable"]:
            return unavailable(obs, f"{fmt(obs['ids'])} delivered {what}", kill=True)
        flagless = [d["id"] for d in obs["drained"] if d["persistent"] is not True]
        return first_failure(
            same(obs["ids"], [d["id"] for d in obs["drained"]], what=f"confirmed persistent messages {what}"),
            holds(not flagless, expected="each still persistent", observed=f"not persistent: {fmt(flagless)}" if flagless else "all persistent",
                  key="persistence-flag-lost" if flagless else None),
        )
