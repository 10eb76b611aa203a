"""Verdict examples of the AMQP 1.0 outcome, settlement-mode, session-window and detach cases
(conformance/cases/link/test_outcomes.py, test_settle_and_credit.py), joined to the link area's
tables in tests/verdicts/test_link.py; judged with the spec-only amqp-1.0 profile."""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import select_profile
from tests.verdicts.examples import Example, with_

SPEC10 = select_profile("Other", "1.0", "amqp-1.0")


def dl(mid: str, tag: int = 1, *, count: int = 0, fa: bool = True, presettled: bool = False) -> dict[str, Any]:
    return {"id": mid, "tag": tag, "redelivered": not fa or count > 0, "delivery_count": count, "first_acquirer": fa, "presettled": presettled}


def ex(case: str, name: str, obs: dict[str, Any]) -> Example:
    return Example(case, name, obs, queue_type="classic", profile=SPEC10)


MODIFIED = {"published": ["m1"], "outcome": "modified", "delivery_failed": True, "first": [dl("m1")], "again": [dl("m1", 2, count=1, fa=False)]}
HERE = {"published": ["m1", "m2"], "first": [dl("m1")], "later_on_link": [dl("m2", 2)], "detach": "answered", "others": [dl("m1", 1, count=0, fa=False)]}
MODES = {"published": ["m1"], "asked": {"snd-settle-mode": "unsettled", "rcv-settle-mode": "first"},
         "granted": {"snd-settle-mode": "unsettled", "rcv-settle-mode": "first", "distribution-mode": "unspecified", "outcomes": None},
         "got": [dl("m1")], "settlement": "accepted and settled by the receiver", "detach": "answered", "after": []}
SECOND = with_(MODES, asked={"snd-settle-mode": "unsettled", "rcv-settle-mode": "second"}, settlement="settled by the broker")
SETTLED = with_(MODES, asked={"snd-settle-mode": "settled", "rcv-settle-mode": "first"}, granted={**MODES["granted"], "snd-settle-mode": "settled"},
                got=[dl("m1", presettled=True)], settlement="settled by the broker at send")
WINDOW = {"published": ["m1", "m2", "m3", "m4", "m5", "m6"], "window": 2, "credit": 10,
          "got": [dl(f"m{i}", i) for i in range(1, 7)], "detach": "answered", "after": []}
REFUSED = {"sent": ["m1", "m2", "m3", "m4", "m5"], "limit": 2, "ready": 2, "held": ["m1", "m2"], "absent": "attach refused: amqp:not-found",
           "outcomes": {"m1": "accepted", "m2": "accepted", "m3": "rejected (amqp:resource-limit-exceeded)", "m4": "rejected", "m5": "released"}}
DETACH = {"published": ["m1", "m2", "m3"], "held": [dl("m1", 1), dl("m2", 2), dl("m3", 3)], "detach": "answered", "session": "usable",
          "after": [dl("m2", 4, fa=False), dl("m3", 5, fa=False)], "left": []}

GOOD: list[Example] = [
    ex("TestOutcomeModifiedFailed", "modified-back-counted", MODIFIED),
    ex("TestOutcomeUndeliverableHere", "kept-from-the-link", HERE),
    ex("TestSettleModes", "unsettled-first", MODES),
    ex("TestSettleModes", "unsettled-second", SECOND),
    ex("TestSettleModes", "settled-first", SETTLED),
    ex("TestSettleModes", "mixed-granted-unsettled", with_(MODES, asked={"snd-settle-mode": "mixed", "rcv-settle-mode": "first"})),
    ex("TestSessionWindowDelivers", "all-through-a-small-window", WINDOW),
    ex("TestSenderRefused", "rejected-over-the-limit", REFUSED),
    ex("TestSenderRefused", "quorum-takes-one-more", with_(REFUSED, held=["m1", "m2", "m3"], ready=3,
                                                            outcomes={**REFUSED["outcomes"], "m3": "accepted"}, absent="released")),
    ex("TestDetachReleases", "released-to-the-same-session", DETACH),
    ex("TestDetachReleases", "released-to-a-later-receiver", with_(DETACH, after=[], left=[dl("m2", 1, fa=False), dl("m3", 2, fa=False)])),
]

VIOLATIONS: list[tuple[Example, str]] = [
    (ex("TestOutcomeModifiedFailed", "uncounted", with_(MODIFIED, again=[dl("m1", 2, fa=False)])), "delivery-count 0 on the first delivery, 0"),
    (ex("TestOutcomeModifiedFailed", "discarded", with_(MODIFIED, again=[])), "missing [m1]"),
    (ex("TestOutcomeUndeliverableHere", "back-to-the-same-link", with_(HERE, later_on_link=[dl("m1", 2, fa=False), dl("m2", 3)])),
     "came back to that link 1 time(s)"),
    (ex("TestOutcomeUndeliverableHere", "lost", with_(HERE, others=[])), "missing [m1]"),
    (ex("TestOutcomeUndeliverableHere", "link-stalled", with_(HERE, later_on_link=[])), "missing [m2]"),
    (ex("TestSettleModes", "unsettled-mode-sent-settled", with_(MODES, got=[dl("m1", presettled=True)])), "transfer settled=true"),
    (ex("TestSettleModes", "settled-mode-sent-unsettled", with_(SETTLED, got=[dl("m1")])), "transfer settled=false"),
    (ex("TestSettleModes", "second-never-settled", with_(SECOND, settlement="not settled by the broker within 3s")), "not settled by the broker"),
    (ex("TestSettleModes", "left-in-queue", with_(MODES, after=[dl("m1", 1, fa=False)])), "unexpected [m1]"),
    (ex("TestSettleModes", "no-mode-stated", with_(MODES, granted={**MODES["granted"], "snd-settle-mode": None})), "granted snd-settle-mode None"),
    (ex("TestSessionWindowDelivers", "frozen-at-the-window", with_(WINDOW, got=WINDOW["got"][:2], after=WINDOW["got"][2:])), "2 arrived"),
    (ex("TestSessionWindowDelivers", "lost-after-the-window", with_(WINDOW, got=WINDOW["got"][:2], after=[])), "2 arrived"),
    (ex("TestSessionWindowDelivers", "duplicated", with_(WINDOW, after=[dl("m6", 1, fa=False)])), "duplicated [m6]"),
    (ex("TestSenderRefused", "no-outcome", with_(REFUSED, sent=["m1", "m2", "m3"], outcomes={"m1": "accepted", "m2": "accepted",
                                                                                          "m3": "no outcome within 2s"})), "m3: no outcome"),
    (ex("TestSenderRefused", "all-accepted", with_(REFUSED, outcomes={m: "accepted" for m in REFUSED["sent"]})), "all 5 accepted"),
    (ex("TestSenderRefused", "accepted-but-dropped", with_(REFUSED, held=["m1"], ready=1)), "accepted but not in the queue: [m2]"),
    (ex("TestSenderRefused", "refused-but-kept", with_(REFUSED, held=["m1", "m2", "m3"], ready=3)), "in the queue although refused: [m3]"),
    (ex("TestSenderRefused", "nowhere-accepted", with_(REFUSED, absent="accepted")), "to an address with no node: accepted"),
    (ex("TestDetachReleases", "unanswered", with_(DETACH, detach="no detach answer within 3s", session="not tried", after=[],
                                                  left=[dl("m2", 1, fa=False), dl("m3", 2, fa=False)])), "no detach answer"),
    (ex("TestDetachReleases", "kept-acquired", with_(DETACH, after=[], left=[])), "none of m2, m3 came"),
    (ex("TestDetachReleases", "session-lost", with_(DETACH, session="failed: session ended by broker", after=[],
                                                    left=[dl("m2", 1, fa=False), dl("m3", 2, fa=False)])), "session after the detach: failed"),
    (ex("TestDetachReleases", "accepted-back", with_(DETACH, left=[dl("m1", 1, fa=False)])), "unexpected [m1]"),
]
