"""Persistence at the edges of a broker's message store: a durable queue whose store was never
written to when the node died, and confirmed messages that fill the store past a file boundary.

Both ride the run's shared faults (conformance.runner.shared_faults): the first the kill -9, the
second the graceful restart; neither adds a fault of its own to a whole run.
"""

from __future__ import annotations

import hashlib
from typing import Any

from conformance.cases.persist.test_restart import RECOVERY_S, unavailable
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same
from conformance.nemesis.kinds import KILL, RESTART, FaultKind


class TestDeclaredQueueSurvivesKill(Case):
    """kill -9 right after queue.declare, before the first publish: a store may have created the
    queue's message file and written nothing to it yet."""

    requirement = "PERSIST-DECLARED-QUEUE-SURVIVES-KILL"
    disrupts_broker = True
    #: The message-file edge is the classic queue's (a quorum queue's log is the node's); a quorum
    #: queue after kill -9 also costs a leader check.
    queue_types = ("classic",)

    def broker_fault(self, variant: str | None) -> FaultKind:
        return KILL

    def prepare(self, ctx: CaseContext) -> Obs:
        return {"variant": "kill", "queue": ctx.queue()}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        q = prepared["queue"]
        try:
            ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
            ids = ctx.publish(q, 1, prefix="after-kill-", persistent=True)
            drained = ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            return {"variant": "kill", "ids": [], "drained": [], "unavailable": f"{type(exc).__name__}: {exc}"}
        return {"variant": "kill", "ids": ids, "drained": [{"id": d.message_id, "persistent": d.persistent} for d in drained],
                "unavailable": None}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if obs["unavailable"]:
            return unavailable(obs, "the durable queue declared before the kill -9 exists after the start, and accepts, confirms and delivers")
        return same(obs["ids"], [d["id"] for d in obs["drained"]],
                    what="a persistent message published and confirmed after the kill -9 and start, on the queue declared before it")


#: Five confirmed messages of 4 MiB: 20 MiB, past RabbitMQ's 16 MiB message-store file and two of
#: LavinMQ's 8 MiB segments.
FILL_MESSAGES, FILL_SIZE = 5, 4 * 1024 * 1024


def fill_body(mid: str) -> bytes:
    seed = hashlib.sha256(mid.encode()).digest()
    return (seed * (FILL_SIZE // len(seed) + 1))[:FILL_SIZE]


class TestConfirmedAcrossSegments(Case):
    requirement = "PERSIST-CONFIRMED-ACROSS-SEGMENTS"
    disrupts_broker = True
    #: The file boundary is the classic store's (a quorum queue's log rolls at hundreds of MiB).
    queue_types = ("classic",)

    def broker_fault(self, variant: str | None) -> FaultKind:
        return RESTART

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        ids = [f"segment-{i}" for i in range(1, FILL_MESSAGES + 1)]
        for mid in ids:
            ctx.admin.publish(q, fill_body(mid), message_id=mid, persistent=True)
        return {"variant": "restart", "queue": q, "ids": ids}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        q = prepared["queue"]
        out: dict[str, Any] = {"variant": "restart", "ids": prepared["ids"]}
        try:
            ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
            drained = ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            return {**out, "drained": [], "unavailable": f"{type(exc).__name__}: {exc}"}
        return {**out, "unavailable": None,
                "drained": [{"id": d.message_id, "persistent": d.persistent, "intact": d.body == fill_body(d.message_id or "")}
                            for d in drained]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = f"{len(obs['ids'])} confirmed persistent messages of {FILL_SIZE // (1024 * 1024)} MiB after a restart"
        if obs["unavailable"]:
            return unavailable(obs, f"{what}: delivered and acknowledged")
        flagless = [d["id"] for d in obs["drained"] if d["persistent"] is not True]
        torn = [d["id"] for d in obs["drained"] if not d["intact"]]
        return first_failure(
            same(obs["ids"], [d["id"] for d in obs["drained"]], what=what),
            holds(not flagless, expected="each still delivery-mode 2 (persistent)", observed=f"not persistent: {fmt(flagless)}" if flagless else "all persistent",
                  key="persistence-flag-lost" if flagless else None),
            holds(not torn, expected="each body intact", observed=f"bodies differ: {fmt(torn)}" if torn else "all intact", key="body-corrupt" if torn else None),
        )
