"""What a publisher is told about its own publishes: publisher confirms, refusals and returns.

The publisher pipelines its publishes (it does not wait for each confirm before the next), as a
real confirming producer does; that is where a broker's confirms can come out coalesced, out of
order, twice or never. Every wait is the adapter's explicit window: a confirm that never comes is
an observation ("no confirm for sequence number 7"), not a stalled case. What the queue then holds
is read with basic.get until basic.get-empty: a broker acks a publish only once the queue has it.
"""

from __future__ import annotations

from typing import Any

from conformance.api import AckMode, Session
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, TargetCannot
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.confirms import event_obs, ledger, sequence
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

#: How long a burst waits for the broker's confirms (a local broker needs well under a second).
CONFIRM_WINDOW_S = 3.0
BURST = 200
#: The refusing queue: two messages, new publishes refused when full (a count limit: one every broker
#: expresses, qpidd's qpid.max_count with the reject policy included; a byte limit far above two small
#: messages never bound, and qpidd's byte limit counts other bytes, adapters/amqp10/qmf-arguments.yaml).
LIMIT = 2
REFUSING = {"x-max-length": LIMIT, "x-overflow": "reject-publish"}
#: Publishes into the empty refusing queue: a quorum queue applies its limit a little late, so
#: enough to fill it whatever the queue type.
OFFERED = 20
#: Publishes once the queue is full (every publish of the first burst confirmed).
OVER = 3
NO_ROUTE = 312
#: A broker error, not an answer: INTERNAL_ERROR, and the connection-level failures.
CRASH_CODES = (541, 501, 502, 504, 505)


def burst(session: Session, queue: str, ids: list[str], **kw: Any) -> list[dict[str, Any]]:
    """What the broker sent about ``ids``; a channel or connection it closed ends the list as an
    event of its own (a broker that crashes the channel is judged, never an error of the suite)."""
    try:
        return [event_obs(e) for e in session.publish_pipelined(queue, [(m, m.encode()) for m in ids],
                                                               window=CONFIRM_WINDOW_S, **kw)]
    except ChannelClosed as exc:  # what the broker said before it (an AMQP 1.0 adapter keeps it) is kept too
        return [event_obs(e) for e in getattr(exc, "events", [])] + [{"kind": "closed", "code": exc.code, "text": exc.text, "hard": exc.hard}]
    except ConnectionLost as exc:  # the connection an earlier burst's answer closed, or a cut
        return [{"kind": "closed", "code": 0, "text": str(exc), "hard": True}]


def emptied(session: Session, queue: str) -> list[str]:
    """Every message of ``queue``, by basic.get (auto-ack) until basic.get-empty."""
    out = []
    while (d := session.get(queue, ack_mode=AckMode.AUTO)) is not None:
        out.append(d.message_id)
        if len(out) > BURST + OFFERED:  # a queue that never empties is judged, not looped on
            break
    return out


def closed(events: list[dict[str, Any]]) -> Verdict:
    """No channel or connection closed by the broker while it was told about publishes."""
    shut = [e for e in events if e["kind"] == "closed"]
    return holds(not shut, expected="the channel stays open while the broker answers the publishes",
                 observed=f"{'connection' if shut and shut[0].get('hard') else 'channel'} closed with {shut[0]['code']} {shut[0]['text']}"
                 f" after {sequence([e for e in events if e['kind'] != 'closed'])}" if shut else "open",
                 key="crashed" if shut and shut[0]["code"] in CRASH_CODES else "closed")


def once_each(obs: Obs, what: str) -> Verdict:
    """Every sequence number of the session confirmed exactly once (the ledger's problems)."""
    led = ledger(obs["events"], len(obs["published"]))
    problems = led.problems()
    if any(e["kind"] == "closed" for e in obs["events"]):
        return closed(obs["events"])
    return holds(not problems, expected=f"{what}: each of sequence numbers 1..{led.published} confirmed exactly once "
                 f"within {CONFIRM_WINDOW_S:g}s, by basic.ack or basic.nack, never both (AMQP 1.0: one settled disposition "
                 f"per transfer, accepted or another outcome)",
                 observed="; ".join(problems) + f"; the broker sent {sequence(obs['events'])}" if problems else
                 f"{len(led.tags('ack'))} acked, {len(led.tags('nack'))} nacked, each once",
                 key="missing-confirm" if led.missing else "confirm-twice" if problems else None)


class TestEachPublishConfirmedOnce(Case):
    requirement = "PUBLISH-CONFIRM-EACH-ONCE"
    configurations = ("priority", "message-ttl", "delivery-limit", "length-limit-reject")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        publisher = ctx.session("publisher")
        # one mandatory publish before confirm.select: confirm mode numbers only what follows it
        publisher.publish(q, b"m0", message_id="m0")
        ids = [f"m{i}" for i in range(1, BURST + 1)]
        events = burst(publisher, q, ids)
        try:
            ready = ctx.stats(q).ready
        except TargetCannot:  # a target that cannot count (no admin, no browsing): what a drain proves is there
            ready = len(ctx.drain(q))
        return {"before": ["m0"], "published": ids, "events": events, "ready": ready}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        led = ledger(obs["events"], len(obs["published"]))
        n = len(obs["published"])
        return first_failure(
            once_each(obs, f"{n} publishes pipelined to a queue that takes them"),
            holds(not led.tags("nack"), expected=f"every one of the {n} publishes acked (the queue takes them all)",
                  observed=f"nacked {fmt(led.tags('nack'))}", key="nacked"),
            holds(obs["ready"] == n + len(obs.get("before", [])),
                  expected=f"the queue holds all {n} confirmed messages and the {len(obs.get('before', []))} published before confirm.select",
                  observed=f"the queue holds {obs['ready']}", key="confirmed-lost" if obs["ready"] < n else "extra"),
        )


class TestRefusedPublishNacked(Case):
    requirement = "PUBLISH-CONFIRM-REFUSED-NACKED"
    configurations = ("priority", "message-ttl", "delivery-limit")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue(REFUSING)
        publisher = ctx.session("publisher")
        offered = [f"m{i}" for i in range(1, OFFERED + 1)]
        events = burst(publisher, q, offered)
        # Every publish of the first burst is confirmed, so the queue is full now (a quorum queue
        # may take more than its limit before it tells the channel to refuse): these are refused.
        over = [f"over{i}" for i in range(1, OVER + 1)]
        events += burst(publisher, q, over)
        getter = ctx.session("getter")
        held = emptied(getter, q)
        retry = burst(publisher, q, ["retry"])
        return {"published": offered + over + ["retry"], "over": over, "events": events + retry, "held": held,
                "retry_held": emptied(getter, q)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        ids = obs["published"]
        led = ledger(obs["events"], len(ids))
        acked = [ids[t - 1] for t in led.tags("ack") if t < len(ids)]
        nacked = [ids[t - 1] for t in led.tags("nack") if t < len(ids)]
        refused_under = [t for t in range(1, LIMIT + 1) if led.outcome.get(t) == "nack"]
        over_acked = [m for m in obs["over"] if m in acked]
        retry = led.outcome.get(len(ids))
        wrongly_held = sorted(set(nacked) & set(obs["held"]))
        return first_failure(
            once_each(obs, f"{len(ids) - 1} publishes to a queue limited to {LIMIT} (reject-publish), then a retry"),
            holds(not refused_under, expected=f"the first {LIMIT} publishes into the empty queue (under its limits) acked",
                  observed=f"sequence number(s) {fmt(refused_under)} nacked while the queue was under its limit; the broker sent {sequence(obs['events'])}",
                  key="refused-under-limit"),
            holds(not over_acked, expected=f"once the first {OFFERED} are confirmed the queue is full: the {OVER} publishes after them nacked",
                  observed=f"acked {fmt(over_acked)}; the queue then held {len(obs['held'])}", key="not-refused"),
            holds(sorted(obs["held"]) == sorted(acked),
                  expected="the queue holds exactly the acked messages, none of the nacked ones",
                  observed=f"held {fmt(obs['held'])}; acked {fmt(acked)}" + (f"; nacked yet held {fmt(wrongly_held)}" if wrongly_held else ""),
                  key="nacked-enqueued" if wrongly_held else "acked-lost"),
            holds(retry == "ack" and obs["retry_held"] == ["retry"],
                  expected="after the queue is emptied, a retry is acked and delivered",
                  observed=f"retry {retry or 'never confirmed'}; the queue then held {fmt(obs['retry_held'])}", key="retry-refused"),
        )


class TestUnroutableConfirmed(Case):
    requirement = "PUBLISH-CONFIRM-UNROUTABLE"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        exchange = ctx.exchange()
        publisher = ctx.session("publisher")
        mandatory = burst(publisher, "nowhere", ["u-mandatory"], mandatory=True, exchange=exchange)
        plain = burst(publisher, "nowhere", ["u-plain"], exchange=exchange)
        return {"published": ["u-mandatory", "u-plain"], "events": mandatory + plain, "mandatory": mandatory, "plain": plain}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        m, p = obs["mandatory"], obs["plain"]
        returned_m = [e for e in m if e["kind"] == "return"]
        confirms_m = [e for e in m if e["kind"] != "return"]
        return first_failure(
            once_each(obs, "a mandatory and a plain publish to an exchange with no binding"),
            holds(len(returned_m) == 1 and returned_m[0].get("code") == NO_ROUTE and returned_m[0].get("id") == "u-mandatory",
                  expected=f"the mandatory publish returned once with basic.return {NO_ROUTE} NO_ROUTE",
                  observed=f"the broker sent {sequence(m)}", key="not-returned"),
            holds(not returned_m or not confirms_m or m.index(returned_m[0]) < m.index(confirms_m[0]),
                  expected="its basic.return before its basic.ack", observed=f"the broker sent {sequence(m)}", key="ack-before-return"),
            holds([e["kind"] for e in confirms_m] == ["ack"], expected="the unroutable mandatory publish acked (not nacked)",
                  observed=f"the broker sent {sequence(m)}", key="nacked"),
            holds([e["kind"] for e in p] == ["ack"], expected="the plain (not mandatory) unroutable publish acked, no return",
                  observed=f"the broker sent {sequence(p)}", key="plain-not-acked"),
        )


class TestTxUnroutableReturnedOnCommit(Case):
    requirement = "PUBLISH-TX-UNROUTABLE-RETURNED"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue(plain=True)
        exchange = ctx.exchange()
        publisher = ctx.session("publisher")
        publisher.select_tx()
        routed = burst(publisher, q, ["t1", "t2"], mandatory=True, commit=True)
        unroutable = burst(publisher, "nowhere", ["t-unroutable"], mandatory=True, exchange=exchange, commit=True)
        return {"routed": routed, "unroutable": unroutable, "held": emptied(ctx.session("getter"), q)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        u = obs["unroutable"]
        kinds = [e["kind"] for e in u]
        returns = [i for i, e in enumerate(u) if e["kind"] == "return"]
        first_sync = kinds.index("sync-ok") if "sync-ok" in kinds else len(kinds)
        committed = "commit-ok" in kinds
        early = [i for i in returns if i < first_sync]
        return first_failure(
            holds(committed and "commit-ok" in [e["kind"] for e in obs["routed"]],
                  expected="tx.commit answered tx.commit-ok", observed=f"the broker sent {sequence(obs['routed'])} then {sequence(u)}", key="no-commit-ok"),
            holds(not early, expected="no basic.return before the tx.commit (RabbitMQ: sent on commit)",
                  observed=f"returned before the commit: the broker sent {sequence(u)}", key="returned-before-commit"),
            holds(len(returns) == 1 and u[returns[0]].get("id") == "t-unroutable" and u[returns[0]].get("code") == NO_ROUTE,
                  expected=f"the unroutable mandatory publish returned once with basic.return {NO_ROUTE} at the commit",
                  observed=f"the broker sent {sequence(u)}", key="not-returned"),
            holds(not [e for e in obs["routed"] if e["kind"] == "return"] and sorted(obs["held"]) == ["t1", "t2"],
                  expected="the two routed messages committed to the queue, none returned",
                  observed=f"the broker sent {sequence(obs['routed'])}; the queue held {fmt(obs['held'])}", key="routed-lost"),
        )


def tx_round(session: Session, queue: str, ids: list[str]) -> Obs:
    """One transaction of mandatory publishes and its commit: what came back, or the channel exception."""
    events = burst(session, queue, ids, mandatory=True, commit=True)
    shut = next((e for e in events if e["kind"] == "closed"), None)
    return {"ids": ids, "events": [e for e in events if e["kind"] != "closed"],
            "closed": f"{'connection' if shut.get('hard') else 'channel'} closed with {shut['code']} {shut['text']}" if shut else None,
            "crashed": bool(shut and (shut["code"] in CRASH_CODES or shut.get("hard")))}


class TestTxRefusedNotSilent(Case):
    requirement = "PUBLISH-TX-REFUSED-NOT-SILENT"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue(REFUSING)
        rounds = []
        session = None
        # the first transaction overfills the empty queue by one, the second finds it full (a quorum
        # queue: over full); one over the limit, so a commit that loses any one publish without a
        # word is seen even where the broker would have refused one
        for prefix, n in (("a", LIMIT + 1), ("b", 2 * LIMIT)):
            if session is None or not session.is_open:
                session = ctx.session(f"publisher-{prefix}")
                session.select_tx()
            rounds.append(tx_round(session, q, [f"{prefix}{i}" for i in range(1, n + 1)]))
        return {"rounds": rounds, "held": emptied(ctx.session("getter"), q)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        held = set(obs["held"])
        checks = []
        for r in obs["rounds"]:
            # 0-9-1: basic.return; AMQP 1.0: a transactional transfer's outcome other than accepted
            returned = {e.get("id") for e in r["events"] if e["kind"] == "return" or (e["kind"] == "nack" and e.get("id"))}
            committed = any(e["kind"] == "commit-ok" for e in r["events"])
            silent = [m for m in r["ids"] if m not in held and m not in returned] if committed else []
            what = (f"tx.commit of {fmt(r['ids'])} to a queue limited to {LIMIT} (reject-publish): "
                    + (r["closed"] if r["closed"] else f"the broker sent {sequence(r['events'])}"))
            if r.get("crashed"):
                checks.append(holds(False, expected="the commit answered: tx.commit-ok, or a channel exception refusing it",
                                    observed=f"{what}: the broker failed, not refused", key="crashed"))
                continue
            checks.append(holds(
                bool(r["closed"]) or (committed and not silent),
                expected="a refused publish of a transaction is not lost silently: the commit fails with a channel "
                         "exception, or after tx.commit-ok each message is in the queue or came back with basic.return "
                         "(AMQP 1.0: the discharge rejected, or each transfer in the queue or refused by its outcome)",
                observed=(f"{what}; neither queued nor returned: {fmt(silent)}" if silent
                          else f"{what}; each message queued or returned" if committed else f"{what}; no tx.commit-ok"),
                # the whole transaction lost (a full queue's refusals ignored by the commit) or only part of it
                key=("dropped-under-commit-ok" if len(silent) == len(r["ids"]) else "partly-dropped-under-commit-ok")
                if silent else "no-commit-ok"))
        return first_failure(*checks)
