"""Dead-letter topologies: cycles through a delay queue, queue TTL on an unread queue, a message
requeued before it dies, application headers beside x-death, a re-published dead letter, drop-head
order, and dead-letter queues with length limits of their own.

Every TTL here is short (TTL_MS) and every wait for it is a protocol barrier with an explicit
deadline: basic.get polled on the queue the message must come back to, or the dead-letter queue's
message count; never a bare sleep.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping

from conformance.api import AckMode, Delivery, Session
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.reference import judge
from conformance.kit.scenarios import FIRST_DEATH, dead_obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same

from .test_dead_lettering import one_copy, with_dlq

#: The TTL of every delay queue and TTL queue here: long enough to be measured, short enough to wait for.
TTL_MS = 200
#: How long past the TTL a barrier waits for an expiry the broker owes.
GRACE_S = 3.0
DLX = "x-dead-letter-exchange"
DLRK = "x-dead-letter-routing-key"


def deaths(d: dict[str, Any]) -> list[dict[str, Any]]:
    """x-death reduced to what the verdicts judge: queue, reason, count, most recent first."""
    return [{k: e.get(k) for k in ("queue", "reason", "count")} for e in d["x-death"]]


def first(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d["headers"].get(k) for k in FIRST_DEATH}


def get_within(ctx: CaseContext, session: Session, queue: str, timeout: float, what: str) -> Delivery | None:
    """Barrier: basic.get polled until ``queue`` hands out a message, within ``timeout`` (None if
    not: what never arrived is the verdict's observation, not the suite's error)."""
    got: list[Delivery | None] = [None]

    def handed_out() -> bool:
        got[0] = session.get(queue, ack_mode=AckMode.MANUAL)
        return got[0] is not None

    try:
        ctx.wait_for(handed_out, what, timeout=timeout)
    except OperationTimeout:
        return None
    return got[0]


def lost_verdict(obs: Obs) -> Verdict | None:
    """A message the client published (or re-published) that its queue never handed out: the
    broker lost it before the dead-lettering under test could happen, a failure naming the loss."""
    if not obs.get("lost"):
        return None
    return holds(False, expected="every message published to the queue handed out by basic.get", observed=obs["lost"], key="lost")


def count_within(ctx: CaseContext, queue: str, n: int, timeout: float, what: str) -> bool:
    """Barrier: ``queue`` reports at least ``n`` ready messages within ``timeout`` (False if not:
    what never arrived is the verdict's observation, not the suite's error)."""
    try:
        ctx.wait_for(lambda: ctx.stats(queue).ready >= n, what, timeout=timeout)
    except OperationTimeout:
        return False
    return True


def get_all(session: Session, queue: str, limit: int = 20) -> list[Delivery]:
    """Everything ready in ``queue`` by basic.get until get-empty, each acknowledged (for queues
    whose length limit would refuse or push out a sentinel)."""
    out: list[Delivery] = []
    while len(out) < limit:
        d = session.get(queue, ack_mode=AckMode.MANUAL)
        if d is None:
            break
        session.ack(d.tag)
        out.append(d)
    session.sync()
    return out


def closed(exc: ChannelClosed) -> str:
    return f"{'connection' if exc.hard else 'channel'} closed with {exc.code} {exc.text}"


class TestCycleWithRejection(Case):
    requirement = "DLX-CYCLE-WITH-REJECTION"
    #: reject-expire: work --rejected--> delay --expired--> work (the retry-through-a-delay-queue
    #: pattern); self: work --rejected--> work (the dead-letter target includes the source).
    variants = ("reject-expire", "self")
    configurations = ("dead-letter-at-least-once",)

    def scenario(self, ctx: CaseContext) -> Obs:
        # "delay" sorts before "work": a broker that walks x-death in name order meets the delay
        # queue's expiry before the work queue's rejection (RabbitMQ 3.13.0-3.13.2's false cycle).
        work_name = ctx.queue_name("work")
        if ctx.variant == "self":
            work = ctx.queue({DLX: "", DLRK: work_name}, name=work_name)
            delay = None
        else:
            delay_name = ctx.queue_name("delay")
            work = ctx.queue({DLX: "", DLRK: delay_name}, name=work_name)
            delay = ctx.queue({DLX: "", DLRK: work_name, "x-message-ttl": TTL_MS}, name=delay_name)
        ctx.publish(work, 1)
        session = ctx.session("consumer")
        arrivals: list[dict[str, Any]] = []
        error = None
        try:
            for n in range(3):
                d = get_within(ctx, session, work, TTL_MS / 1000 + GRACE_S, f"m1 back in {work} (arrival {n + 1})")
                if d is None:
                    break
                arrivals.append(dead_obs(d))
                if n < 2:
                    session.reject(d.tag, requeue=False)
                else:
                    session.ack(d.tag)
                session.sync()
        except ChannelClosed as exc:
            error = closed(exc)
        where = {q: ctx.stats(q).ready for q in (work, delay) if q}
        return {"variant": ctx.variant, "work": work, "delay": delay, "arrivals": arrivals, "error": error, "ready": where}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        work, delay, arrivals = obs["work"], obs["delay"], obs["arrivals"]
        got = [a["id"] for a in arrivals]
        entry = (lambda n: [{"queue": delay, "reason": "expired", "count": n}, {"queue": work, "reason": "rejected", "count": n}]) \
            if delay else (lambda n: [{"queue": work, "reason": "rejected", "count": n}])
        path = "work -rejected-> delay -expired-> work" if delay else "work -rejected-> work"
        came_back = first_failure(
            holds(obs["error"] is None, expected=f"the rejections of the cycle {path} accepted",
                  observed=obs["error"] or "accepted", key="channel-closed"),
            holds(got == ["m1"] * 3, expected=f"m1 back in the work queue after each of two rounds of {path} (3 arrivals)",
                  observed=f"arrivals {fmt(got)}; then ready per queue {fmt(obs['ready'])}", key="cycle-dropped"),
        )
        if got != ["m1"] * 3:
            return came_back
        return first_failure(
            came_back,
            same(entry(1), deaths(arrivals[1]), what="x-death after one round (most recent first)", spec=False),
            same(entry(2), deaths(arrivals[2]), what="x-death after two rounds (most recent first)", spec=False),
            same({"x-first-death-queue": work, "x-first-death-reason": "rejected", "x-first-death-exchange": ""},
                 first(arrivals[2]), what="x-first-death-* after two rounds", spec=False),
        )


class TestQueueTtlExpiresUnread(Case):
    requirement = "DLX-QUEUE-TTL-EXPIRES-UNREAD"
    configurations = ("dead-letter-at-least-once",)

    def scenario(self, ctx: CaseContext) -> Obs:
        q, dlq = with_dlq(ctx, {"x-message-ttl": TTL_MS})
        ctx.publish(q, 2)
        # Only the dead-letter queue is watched: no basic.get and no consumer ever touch q.
        arrived = count_within(ctx, dlq, 2, TTL_MS / 1000 + GRACE_S, f"m1 and m2 expired from {q} into {dlq}")
        dead = [dead_obs(d) for d in ctx.drain(dlq)]
        return {"source": q, "arrived": arrived, "dead": dead, "left": ctx.stats(q).ready}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        dead = obs["dead"]
        got = [d["id"] for d in dead]
        return first_failure(
            holds(got == ["m1", "m2"],
                  expected=f"m1, m2 dead-lettered within {TTL_MS}ms + {GRACE_S:g}s of an x-message-ttl {TTL_MS} queue nobody reads",
                  observed=f"dead-letter queue held {fmt(got)}; {obs['left']} still ready in the queue", key="not-expired"),
            same([[{"queue": obs["source"], "reason": "expired", "count": 1}]] * 2, [deaths(d) for d in dead],
                 what="x-death of each copy", spec=False),
        )


class TestDeadLetterAfterRequeue(Case):
    requirement = "DLX-AFTER-REQUEUE"
    configurations = ("dead-letter-at-least-once",)

    def scenario(self, ctx: CaseContext) -> Obs:
        q, dlq = with_dlq(ctx)
        ctx.publish(q, 1)
        session = ctx.session("consumer")
        error = None
        redelivered = None
        try:
            d = get_within(ctx, session, q, GRACE_S, f"m1 in {q}")
            if d is None:
                return {"source": q, "lost": f"m1, published to {q}, never handed out by basic.get within {GRACE_S:g}s", "dead": []}
            session.nack(d.tag, requeue=True)
            d = get_within(ctx, session, q, GRACE_S, f"m1 requeued to {q}")
            if d is None:
                raise AssertionError(f"m1 not requeued to {q}")  # NACK-SINGLE-REQUEUE's business, not this case's
            redelivered = d.redelivered
            session.reject(d.tag, requeue=False)
            session.sync()
        except ChannelClosed as exc:
            error = closed(exc)
        try:
            ctx.wait_for(lambda: ctx.stats(dlq).ready >= 1 or ctx.stats(q).ready > 0,
                         f"m1 dead-lettered into {dlq} (or back in {q})")
        except OperationTimeout:
            pass  # a rejection accepted and not applied: an observation (the drain below finds no copy), in the history
        return {"source": q, "redelivered": redelivered, "error": error, "dead": [dead_obs(d) for d in ctx.drain(dlq)],
                "left": ctx.stats(q).ready}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        lost = lost_verdict(obs)
        if lost:
            return lost
        dead = obs["dead"]
        arrived = first_failure(
            holds(obs["error"] is None, expected="basic.reject(requeue=false) of the requeued m1 accepted",
                  observed=obs["error"] or "accepted", key="channel-closed"),
            one_copy(dead, "m1"),
        )
        if len(dead) != 1:
            return arrived
        return first_failure(
            arrived,
            same([{"queue": obs["source"], "reason": "rejected", "count": 1}], deaths(dead[0]),
                 what="x-death after nack(requeue=true) then reject(requeue=false)", spec=False),
        )


#: Application headers of several field types, a nested table and an array among them.
APP_HEADERS: dict[str, Any] = {
    "app-text": "hello, dead letter",
    "app-int": 42,
    "app-negative": -7,
    "app-long": 2**40,
    "app-true": True,
    "app-false": False,
    "app-decimal": Decimal("3.14"),
    "app-time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    "app-array": ["a", 1, True],
    "app-table": {"inner": "value", "n": 3, "deeper": {"leaf": "x"}},
}


def plain(value: Any) -> Any:
    """A header value as JSON-able data, equal for equal AMQP field values."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


class TestHeadersKept(Case):
    requirement = "DLX-HEADERS-KEPT"

    def scenario(self, ctx: CaseContext) -> Obs:
        q, dlq = with_dlq(ctx)
        ctx.admin.publish(q, b"m1", message_id="m1", headers=dict(APP_HEADERS))
        session = ctx.session("consumer")
        d = get_within(ctx, session, q, GRACE_S, f"m1 in {q}")
        if d is None:
            return {"sent": plain(APP_HEADERS), "lost": f"m1, published to {q}, never handed out by basic.get within {GRACE_S:g}s", "dead": [], "app": []}
        session.reject(d.tag, requeue=False)
        session.sync()
        ctx.wait_for(lambda: ctx.stats(dlq).ready >= 1 or ctx.stats(q).ready > 0, f"m1 dead-lettered into {dlq} (or back in {q})")
        copies = ctx.drain(dlq)
        return {"sent": plain(APP_HEADERS), "dead": [dead_obs(c) for c in copies],
                "app": [plain({k: v for k, v in c.headers.items() if k.startswith("app-")}) for c in copies]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        lost = lost_verdict(obs)
        if lost:
            return lost
        dead = obs["dead"]
        if len(dead) != 1:
            return one_copy(dead, "m1")
        return first_failure(
            one_copy(dead, "m1"),
            holds(bool(dead[0]["x-death"]), expected="x-death on the dead-lettered copy", observed=f"x-death = {fmt(dead[0]['x-death'])}",
                  key="no-x-death"),
            same(obs["sent"], obs["app"][0], what="the application headers of the dead-lettered copy", spec=False),
        )


class TestRepublishedDiesAgain(Case):
    requirement = "DLX-REPUBLISHED-DIES-AGAIN"
    #: how m1 dies, both times: rejected by the consumer, or expired by its own 1 ms expiration
    variants = ("rejected", "expired")

    def scenario(self, ctx: CaseContext) -> Obs:
        how = str(ctx.variant)
        expiration = 1 if how == "expired" else None
        q, dlq = with_dlq(ctx)
        ctx.admin.publish(q, b"m1", message_id="m1", expiration_ms=expiration)
        session = ctx.session("consumer")
        error = lost = None
        copies: list[dict[str, Any]] = []
        try:
            for n in range(2):
                if how == "rejected":
                    d = get_within(ctx, session, q, GRACE_S, f"m1 in {q} (publication {n + 1})")
                    if d is None:
                        lost = f"m1 {'re-published by the client' if n else 'published'} to {q}, never handed out by basic.get within {GRACE_S:g}s"
                        break
                    session.reject(d.tag, requeue=False)
                    session.sync()
                copy = get_within(ctx, session, dlq, GRACE_S, f"m1 dead-lettered into {dlq} (death {n + 1})")
                if copy is None:
                    break
                copies.append(dead_obs(copy))
                session.ack(copy.tag)
                if n == 0:
                    # the client's retry: the dead letter goes back, on the same channel, with every header it carries
                    session.publish(q, copy.body, message_id=copy.message_id, headers=dict(copy.headers), expiration_ms=expiration)
            session.sync()
        except ChannelClosed as exc:
            error = closed(exc)
        return {"variant": how, "source": q, "error": error, "lost": lost, "copies": copies, "left": ctx.stats(q).ready}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        lost = lost_verdict(obs)
        if lost:
            return lost
        copies = obs["copies"]
        got = [c["id"] for c in copies]
        src = obs["source"]
        reason = obs.get("variant", "rejected")
        arrived = first_failure(
            holds(obs["error"] is None, expected="every settlement of the re-published m1 accepted",
                  observed=obs["error"] or "accepted", key="channel-closed"),
            holds(got == ["m1", "m1"], expected=f"a dead-lettered copy of m1 after each death ({reason}), the second after its re-publication",
                  observed=f"copies {fmt(got)}; {obs['left']} still ready in the queue",
                  # an expiry from a queue the message already expired from, dropped as a loop: the key a profile may document
                  key="repeat-expiry-dropped" if reason == "expired" and got == ["m1"] and not obs["left"] else "second-death-lost"),
        )
        if got != ["m1", "m1"]:
            return arrived
        got_deaths = deaths(copies[1])

        def check(values: Mapping[str, Any]) -> Verdict:
            history = values["dead-letter.republished-history"]
            v = same([{"queue": src, "reason": reason, "count": 2 if history == "continued" else 1}], got_deaths,
                     what="x-death of the re-published message dead-lettered again", spec=False)
            return replace(v, expected=f"{v.expected} ({history})")

        return first_failure(
            arrived,
            judge(self.requirement, profile, queue_type, ["dead-letter.republished-history"], check),
            same({"x-first-death-queue": src, "x-first-death-reason": reason, "x-first-death-exchange": ""},
                 first(copies[1]), what="x-first-death-* after the second death", spec=False),
        )


class TestMaxlenOrder(Case):
    requirement = "DLX-MAXLEN-ORDER"

    def scenario(self, ctx: CaseContext) -> Obs:
        q, dlq = with_dlq(ctx, {"x-max-length": 2, "x-overflow": "drop-head"})
        ctx.publish(q, 5)  # m1..m3 pushed out of the head by m3..m5
        count_within(ctx, dlq, 3, GRACE_S, f"m1..m3 dead-lettered into {dlq}")
        return {"source": q, "dead": [dead_obs(d) for d in ctx.drain(dlq)], "kept": [d.message_id for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        dead = obs["dead"]
        got = [d["id"] for d in dead]
        return first_failure(
            holds(got == ["m1", "m2", "m3"], expected="m1, m2, m3 dead-lettered in publication order",
                  observed=f"dead-letter queue held {fmt(got)}", key="maxlen-order"),
            same([[{"queue": obs["source"], "reason": "maxlen", "count": 1}]] * 3, [deaths(d) for d in dead],
                 what="x-death of each pushed-out copy", spec=False),
            holds(obs["kept"] == ["m4", "m5"], expected="m4, m5 kept in the queue", observed=f"queue held {fmt(obs['kept'])}", key="kept"),
        )


class TestTargetLimit(Case):
    requirement = "DLX-TARGET-LIMIT"
    #: the dead-letter queue's own overflow mode (x-max-length 2)
    variants = ("drop-head", "reject-publish")

    def scenario(self, ctx: CaseContext) -> Obs:
        overflow = str(ctx.variant)
        dlq_args: dict[str, Any] = {"x-max-length": 2, "x-overflow": overflow}
        # drop-head: the dead-letter queue dead-letters what it pushes out into dlq2, whose arrival
        # proves m3 reached it. reject-publish: a fanout dead-letter exchange feeds the limited
        # dead-letter queue and an unlimited witness in the same routing step, so m3 in the witness
        # proves the limited queue was offered m3 too.
        side = ctx.queue(plain=True, role="dlq2" if overflow == "drop-head" else "witness")
        if overflow == "drop-head":
            dlq_args.update({DLX: "", DLRK: side})
        dlq = ctx.queue(dlq_args, role="dlq")  # of the case's queue type: the limit under test is the target's own
        if overflow == "drop-head":
            q = ctx.queue({DLX: "", DLRK: dlq})
        else:
            x = ctx.exchange("fanout")
            ctx.admin.bind_queue(dlq, x, "")
            ctx.admin.bind_queue(side, x, "")
            q = ctx.queue({DLX: x})
        ids = ctx.publish(q, 3)
        session = ctx.session("consumer")
        error = lost = None
        try:
            for mid in ids:
                d = get_within(ctx, session, q, GRACE_S, f"{mid} in {q}")
                if d is None:
                    lost = f"{mid}, published to {q}, never handed out by basic.get within {GRACE_S:g}s"
                    break
                session.reject(d.tag, requeue=False)
                session.sync()
                if mid == "m2":  # m1 and m2 fill the dead-letter queue before m3 overflows it
                    count_within(ctx, dlq, 2, GRACE_S, f"m1 and m2 dead-lettered into {dlq}")
        except ChannelClosed as exc:  # the broker failing the rejection is the observation
            error = f"basic.reject(requeue=false) of {mid}: {closed(exc)}"
            session = ctx.session("reader")
        count_within(ctx, side, 1 if overflow == "drop-head" else 3, GRACE_S,
                     f"m1 pushed out of {dlq} into {side}" if overflow == "drop-head" else f"m1..m3 dead-lettered into {side}")
        return {"variant": overflow, "source": q, "dlq": dlq, "error": error, "lost": lost,
                "dlq_held": [dead_obs(d) for d in get_all(session, dlq)],
                "side_held": [dead_obs(d) for d in get_all(session, side)],
                "source_held": [d.message_id for d in get_all(session, q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        lost = lost_verdict(obs)
        if lost:
            return lost
        got = {"dlq": [d["id"] for d in obs["dlq_held"]], "side": [d["id"] for d in obs["side_held"]], "source": obs["source_held"]}
        if obs.get("error"):
            return holds(False, expected="each basic.reject(requeue=false) accepted, whatever the dead-letter queue does with the copy",
                         observed=f"{obs['error']}; then {fmt(got)}", key="channel-closed")
        if obs["variant"] == "reject-publish":
            v = same({"dlq": ["m1", "m2"], "side": ["m1", "m2", "m3"], "source": []}, got,
                     what="after rejecting m1..m3 into a dead-letter queue of x-max-length 2 (reject-publish) beside an unlimited"
                          " witness (m3 refused there and dropped, not returned)")
            # a dead-letter queue that took m3 past its limit: the key a profile may document
            return replace(v, key="dead-letter-limit-ignored") if got["dlq"] == ["m1", "m2", "m3"] else v
        held = same({"dlq": ["m2", "m3"], "side": ["m1"], "source": []}, got,
                    what="after rejecting m1..m3 into a dead-letter queue of x-max-length 2 (drop-head) that dead-letters into dlq2")
        if not obs["side_held"]:
            return held
        return first_failure(
            held,
            same([{"queue": obs["dlq"], "reason": "maxlen", "count": 1}, {"queue": obs["source"], "reason": "rejected", "count": 1}],
                 deaths(obs["side_held"][0]), what="x-death of m1 pushed out of the dead-letter queue", spec=False),
        )
