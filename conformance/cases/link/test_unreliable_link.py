"""Reliable vs. unreliable links (the Qpid seeds' programs): what an acquirer leaves behind. (A
reliable link's redelivery after its acquirer disconnects is ACK-REDELIVER-ON-CONNECTION-LOSS's.)

AMQP 1.0 runs them over links with snd-settle-mode unsettled (reliable) or settled (unreliable);
AMQP 0-9-1 over a manual-ack or no-ack consumer.
"""

from __future__ import annotations

from typing import Any

from conformance.api import AckMode
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, SettlementRefused
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


class TestUnreliableLinkNoSettle(Case):
    requirement = "LINK-UNRELIABLE-NO-SETTLE"
    variants = ("release", "reject")

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
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
