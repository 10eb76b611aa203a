"""AMQP 0-9-1 basic.publish: message priorities (basic rule 06) and a publish to a missing exchange (over AMQP 1.0:
a sending link attached to the address of an exchange that does not exist, transport 2.6.3)."""

from __future__ import annotations

import uuid

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import channel_closed_with, no_node_refused
from conformance.kit.verdicts import Verdict, holds

NOT_FOUND = 404
#: The broker owes its attach and the detach that follows it at once ("MUST immediately detach").
ATTACH_PROMPT_S = 3.0
LOW, HIGH = 0, 9


class TestPriorityTwoLevels(Case):
    requirement = "PUBLISH-PRIORITY-TWO-LEVELS"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = []
        for mid, prio in (("low1", LOW), ("low2", LOW), ("low3", LOW), ("high", HIGH)):
            ctx.admin.publish(q, mid.encode(), message_id=mid, priority=prio)
            published.append({"id": mid, "priority": prio})
        session = ctx.session("consumer")
        held = ctx.take(session.consume(q, prefetch=10), len(published))
        session.ack(held[-1].tag, multiple=True)
        session.sync()
        return {"published": published, "delivered": [delivery_obs(d) for d in held]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        order = [d["id"] for d in obs["delivered"]]
        high = next(p["id"] for p in obs["published"] if p["priority"] == HIGH)
        fifo = order == [p["id"] for p in obs["published"]]  # every message, in publication order: priority ignored
        return holds(bool(order) and order[0] == high,
                     expected=f"published {[(p['id'], p['priority']) for p in obs['published']]} before any consumer: {high} (priority {HIGH}) delivered first",
                     observed=f"delivered in order {order}", key="priority-ignored" if fifo else None)


class TestUnknownExchange(Case):
    requirement = "PUBLISH-UNKNOWN-EXCHANGE-404"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        missing = f"conformance.missing.{uuid.uuid4().hex[:8]}"
        session = ctx.session("publisher")
        if ctx.adapter.protocol == "amqp-1.0":
            # AMQP 1.0 publishes by attaching a sending link to the exchange's node: its answer is the rule's (2.6.3)
            attach = session.attach_answer("rk", ATTACH_PROMPT_S, exchange=missing)
            ctx.history.add("publisher", "attach", f"{attach}")
            return {"exchange": missing, "attach": attach}
        answer = ctx.channel_error(lambda: (session.publish("rk", b"x", message_id="m1", exchange=missing), session.sync()))
        return {"exchange": missing, "answer": answer}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if "attach" in obs:
            return no_node_refused(obs["attach"], what="of a sending link to exchange (never declared) at")
        return channel_closed_with(obs["answer"], NOT_FOUND, what=f"basic.publish to exchange {obs['exchange']!r}, never declared")
