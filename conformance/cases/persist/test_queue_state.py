"""What a durable queue's own state is after a node restart and kill -9: a queue deleted before the
fault stays deleted, and a priority queue comes back a priority queue, for the messages it held and
for those published after.

Both ride the run's shared faults (conformance.runner.shared_faults): prepare before the restart or
the kill, observe after it; neither adds a fault of its own to a whole run.
"""

from __future__ import annotations

from dataclasses import replace

from conformance.cases.persist import RestartOrKill
from conformance.cases.persist.test_restart import RECOVERY_S, how, unavailable
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout
from conformance.kit.case import CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same

NOT_FOUND = 404
LOW, HIGH = 0, 9


class TestDeletedQueueStaysGone(RestartOrKill):
    """A durable queue with persistent messages, deleted before the fault; a second durable queue,
    kept, is the barrier after it: once the broker serves the kept one, it has recovered the
    queues it stored, and a passive declare of the deleted one must find nothing."""

    requirement = "PERSIST-DELETED-QUEUE-STAYS-GONE"
    #: The queue's record is the vhost's definitions, whatever its type; a quorum queue after kill -9
    #: would also cost a leader check.
    queue_types = ("classic",)

    def prepare(self, ctx: CaseContext) -> Obs:
        deleted, kept = ctx.queue(role="deleted"), ctx.queue(role="kept")
        ctx.publish(deleted, 2, prefix="deleted-", persistent=True)
        ctx.publish(kept, 1, prefix="kept-", persistent=True)
        ctx.admin.delete_queue(deleted)  # delete-ok: the deletion is done before the fault
        return {"variant": ctx.variant, "deleted": deleted, "kept": kept}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        out = {"variant": prepared["variant"], "deleted": prepared["deleted"]}
        try:
            ctx.await_queue(prepared["kept"], timeout=ctx.recovery_left(RECOVERY_S))
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            # the barrier is gone; the deleted queue is still asked once: one that came back fails whatever the barrier did
            return {**out, "unavailable": f"{type(exc).__name__}: {exc}", "after": self._passive(ctx, prepared["deleted"])}
        return {**out, "unavailable": None, "after": ctx.channel_error(lambda: ctx.admin.queue_stats(prepared["deleted"]))}

    @staticmethod
    def _passive(ctx: CaseContext, queue: str) -> Obs | None:
        try:
            return ctx.channel_error(lambda: ctx.admin.queue_stats(queue))
        except (ConnectionLost, OperationTimeout):
            return None  # the broker does not answer at all: the barrier's cause says why

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        after = obs["after"]
        if obs["unavailable"]:
            if after is not None and not after["closed"]:
                return holds(False, expected=f"queue {obs['deleted']!r}, deleted (delete-ok) before the {fault}, still gone after it",
                             observed=f"passive declare: the queue exists again (and the durable queue kept across the {fault} could not be consumed: {obs['unavailable']})",
                             key=f"deleted-queue-back-after-{obs['variant']}")
            deleted = "" if after is None else f"; the deleted one: passive declare closed with {after['code']}"
            v = unavailable(obs, f"the durable queue kept across the {fault} served again, the deleted one still gone")
            return replace(v, observed=v.observed + deleted)
        back = not after["closed"]
        return holds(after["closed"] and after["code"] == NOT_FOUND,
                     expected=f"queue {obs['deleted']!r}, deleted (delete-ok) before the {fault}, still gone after it: passive queue.declare refused with 404 NOT_FOUND",
                     observed="passive declare: the queue exists again" if back else f"passive declare: closed with {after['code']} {after.get('text', '')}".rstrip(),
                     key=f"deleted-queue-back-after-{obs['variant']}" if back else f"passive-declare-{after['code']}")


class TestPriorityOrderSurvives(RestartOrKill):
    """Persistent messages of priority 0 then 9 on a durable priority queue before the fault, one of
    each after it, all queued before the consumer: the priority-9 ones first."""

    requirement = "PERSIST-PRIORITY-ORDER-SURVIVES"
    #: The priority configuration's queue (x-max-priority 10): a broker refusing it makes the cell
    #: unsupported (refused); RabbitMQ 3.10 quorum queues have no priorities.
    queue_types = ("classic+priority",)

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        before = [("before-low1", LOW), ("before-low2", LOW), ("before-high", HIGH)]
        for mid, prio in before:
            ctx.admin.publish(q, mid.encode(), message_id=mid, persistent=True, priority=prio)
        return {"variant": ctx.variant, "queue": q, "published": [list(p) for p in before]}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        q = prepared["queue"]
        published = [tuple(p) for p in prepared["published"]]
        out = {"variant": prepared["variant"]}
        try:
            ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
            for mid, prio in (("after-low", LOW), ("after-high", HIGH)):
                ctx.admin.publish(q, mid.encode(), message_id=mid, persistent=True, priority=prio)
                published.append((mid, prio))
            drained = ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            return {**out, "published": [list(p) for p in published], "delivered": [], "unavailable": f"{type(exc).__name__}: {exc}"}
        return {**out, "published": [list(p) for p in published], "delivered": [d.message_id for d in drained], "unavailable": None}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        ids = [mid for mid, _ in obs["published"]]
        high = [mid for mid, prio in obs["published"] if prio == HIGH]
        if obs["unavailable"]:
            return unavailable(obs, f"{fmt(ids)} delivered after the {fault}, priority {HIGH} first")
        got = obs["delivered"]
        lead = got[:len(high)]
        fifo = got == ids  # publication order: the queue came back without priorities
        return first_failure(
            same(sorted(ids), sorted(got), what=f"persistent messages on the priority queue, published around the {fault}"),
            holds(sorted(lead) == sorted(high),
                  expected=f"published {fmt([f'{m}:{p}' for m, p in obs['published']])} (id:priority; the last two after the {fault}) "
                           f"before any consumer: priority {HIGH} ({fmt(high)}) delivered before every priority {LOW}",
                  observed=f"delivered in order {fmt(got)}", key="priority-lost-after-" + obs["variant"] if fifo else "priority-order"),
        )
