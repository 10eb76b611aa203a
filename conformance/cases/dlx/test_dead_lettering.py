"""Dead-lettering: reasons, the x-death history, x-first/last-death headers, dead-letter routing.

A dead-lettered copy is awaited on its target queue (a broker-side condition with a deadline), and
every dead-letter queue is then drained with a sentinel, so an extra or a missing copy is seen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from conformance.api import AckMode
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.reference import judge
from conformance.kit.scenarios import FIRST_DEATH, LAST_DEATH, dead_obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds, same

REASON = {"rejected": "rejected", "nacked": "rejected", "expired": "expired", "maxlen": "maxlen"}


def with_dlq(ctx: CaseContext, extra: dict[str, Any] | None = None) -> tuple[str, str]:
    """A source queue of the case's type dead-lettering (through the default exchange) into a
    classic dead-letter queue."""
    dlq = ctx.queue(plain=True, role="dlq")
    q = ctx.queue({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq, **(extra or {})})
    return q, dlq


def kill_one(ctx: CaseContext, q: str, how: str) -> None:
    """Take the head message of ``q`` and settle it so that it dies."""
    session = ctx.session("consumer")
    d = session.get(q, ack_mode=AckMode.MANUAL)
    if d is None:
        raise AssertionError(f"{q} unexpectedly empty")  # setup error, not a verdict
    if how == "nacked":
        session.nack(d.tag, requeue=False)
    else:
        session.reject(d.tag, requeue=False)
    session.sync()
    session.close()  # a settlement the broker did not apply now returns the message to ``q``


def await_death(ctx: CaseContext, source: str | None, *targets: str, n: int = 1, what: str = "") -> None:
    """Barrier after a message must have died: ``n`` copies reached the target queue(s), or the
    message is back in ``source`` (requeued instead of dead-lettered, which no wait would change)."""
    ctx.wait_for(lambda: sum(ctx.stats(t).ready for t in targets) >= n or (source is not None and ctx.stats(source).ready > 0),
                 what or f"{n} dead-lettered message(s) in {', '.join(targets)} (or the message back in {source})")


def collect(ctx: CaseContext, dlq: str, n: int = 1, source: str | None = None) -> list[dict[str, Any]]:
    """``source``: the queue a killed message came from (None where its death is an expiry or an
    overflow, whose source queue legitimately holds other messages)."""
    await_death(ctx, source, dlq, n=n)
    return [dead_obs(d) for d in ctx.drain(dlq)]


def one_copy(dead: list[dict[str, Any]], mid: str) -> Verdict:
    got = [d["id"] for d in dead]
    return holds(got == [mid], expected=f"exactly one dead-lettered copy of {mid}", observed=f"dead-letter queue held {fmt(got)}",
                 key=f"dead-copies-{len(got)}")


class TestReason(Case):
    requirement = "DLX-REASON"
    variants = ("rejected", "nacked", "expired", "maxlen")

    def scenario(self, ctx: CaseContext) -> Obs:
        how = str(ctx.variant)
        q, dlq = with_dlq(ctx, {"x-max-length": 1} if how == "maxlen" else None)
        if how == "expired":
            ctx.admin.publish(q, b"m1", message_id="m1", expiration_ms=1)
        else:
            ctx.publish(q, 2 if how == "maxlen" else 1)  # maxlen: m2 pushes m1 out of the head
            if how != "maxlen":
                kill_one(ctx, q, how)
        return {"variant": how, "source": q, "dead": collect(ctx, dlq, source=q if how in ("rejected", "nacked") else None)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        dead = obs["dead"]
        death = (dead[0]["x-death"] or [{}])[0] if dead else {}
        return first_failure(
            one_copy(dead, "m1"),
            same({"reason": REASON[obs["variant"]], "queue": obs["source"]}, {"reason": death.get("reason"), "queue": death.get("queue")},
                 what=f"x-death[0] after the message was {obs['variant']}", spec=False),
        )


class TestXDeathFields(Case):
    requirement = "DLX-XDEATH-FIELDS"

    def scenario(self, ctx: CaseContext) -> Obs:
        q, dlq = with_dlq(ctx)
        ctx.admin.publish(q, b"m1", message_id="m1", expiration_ms=60000)
        kill_one(ctx, q, "rejected")
        return {"source": q, "dead": collect(ctx, dlq, source=q)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        dead = obs["dead"]
        if not dead:
            return one_copy(dead, "m1")
        d = dead[0]
        entry = d["x-death"][0] if len(d["x-death"]) == 1 else None
        want = {"queue": obs["source"], "reason": "rejected", "count": 1, "exchange": "", "routing-keys": [obs["source"]],
                "original-expiration": "60000"}
        got = {k: (entry or {}).get(k) for k in want}
        return first_failure(
            one_copy(dead, "m1"),
            holds(entry is not None, expected="x-death with exactly one entry", observed=f"x-death = {fmt(d['x-death'])}", key="x-death-entries"),
            same(want, got, what="x-death[0]", spec=False),
            holds(bool((entry or {}).get("time")), expected="x-death[0].time set", observed=f"time = {fmt((entry or {}).get('time'))}", key="no-time"),
            holds(d["expiration"] is None, expected="the expiration property removed (kept as original-expiration)",
                  observed=f"expiration = {fmt(d['expiration'])}", key="expiration-kept"),
            same({"x-first-death-queue": obs["source"], "x-first-death-reason": "rejected", "x-first-death-exchange": ""},
                 {k: d["headers"].get(k) for k in FIRST_DEATH}, what="x-first-death-*", spec=False),
        )


class TestXDeathCount(Case):
    requirement = "DLX-XDEATH-COUNT"

    def scenario(self, ctx: CaseContext) -> Obs:
        # Two queues dead-lettering into each other: c1 -> c2 -> c1 -> c2, each death a rejection.
        n1, n2 = ctx.queue_name("c1"), ctx.queue_name("c2")
        c1 = ctx.queue({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": n2}, name=n1)
        c2 = ctx.queue({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": n1}, name=n2)
        ctx.publish(c1, 1)
        path = [c1, c2, c1]
        for i, q in enumerate(path):
            kill_one(ctx, q, "rejected")
            nxt = c2 if q == c1 else c1
            await_death(ctx, q, nxt, what=f"the message dead-lettered into {nxt} (death {i + 1})")
            if ctx.stats(q).ready:
                break  # requeued instead of dead-lettered: the drain below shows where it is
        return {"c1": c1, "c2": c2, "dead": [dead_obs(d) for d in ctx.drain(c2)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        dead = obs["dead"]
        if len(dead) != 1:
            return one_copy(dead, "m1")
        deaths = [{k: e.get(k) for k in ("queue", "reason", "count")} for e in dead[0]["x-death"]]
        want = [{"queue": obs["c1"], "reason": "rejected", "count": 2}, {"queue": obs["c2"], "reason": "rejected", "count": 1}]
        return first_failure(
            same(want, deaths, what="x-death after rejections in c1, c2, c1 (most recent first)", spec=False),
            same({"x-first-death-queue": obs["c1"], "x-first-death-reason": "rejected", "x-first-death-exchange": ""},
                 {k: dead[0]["headers"].get(k) for k in FIRST_DEATH}, what="x-first-death-* (never changed by later deaths)", spec=False),
        )


class TestLastDeath(Case):
    requirement = "DLX-LAST-DEATH"

    def scenario(self, ctx: CaseContext) -> Obs:
        q, dlq = with_dlq(ctx)
        ctx.publish(q, 1)
        kill_one(ctx, q, "rejected")
        return {"source": q, "dead": collect(ctx, dlq, source=q)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if not obs["dead"]:
            return one_copy(obs["dead"], "m1")
        got = {k: obs["dead"][0]["headers"].get(k) for k in LAST_DEATH}

        def check(values: Mapping[str, Any]) -> Verdict:
            headers = values["dead-letter.last-death-headers"]
            want = ({"x-last-death-queue": obs["source"], "x-last-death-reason": "rejected", "x-last-death-exchange": ""}
                    if headers == "present" else dict.fromkeys(LAST_DEATH))
            v = same(want, got, what="x-last-death-*", spec=False)
            return replace(v, expected=f"{v.expected} ({headers})")

        return judge(self.requirement, profile, queue_type, ["dead-letter.last-death-headers"], check)


class TestRoutingKey(Case):
    requirement = "DLX-ROUTING-KEY"
    variants = ("original", "override")

    def scenario(self, ctx: CaseContext) -> Obs:
        x = ctx.exchange("direct")
        by_original, by_override = ctx.queue(plain=True, role="dlq-orig"), ctx.queue(plain=True, role="dlq-over")
        args: dict[str, Any] = {"x-dead-letter-exchange": x}
        if ctx.variant == "override":
            args["x-dead-letter-routing-key"] = "dl-override"
        q = ctx.queue(args)
        ctx.admin.bind_queue(by_original, x, q)  # the original routing key is the source queue's name
        ctx.admin.bind_queue(by_override, x, "dl-override")
        ctx.publish(q, 1)
        kill_one(ctx, q, "rejected")
        await_death(ctx, q, by_original, by_override, what="the dead-lettered message routed by the exchange")
        return {"variant": ctx.variant,
                "original": [d.message_id for d in ctx.drain(by_original)],
                "override": [d.message_id for d in ctx.drain(by_override)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        want = {"original": ["m1"], "override": []} if obs["variant"] == "original" else {"original": [], "override": ["m1"]}
        got = {"original": obs["original"], "override": obs["override"]}
        how = "x-dead-letter-routing-key set" if obs["variant"] == "override" else "no x-dead-letter-routing-key"
        return same(want, got, what=f"dead-letter queues bound by original key / by override key ({how})", spec=False)
