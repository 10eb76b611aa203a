"""The seeds' acknowledgement forms and JMS acknowledgement modes, judged by what comes back.

Seed 000: ``session.acknowledge()`` with no argument acknowledges every message fetched on the
session, synchronously by default or without waiting (``sync=False``). Seeds 002 and 004: the JMS
modes. Over AMQP 1.0 every mode below is a reliable link (snd-settle-mode unsettled, rcv-settle-mode
first) whose deliveries the client accepts at the moment the mode says; over AMQP 0-9-1 a manual-ack
consumer with basic.ack multiple=false. The broker sees only the acknowledgements: when the client
library sent them relative to the application's onMessage is what tells the modes apart, and that is
the suite's script here, not something the broker could be asked about.
"""

from __future__ import annotations

from typing import Any

from conformance.api import AckScope, Delivery, Session
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered, returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

#: The listener's stream: five messages prefetched; the application has handled two and is inside
#: onMessage for the third when its process dies; two are still unread in the client's buffer.
PREFETCHED, HANDLED = 5, 2


def listener_dies(ctx: CaseContext, acknowledge: Any, *, barrier: bool) -> Obs:
    """Five deliveries in the client's buffer; ``acknowledge(session, held)`` sends what the mode
    sends by the time the process dies, which returns the ids acknowledged; ``barrier``: a round trip
    after them (the broker has processed them) before the connection is cut."""
    q = ctx.queue()
    published = ctx.publish(q, PREFETCHED)
    conn = ctx.connect("listener")
    session = conn.session()
    held = ctx.take(session.consume(q, prefetch=PREFETCHED), PREFETCHED)
    acked = acknowledge(session, held)
    if barrier:
        session.sync()
    conn.cut()
    ctx.await_consumers(q, 0)
    return {"published": published, "held": [delivery_obs(d) for d in held], "acknowledged": acked,
            "barrier": barrier, "returned": [delivery_obs(d) for d in ctx.drain(q)]}


def ack_each(session: Session, ds: list[Delivery]) -> list[str]:
    for d in ds:
        session.ack(d.tag)
    return [d.message_id or "" for d in ds]


def returned_after(obs: Obs, expected: list[str], what: str) -> Verdict:
    return first_failure(
        returned_exactly(obs["held"], obs["published"], what="delivered into the client's buffer"),
        returned_exactly(obs["returned"], expected, what=what),
        all_redelivered(obs["returned"]),
    )


class TestJmsAutoAcknowledge(Case):
    requirement = "SEED-JMS-AUTO-ACKNOWLEDGE"

    def scenario(self, ctx: CaseContext) -> Obs:
        # AUTO_ACKNOWLEDGE, asynchronous listener: each message is acknowledged once onMessage returned
        return listener_dies(ctx, lambda s, held: ack_each(s, held[:HANDLED]), barrier=True)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        rest = [d["id"] for d in obs["held"][HANDLED:]]
        return returned_after(obs, rest, "after m1 and m2 were acknowledged as their onMessage returned and the process died in m3's")


class TestJmsPreAcknowledge(Case):
    requirement = "SEED-JMS-PRE-ACKNOWLEDGE"

    def scenario(self, ctx: CaseContext) -> Obs:
        # PRE_ACKNOWLEDGE: each message is acknowledged before onMessage gets it, so m3 is too
        return listener_dies(ctx, lambda s, held: ack_each(s, held[:HANDLED + 1]), barrier=True)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        rest = [d["id"] for d in obs["held"][HANDLED + 1:]]
        return returned_after(obs, rest, "after m1..m3 were acknowledged before their onMessage and the process died in m3's")


class TestJmsDupsOkAcknowledge(Case):
    requirement = "SEED-JMS-DUPS-OK-ACKNOWLEDGE"

    def scenario(self, ctx: CaseContext) -> Obs:
        # DUPS_OK_ACKNOWLEDGE: acknowledged lazily, nothing waited for, and the connection dies at once
        return listener_dies(ctx, lambda s, held: ack_each(s, held[:HANDLED]), barrier=False)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        got = [d["id"] for d in obs["returned"]]
        owed = [d["id"] for d in obs["held"][HANDLED:]]
        lazy = [d["id"] for d in obs["held"][:HANDLED]]
        missing = [m for m in owed if m not in got]
        foreign = [m for m in got if m not in obs["published"]]
        twice = sorted({m for m in got if got.count(m) > 1})
        dups = [m for m in got if m in lazy]
        return first_failure(
            returned_exactly(obs["held"], obs["published"], what="delivered into the client's buffer"),
            holds(not missing, expected=f"every message never acknowledged comes back: {fmt(owed)}; the lazily acknowledged "
                                        f"{fmt(lazy)} may come back too (duplicates the application filters by message id)",
                  observed=f"came back {fmt(got)}" + (f" (missing {fmt(missing)})" if missing else f"; of the lazily acknowledged: {fmt(dups)}"),
                  key="lost" if missing else None),
            holds(not foreign and not twice, expected="only the listener's messages, each once",
                  observed=f"unexpected {fmt(foreign)}, twice {fmt(twice)}" if foreign or twice else "no unknown or doubled message",
                  key="unexpected" if foreign or twice else None),
            all_redelivered(obs["returned"]),
        )


def acknowledge_all(ctx: CaseContext, *, wait: bool) -> Obs:
    """Two receivers on one session, two messages fetched from each, then the seed's
    ``session.acknowledge()`` of everything fetched on the session; synchronous (a round trip, then
    the connection cut at once) or ``sync=False`` (no waiting; the session and connection closed in order)."""
    queues = [ctx.queue(role="a"), ctx.queue(role="b")]
    published = ctx.publish(queues[0], 2, prefix="a") + ctx.publish(queues[1], 2, prefix="b")
    conn = ctx.connect("consumer")
    session = conn.session()
    held = [d for q in queues for d in ctx.take(session.consume(q, prefetch=2), 2)]
    session.acknowledge(max(held, key=lambda d: d.tag), AckScope.CUMULATIVE)
    if wait:
        session.sync()
        conn.cut()  # at once: only what the broker settled before the acknowledgement returned can count
    else:
        session.close()
        conn.close()
    for q in queues:
        ctx.await_consumers(q, 0)
    return {"published": published, "held": [delivery_obs(d) for d in held],
            "returned": [delivery_obs(d) for q in queues for d in ctx.drain(q)]}


class TestAcknowledgeAllSync(Case):
    requirement = "SEED-ACK-ALL-SYNC"

    def scenario(self, ctx: CaseContext) -> Obs:
        return acknowledge_all(ctx, wait=True)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["held"], obs["published"], what="fetched on the session from two receivers"),
            returned_exactly(obs["returned"], [], what="after acknowledge() of all returned and the connection was cut"),
        )


class TestAcknowledgeAllAsync(Case):
    requirement = "SEED-ACK-ALL-ASYNC"

    def scenario(self, ctx: CaseContext) -> Obs:
        return acknowledge_all(ctx, wait=False)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["held"], obs["published"], what="fetched on the session from two receivers"),
            returned_exactly(obs["returned"], [], what="after acknowledge(sync=False) of all and an orderly close"),
        )
