"""basic.qos prefetch-count: the limit over the whole recorded history, what an ack frees, 0 means
unlimited, and the scope of global=false/true.

The dispatch barrier: a queue's ready count drops the moment it hands a message to a consumer, so
"published - ready" is what the broker has dispatched. Whatever was dispatched but not yet seen is
awaited and recorded before the next acknowledgement, so an excess delivery cannot hide in a
client buffer: the history the verdict judges is complete.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Mapping

from conformance.api import Consumer, Delivery
from conformance.catalogue.profiles import Profile
from conformance.errors import OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import accepted
from conformance.kit.reference import judge
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same

N = 3
M = 12
#: How long a consumer with room may take to get a message after its publish was confirmed. A
#: confirm does not promise the dispatch already happened (some brokers confirm first), so "held
#: back" is a message still ready after this window, never a ready count read once.
DISPATCH_WINDOW_S = 1.0
#: Acknowledgement pattern while working through the queue: (how many, multiple?).
ACKS = ((1, False), (2, True), (3, True), (1, False))


def catch_up(ctx: CaseContext, q: str, consumer: Consumer, published: int, seen: list[Delivery], events: list[Any]) -> None:
    """Receive (and record) everything the broker has dispatched so far."""
    dispatched = published - ctx.stats(q).ready
    while len(seen) < dispatched:
        d = ctx.take(consumer, 1)[0]
        seen.append(d)
        events.append(["deliver", d.message_id])


def held_back(ctx: CaseContext, q: str) -> bool:
    """The one message published to ``q`` is still not handed to its consumer after the window."""
    try:
        ctx.wait_for(lambda: ctx.stats(q).ready == 0, f"the message of {q} handed to its consumer", timeout=DISPATCH_WINDOW_S)
    except OperationTimeout:
        return True
    return False


def prefetch_workload(ctx: CaseContext) -> Obs:
    """A consumer with prefetch N works through M messages with a mix of single and multiple acks."""
    q = ctx.queue()
    ctx.publish(q, M)
    session = ctx.session("consumer")
    consumer = session.consume(q, prefetch=N)
    seen: list[Delivery] = []
    events: list[Any] = []
    refills: list[dict[str, int]] = []
    acked = 0
    step = 0
    while acked < M:
        want = min(M, acked + N)
        ctx.wait_for(lambda: M - ctx.stats(q).ready >= want, f"{want} messages dispatched")
        catch_up(ctx, q, consumer, M, seen, events)
        k, multiple = ACKS[step % len(ACKS)]
        step += 1
        k = min(k, len(seen) - acked)
        batch = seen[acked : acked + k]
        if multiple:
            session.ack(batch[-1].tag, multiple=True)
        else:
            for d in batch:
                session.ack(d.tag)
        acked += k
        events.append(["ack", [d.message_id for d in batch]])
        session.sync()
        before = len(seen)
        if len(seen) < M:
            expect = min(M, acked + N)
            try:
                ctx.wait_for(lambda: M - ctx.stats(q).ready >= expect, f"{expect} messages dispatched after acking {k}")
            except OperationTimeout:
                # The ack freed nothing: a finding for the verdicts (what was dispatched is recorded),
                # and the workload cannot go on.
                catch_up(ctx, q, consumer, M, seen, events)
                refills.append({"acked": k, "received": len(seen) - before, "ready_left": M - before})
                break
            catch_up(ctx, q, consumer, M, seen, events)
            refills.append({"acked": k, "received": len(seen) - before, "ready_left": M - before})
    return {"prefetch": N, "published": M, "events": events, "refills": refills}


def max_outstanding(events: list[Any]) -> tuple[int, int]:
    """The most unacknowledged deliveries held at once, and at which event."""
    held: set[str] = set()
    worst, at = 0, -1
    for i, (kind, what) in enumerate(events):
        if kind == "deliver":
            held.add(what)
            if len(held) > worst:
                worst, at = len(held), i
        else:
            held.difference_update(what)
    return worst, at


class TestPrefetchLimit(Case):
    requirement = "PREFETCH-LIMIT"

    def scenario(self, ctx: CaseContext) -> Obs:
        return prefetch_workload(ctx)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        worst, at = max_outstanding(obs["events"])
        delivered = [what for kind, what in obs["events"] if kind == "deliver"]
        return first_failure(
            holds(worst <= obs["prefetch"],
                  expected=f"never more than prefetch-count {obs['prefetch']} unacknowledged deliveries",
                  observed=f"at most {worst} held at once" + (f" (event {at}: {fmt(obs['events'][max(0, at - 3):at + 1])})" if worst > obs["prefetch"] else ""),
                  key=f"max-outstanding-{worst}"),
            holds(len(delivered) == obs["published"] and len(set(delivered)) == obs["published"],
                  expected=f"all {obs['published']} messages delivered once",
                  observed=f"{len(delivered)} deliveries of {len(set(delivered))} messages", key="incomplete"),
        )


class TestAckReleases(Case):
    requirement = "PREFETCH-ACK-RELEASES"

    def scenario(self, ctx: CaseContext) -> Obs:
        return prefetch_workload(ctx)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        want = [min(r["acked"], r["ready_left"]) for r in obs["refills"]]
        got = [r["received"] for r in obs["refills"]]
        return first_failure(
            holds(bool(obs["refills"]), expected="the consumer reaches its limit while messages are still ready, so acks refill it",
                  observed="no acknowledgement ever freed a slot (everything was delivered up front)" if not obs["refills"] else f"{len(obs['refills'])} refills",
                  key="no-refill"),
            same(want, got, what="deliveries received after each acknowledgement (acked, while messages were ready)", spec=False),
        )


class TestLimitAfterDrop(Case):
    """A poison message p, then six others, on a queue with x-delivery-limit 1 (two deliveries
    allowed); a consumer under basic.qos(2) holds m1 and nacks p with requeue each time it comes,
    until the limit drops it. The drop frees p's slot: exactly one more message (m2) may come.
    The negative proof needs no window: the delivery that fills the slot and any excess one come
    from the same grant, so after m2 a round trip on the consumer's channel brings in anything
    else already sent."""

    requirement = "PREFETCH-LIMIT-AFTER-DROP"
    PREFETCH = 2

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue({"x-delivery-limit": 1})
        ctx.publish(q, 1, prefix="p")
        ctx.publish(q, 6)
        session = ctx.session("consumer")
        consumer = session.consume(q, prefetch=self.PREFETCH)
        events: list[Any] = []
        held: list[str] = []
        returns = 0
        while True:
            d = ctx.take(consumer, 1)[0]
            events.append(["deliver", d.message_id])
            if d.message_id != "p1":
                held.append(d.message_id or "")
                if len(held) >= self.PREFETCH:
                    break  # p's slot was freed (dropped at the limit, at the return or the next attempt) and filled
                continue
            session.nack(d.tag, requeue=True)
            events.append(["nack", ["p1"]])
            returns += 1
            if returns > 3:
                break  # never dropped: the limit is another case's finding; judge what was held
        session.sync()
        try:
            while True:
                d = consumer.next(0.05)  # dispatches what the round trip brought in
                events.append(["deliver", d.message_id])
        except OperationTimeout:
            pass
        return {"prefetch": self.PREFETCH, "events": events, "returns": returns}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        events = obs["events"]
        worst, at = max_outstanding(events)
        # an excess that first appears after the last return (the drop) tells a credit granted
        # twice at the drop from a limit exceeded all along
        last_return = max((i for i, (kind, _) in enumerate(events) if kind == "nack"), default=-1)
        dropped = last_return >= 0 and not any(kind == "deliver" and what in events[last_return][1] for kind, what in events[last_return:])
        when = "-after-drop" if worst > obs["prefetch"] and dropped and at > last_return else ""
        return holds(worst <= obs["prefetch"],
                     expected=f"never more than prefetch-count {obs['prefetch']} unacknowledged deliveries, p1 nacked until the delivery limit dropped it",
                     observed=f"at most {worst} held at once (events: {fmt(events)})",
                     key=f"max-outstanding-{worst}{when}")


#: Ready messages for the prefetch-0 consumer: more than 2000, where a quorum queue consumer's
#: "unlimited" credit has been seen to stop (rabbitmq/rabbitmq-server#14485, rabbit_fifo_client
#: UNLIMITED_PREFETCH_COUNT 2000); small bodies, published in one unconfirmed burst.
ZERO_MESSAGES = 2100
#: How many missing or duplicated ids a record keeps (the counts say the rest).
ZERO_SHOWN = 8
#: A ready count unchanged this long when the deadline ran out is described as held back rather than
#: still trickling out (a description only: the deadline decides the verdict).
ZERO_STILL_S = 1.0
#: A ready count standing still this long, with the consumer's window unlimited, is a broker holding
#: messages back: several seconds, never a scheduling pause of a loaded machine.
ZERO_HELD_S = 3.0


class TestPrefetchZero(Case):
    requirement = "PREFETCH-ZERO-UNLIMITED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        producer = ctx.session("producer")
        ids = ctx.publish(q, ZERO_MESSAGES, session=producer)
        ctx.wait_for(lambda: ctx.stats(q).ready == len(ids), f"all {len(ids)} messages of the burst ready")
        consumer = ctx.session("consumer").consume(q, prefetch=0)
        # The broker's ready count is the barrier: 0 means every message was handed to the consumer.
        # The case's ordinary deadline bounds the wait; a count that has not moved for ZERO_HELD_S
        # while messages are ready ends it early (a local broker with an unlimited consumer does not
        # pause that long: it is holding them back), and how long it stood still describes the finding.
        last = [len(ids), time.monotonic()]

        def dispatched() -> bool:
            ready, now = ctx.stats(q).ready, time.monotonic()
            if ready != last[0]:
                last[:] = [ready, now]
            elif now - last[1] >= ZERO_HELD_S:
                raise OperationTimeout(f"ready count at {ready} for {now - last[1]:.1f}s")
            return ready == 0

        stalled_s = None
        try:
            ctx.wait_for(dispatched, f"the broker to hand all {len(ids)} messages to the prefetch-0 consumer")
        except OperationTimeout:
            stalled_s = round(time.monotonic() - last[1], 1)  # what was handed out is judged
        held_back = ctx.stats(q).ready
        got = [d.message_id for d in ctx.take(consumer, len(ids) - held_back)]
        seen = set(got)
        return {"published": len(ids), "received": len(got), "stalled_s": stalled_s,
                "missing": [m for m in ids if m not in seen][:ZERO_SHOWN],
                "duplicated": sorted({m for m in got if got.count(m) > 1})[:ZERO_SHOWN] if len(seen) < len(got) else [],
                "ready_after": ctx.stats(q).ready}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        n, got = obs["published"], obs["received"]
        problems = []
        if obs["missing"]:
            problems.append(f"missing {fmt(obs['missing'])}{' ...' if len(obs['missing']) >= ZERO_SHOWN else ''}")
        if obs["duplicated"]:
            problems.append(f"duplicated {fmt(obs['duplicated'])}")
        stalled = obs.get("stalled_s")
        if obs["missing"] and stalled is not None:
            problems.append(f"the ready count had stood still for {stalled:g}s" if stalled >= ZERO_STILL_S
                            else "the ready count still falling at the deadline")
        return first_failure(
            holds(not problems and got == n,
                  expected=f"all {n} ready messages delivered once with prefetch-count 0 and no ack",
                  observed=f"{got} deliveries" + (f" ({'; '.join(problems)})" if problems else ""),
                  key=f"held-back-at-{got}" if obs["missing"] else "duplicates" if problems else None),
            same(0, obs["ready_after"], what="messages still ready in the queue"),
        )


#: The limits a basic.qos scope can set (prefetch.global and prefetch.non-global values, refusal aside).
SCOPES = ("per-consumer", "per-channel", "per-connection")


class TestPrefetchScope(Case):
    """basic.qos(2) on channel 1, whose consumer A fills the limit with the only 2 messages of its
    queue. Then consumer C on the same channel, and consumer B on a second channel of the same
    connection, each subscribe to a queue that then gets one message; a message still ready after
    a short window was held back. Who is held back tells the scopes apart: per consumer, nobody;
    per channel, C; per connection, C and B. Both of A's deliveries are then
    acknowledged, which frees room for everyone held back."""

    requirement = "PREFETCH-SCOPE"
    variants = ("global-false", "global-true")

    def scenario(self, ctx: CaseContext) -> Obs:
        q1, q2, q3 = ctx.queue(role="a"), ctx.queue(role="b"), ctx.queue(role="c")
        ctx.publish(q1, 2, prefix="a")  # exactly A's share: a freed slot can only go to B or C
        connection = ctx.connect("consumer")
        session, other = connection.session(), connection.session()
        session.qos(2, global_=ctx.variant == "global-true")
        obs: dict[str, Any] = {"variant": ctx.variant}
        consumers: list[Consumer] = []
        obs["consume"] = ctx.channel_error(lambda: consumers.append(session.consume(q1)) or session.sync())
        if obs["consume"]["closed"]:
            return obs
        held = ctx.take(consumers[0], 2)
        c = session.consume(q3)
        ctx.publish(q3, 1, prefix="c")
        obs["c_held_back"] = held_back(ctx, q3)
        b = other.consume(q2)
        ctx.publish(q2, 1, prefix="b")
        obs["b_held_back"] = held_back(ctx, q2)
        if obs["c_held_back"] or obs["b_held_back"]:
            for d in held:
                session.ack(d.tag)
        obs["c_got"] = ctx.take(c, 1)[0].message_id
        obs["b_got"] = ctx.take(b, 1)[0].message_id
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        key = "prefetch.non-global" if obs["variant"] == "global-false" else "prefetch.global"
        what = f"basic.qos(2, global={obs['variant'] == 'global-true'}) then basic.consume"
        answer = obs["consume"]

        def check(values: Mapping[str, Any]) -> Verdict:
            scope = values[key]
            if scope == "refused-540":
                ok = answer["closed"] and answer["hard"] and answer["code"] == 540
                return holds(ok, expected=f"{what}: connection closed with 540 NOT_IMPLEMENTED",
                             observed=f"{what}: " + (f"{'connection' if answer['hard'] else 'channel'} closed with {answer['code']} {answer['text']}" if answer["closed"] else "accepted"),
                             key="consume-accepted" if not answer["closed"] else f"closed-{answer['code']}", spec=False)
            if scope not in SCOPES:
                raise ValueError(f"{key} {scope!r}: expected one of {', '.join(SCOPES)} or refused-540")
            want = {"C (same channel)": scope != "per-consumer", "B (second channel)": scope == "per-connection"}
            got = {"C (same channel)": obs.get("c_held_back"), "B (second channel)": obs.get("b_held_back")}
            held = same(want, got, what="held back while A holds 2", spec=False)
            return first_failure(
                accepted(answer, what=what),
                replace(held, expected=f"{held.expected} ({scope} limit)"),
                same(["c1", "b1"], [obs.get("c_got"), obs.get("b_got")], what="deliveries of C and B", spec=False),
            )

        return judge(self.requirement, profile, queue_type, [key], check)


class TestPrefetchSizeSingleMessage(Case):
    """basic/qos/prefetch-size/01: a window in octets never holds back a single message."""

    requirement = "PREFETCH-SIZE-SINGLE-MESSAGE"
    queue_types = (None,)
    WINDOW = 1  # octets: smaller than any message the suite publishes

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        session = ctx.session("consumer")
        answer = ctx.channel_error(lambda: session.qos(0, prefetch_size=self.WINDOW))
        if answer["closed"]:
            return {"qos": answer, "published": published, "delivered": []}
        consumer = session.consume(q)
        got = ctx.take(consumer, 1)
        session.ack(got[0].tag)
        session.sync()
        return {"qos": answer, "published": published, "delivered": [d.message_id for d in got]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = f"basic.qos prefetch-size={self.WINDOW} prefetch-count=0"
        return first_failure(
            accepted(obs["qos"], what=what),
            holds(obs["delivered"] == obs["published"],
                  expected=f"after {what}, with nothing unacknowledged: {obs['published']} delivered",
                  observed=f"after {what}, with nothing unacknowledged: delivered {obs['delivered']}"),
        )
