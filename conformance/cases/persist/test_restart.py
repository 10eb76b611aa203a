"""Persistence across a node restart and kill -9 (broker-level faults; one fault may serve many cases).

Delivery modes map to the Qpid design seed's PERSISTENT (2) and NON_PERSISTENT (1). Messages are
published over the confirming admin session, so "confirmed" is established before the fault.
"""

from __future__ import annotations

from typing import Any, Mapping

from conformance.api import AckMode
from conformance.cases.persist import RestartOrKill
from conformance.catalogue.capabilities import adapter_capabilities
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs, Settled, delivery_obs
from conformance.kit.reference import judge
from conformance.kit.scenarios import unavailable_key
from conformance.kit.verdicts import Outcome, Verdict, first_failure, fmt, holds, same
from conformance.nemesis.kinds import RESTART, FaultKind
from conformance.unsupported import REFUSED

#: How long the restarted broker has to serve the queue again (boot already finished).
RECOVERY_S = 15.0


def recovered(ctx: CaseContext, q: str) -> dict[str, Any]:
    """After the fault: wait until ``q`` answers (ending as soon as it does), then drain it; an
    unavailable queue is reported."""
    try:
        ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
        drained = ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))
        return {"drained": [{"id": d.message_id, "persistent": d.persistent} for d in drained], "unavailable": None}
    except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
        return {"drained": [], "unavailable": f"{type(exc).__name__}: {exc}"}


def how(obs: Obs) -> str:
    """The fault a restart-or-kill case's observation went through, in the verdict's words."""
    return "kill -9 and start" if obs["variant"] == "kill" else "restart"


def unavailable(obs: Obs, expected: str, *, kill: bool | None = None) -> Verdict:
    """The queue never became consumable; the key names the fault, since a profile may document
    unavailability after kill -9 but not after a graceful restart."""
    kill = obs.get("variant") == "kill" if kill is None else kill
    return holds(False, expected=expected, observed=f"the queue could not be consumed after the {'kill -9' if kill else 'restart'} ({obs['unavailable']})",
                 key=unavailable_key(obs["unavailable"], kill=kill))



class TestConfirmedSurvives(RestartOrKill):
    requirement = "PERSIST-CONFIRMED-SURVIVES"
    #: a queue declared with a dead-letter exchange recovers its dead-lettering state with its messages
    configurations = ("dead-letter",)

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        return {"variant": ctx.variant, "queue": q, "ids": ctx.publish(q, 3, prefix="persistent-", persistent=True)}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        return {"variant": prepared["variant"], "ids": prepared["ids"], **recovered(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        if obs["unavailable"]:
            return unavailable(obs, f"{fmt(obs['ids'])} delivered after {fault}")
        got = [d["id"] for d in obs["drained"]]
        lost_flag = [d["id"] for d in obs["drained"] if d["persistent"] is not True]
        return first_failure(
            same(obs["ids"], got, what=f"confirmed persistent messages after {fault}"),
            holds(not lost_flag, expected="still delivery-mode 2 (persistent)", observed=f"not persistent: {fmt(lost_flag)}" if lost_flag else "all persistent",
                  key="persistence-flag-lost"),
        )


class TestTransientFate(Case):
    requirement = "PERSIST-TRANSIENT-FATE"
    disrupts_broker = True

    def broker_fault(self, variant: str | None) -> FaultKind:
        return RESTART

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        transient = ctx.publish(q, 2, prefix="transient-")
        control = ctx.publish(q, 1, prefix="persistent-", persistent=True)
        return {"queue": q, "transient": transient, "control": control}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        return {"transient": prepared["transient"], "control": prepared["control"], **recovered(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if obs["unavailable"]:
            return unavailable(obs, "the queue served after a restart", kill=False)

        def check(values: Mapping[str, Any]) -> Verdict:
            fate = values["persistence.transient-after-restart"]
            want = ([*obs["transient"], *obs["control"]] if fate == "kept" else obs["control"])
            got = [d["id"] for d in obs["drained"]]
            return same(sorted(want), sorted(got), what=f"queue content after restart (transient messages {fate}, as the vendor documents; one persistent control)", spec=False)

        return judge(self.requirement, profile, queue_type, ["persistence.transient-after-restart"], check)


class TestNonDurableQueueGone(Case):
    requirement = "PERSIST-NON-DURABLE-QUEUE-GONE"
    disrupts_broker = True

    def broker_fault(self, variant: str | None) -> FaultKind:
        return RESTART

    def prepare(self, ctx: CaseContext) -> Obs:
        declared: list[str] = []
        answer = ctx.channel_error(lambda: declared.append(ctx.queue(durable=False)))
        if answer["closed"]:
            return Settled({"declare": answer})
        q = declared[0]
        ctx.publish(q, 1, persistent=True)
        return {"declare": answer, "queue": q}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        q = prepared["queue"]
        return {"declare": prepared["declare"], "after": ctx.channel_error(lambda: ctx.admin.queue_stats(q))}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        declare = obs["declare"]
        refused = f"declare refused with {declare.get('code')} {declare.get('text', '')}".rstrip()

        def check(values: Mapping[str, Any]) -> Verdict:
            if values["persistence.non-durable-queue"] == "declare-refused":
                return holds(bool(declare["closed"]), expected="declaring a non-durable queue is refused",
                             observed=refused if declare["closed"] else "declared", key="declared")
            if declare["closed"]:
                # queue.declare durable, rule "types": the server MUST support both durable and transient queues
                return holds(False, expected="a non-durable queue can be declared (the server MUST support transient queues)",
                             observed=refused, key=f"refused-{declare['code']}")
            after = obs["after"]
            return holds(after["closed"] and after["code"] == 404,
                         expected="after the restart the non-durable queue no longer exists (passive declare: 404 NOT_FOUND)",
                         observed=f"passive declare: {'closed with ' + str(after['code']) if after['closed'] else 'the queue still exists'}",
                         key="queue-survived" if not after["closed"] else None)

        return judge(self.requirement, profile, queue_type, ["persistence.non-durable-queue"], check)


def requeued_held(ctx: CaseContext, q: str, n: int) -> list[Obs]:
    """Take ``n`` deliveries of ``q`` on one channel, cancel the consumer (so nothing comes straight
    back), return them all with basic.nack(multiple, requeue=true) and close the channel; the
    synchronous cancel and the round trip after the nack are the barriers.

    Where cancelling would end the deliveries with the subscription (AMQP 1.0: a delivery belongs to
    its link, whose detach settles it; no ``consumer-cancel.keeps-unacked``) the link stays attached
    while its deliveries are released: one the broker sends straight back is released again by the
    session's end, and the departure barrier proves every one of them is back on the queue."""
    offered = adapter_capabilities(ctx.adapter)
    session = ctx.session("consumer")
    consumer = session.consume(q, prefetch=n)
    held = ctx.take(consumer, n)
    if offered is None or "consumer-cancel.keeps-unacked" in offered:
        consumer.cancel()
    session.nack(held[-1].tag, multiple=True, requeue=True)
    session.sync()
    session.close()
    ctx.await_consumers(q, 0)
    return [delivery_obs(d) for d in held]


def recovered_deliveries(ctx: CaseContext, q: str) -> dict[str, Any]:
    """As :func:`recovered`, keeping each delivery's flags and count."""
    try:
        ctx.await_queue(q, timeout=ctx.recovery_left(RECOVERY_S))
        drained = ctx.drain(q, ctx.recovery_left(RECOVERY_S), op_timeout=ctx.recovery_left(RECOVERY_S))
        return {"drained": [delivery_obs(d) for d in drained], "unavailable": None}
    except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
        return {"drained": [], "unavailable": f"{type(exc).__name__}: {exc}"}


class TestRequeuedRedelivered(RestartOrKill):
    """Persistent messages delivered and returned with basic.nack(requeue=true) before the fault come
    back after it, flagged redelivered (basic.deliver redelivered: the message may have been
    delivered before)."""

    requirement = "PERSIST-REQUEUED-REDELIVERED"

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        ids = ctx.publish(q, 2, prefix="requeued-", persistent=True)
        return {"variant": ctx.variant, "queue": q, "ids": ids, "before": requeued_held(ctx, q, 2)}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        return {"variant": prepared["variant"], "ids": prepared["ids"], "before": prepared["before"], **recovered_deliveries(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        if obs["unavailable"]:
            return unavailable(obs, f"{fmt(obs['ids'])} redelivered after {fault}")
        got = [d["id"] for d in obs["drained"]]
        cleared = [d["id"] for d in obs["drained"] if d["redelivered"] is not True]
        return first_failure(
            same(obs["ids"], got, what=f"persistent messages nacked with requeue=true, after {fault}"),
            holds(not cleared, expected=f"delivered after the {fault} with redelivered=true (delivered and requeued before it)",
                  observed=f"redelivered=false: {fmt(cleared)}" if cleared else "all redelivered=true", key="redelivered-cleared-by-restart"),
        )


class TestPurgedStaysGone(RestartOrKill):
    """Messages removed by queue.purge, requeued ones among them, do not come back after the fault."""

    requirement = "PERSIST-PURGED-STAYS-GONE"

    def prepare(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        ids = ctx.publish(q, 4, prefix="purged-", persistent=True)
        requeued_held(ctx, q, 2)
        purged = ctx.admin.purge_queue(q)
        control = ctx.publish(q, 1, prefix="after-purge-", persistent=True)
        return {"variant": ctx.variant, "queue": q, "ids": ids, "purged": purged, "control": control}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        kept = ("variant", "ids", "purged", "control")
        return {**{k: prepared[k] for k in kept}, **recovered(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        count = holds(obs["purged"] == len(obs["ids"]), expected=f"purge-ok message-count {len(obs['ids'])} (2 of them requeued)",
                      observed=f"purge-ok message-count {obs['purged']}", key="purge-count")
        if count.outcome is not Outcome.PASS:
            return count  # the purge came before the fault: whatever the fault did after it
        if obs["unavailable"]:
            return unavailable(obs, f"only {fmt(obs['control'])} after {fault}")
        got = [d["id"] for d in obs["drained"]]
        back = [m for m in got if m in obs["ids"]]
        return first_failure(
            count,
            holds(not back, expected=f"no purged message after the {fault}", observed=f"purged messages back: {fmt(back)}", key="purged-back"),
            same(obs["control"], got, what=f"queue content after purge, one persistent publish and {fault}"),
        )


class TestDeliveryCountSurvives(RestartOrKill):
    """On a queue with a delivery limit, x-delivery-count after the fault continues from the count the
    message had before it: a restart must not give a poison message a fresh budget."""

    requirement = "PERSIST-DELIVERY-COUNT-SURVIVES"

    def prepare(self, ctx: CaseContext) -> Obs:
        declared: list[str] = []
        answer = ctx.channel_error(lambda: declared.append(ctx.queue({"x-delivery-limit": 10})))
        if answer["closed"]:
            return Settled({"variant": ctx.variant, "declare": answer})
        q = declared[0]
        ids = ctx.publish(q, 1, prefix="counted-", persistent=True)
        session = ctx.session("consumer")
        before = []
        for _ in range(2):  # basic.get on one channel: each get sees the previous nack's requeue
            d = session.get(q, ack_mode=AckMode.MANUAL)
            if d is None:
                break
            before.append(delivery_obs(d))
            session.nack(d.tag, requeue=True)
        session.sync()
        session.close()
        return {"variant": ctx.variant, "declare": answer, "queue": q, "ids": ids, "before": before}

    def observe(self, ctx: CaseContext, prepared: Obs) -> Obs:
        kept = ("variant", "declare", "ids", "before")
        return {**{k: prepared[k] for k in kept}, **recovered_deliveries(ctx, prepared["queue"])}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        fault = how(obs)
        answer = obs["declare"]
        if answer["closed"]:
            documented = profile.entry("delivery-limit.support", queue_type)
            if documented is None or documented.value != "supported":
                return Verdict(Outcome.UNSUPPORTED, expected="queue.declare with x-delivery-limit=10: accepted",
                               observed=f"refused with {answer.get('code')} {answer.get('text', '')}".rstrip(),
                               reason=f"the broker refused x-delivery-limit for this queue type cleanly ({answer.get('code')})",
                               unsupported_kind=REFUSED, key=f"refused-{answer.get('code')}")
            return holds(False, expected="queue.declare with x-delivery-limit=10: accepted (the vendor documents delivery limits)",
                         observed=f"refused with {answer.get('code')}", key=f"refused-{answer.get('code')}")
        if obs["unavailable"]:
            return unavailable(obs, f"{fmt(obs['ids'])} after {fault}")
        counts = [d["delivery_count"] for d in obs["before"]]
        got = [d["id"] for d in obs["drained"]]
        if len(counts) < 2 or counts[-1] is None:
            return holds(False, expected="two deliveries before the fault, the second counting the first return in x-delivery-count",
                         observed=f"x-delivery-count before the fault: {fmt(counts)}", key="not-counted-before")
        after = [d["delivery_count"] for d in obs["drained"]]
        return first_failure(
            same(obs["ids"], got, what=f"the persistent message returned twice, after {fault}"),
            same([counts[-1] + 1], after, what=f"x-delivery-count after {fault} (before it: {fmt(counts)}; none = header absent)", spec=False),
        )
