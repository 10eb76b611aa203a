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


#: Five confirmed messages of about 4 MiB: 20 MiB, past RabbitMQ's 16 MiB message-store file and two
#: of LavinMQ's 8 MiB segments.
FILL_MESSAGES, FILL_SIZE = 5, 4 * 1024 * 1024
#: LavinMQ's default segment_size, and where its first segment's data ends once the second message
#: is sized to fill it: 6 bytes short of the end, the position of the read that closed queues after
#: a restart in LavinMQ issue #669 ("pos 8388602 of 8388608"). The next message, too large for the
#: 6 bytes, starts the second segment.
SEGMENT_SIZE, SEGMENT_GAP, SEGMENT_HEADER = 8 * 1024 * 1024, 6, 4


def stored_size(queue: str, mid: str, body: int) -> int:
    """A message's bytes in a LavinMQ segment (src/lavinmq/message.cr, BytesMessage#bytesize):
    timestamp 8, exchange "" as a short string 1, routing key (the queue) 1+n, properties (2 bytes of
    flags, message-id 1+n, delivery-mode 1), body size 8, body."""
    return 8 + 1 + 1 + len(queue.encode()) + 2 + 1 + len(mid.encode()) + 1 + 8 + body


def fill_sizes(queue: str, ids: list[str]) -> list[int]:
    """Body sizes: the first two fill LavinMQ's first segment to SEGMENT_GAP bytes short of its end."""
    second = SEGMENT_SIZE - SEGMENT_HEADER - SEGMENT_GAP - stored_size(queue, ids[0], FILL_SIZE) - stored_size(queue, ids[1], 0)
    return [FILL_SIZE, second, *[FILL_SIZE] * (len(ids) - 2)]


def fill_body(mid: str, size: int) -> bytes:
    seed = hashlib.sha256(mid.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


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
        sizes = fill_sizes(q, ids)
        for mid, size in zip(ids, sizes):
            ctx.admin.publish(q, fill_body(mid, size), message_id=mid, persistent=True)
        return {"variant": "restart", "queue": q, "ids": ids, "sizes": sizes}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        q = prepared["queue"]
        out: dict[str, Any] = {"variant": "restart", "ids": prepared["ids"]}
        sizes = dict(zip(prepared["ids"], prepared["sizes"]))
        try:
            ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
            drained = ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            return {**out, "drained": [], "unavailable": f"{type(exc).__name__}: {exc}"}
        return {**out, "unavailable": None,
                "drained": [{"id": d.message_id, "persistent": d.persistent, "intact": d.body == fill_body(d.message_id or "", sizes.get(d.message_id or "", 0))}
                            for d in drained]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = f"{len(obs['ids'])} confirmed persistent messages of about {FILL_SIZE // (1024 * 1024)} MiB after a restart"
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
