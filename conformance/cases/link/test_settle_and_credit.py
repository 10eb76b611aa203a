"""Settlement modes, link credit and detach of a receiving link (AMQP 1.0 transport 2.6-2.8).

Every wait ends on a protocol event: the broker's attach, a transfer, its settled disposition, or
its detach, which follows every transfer it sent on the link (frames of a session are ordered), so
after the detach answer nothing more can arrive on that link.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds
from conformance.secrets import SecretUrl

#: The broker owes its detach (or its settlement under rcv-settle-mode second) at once.
PROMPT_S = 3.0
#: Deliveries a detach releases are back in the queue as soon as the broker answered it.
RELEASE_S = 1.5
MODES = tuple(f"{snd}-{rcv}" for snd in ("unsettled", "settled", "mixed") for rcv in ("first", "second"))


class TestSettleModes(Case):
    requirement = "LINK-SETTLE-MODES"
    variants = MODES

    def scenario(self, ctx: CaseContext) -> Obs:
        snd, rcv = str(ctx.variant).split("-")
        q = ctx.queue()
        published = ctx.publish(q, 1)
        session = ctx.session("receiver")
        # A mode the broker declines is a detach with an error (transport 2.6.3): the adapter reports
        # it as a refusal (unsupported), anything else that breaks the session as an error.
        receiver = session.receiver(q, snd_settle_mode=snd, rcv_settle_mode=rcv, credit=1)
        got = receiver.next(WAIT_S)
        if got.presettled:
            settlement = "settled by the broker at send"
        elif rcv == "second":  # the receiver's own mode is the one in force (transport 2.7.3)
            settlement = session.settle_second(got.tag, PROMPT_S)
        else:
            session.ack(got.tag)
            session.sync()
            settlement = "accepted and settled by the receiver"
        detach = receiver.detach(PROMPT_S)
        return {"published": published, "asked": {"snd-settle-mode": snd, "rcv-settle-mode": rcv}, "granted": dict(receiver.granted),
                "got": [delivery_obs(got)], "settlement": settlement, "detach": detach, "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        mode = obs["granted"].get("snd-settle-mode")
        d = obs["got"][0] if obs["got"] else {}
        settled = d.get("presettled")
        consistent = {"settled": settled is True, "unsettled": settled is False}.get(str(mode), True)
        second = obs["asked"]["rcv-settle-mode"] == "second" and settled is False
        return first_failure(
            holds(mode in ("unsettled", "settled", "mixed"), expected="the broker's attach states the snd-settle-mode in force",
                  observed=f"granted snd-settle-mode {mode}", key=f"granted-{mode}"),
            returned_exactly(obs["got"], obs["published"], what="the delivery on the link"),
            holds(consistent, expected=f"transfers keep to the granted snd-settle-mode {mode}",
                  observed=f"snd-settle-mode {mode}, transfer settled={str(settled).lower()}", key=None if consistent else f"{mode}-mode-transfer-settled-{str(settled).lower()}"),
            holds(not second or obs["settlement"] == "settled by the broker",
                  expected="under rcv-settle-mode second the broker settles the receiver's accepted outcome",
                  observed=obs["settlement"], key=None if not second or obs["settlement"] == "settled by the broker" else "second-not-settled"),
            returned_exactly(obs["after"], [], what="after its settlement"),
        )



class TestDetachReleases(Case):
    requirement = "LINK-DETACH-RELEASES"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        session = ctx.session("receiver")
        receiver = session.receiver(q, credit=3)
        receiver.received(3, WAIT_S)
        held = list(receiver.buffer)
        receiver.buffer.clear()
        session.ack(held[0].tag)  # accepted: stays gone; the other two are still unsettled at the detach
        detach = receiver.detach(PROMPT_S)
        after: list[Obs] = []
        alive = "usable"
        if not detach.startswith("answered"):
            # The link's handle is in an unknown state at the broker: a new link could collide with it.
            return {"published": published, "held": [delivery_obs(d) for d in held], "detach": detach, "session": "not tried",
                    "after": [], "left": [delivery_obs(d) for d in ctx.drain(q)]}
        try:
            # The same session takes the released deliveries: the session survived the detach.
            again = session.receiver(q, credit=len(published))
            again.received(len(held) - 1, RELEASE_S)
            after = [delivery_obs(d) for d in again.buffer]
            for d in list(again.buffer):
                session.ack(d.tag)
            again.detach(PROMPT_S)  # its credit must not take what a later receiver looks for
        except ChannelClosed as exc:
            alive = f"failed: {exc.text}"
        return {"published": published, "held": [delivery_obs(d) for d in held], "detach": detach, "session": alive,
                "after": after, "left": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        accepted = [d["id"] for d in obs["held"][:1]]
        unsettled = [d["id"] for d in obs["held"][1:]]
        return first_failure(
            returned_exactly(obs["held"], obs["published"], what="the deliveries held before the detach"),
            holds(obs["detach"].startswith("answered"), expected="the broker answers the detach (closed=true)",
                  observed=f"detach: {obs['detach']}", key="detach-" + obs["detach"].split(" ")[0].split(":")[0]),
            holds(obs["session"] in ("usable", "not tried"), expected="the session stays usable after the link's detach",
                  observed=f"session after the detach: {obs['session']}", key=None if obs["session"] in ("usable", "not tried") else "session-lost"),
            holds(bool(obs["after"] + obs["left"]) or not unsettled, expected=f"the unsettled {', '.join(unsettled)} released by the detach",
                  observed=f"none of {', '.join(unsettled)} came to a receiver on the same session within {RELEASE_S:g}s, nor to a later one",
                  key=None if obs["after"] + obs["left"] or not unsettled else "unsettled-kept-acquired"),
            returned_exactly(obs["after"] + obs["left"], unsettled,
                             what=f"after the detach, the unsettled {', '.join(unsettled)} (not the accepted {', '.join(accepted)})"),
        )


class TestSessionWindowDelivers(Case):
    requirement = "LINK-SESSION-WINDOW-DELIVERS"
    WINDOW, CREDIT, QUEUED = 2, 10, 6
    #: Small enough that the window counts frames of this size; every message here fits in one.
    FRAME = 4096

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, self.QUEUED)
        session = ctx.connect("receiver", url=SecretUrl(ctx.url).with_query({"max-frame-size": self.FRAME})).session(incoming_window=self.WINDOW)
        receiver = session.receiver(q, credit=self.CREDIT)
        receiver.received(self.QUEUED, PROMPT_S)  # queued before the attach: all can flow at once
        got = list(receiver.buffer)
        receiver.buffer.clear()
        for d in got:
            session.ack(d.tag)
        detach = receiver.detach(PROMPT_S)
        return {"published": published, "window": self.WINDOW, "credit": self.CREDIT, "got": [delivery_obs(d) for d in got],
                "detach": detach, "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        n, want = len(obs["got"]), len(obs["published"])
        return first_failure(
            holds(n == want, expected=f"all {want} queued messages through a session window of {obs['window']} frames with {obs['credit']} credit",
                  observed=f"{n} arrived within {PROMPT_S:g}s", key=None if n == want else "transfers-stalled-at-window"),
            returned_exactly(obs["got"] + obs["after"], obs["published"], what="the link's and a later receiver's together"),
        )
