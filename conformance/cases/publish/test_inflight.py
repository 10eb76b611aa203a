"""In-flight publishes of a producer with publisher confirms, cut at chosen frames.

The producer publishes m1..m6 one confirm at a time. The proxy resets the connection at the 4th
message: before its publish reaches the broker, after its header but before its body (a torn
message; 0-9-1 only: an AMQP 1.0 message's first transfer frame carries its content), after its
content (the broker has it, the confirm never arrives), or with the broker's confirm (0-9-1
basic.ack, 1.0 the accepting disposition) held back. A torn message is also torn inside its content:
after the first of its several content frames (0-9-1 body frames; 1.0 transfer frames with
more=true, the client announcing a max-frame-size below the message's size), or inside its first
one (half of the frame's bytes reach the broker, never its end). The queue is drained once the broker has dropped the channel (what it kept),
then the producer reconnects, resends every unconfirmed message with the same id, and the queue is
drained again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import ConnectionLost
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.faults import Fault, Moment
from conformance.nemesis.points import fault_at, frame_size_query
from conformance.secrets import SecretUrl

MESSAGES, AT = 6, 4
#: variant -> (fault point at the 4th message, moment); the points are data
#: (conformance/nemesis/fault_points.yaml), each protocol cuts at its own frame: a protocol that
#: carries a small message's content in the frame that begins the publish (AMQP 1.0) cannot withhold
#: the body alone, and says so.
POSITIONS: dict[str, tuple[str, Moment]] = {
    "publish-withheld": ("publish", Moment.BEFORE),
    "body-withheld": ("publish-content-apart", Moment.BEFORE),
    "body-delivered": ("publish-content", Moment.AFTER),
    "confirm-withheld": ("confirm", Moment.BEFORE),
}
#: Payload bytes of one body frame at frame-max 131072: pika offers it, a broker may only lower it,
#: so a body of more than two frames' payload is at least three body frames on any broker (and at
#: least three transfer frames on AMQP 1.0 brokers whose max-frame-size is no larger).
FRAME_PAYLOAD = 131072 - 8
#: variant -> (fault point at the 4th message's first content frame, moment, that message's body
#: size; None: the small body of every other message). The cut lands where the message is torn.
TORN_CUTS: dict[str, tuple[str, Moment, int | None]] = {
    "body-withheld": ("publish-content-apart", Moment.BEFORE, None),
    "between-body-frames": ("publish-content-part", Moment.AFTER, 2 * FRAME_PAYLOAD + 1000),
    "inside-body-frame": ("publish-content", Moment.INSIDE, 64 * 1024),
}
TORN_WHERE = {
    "body-withheld": "its publish begun, its content never sent",
    "between-body-frames": "the first of its content frames sent, the others never",
    "inside-body-frame": "half of its first content frame sent, never the rest",
}


def body_of(mid: str, size: int | None = None) -> bytes:
    small = f"payload of {mid} ".encode() * 8
    return small if size is None else (small * (size // len(small) + 1))[:size]


def publish_until_cut(ctx: CaseContext, q: str, fault: Fault, body: Callable[[str], bytes], *, split: bool = False) -> tuple[list[str], list[str], str]:
    """m1..m6 published one confirm at a time through a proxy armed with ``fault``, until the cut:
    (ids, the confirmed ones, the fault's hit). Returns once the broker has dropped the producer's
    channel, so what the queue holds next is what it kept. ``split``: the producer's client takes
    frames of at most one body frame's payload where its protocol lets it choose (AMQP 1.0's
    max-frame-size), so a larger message leaves in several frames whatever the broker announces."""
    proxy = ctx.proxy()
    frames = frame_size_query(proxy.protocol, FRAME_PAYLOAD + 8) if split else {}
    producer = ctx.connect("producer", via=proxy, url=SecretUrl(ctx.url).with_query(frames) if frames else None).session()
    tether = ctx.tether(producer)
    producer.enable_confirms()
    armed = proxy.arm(fault)
    ids = [f"m{i}" for i in range(1, MESSAGES + 1)]
    confirmed: list[str] = []
    for mid in ids:
        try:
            producer.publish(q, body(mid), message_id=mid, persistent=True)
        except ConnectionLost:
            break
        confirmed.append(mid)
    hit = ctx.expect_fired(armed)
    ctx.await_consumers(tether, 0)
    return ids, confirmed, hit


def publish_through_cut(ctx: CaseContext, variant: str) -> Obs:
    if variant in POSITIONS:
        point, moment = POSITIONS[variant]
        size = None
    else:
        point, moment, size = TORN_CUTS[variant]
    fault = fault_at(ctx.adapter.protocol, point, nth=AT, moment=moment)  # cannot-express before anything is set up
    q = ctx.queue()
    sizes = {f"m{AT}": size}

    def body(mid: str | None) -> bytes:
        return body_of(mid or "", sizes.get(mid or ""))

    ids, confirmed, hit = publish_until_cut(ctx, q, fault, body, split=point == "publish-content-part")
    kept = [(d.message_id, d.body) for d in ctx.drain(q)]
    unconfirmed = [m for m in ids if m not in confirmed]
    again = ctx.session("producer-reconnected")
    again.enable_confirms()
    for mid in unconfirmed:
        again.publish(q, body(mid), message_id=mid, persistent=True)
    later = [(d.message_id, d.body) for d in ctx.drain(q)]

    def obs(pairs: list[tuple[str | None, bytes]]) -> list[dict[str, Any]]:
        return [{"id": m, "intact": b == body(m)} for m, b in pairs]

    return {"variant": variant, "ids": ids, "confirmed": confirmed, "unconfirmed": unconfirmed, "hit": hit,
            "kept": obs(kept), "after_resend": obs(later)}


class TestInflightAtLeastOnce(Case):
    requirement = "PUBLISH-INFLIGHT-AT-LEAST-ONCE"
    variants = tuple(POSITIONS)

    def scenario(self, ctx: CaseContext) -> Obs:
        return publish_through_cut(ctx, ctx.variant or "")

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        kept = [d["id"] for d in obs["kept"]]
        every = kept + [d["id"] for d in obs["after_resend"]]
        counts = Counter(every)
        lost_confirmed = [m for m in obs["confirmed"] if m not in kept]
        missing = [m for m in obs["ids"] if counts[m] == 0]
        bad_dupes = sorted(m for m, n in counts.items() if n > 1 and m not in obs["unconfirmed"])
        torn = sorted({d["id"] for d in obs["kept"] + obs["after_resend"] if not d["intact"]})
        return first_failure(
            holds(
                not lost_confirmed,
                expected=f"every confirmed message {fmt(obs['confirmed'])} is in the queue after the cut",
                observed=f"confirmed but missing after the cut: {fmt(lost_confirmed)}" if lost_confirmed else f"kept {fmt(kept)}",
                key="confirmed-lost" if lost_confirmed else None,
            ),
            holds(not missing, expected="after resending the unconfirmed, every message is there", observed=f"missing {fmt(missing)}" if missing else "none missing", key="lost" if missing else None),
            holds(
                not bad_dupes,
                expected=f"only unconfirmed messages {fmt(obs['unconfirmed'])} may appear twice",
                observed=f"duplicated confirmed messages {fmt(bad_dupes)}" if bad_dupes else "no confirmed message duplicated",
                key="confirmed-duplicated" if bad_dupes else None,
            ),
            holds(not torn, expected="every message body arrives intact", observed=f"corrupt bodies: {fmt(torn)}" if torn else "all bodies intact"),
        )


class TestTornMessageDiscarded(Case):
    requirement = "PUBLISH-TORN-MESSAGE-DISCARDED"
    variants = tuple(TORN_CUTS)

    def scenario(self, ctx: CaseContext) -> Obs:
        return publish_through_cut(ctx, ctx.variant or "")

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        torn_id = obs["ids"][AT - 1]
        kept = [d["id"] for d in obs["kept"]]
        corrupt = [d["id"] for d in obs["kept"] if not d["intact"]]
        return first_failure(
            holds(
                torn_id not in kept,
                expected=f"{torn_id} ({TORN_WHERE.get(obs['variant'], 'its body cut short')}) is not enqueued",
                observed=f"{torn_id} was enqueued" + (" with a corrupt body" if torn_id in corrupt else "") if torn_id in kept else f"not enqueued; queue held {fmt(kept)}",
                key="torn-enqueued" if torn_id in kept else None,
            ),
            holds(not corrupt, expected="no enqueued message has a partial body", observed=f"partial bodies: {fmt(corrupt)}" if corrupt else "all bodies intact"),
        )
