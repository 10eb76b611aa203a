"""Where a requeued message goes: back at its original place (the seed's and RabbitMQ's documented
intent; AMQP 0-9-1 leaves it to the broker). A broker that puts it elsewhere deviates only where its
profile documents that place, with the reason and a citation.

Two consumers with prefetch 1 hold m1 (A) and m2 (B) while m3, m4 wait. B returns its message
first, then A. The resulting order tells the three documented policies apart:
publication-order [m1 m2 m3 m4], head-in-return-order [m2 m1 m3 m4], tail-in-return-order [m3 m4 m2 m1].

A consumer returns its message by going away (its connection cut), by basic.recover (0-9-1 only),
or by a negative acknowledgement with requeue (0-9-1 basic.nack, 1.0 released) after it stopped
receiving (0-9-1 basic.cancel, 1.0 no more link credit), so that nothing returned is taken again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from conformance.catalogue.capabilities import adapter_capabilities, vocabulary
from conformance.catalogue.profiles import Profile
from conformance.errors import OperationTimeout, Unsupported
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.reference import judge
from conformance.kit.verdicts import Verdict, same

POLICIES = ("publication-order", "head-in-return-order", "tail-in-return-order")
#: How long a returned message may take to be counted ready again before the drain judges what came back.
RETURN_WINDOW_S = 5.0
#: What a variant needs beyond the requirement's needs (conformance/catalogue/data/capabilities.yaml).
VARIANT_NEEDS: dict[str, tuple[str, ...]] = {"consumer-loss": (), "recover": ("recover",), "nack": ("nack.requeue", "consume.pause")}


def expected_order(policy: str, published: list[str], returned: list[str]) -> list[str]:
    untouched = [m for m in published if m not in returned]
    if policy == "publication-order":
        return [m for m in published]
    if policy == "head-in-return-order":
        return returned + untouched
    if policy == "tail-in-return-order":
        return untouched + returned
    raise ValueError(f"unknown requeue policy {policy!r}; one of {', '.join(POLICIES)}")


def back_in_queue(ctx: CaseContext, q: str, ready: int, what: str) -> None:
    """Barrier: the queue counts ``ready`` messages again. A return the broker accepted and never
    made (the count stays short) is an observation, not the suite's error: the drain's order then
    shows what is missing, and the verdict fails it."""
    try:
        ctx.wait_for(lambda: ctx.stats(q).ready >= ready, what, timeout=RETURN_WINDOW_S)
    except OperationTimeout:
        pass  # recorded in the history by wait_for


class TestRequeuePosition(Case):
    requirement = "ACK-REQUEUE-POSITION"
    variants = ("consumer-loss", "recover", "nack")
    configurations = ("priority", "length-limit-drop-head", "delivery-limit")

    def scenario(self, ctx: CaseContext) -> Obs:
        offered = adapter_capabilities(ctx.adapter)
        lacking = [n for n in VARIANT_NEEDS[ctx.variant or ""] if offered is not None and n not in offered]
        if lacking:  # before any setup: the variant is not the broker's to fail
            raise Unsupported(f"variant {ctx.variant} needs {', '.join(lacking)} ({'; '.join(vocabulary()[n] for n in lacking)}), "
                              f"which adapter {ctx.adapter.name} does not offer")
        q = ctx.queue()
        published = ctx.publish(q, 4)
        conn_a, conn_b = ctx.connect("A"), ctx.connect("B")
        sa, sb = conn_a.session(), conn_b.session()
        ca = sa.consume(q, prefetch=1)
        held_a = ctx.take(ca, 1)[0]
        cb = sb.consume(q, prefetch=1)
        held_b = ctx.take(cb, 1)[0]
        if ctx.variant in ("recover", "nack"):
            ca.pause()
            cb.pause()
            if ctx.variant == "recover":
                sb.recover(requeue=True)
            else:
                sb.nack(held_b.tag, requeue=True)
            back_in_queue(ctx, q, 3, "B's delivery back in the queue")
            if ctx.variant == "recover":
                sa.recover(requeue=True)
            else:
                sa.nack(held_a.tag, requeue=True)
            back_in_queue(ctx, q, 4, "A's delivery back in the queue")
        else:
            conn_b.cut()
            ctx.await_consumers(q, 1)
            conn_a.cut()
            ctx.await_consumers(q, 0)
        order = [d.message_id for d in ctx.drain(q)]
        return {"variant": ctx.variant, "published": published, "returned": [held_b.message_id, held_a.message_id], "order": order}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        key = f"requeue.position.{obs['variant']}"

        def check(values: Mapping[str, Any]) -> Verdict:
            policy = values[key]
            expected = expected_order(policy, obs["published"], obs["returned"])
            v = same(expected, obs["order"], what="delivery order after requeue", spec=False)
            return replace(v, expected=f"{v.expected} ({policy})")

        return judge(self.requirement, profile, queue_type, [key], check)
