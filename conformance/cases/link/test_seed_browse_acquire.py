"""Seed 001's demonstration program, run as the seed runs it, over AMQP 1.0.

One session holds a sender, three browsers (distribution-mode copy) and an acquirer (reliable:
snd-settle-mode unsettled; unreliable: settled). "Hello World" is sent; browser 1 fetches twice,
browser 2 fetches twice, the acquirer fetches and closes its receiver without acknowledging, browser
3 fetches; the connection closes, and a second acquirer on a new connection fetches and acknowledges.

A fetch is what the seed's ``rx.fetch(timeout=1)`` is over AMQP 1.0: one credit with drain set, so
the broker answers at once with the message or with its flow using up the credit (transport 2.6.7):
"nothing" is the broker's answer, not a timeout. Each receiver gets credit only when it fetches
(the seed's receivers have capacity 0), so browser 3 sees the queue as it is after the acquirer left.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout, TargetCannot
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.redelivery import describe, expectation, marks, signal_of, wrong_on_first, wrong_on_redelivery
from conformance.kit.verdicts import Verdict, each_step, first_failure, fmt, holds
from conformance.unsupported import REFUSED

#: A drain is answered at once (there is nothing to wait for); the bound only ends a silent broker's turn.
PROMPT_S = 3.0
HELLO = "hello-world"


def fetch(link: Any) -> Obs:
    """One fetch: credit 1 with drain; what arrived, and how the broker answered (or failed to)."""
    try:
        return {"answer": "drained", "got": [delivery_obs(d) for d in link.drain(1, PROMPT_S)]}
    except OperationTimeout:
        got = [delivery_obs(d) for d in link.buffer]
        link.buffer.clear()
        return {"answer": f"no drain answer within {PROMPT_S:g}s", "got": got}
    except ChannelClosed as exc:
        return {"answer": f"session ended: {exc.text}", "got": []}
    except ConnectionLost as exc:
        return {"answer": f"connection lost: {exc}", "got": []}


class TestSeedBrowseAcquireDemo(Case):
    requirement = "SEED-BROWSE-ACQUIRE-DEMO"
    variants = ("reliable", "unreliable")

    def scenario(self, ctx: CaseContext) -> Obs:
        reliable = ctx.variant == "reliable"
        q = ctx.queue()
        conn = ctx.connect("demo")
        session = conn.session()
        session.enable_confirms()  # the seed's tx.send() is synchronous: the message is queued when it returns
        browsers = [session.browser(q) for _ in range(3)]
        granted = browsers[0].granted.get("distribution-mode")
        if granted != "copy":
            # messaging 3.5.3: the sender's attach states the distribution-mode in place: a clean refusal
            raise TargetCannot(f"the broker granted distribution-mode {granted} to a browser (asked copy): it does not browse",
                               kind=REFUSED, refusal=f"attach answered distribution-mode {granted} (asked copy)")
        acquirer = session.receiver(q, snd_settle_mode="unsettled" if reliable else "settled", credit=0)
        mode = acquirer.granted.get("snd-settle-mode")
        if not reliable and mode != "settled":
            raise TargetCannot(f"asked for an unreliable link (snd-settle-mode settled); the broker's attach answered {mode}",
                               kind=REFUSED, refusal=f"attach answered snd-settle-mode {mode} (asked settled)")
        session.publish(q, b"Hello World", message_id=HELLO)
        steps: dict[str, Any] = {"published": [HELLO], "acquirer_mode": mode}
        steps["browser1_first"] = fetch(browsers[0])
        steps["ready_while_browsed"] = ctx.stats(q).ready
        steps["browser1_then"] = fetch(browsers[0])
        steps["browser2_first"] = fetch(browsers[1])
        steps["browser2_then"] = fetch(browsers[1])
        steps["acquirer"] = fetch(acquirer)
        steps["acquirer_close"] = acquirer.detach(PROMPT_S)  # rxacquire.close(), nothing acknowledged
        steps["browser3"] = fetch(browsers[2])
        conn.close()
        conn2 = ctx.connect("acquirer2")
        session2 = conn2.session()
        acquirer2 = session2.receiver(q, credit=0)
        steps["acquirer2"] = fetch(acquirer2)
        if steps["acquirer2"]["got"]:
            last = max(steps["acquirer2"]["got"], key=lambda d: d["tag"])
            session2.ack(last["tag"], multiple=True)  # the seed's session.acknowledge(): all fetched on the session
            session2.sync()
        conn2.close()
        ctx.await_consumers(q, 0)
        steps["left"] = [delivery_obs(d) for d in ctx.drain(q)]
        return steps

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        reliable = obs["acquirer_mode"] != "settled"
        signal = signal_of(profile, queue_type)
        hello = obs["published"]

        def answered(f: Obs, what: str) -> Verdict:
            # the broker's "none" is its drain answer; without one, nothing is proven (LINK-DRAIN is a SHOULD)
            kind = f["answer"].split(":")[0].split(" within")[0].replace(" ", "-")
            return holds(f["answer"] == "drained", expected=f"{what}: the broker answers the fetch (drain)",
                         observed=f"{what}: {f['answer']}", key=None if f["answer"] == "drained" else f"fetch-{kind}", spec=False)

        def seen(step: str, what: str) -> Verdict:
            f = obs[step]
            wrong = [w for w in (wrong_on_first(d, signal) for d in f["got"]) if w is not None]
            checks = [] if f["got"] else [answered(f, what)]  # a message in answer is an answer
            return first_failure(
                *checks,
                returned_exactly(f["got"], hello, what=what),
                holds(not wrong, expected=f"not marked as acquired before ({expectation(True, signal, True)})",
                      observed=describe(wrong) if wrong else ", ".join(marks(d) for d in f["got"]),
                      key="copy-granted-but-acquired" if wrong else None, spec=all(w.spec for w in wrong)),
            )

        def nothing(step: str, what: str) -> Verdict:
            f = obs[step]
            return first_failure(
                answered(f, what),
                returned_exactly(f["got"], [], what=what),
            )

        def redelivered(step: str, what: str) -> Verdict:
            f = obs[step]
            unmarked = [w for w in (wrong_on_redelivery(d, signal) for d in f["got"]) if w is not None]
            checks = [] if f["got"] else [answered(f, what)]
            return first_failure(
                *checks,
                returned_exactly(f["got"], hello, what=what),
                holds(not unmarked, expected=f"marked redelivered ({expectation(False, signal, True)})",
                      observed=describe(unmarked) if unmarked else ", ".join(marks(d) for d in f["got"]),
                      key=f"{step}-unmarked" if unmarked else None, spec=all(w.spec for w in unmarked)),
            )

        acquired = obs["acquirer"]["got"]
        unsettled = [d["id"] for d in acquired if d.get("presettled") is False]
        settled = [d["id"] for d in acquired if d.get("presettled") is True]
        ready = obs["ready_while_browsed"]
        steps = [
            ("browser 1 fetches", seen("browser1_first", "browser 1's first fetch")),
            ("while browsed", holds(ready == 1, expected="the message stays in the queue (1 ready) while browser 1 holds it",
                                    observed=f"{ready} ready", key=None if ready == 1 else "copy-granted-but-acquired")),
            ("browser 1 fetches again", nothing("browser1_then", "browser 1's second fetch")),
            ("browser 2 fetches", seen("browser2_first", "browser 2's first fetch")),
            ("browser 2 fetches again", nothing("browser2_then", "browser 2's second fetch")),
            ("the acquirer fetches", first_failure(
                seen("acquirer", "the acquirer's fetch"),
                holds(not (settled if reliable else unsettled),
                      expected="the delivery arrives unsettled (reliable link)" if reliable else "the delivery arrives settled at send (unreliable link)",
                      observed=f"settled at send: {fmt(settled)}" if reliable else f"unsettled: {fmt(unsettled)}" if unsettled else "as asked",
                      key=("reliable-settled-at-send" if settled else None) if reliable else ("unreliable-unsettled" if unsettled else None)))),
            ("the acquirer closes its receiver", holds(obs["acquirer_close"] == "answered", expected="the broker answers the detach",
                                                       observed=obs["acquirer_close"], key=None if obs["acquirer_close"] == "answered" else "detach-unanswered")),
            # Reliable: the closed link's unsettled delivery took the source's default outcome (3.5.3), so the
            # message is available again (seed 000: "again become available to consumers") and a browser
            # sees it (copy: it remains available).
            # How browser 3's copy is marked is SEED-BROWSE-SEES-RETURN-MARKED (below), not the seed's outcome.
            ("browser 3 fetches", returned_exactly(obs["browser3"]["got"], hello, what="browser 3's fetch after the acquirer left without accepting")
             if reliable else nothing("browser3", "browser 3's fetch after the unreliable acquirer took it")),
            ("acquirer 2 fetches on a new connection", redelivered("acquirer2", "acquirer 2's fetch") if reliable
             else nothing("acquirer2", "acquirer 2's fetch")),
            ("after acquirer 2 acknowledged", returned_exactly(obs["left"], [], what="left in the queue")),
        ]
        return each_step(steps)


class TestSeedBrowseSeesReturnMarked(TestSeedBrowseAcquireDemo):
    """The same program (reliable link); judged: how browser 3's copy of the returned message is marked."""

    requirement = "SEED-BROWSE-SEES-RETURN-MARKED"
    variants = ("reliable",)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        signal = signal_of(profile, queue_type)
        got = obs["browser3"]["got"]
        if [d["id"] for d in got] != obs["published"]:
            # The program never showed browser 3 the returned message: no copy to judge the marks of.
            # What went wrong is the demonstration's finding, judged (and explained) as it is there.
            return super().verdict(obs, profile, queue_type)
        unmarked = [w for w in (wrong_on_redelivery(d, signal) for d in got) if w is not None]
        return first_failure(
            returned_exactly(got, obs["published"], what="browser 3's fetch after the acquirer left without accepting"),
            holds(not unmarked, expected=f"browser 3's copy marked redelivered ({expectation(False, signal, True)})",
                  observed=describe(unmarked) if unmarked else ", ".join(marks(d) for d in got),
                  key="browser3-unmarked" if unmarked else None, spec=all(w.spec for w in unmarked)),
        )
