"""Connection cuts at each frame of a delivery and around its acknowledgement, and a consumer that
leaves while the broker is still writing a body of several frames.

The cut points are data (DELIVERY_CUTS, ACK_CUTS): a frame, who sends it, which one, and whether the
proxy resets the connection before forwarding it or once the peer's TCP stack has it. Each scenario
ends with a barrier (the queue reports the consumer gone) and a sentinel-proven drain, so "came
back" and "did not come back" are both decided, never sampled. A broker that closes the channel or
the connection, or dies, where the scenario expects an answer is observed, and judged a failure.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from conformance.catalogue.capabilities import adapter_capabilities, vocabulary
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConformanceError, ConnectionLost, OperationTimeout, Unsupported
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, ScenarioVoid, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.faults import Action, Moment
from conformance.nemesis.points import fault_at, frame_size_query
from conformance.secrets import SecretUrl

#: Payload bytes of one body frame at frame-max 131072 (RabbitMQ's and LavinMQ's default; the frame's
#: 8 bytes of header and end octet are not payload).
FRAME_PAYLOAD = 131072 - 8
#: Three body frames: one to cut inside, one to cut after.
BODY_FRAMES = 3
DELIVERY_BODY = (BODY_FRAMES - 1) * FRAME_PAYLOAD + 1000

#: variant -> (fault point, nth of it on the connection): the broker's frame the connection is reset
#: after (forwarded, and acknowledged by the client's TCP stack, then RST both ways). The points are
#: data (conformance/nemesis/fault_points.yaml): over AMQP 1.0 the delivery is BODY_FRAMES transfer
#: frames at the client's max-frame-size of FRAME_PAYLOAD + 8 (the first begins the delivery and its
#: content), and no frame carries the message's properties alone (cannot-express).
DELIVERY_CUTS: dict[str, tuple[str, int]] = {
    "after-deliver-method": ("deliver", 1),
    "after-content-header": ("delivery-header", 1),
    "inside-body": ("delivery-content", 1),
    "after-last-body-frame": ("delivery-content", BODY_FRAMES),
}

#: variant -> (moment of the cut at the client's 1st acknowledgement, multiple, must the acked come back):
#: withheld at the proxy the ack never reaches the broker; delivered, it may or may not take effect.
#: The acknowledgement is the fault point "ack": 0-9-1 basic.ack, AMQP 1.0 the receiver's disposition
#: (one delivery-id, or first..last for the up-to variant: capability ack.range).
ACK_CUTS: dict[str, tuple[Moment, bool, bool]] = {
    "ack-withheld": (Moment.BEFORE, False, True),
    "ack-delivered": (Moment.AFTER, False, False),
    "ack-multiple-delivered": (Moment.AFTER, True, False),
}
#: Held messages; the ack names the 2nd (multiple covers the 1st too); the 3rd is never acked.
ACK_HELD, ACK_AT = 3, 2
#: The acknowledgement's frame (the fault point "ack" of the client's protocol), in the verdict's words.
ACK_WORDS = {"disposition": "disposition (accepted, settled)"}


def body_of(mid: str, size: int) -> bytes:
    seed = hashlib.sha256(mid.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def intact(d: Any, sizes: dict[str, int]) -> bool:
    mid = d.message_id or ""
    return d.body == body_of(mid, sizes.get(mid, 0))


def after_loss(ctx: CaseContext, q: str, sizes: dict[str, int]) -> Obs:
    """Barrier (no consumer left), then everything the queue delivers, proven complete by a sentinel;
    a broker that no longer answers is an observation too."""
    try:
        ctx.await_consumers(q, 0)
        drained = ctx.drain(q)
    except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
        return {"returned": [], "intact": [], "unreachable": f"{type(exc).__name__}: {exc}"}
    except ConformanceError as exc:
        return {"returned": [], "intact": [], "unreachable": f"{type(exc).__name__}: {exc}"}
    return {"returned": [delivery_obs(d) for d in drained], "intact": [intact(d, sizes) for d in drained], "unreachable": None}


def served(obs: Obs, what: str) -> Verdict:
    return holds(not obs["unreachable"], expected=f"the broker serves the queue {what}",
                 observed=f"the queue could not be drained: {obs['unreachable']}" if obs["unreachable"] else "it does",
                 key="broker-unreachable" if obs["unreachable"] else None)


def bodies_intact(obs: Obs) -> Verdict:
    torn = [d["id"] for d, ok in zip(obs["returned"], obs["intact"]) if not ok]
    return holds(not torn, expected="every delivery's body arrives whole and unchanged",
                 observed=f"bodies differ: {fmt(torn)}" if torn else "all intact", key="body-corrupt" if torn else None)


class TestCutInsideDelivery(Case):
    requirement = "ACK-CUT-INSIDE-DELIVERY"
    variants = tuple(DELIVERY_CUTS)

    def scenario(self, ctx: CaseContext) -> Obs:
        point, nth = DELIVERY_CUTS[ctx.variant or ""]
        fault_at(ctx.adapter.protocol, point)  # a moment the protocol cannot express ends the case before any setup
        q = ctx.queue()
        ctx.admin.publish(q, body_of("m1", DELIVERY_BODY), message_id="m1")
        proxy = ctx.proxy()
        fault = proxy.arm(fault_at(proxy.protocol, point, nth=nth, moment=Moment.AFTER))
        frames = frame_size_query(proxy.protocol, FRAME_PAYLOAD + 8)
        url = SecretUrl(ctx.url).with_query(frames) if frames else None
        consumer = ctx.connect("consumer", via=proxy, url=url).session().consume(q, prefetch=10)
        received = []
        try:  # the client reads (a blocking client reads only when asked) until the message or the cut
            received = [delivery_obs(d) for d in consumer.take(1, WAIT_S)]
        except (ConformanceError, OSError):
            pass  # the cut came first: nothing, or only part of the message, reached the client
        hit = ctx.expect_fired(fault)
        return {"variant": ctx.variant, "published": ["m1"], "hit": hit, "received": received,
                **after_loss(ctx, q, {"m1": DELIVERY_BODY})}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        where = f"after the connection was reset {obs['variant'].replace('-', ' ')}"
        return first_failure(
            served(obs, where),
            returned_exactly(obs["returned"], obs["published"], what=f"{where}, the unacknowledged message"),
            all_redelivered(obs["returned"], signal=signal_of(profile, queue_type)),
            bodies_intact(obs),
        )


class TestCutAroundAck(Case):
    requirement = "ACK-CUT-AROUND-ACK"
    variants = tuple(ACK_CUTS)

    def scenario(self, ctx: CaseContext) -> Obs:
        moment, multiple, _ = ACK_CUTS[ctx.variant or ""]
        if multiple:
            offered = adapter_capabilities(ctx.adapter)
            if offered is not None and "ack.range" not in offered:
                # the requirement needs ack.individual; only this variant needs more
                raise Unsupported(f"variant {ctx.variant} acknowledges up to a delivery in one operation (ack.range: "
                                  f"{vocabulary()['ack.range']}), which adapter {ctx.adapter.name} does not offer")
        fault_at(ctx.adapter.protocol, "ack")  # a protocol with no acknowledgement frame ends the case before any setup
        q = ctx.queue()
        published = ctx.publish(q, ACK_HELD)
        proxy = ctx.proxy()
        fault = proxy.arm(fault_at(proxy.protocol, "ack", moment=moment))
        session = ctx.session("consumer", via=proxy)
        held = ctx.take(session.consume(q, prefetch=10), ACK_HELD)
        acked = held[:ACK_AT] if multiple else held[ACK_AT - 1:ACK_AT]
        try:
            session.ack(held[ACK_AT - 1].tag, multiple=multiple)
            session.sync()
        except (ConnectionLost, OSError):
            pass  # the cut: what the broker made of the ack is what the drain shows
        hit = ctx.expect_fired(fault)
        return {"variant": ctx.variant, "published": published, "hit": hit, "held": [delivery_obs(d) for d in held],
                "acked": [d.message_id for d in acked], "ack": ACK_WORDS.get(fault.frame, fault.frame), **after_loss(ctx, q, {})}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        _, multiple, acked_return = ACK_CUTS[obs["variant"]]
        back = [d["id"] for d in obs["returned"]]
        counts = Counter(back)
        acked = obs["acked"]
        must = [d["id"] for d in obs["held"] if acked_return or d["id"] not in acked]
        lost = [m for m in must if counts[m] == 0]
        twice = sorted(m for m, n in counts.items() if n > 1)
        foreign = [m for m in back if m not in obs["published"]]
        frame = obs.get("ack", "basic.ack")
        how = f"{frame}{(' multiple' if frame == 'basic.ack' else ' first..last') if multiple else ''} of {fmt(acked)} {'held back' if acked_return else 'delivered to the broker'}, then a reset"
        settled = [m for m in acked if counts[m] == 0]
        return first_failure(
            served(obs, f"after {how}"),
            holds(not lost, expected=f"after {how}: {fmt(must)} delivered again" + ("" if acked_return else f"; {fmt(acked)} either gone or delivered again"),
                  observed=f"came back {fmt(back)} (missing {fmt(lost)})" if lost else f"came back {fmt(back)}" + (f"; the ack took effect for {fmt(settled)}" if settled else ""),
                  key="unacked-lost" if lost else None),
            holds(not twice and not foreign, expected="each message at most once after the reset",
                  observed=f"twice: {fmt(twice)}" + (f", unexpected {fmt(foreign)}" if foreign else "") if twice or foreign else "none twice",
                  key="duplicated" if twice or foreign else None),
            all_redelivered(obs["returned"], signal=signal_of(profile, queue_type)),
        )


#: A body larger than every buffer between the broker and the held proxy (loopback send and receive
#: buffers grow to several MiB), so the broker is still writing it when the consumer leaves.
MID_BODY = 16 * 1024 * 1024
BEHIND = 1000
#: The proxy holds the broker's frames (from the 2nd body frame on) until the consumer's basic.cancel
#: or channel.close has reached the broker, however long the client takes on a loaded machine; this
#: only bounds the wait if that frame never comes (the scenario is then void, never a pass).
HOLD_BOUND_S = 15.0


class TestCancelMidBody(Case):
    """The queue's only consumer leaves (basic.cancel, or channel.close) while the proxy holds the
    broker's body frames, so the broker's write of the message is blocked half way."""

    requirement = "ACK-CANCEL-MID-BODY"
    variants = ("cancel", "channel-close")
    #: 16 MiB through the proxy and a hold per cell: the classic queue only, where stores map segments.
    queue_types = ("classic",)

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        ctx.admin.publish(q, body_of("m1", MID_BODY), message_id="m1")
        # a second message behind it, so the first one's store segment is no longer the one written
        # to (a store may release a finished segment once the queue has no consumer)
        ctx.admin.publish(q, body_of("m2", BEHIND), message_id="m2")
        proxy = ctx.proxy()
        # the first frame of the consumer leaving ends the hold: a client library closing a channel
        # may cancel its consumers first (pika does), so either frame can be the first (0-9-1
        # basic.cancel or channel.close; AMQP 1.0 detach or end)
        leaving = (fault_at(proxy.protocol, "consumer-cancel").frame, fault_at(proxy.protocol, "session-close").frame)
        hold = proxy.arm(fault_at(proxy.protocol, "delivery-content", action=Action.DELAY, nth=2, delay_s=HOLD_BOUND_S, until=leaving))
        # the client's max-frame-size, where its protocol lets the broker send larger frames (AMQP
        # 1.0), so that the body is many transfer frames and the hold falls inside it
        frames = frame_size_query(proxy.protocol, FRAME_PAYLOAD + 8)
        conn = ctx.connect("consumer", via=proxy, url=SecretUrl(ctx.url).with_query(frames) if frames else None)
        session = conn.session()
        consumer = session.consume(q, prefetch=1)
        if not hold.struck.wait(5.0):
            ctx.expect_fired(hold)  # void: the body never reached its 2nd frame
        answer: dict[str, Any] = {"ok": True, "error": None}
        try:
            if ctx.variant == "cancel":
                detach = getattr(consumer, "detach", None)
                if detach is not None:  # AMQP 1.0: a closing detach, answered by the broker's own (2.6.6)
                    how = detach(WAIT_S)
                    if how != "answered":
                        answer = {"ok": False, "error": f"detach: {how}"}
                else:
                    consumer.cancel()
            session.close()
            conn.session().close()  # a channel opened on the same connection: it is still there
        except (ConnectionLost, ChannelClosed, OperationTimeout) as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        hit = ctx.expect_fired(hold)
        if not hold.held_to_event:
            raise ScenarioVoid(f"the body was not held until the consumer left: {hit}")
        return {"variant": ctx.variant, "published": ["m1", "m2"], "hit": hit, "answer": answer, "left_by": list(leaving),
                **after_loss(ctx, q, {"m1": MID_BODY, "m2": BEHIND})}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        cancel, close = obs.get("left_by", ("basic.cancel", "channel.close"))
        what = cancel if obs["variant"] == "cancel" else close
        answers = {"basic.cancel": "cancel-ok, then close-ok", "channel.close": "close-ok",
                   "detach": "the broker's detach, then the end", "end": "the end, and a new session begins"}
        answer = obs["answer"]
        return first_failure(
            holds(answer["ok"], expected=f"{what} of the only consumer, mid-body, answered ({answers.get(what, 'answered')})",
                  observed=f"no answer: {answer['error']}" if not answer["ok"] else "answered",
                  key="connection-lost" if answer["error"] and "ConnectionLost" in answer["error"] else None if answer["ok"] else "channel-closed"),
            served(obs, f"after {what} in the middle of a body"),
            returned_exactly(obs["returned"], obs["published"], what=f"after {what} mid-body and the close of {'the session' if close == 'end' else 'the channel'}, the unacknowledged message and the one behind it"),
            all_redelivered([d for d in obs["returned"] if d["id"] == obs["published"][0]], signal=signal_of(profile, queue_type)),
            bodies_intact(obs),
        )
