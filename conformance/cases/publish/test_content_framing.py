"""AMQP 0-9-1 content framing at its edges: an empty body, and a body larger than frame-max (over
AMQP 1.0: a message split over several transfer frames, more=true).

These used to be assumptions hidden in the suite (an empty-bodied sentinel): a broker that never
confirmed an empty body stalled every case. Now they are requirements of their own, and the
suite's barriers use ordinary payloads (conformance.kit.case.sentinel_body).

The producer publishes on its own confirming connection whose operations wait at most
``CONFIRM_WINDOW_S``: a confirm that never comes is an observation ("basic.publish: no basic.ack
within 5s"), not a stalled case. Whether the message was routed is proven by a sentinel published
after it on the admin connection: everything the queue held arrives before the sentinel.
"""

from __future__ import annotations

import hashlib

from conformance.catalogue.profiles import Profile
from conformance.errors import AdapterError, ConnectionLost, OperationTimeout, Unsupported
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.context.state import DELIVERY_WINDOW_S
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

#: How long the producer waits for the broker's basic.ack of the edge-case publish.
CONFIRM_WINDOW_S = DELIVERY_WINDOW_S
#: pika offers frame-max 131072 and a broker may only lower it, so this body needs at least 4 body
#: frames on any broker reached through the pika adapter (the odd tail checks reassembly).
LARGE_BODY = 3 * 131072 + 1001


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]


def publish_edge(ctx: CaseContext, body: bytes, mid: str, *, copies: int = 1) -> Obs:
    """Publish ``body`` once; with ``copies`` > 1 through a fanout exchange bound to that many
    queues, so the broker stores (or references) one incoming body for several queues."""
    queues = [ctx.queue(role=f"q{i}") for i in range(1, copies + 1)] if copies > 1 else [ctx.queue()]
    exchange = ""
    if copies > 1:
        exchange = ctx.exchange("fanout")
        for q in queues:
            ctx.admin.bind_queue(q, exchange, "")
    producer = ctx.connect("producer", op_timeout=CONFIRM_WINDOW_S).session()
    producer.enable_confirms()
    try:
        producer.publish(queues[0], body, message_id=mid, exchange=exchange)
        confirm = "basic.ack"
    except Unsupported:  # the protocol cannot publish so (AMQP 1.0 has no exchange to route by): no observation
        raise
    except (ConnectionLost, OperationTimeout) as exc:  # the confirm (0-9-1 basic.ack, 1.0 outcome) never came
        confirm = str(exc)
    except AdapterError as exc:  # basic.nack, or returned unroutable
        confirm = str(exc)
    delivered = []
    for i, q in enumerate(queues):
        consumer = ctx.session(f"consumer{i}" if i else "consumer").consume(q, prefetch=10)
        before = ctx.until_sentinel(consumer, q)
        delivered.append([{"id": d.message_id, "size": len(d.body or b""), "sha": digest(d.body or b"")} for d in before])
    obs: Obs = {"published": {"id": mid, "size": len(body), "sha": digest(body)}, "confirm": confirm, "delivered": delivered[0]}
    if copies > 1:
        obs["copies"] = delivered
    return obs


def _short(d: dict[str, object]) -> str:
    return f"{d['id']} ({d['size']} bytes)"


def judge_edge(obs: Obs, what: str) -> Verdict:
    if "copies" in obs:  # one verdict per bound queue: each must hold its own unchanged copy
        one = {k: v for k, v in obs.items() if k != "copies"}
        return first_failure(*(judge_edge({**one, "delivered": got}, f"{what}, the copy in bound queue {i}")
                               for i, got in enumerate(obs["copies"], 1)))
    sent = obs["published"]
    got = obs["delivered"]
    routed = f"delivered before the sentinel: {fmt([_short(d) for d in got])}"
    return first_failure(
        holds(obs["confirm"] == "basic.ack", expected=f"basic.ack (AMQP 1.0: the accepted outcome) for the publish of {what}",
              observed=obs["confirm"] if obs["confirm"] == "basic.ack" else f"{obs['confirm']}; {routed}", key="not-confirmed"),
        holds(
            got == [sent],
            expected=f"{what} (message-id {sent['id']}, {sent['size']} bytes) delivered once, unchanged, before the sentinel",
            observed=routed
            + ("" if not got or got == [sent] else f"; sent sha {sent['sha']}, got {fmt([d['sha'] for d in got])}"),
            key="not-routed" if not got else "altered",
        ),
    )


class TestEmptyBody(Case):
    requirement = "PUBLISH-EMPTY-BODY"

    def scenario(self, ctx: CaseContext) -> Obs:
        return publish_edge(ctx, b"", "m-empty")

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_edge(obs, "a message with an empty body (body-size 0, no body frames)")


class TestBodyLargerThanFrameMax(Case):
    requirement = "PUBLISH-BODY-LARGER-THAN-FRAME-MAX"

    def scenario(self, ctx: CaseContext) -> Obs:
        body = bytes((i * 31 + 7) % 251 for i in range(LARGE_BODY))
        return publish_edge(ctx, body, "m-large")

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_edge(obs, f"a message of {LARGE_BODY} bytes (larger than frame-max 131072, AMQP 1.0 max-frame-size)")


class TestBodyLargerThanFrameMaxFanout(Case):
    """The same large body routed by a fanout exchange to two queues: a broker that keeps one
    stored body for several queues must give each consumer the whole body, unchanged."""

    requirement = "PUBLISH-BODY-LARGER-THAN-FRAME-MAX"
    variants = ("fanout-two-queues",)

    def scenario(self, ctx: CaseContext) -> Obs:
        body = bytes((i * 31 + 7) % 251 for i in range(LARGE_BODY))
        return publish_edge(ctx, body, "m-large", copies=2)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_edge(obs, f"a message of {LARGE_BODY} bytes (larger than frame-max 131072) through a fanout exchange")
