"""x-delivery-limit: poison-message loops end after the documented number of deliveries, the
x-delivery-count header counts the returns the broker counts, and queue types without limits say so.

Each round returns the one message and then learns, without sleeping, whether it is still there:
- nack / reject: the next basic.get on the same channel (the broker handles a channel's methods in
  order, so the get sees the message if the return requeued it; "empty" means it was removed);
- consumer-loss: a fresh connection consumes it and is cut; the queue's consumer count reaching 0
  is the barrier (a quorum queue removes the consumer and returns or drops its message in one step),
  after which the ready count says whether it came back.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from conformance.api import AckMode
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, OperationTimeout
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import accepted, channel_closed_with
from conformance.kit.reference import judge
from conformance.kit.refusals import NOT_IMPLEMENTED
from conformance.kit.scenarios import dead_obs
from conformance.kit.verdicts import Outcome, Verdict, first_failure, fmt, holds, same
from conformance.unsupported import REFUSED

LIMIT = 2
RETURNS = ("nack", "reject", "consumer-loss")


def return_until_gone(ctx: CaseContext, q: str, how: str, rounds: int) -> Obs:
    """Publish one message, then deliver and return it up to ``rounds`` times (or until it is gone)."""
    ctx.publish(q, 1, prefix="poison")
    deliveries: list[dict[str, Any]] = []
    session = ctx.session("consumer") if how != "consumer-loss" else None
    try:
        gone = _rounds(ctx, q, how, rounds, session, deliveries)
    except ChannelClosed as exc:
        # the broker failed the channel in the loop (a crash at the limit): a finding, and the case
        # stops there
        crashed = {"code": exc.code, "text": exc.text, "hard": exc.hard, "at": len(deliveries)}
        return {"how": how, "rounds": rounds, "deliveries": deliveries, "gone": False, "crashed": crashed}
    return {"how": how, "rounds": rounds, "deliveries": deliveries, "gone": gone}


def _rounds(ctx: CaseContext, q: str, how: str, rounds: int, session: Any, deliveries: list[dict[str, Any]]) -> bool:
    gone = False
    for _ in range(rounds):
        if session is not None:
            d = session.get(q, ack_mode=AckMode.MANUAL)
            if d is None:
                gone = True
                break
        else:
            if ctx.stats(q).ready == 0:
                gone = True
                break
            conn = ctx.connect("consumer")
            d = delivered_or_removed(ctx, q, conn.session())
            if d is None:
                conn.cut()
                gone = True
                break
        deliveries.append({"redelivered": d.redelivered, "count": d.delivery_count, "has_header": "x-delivery-count" in d.headers})
        if how == "nack":
            session.nack(d.tag, requeue=True)  # type: ignore[union-attr]
        elif how == "reject":
            session.reject(d.tag, requeue=True)  # type: ignore[union-attr]
        else:
            conn.cut()
            ctx.await_consumers(q, 0)
    if not gone and session is not None:
        gone = session.get(q, ack_mode=AckMode.AUTO) is None  # take it out: the loop's last return put it back
    return gone


def delivered_or_removed(ctx: CaseContext, q: str, session: Any, timeout: float = 10.0) -> Any:
    """Consume the poison message; None when the broker removed it at this delivery attempt instead.

    A broker may check the limit when it is about to deliver rather than when the message comes back
    (LavinMQ before 2.4: the message stays ready until the next attempt, then is dead-lettered), so
    a consumer can get nothing. Proven without a fixed wait: the queue has no ready message, and a
    round trip on the consumer's own session, which orders after any delivery already sent, brought
    none.
    """
    consumer = session.consume(q, prefetch=1)
    end = time.monotonic() + timeout
    while True:
        try:
            return consumer.next(min(0.2, max(0.0, end - time.monotonic())))
        except OperationTimeout:
            if time.monotonic() >= end:
                raise
        if ctx.stats(q).ready == 0:
            session.sync()
            try:
                return consumer.next(0.05)  # dispatches what the round trip brought in (the client holds it back during the call)
            except OperationTimeout:
                ctx.history.add("case", "no delivery", f"{q}: not ready and nothing delivered after a round trip: removed at the delivery attempt")
                return None


#: The profile keys a delivery-limit verdict reads: how many deliveries a limit allows, which returns count.
LIMIT_KEYS = ("delivery-limit.deliveries", "delivery-limit.counted-returns")


def expected_deliveries(values: Mapping[str, Any], limit: int | None, how: str) -> tuple[int | None, str]:
    """How many deliveries ``values`` (of :data:`LIMIT_KEYS`) allow before removal (None: never
    removed), and why."""
    counted, rule = values["delivery-limit.counted-returns"], values["delivery-limit.deliveries"]
    if limit is None:
        return None, "no limit"
    if how not in counted:
        return None, f"{how} does not count towards the limit"
    extra = {"limit+1": 1, "limit": 0}.get(str(rule))
    if extra is None:
        raise ValueError(f"delivery-limit.deliveries {rule!r}: expected 'limit+1' or 'limit'")
    return limit + extra, f"{rule} with limit {limit}"


def judge_deliveries(obs: Obs, allowed: int | None, why: str) -> Verdict:
    n = len(obs["deliveries"])
    crashed = obs.get("crashed")
    if crashed:
        scope = "connection" if crashed["hard"] else "channel"
        return holds(False, expected=f"delivered {'all ' + str(obs['rounds']) if allowed is None else 'exactly ' + str(allowed)} times ({why}), "
                                     "each return and basic.get answered normally",
                     observed=f"{scope} closed with {crashed['code']} {crashed['text']} after {n} deliveries".rstrip(),
                     key=f"{scope}-{crashed['code']}")
    if allowed is None:
        return holds(
            n == obs["rounds"] and not obs["gone"],
            expected=f"the message is never removed ({why}): delivered all {obs['rounds']} times, still there",
            observed=f"delivered {n} times, then {'removed' if obs['gone'] else 'still there'}",
            key=f"removed-after-{n}",
        )
    return holds(
        n == allowed and obs["gone"],
        expected=f"delivered exactly {allowed} times ({why}), then removed",
        observed=f"delivered {n} times, then {'removed' if obs['gone'] else 'still in the queue'}",
        key=f"delivered-{n}-{'removed' if obs['gone'] else 'kept'}",
    )


class TestArgumentSupport(Case):
    """queue.declare with x-delivery-limit, then (when accepted) one message rejected with requeue
    until it is gone or clearly past the limit: accepted is not enough, the limit must hold."""

    requirement = "LIMIT-ARGUMENT-SUPPORT"

    def scenario(self, ctx: CaseContext) -> Obs:
        declared: list[str] = []
        obs: dict[str, Any] = {"answer": ctx.channel_error(lambda: declared.append(ctx.queue({"x-delivery-limit": LIMIT})))}
        if declared:
            loop = return_until_gone(ctx, declared[0], "reject", LIMIT + 3)
            obs.update(enforced=loop["gone"], deliveries=len(loop["deliveries"]))
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = f"queue.declare with x-delivery-limit={LIMIT}"
        answer = obs["answer"]
        documented = profile.entry("delivery-limit.support", queue_type)
        clean = answer.get("closed") and (not answer.get("hard") or answer.get("code") == NOT_IMPLEMENTED)
        if clean and (documented is None or documented.value != "supported"):
            # The optional feature refused the protocol's own way (a channel exception at declare, or
            # 540 NOT_IMPLEMENTED), where the vendor does not document it as supported: unsupported,
            # the refusal recorded. Where the vendor documents support, the refusal fails below.
            scope = "connection" if answer.get("hard") else "channel"
            return Verdict(Outcome.UNSUPPORTED, expected=f"{what}: accepted (the queue type enforces limits)",
                           observed=f"{what}: {scope} closed with {answer.get('code')} {answer.get('text', '')}".rstrip(),
                           reason=f"the broker refused x-delivery-limit for this queue type cleanly ({answer.get('code')})",
                           unsupported_kind=REFUSED, key=f"refused-{answer.get('code')}")
        rounds = obs.get("deliveries", 0)
        after = f"one message rejected with requeue: delivered {rounds} times, then {'removed' if obs.get('enforced') else 'still in the queue'}"

        def check(values: Mapping[str, Any]) -> Verdict:
            support = values["delivery-limit.support"]
            if support == "refused-406":
                return channel_closed_with(answer, 406, what=what)
            enforced = support == "supported"
            return first_failure(
                accepted(answer, what=what),
                holds(obs.get("enforced") is enforced,
                      expected=f"the limit {'enforced: the message removed within' if enforced else 'ignored: the message still there after'} "
                               f"{LIMIT + 3} deliveries",
                      observed=after, key="enforced" if obs.get("enforced") else "not-enforced", spec=False),
            )

        return judge(self.requirement, profile, queue_type, ["delivery-limit.support"], check)


class TestMaxDeliveries(Case):
    requirement = "LIMIT-MAX-DELIVERIES"
    variants = RETURNS
    #: a priority queue keeps its own message store (LavinMQ: a queue class of its own): its returns
    #: must count towards the limit the same way
    configurations = ("priority",)

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue({"x-delivery-limit": LIMIT})
        return {**return_until_gone(ctx, q, str(ctx.variant), LIMIT + 4), "limit": LIMIT}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        def check(values: Mapping[str, Any]) -> Verdict:
            allowed, why = expected_deliveries(values, obs["limit"], obs["how"])
            return judge_deliveries(obs, allowed, f"x-delivery-limit {obs['limit']}, returned by {obs['how']}: {why}")

        return judge(self.requirement, profile, queue_type, LIMIT_KEYS, check)


class TestCountHeader(Case):
    requirement = "LIMIT-COUNT-HEADER"
    variants = RETURNS

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue({"x-delivery-limit": 10})
        return return_until_gone(ctx, q, str(ctx.variant), 4)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        method = "consume" if obs["how"] == "consumer-loss" else "get"
        observed = [d["count"] for d in obs["deliveries"]]

        def check(values: Mapping[str, Any]) -> Verdict:
            first = values["delivery-count.first"]
            rule = first[method] if isinstance(first, dict) else first
            start = {"zero": 0, "absent": None, "one": 1}[rule]
            shift = 1 if rule == "one" else 0  # "one": the header counts this delivery too (1, 2, 3, ...)
            counts = obs["how"] in values["delivery-limit.counted-returns"]
            expected = [(k + shift if k else start) if counts else start for k in range(len(obs["deliveries"]))]
            return first_failure(
                holds(len(observed) == obs["rounds"], expected=f"{obs['rounds']} deliveries under a limit of 10",
                      observed=f"{len(observed)} deliveries", key="removed-early"),
                same(expected, observed, what=f"x-delivery-count per delivery (basic.{method}), returned by {obs['how']} (none = header absent)", spec=False),
            )

        return judge(self.requirement, profile, queue_type, ["delivery-count.first", "delivery-limit.counted-returns"], check)


class TestDeadLetter(Case):
    requirement = "LIMIT-DEAD-LETTER"

    def scenario(self, ctx: CaseContext) -> Obs:
        dlq = ctx.queue(plain=True, role="dlq")
        q = ctx.queue({"x-delivery-limit": 1, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
        loop = return_until_gone(ctx, q, "reject", 6)
        if loop["gone"]:
            ctx.wait_for(lambda: ctx.stats(dlq).ready >= 1, "the dead-lettered message in the dead-letter queue")
        dead = ctx.drain(dlq)
        return {**loop, "source": q, "dead": [dead_obs(d) for d in dead]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        dead = obs["dead"]
        first = (dead[0]["x-death"] or [{}])[0] if dead else {}
        return first_failure(
            holds(obs["gone"], expected="the message leaves the queue once over the limit", observed="removed" if obs["gone"] else "still in the queue", key="kept"),
            holds(len(dead) == 1, expected="exactly one copy in the dead-letter queue", observed=f"{len(dead)} copies: {fmt([d['id'] for d in dead])}", key=f"dead-copies-{len(dead)}"),
            same({"reason": "delivery_limit", "queue": obs["source"]}, {"reason": first.get("reason"), "queue": first.get("queue")},
                 what="x-death[0] reason and queue", spec=False),
        )


class TestDefaultLimit(Case):
    requirement = "LIMIT-DEFAULT"

    def scenario(self, ctx: CaseContext) -> Obs:
        entry = ctx.profile.entry("delivery-limit.default", ctx.queue_type)
        default = entry.value if entry is not None else None
        rounds = default + 3 if isinstance(default, int) else 25
        return {**return_until_gone(ctx, ctx.queue(), "reject", rounds), "default": default}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        def check(values: Mapping[str, Any]) -> Verdict:
            default = values["delivery-limit.default"]
            if default == "none":
                return judge_deliveries(obs, None, "no default delivery limit")
            allowed, why = expected_deliveries(values, int(default), "reject")
            return judge_deliveries(obs, allowed, f"default limit: {why}")

        return judge(self.requirement, profile, queue_type, ["delivery-limit.default", *LIMIT_KEYS], check)
