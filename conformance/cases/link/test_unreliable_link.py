"""Reliable vs. unreliable links (the Qpid seeds' programs): what an acquirer leaves behind. (A
reliable link's redelivery after its acquirer disconnects is ACK-REDELIVER-ON-CONNECTION-LOSS's.)

AMQP 1.0 runs them over links with snd-settle-mode unsettled (reliable) or settled (unreliable);
AMQP 0-9-1 over a manual-ack or no-ack consumer.
"""

from __future__ import annotations

import uuid
from typing import Any

from conformance.api import AckMode
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, SettlementRefused, TargetCannot
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Outcome, Verdict, first_failure, fmt, holds
from conformance.unsupported import CANNOT_EXPRESS


class TestUnreliableLinkGoneAtFetch(Case):
    requirement = "LINK-UNRELIABLE-GONE-AT-FETCH"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 2)
        conn = ctx.connect("acquirer1")
        consumer = conn.session().consume(q, ack_mode=AckMode.AUTO)
        got = consumer.take(2, WAIT_S)
        conn.cut()
        ctx.await_consumers(q, 0)
        return {"published": published, "granted": dict(consumer.granted), "fetched": [delivery_obs(d) for d in got],
                "second": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        unsettled = [d["id"] for d in obs["fetched"] if d.get("presettled") is False]
        mode = obs["granted"].get("snd-settle-mode")
        return first_failure(
            holds(mode in (None, "settled"), expected="the broker grants snd-settle-mode settled",
                  observed=f"granted snd-settle-mode {mode}", key=f"granted-{mode}"),
            returned_exactly(obs["fetched"], obs["published"], what="the unreliable acquirer's deliveries"),
            holds(not unsettled, expected="every delivery arrives settled at send",
                  observed=("unsettled: " + fmt(unsettled)) if unsettled else "all arrived settled", key="unsettled-at-send" if unsettled else None),
            returned_exactly(obs["second"], [], what="for a second acquirer after the first disconnected"),
        )


def refusal(fn: Any) -> Obs:
    """Who refused a settlement: the client (nothing to settle), the broker (an error), or nobody."""
    try:
        fn()
    except SettlementRefused as exc:
        return {"refused_by": "client", "text": str(exc)}
    except ChannelClosed as exc:
        return {"refused_by": "broker", "text": f"{exc.code} {exc.text}"}
    return {"refused_by": None, "text": ""}


#: The broker owes its answers to the frame-level receiver (an attach, a transfer it has credit for) at once.
PROMPT_S = 2.0


def raw_settle_presettled(ctx: CaseContext, q: str, outcome: str) -> Obs:
    """AMQP 1.0, frame by frame: a receiver asks for snd-settle-mode settled, takes one transfer,
    then sends a disposition (``outcome``, settled) for it anyway, which proton's engine never puts
    on the wire for a delivery it has forgotten. The barrier that the broker has read that
    disposition is the answer to a second link's attach on the same session (a session's frames are
    handled in order); the connection is then closed and the queue drained."""
    conn = ctx.adapter.raw_connection(ctx.url, timeout=PROMPT_S, name=f"conformance {ctx.requirement.id} raw")
    ctx.history.add("raw", "connect", "frame-level connection")
    try:
        address = conn.address(q)
        conn.attach(f"unrel-{uuid.uuid4().hex[:6]}", 0, receiver=True, address=address, snd_settle_mode=1)
        got = conn.read(lambda f: f.name == "attach")
        attach = got[-1] if got and got[-1].name == "attach" else None
        if attach is None:
            return {"raw": True, "attach": "none: " + ", ".join(f.name for f in got), "log": list(conn.log)}
        mode = {0: "unsettled", 1: "settled", 2: "mixed"}.get(int(attach.field(3) or 0), str(attach.field(3)))
        if mode != "settled" or attach.field(5) is None:
            raise TargetCannot(f"asked for an unreliable link from {address} (snd-settle-mode settled); the broker's attach answered "
                               f"snd-settle-mode {mode}{'' if attach.field(5) is not None else ' and no source'}: it offers no at-most-once link",
                               kind="refused", refusal=f"attach answered snd-settle-mode {mode} (asked settled)")
        conn.flow(0, delivery_count=attach.field(9), link_credit=1)
        frames = conn.read(lambda f: f.name == "transfer" and not f.field(5))  # the delivery's last (here: only) transfer
        transfers = [f for f in frames if f.name == "transfer"]
        if not transfers:
            return {"raw": True, "attach": "answered", "transfer": None, "log": list(conn.log)}
        first = transfers[0]
        delivery_id, settled = int(first.field(1)), any(bool(t.field(4)) for t in transfers)
        conn.disposition(delivery_id, outcome, settled=True)
        conn.attach(f"barrier-{uuid.uuid4().hex[:6]}", 1, receiver=True, address=address)
        after = conn.read(lambda f: f.name == "attach" and f.field(1) == 1 or f.name in ("end", "close"))
        barrier = "answered" if any(f.name == "attach" for f in after) else ("ended: " + ", ".join(f.brief() for f in after[-1:]) if after else f"no answer within {PROMPT_S:g}s")
        errors = [f.brief() for f in after if f.name in ("detach", "end", "close")]
        conn.detach(1)
        log = list(conn.log)
    finally:
        conn.close()
    ctx.await_consumers(q, 0)
    return {"raw": True, "attach": "answered", "transfer": {"delivery-id": delivery_id, "settled": settled}, "outcome": outcome,
            "barrier": barrier, "errors": errors, "log": log, "after": [delivery_obs(d) for d in ctx.drain(q)]}


class TestUnreliableLinkNoSettle(Case):
    requirement = "LINK-UNRELIABLE-NO-SETTLE"
    variants = ("release", "reject")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        if getattr(ctx.adapter, "raw_connection", None) is not None:
            # AMQP 1.0: the adapter's own client refuses to settle a pre-settled delivery (nothing to
            # settle at its end), so the frame-level client puts the disposition on the wire itself
            obs = raw_settle_presettled(ctx, q, "released" if ctx.variant == "release" else "rejected")
            return {"published": published, **obs}
        conn = ctx.connect("acquirer1")
        session = conn.session()
        got = session.consume(q, ack_mode=AckMode.AUTO).next(WAIT_S)

        def settle() -> None:
            if ctx.variant == "release":
                session.nack(got.tag, requeue=True)
            else:
                session.reject(got.tag, requeue=False)
            session.sync()

        answer = refusal(settle)
        conn.cut()
        ctx.await_consumers(q, 0)
        return {"published": published, "fetched": [delivery_obs(got)], "answer": answer,
                "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if obs.get("raw"):
            return self.verdict_amqp10(obs)
        who = obs["answer"]["refused_by"]
        if who == "client":
            # Our own adapter refused before anything reached the wire, so the refusal half was never
            # put to the broker (the protocol cannot express it: cannot-express). The other half was:
            # a message the broker settled at send must not come back, and that is still judged.
            back = returned_exactly(obs["after"], [], what="after the client's refusal and a disconnect")
            if back.outcome is not Outcome.PASS:
                return back
            return Verdict(Outcome.UNSUPPORTED, expected="the broker refuses to settle a pre-settled delivery, and the message does not come back",
                           observed=f"not sent: the client refused it ({obs['answer']['text']}); nothing came back after a disconnect",
                           reason="the adapter's client cannot put a settlement of a delivery settled at send on the wire "
                                  "(AMQP 1.0: a delivery the sender settled no longer exists at either end), so the broker is not tested",
                           unsupported_kind=CANNOT_EXPRESS)
        return first_failure(
            holds(who == "broker", expected="settling a pre-settled delivery is refused by the broker",
                  observed=f"refused by the {who}: {obs['answer']['text']}" if who else "accepted without complaint",
                  key=None if who else "settle-accepted"),
            returned_exactly(obs["after"], [], what="after the refused settlement and a disconnect"),
        )


    @staticmethod
    def verdict_amqp10(obs: Obs) -> Verdict:
        """Transport 2.6.12: a delivery settled at the sender is forgotten there, so a disposition for
        it changes nothing (AMQP 1.0 names no error for it: the broker may ignore it or refuse it);
        the message, gone at send (2.7.5, snd-settle-mode settled), must not come back."""
        t = obs.get("transfer")
        outcome = obs.get("outcome", "released")
        return first_failure(
            holds(obs["attach"] == "answered", expected="the broker attaches the unreliable link", observed=f"attach: {obs['attach']}",
                  key=None if obs["attach"] == "answered" else "no-attach"),
            holds(t is not None, expected=f"a transfer for the credit granted, within {PROMPT_S:g}s", observed="no transfer" if t is None else "a transfer",
                  key=None if t is not None else "no-transfer"),
            holds(bool(t and t["settled"]), expected="the delivery arrives settled at send (snd-settle-mode settled, transport 2.7.5)",
                  observed="settled" if t and t["settled"] else "unsettled", key=None if t and t["settled"] else "unsettled-at-send"),
            holds(obs.get("barrier") == "answered" or str(obs.get("barrier", "")).startswith("ended"),
                  expected=f"the broker reads the client's disposition ({outcome}) of it: the next attach on the session is answered",
                  observed=f"barrier: {obs.get('barrier')}", key=None if obs.get("barrier") == "answered" or str(obs.get("barrier", "")).startswith("ended") else "barrier-unanswered"),
            returned_exactly(obs.get("after", []), [], what=f"after a disposition ({outcome}, settled) of a delivery the broker settled at send, and the connection's close"),
        )


class TestAckSync(Case):
    requirement = "LINK-ACK-SYNC"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        conn = ctx.connect("consumer")
        session = conn.session()
        got = session.consume(q, prefetch=1).next(WAIT_S)
        session.ack(got.tag)
        session.sync()
        conn.cut()  # at once: only what the broker settled before sync returned can count
        ctx.await_consumers(q, 0)
        return {"published": published, "acked": [delivery_obs(got)], "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["acked"], obs["published"], what="the delivery acknowledged synchronously"),
            returned_exactly(obs["after"], [], what="after the synchronous acknowledgement returned and the connection was cut"),
        )


class TestAckAsync(Case):
    requirement = "LINK-ACK-ASYNC"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        conn = ctx.connect("consumer")
        session = conn.session()
        got = session.consume(q, prefetch=3).take(3, WAIT_S)
        for d in got:
            session.ack(d.tag)  # no waiting
        session.close()
        conn.close()
        ctx.await_consumers(q, 0)
        return {"published": published, "acked": [delivery_obs(d) for d in got], "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            returned_exactly(obs["acked"], obs["published"], what="the deliveries acknowledged without waiting"),
            returned_exactly(obs["after"], [], what="after the asynchronous acknowledgements and an orderly close"),
        )
