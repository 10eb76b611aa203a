"""Browsing (distribution-mode copy) and draining link credit: AMQP 1.0 only."""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, OperationTimeout, TargetCannot
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.redelivery import describe, signal_of, wrong_on_first
from conformance.kit.verdicts import Verdict, first_failure, holds

BROWSERS = 3
#: "Promptly" for a drain answer: the sender owes a flow at once, there is nothing to wait for.
PROMPT_S = 3.0


class TestBrowseNonDestructive(Case):
    requirement = "LINK-BROWSE-NON-DESTRUCTIVE"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        browsers = []
        for i in range(1, BROWSERS + 1):
            session = ctx.session(f"browser{i}")
            b = session.consume(q, browse=True, prefetch=1)
            granted = b.granted.get("distribution-mode")
            if granted != "copy":
                # 3.5.3: the sender's attach sets the distribution-mode actually in place: a clean refusal
                raise TargetCannot(f"the broker granted distribution-mode {granted} to a browser (asked copy): it does not browse",
                                   kind="refused", refusal=f"attach answered distribution-mode {granted} (asked copy)")
            seen = b.next(WAIT_S)
            # The delivery was sent, so whatever the broker does to the queue for it is done.
            ready = ctx.stats(q).ready
            session.close()
            ctx.await_consumers(q, 0)
            browsers.append({"granted": granted, "seen": [delivery_obs(seen)], "ready_while_browsing": ready})
        return {"published": published, "browsers": browsers, "acquirer": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        checks = []
        for i, b in enumerate(obs["browsers"], 1):
            checks.append(returned_exactly(b["seen"], obs["published"], what=f"browser {i} (granted {b['granted']})"))
            checks.append(holds(b["ready_while_browsing"] == len(obs["published"]),
                                expected=f"while browser {i} holds the message, the queue still has {len(obs['published'])} ready",
                                observed=f"while browser {i} holds the message, ready = {b['ready_while_browsing']}",
                                key="copy-granted-but-acquired" if b["ready_while_browsing"] < len(obs["published"]) else None))
            # Browsing acquires nothing, so a browser must not see a message marked as acquired before:
            # by the spec a delivery-count >= 1 (3.2.1), and first-acquirer=false only where the
            # profile documents that the broker sets first-acquirer (false is its default otherwise).
            again = [w for w in (wrong_on_first(d, signal_of(profile, queue_type)) for d in b["seen"]) if w is not None]
            checks.append(holds(not again, expected=f"browser {i} sees a message nobody acquired (not marked as acquired before)",
                                observed=f"browser {i} saw {describe(again)}" if again else f"browser {i}: never acquired",
                                key="copy-granted-but-acquired" if again else None, spec=all(w.spec for w in again)))
        checks.append(returned_exactly(obs["acquirer"], obs["published"], what="for an acquirer after the browsers"))
        return first_failure(*checks)


class TestDrain(Case):
    requirement = "LINK-DRAIN"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 3)
        session = ctx.session("receiver")
        consumer = session.consume(q, prefetch=1)
        first = consumer.next(WAIT_S)  # credit now used up: the drains below grant all there is

        def drain(credit: int) -> Obs:
            try:
                return {"answer": "drained", "got": [delivery_obs(d) for d in consumer.drain(credit, PROMPT_S)]}
            except OperationTimeout:
                return {"answer": f"no flow answer within {PROMPT_S:.0f}s", "got": []}
            except ChannelClosed as exc:
                return {"answer": f"session ended: {exc.text}", "got": []}

        with_messages = drain(5)
        empty = drain(3) if with_messages["answer"] == "drained" else {"answer": "not tried", "got": []}
        return {"published": published, "first": [delivery_obs(first)], "drain_with_messages": with_messages, "drain_empty": empty}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        full, empty = obs["drain_with_messages"], obs["drain_empty"]
        rest = [m for m in obs["published"] if m not in [d["id"] for d in obs["first"]]]
        return first_failure(
            holds(full["answer"] == "drained", expected="a drain of 5 credit with 2 messages ready: both sent, then credit 0",
                  observed=f"drain with messages ready: {full['answer']}", key="drain-" + full["answer"].split(":")[0].replace(" ", "-")),
            returned_exactly(full["got"], rest, what="sent in answer to the drain"),
            holds(empty["answer"] == "drained", expected="a drain on the empty queue: credit 0 at once",
                  observed=f"drain on the empty queue: {empty['answer']}", key="empty-drain-" + empty["answer"].split(":")[0].split(" within")[0].replace(" ", "-")),
            returned_exactly(empty["got"], [], what="sent in answer to the drain on the empty queue"),
        )
