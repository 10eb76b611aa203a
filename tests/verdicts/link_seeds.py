"""Verdict examples of the seeds' cases (conformance/cases/link/test_seed_browse_acquire.py,
test_seed_ack_modes.py), joined to the link area's tables in tests/verdicts/test_link.py. AMQP 1.0
observations are judged with the spec-only amqp-1.0 profile or qpid-cpp's (whose redelivery signal
is delivery-count), AMQP 0-9-1 ones with RabbitMQ 3.10's."""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import select_profile
from tests.verdicts.examples import RABBIT, Example, with_

SPEC10 = select_profile("Other", "1.0", "amqp-1.0")
QPIDD = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
P10 = select_profile("RabbitMQ", "3.10.8", "amqp-1.0")


def dl(mid: str, tag: int = 1, *, count: int = 0, fa: bool = True, presettled: bool = False) -> dict[str, Any]:
    return {"id": mid, "tag": tag, "redelivered": not fa or count > 0, "delivery_count": count, "first_acquirer": fa, "presettled": presettled}


def d091(mid: str, tag: int = 1, redelivered: bool = False) -> dict[str, Any]:
    return {"id": mid, "tag": tag, "redelivered": redelivered, "delivery_count": None}


def ex(case: str, name: str, obs: dict[str, Any], profile: Any = SPEC10) -> Example:
    return Example(case, name, obs, queue_type="classic", profile=profile)


H = "hello-world"


def fetched(*ds: dict[str, Any], answer: str = "drained") -> dict[str, Any]:
    return {"answer": answer, "got": list(ds)}


NONE = fetched()
#: Seed 001 over a reliable link, as the spec and the seed have it: browser 3 and acquirer 2 see the
#: message marked as acquired before (first-acquirer false, delivery-count 1).
RELIABLE = {"published": [H], "acquirer_mode": "unsettled", "browser1_first": fetched(dl(H)), "ready_while_browsed": 1,
            "browser1_then": NONE, "browser2_first": fetched(dl(H, 2)), "browser2_then": NONE, "acquirer": fetched(dl(H, 3)),
            "acquirer_close": "answered", "browser3": fetched(dl(H, 4, count=1, fa=False)),
            "acquirer2": fetched(dl(H, 1, count=1, fa=False)), "left": []}
UNRELIABLE = with_(RELIABLE, acquirer_mode="settled", acquirer=fetched(dl(H, 3, presettled=True)), browser3=NONE, acquirer2=NONE)
#: What qpidd 1.39.0 does: the copy browser 3 is sent carries the marks of a message never acquired
#: (its count is advanced only when the next acquirer takes it).
QPIDD_SEEN = with_(RELIABLE, browser3=fetched(dl(H, 4, count=0, fa=True)))
#: RabbitMQ 3.10's plugin: the browsers acquire (copy echoed), so the message leaves "ready".
RABBIT_QQ = with_(RELIABLE, ready_while_browsed=0, browser2_first=NONE, browser2_then=fetched(answer="no drain answer within 3s"),
                  acquirer=NONE, browser3=NONE, acquirer2=fetched(dl(H, 1, fa=False)))
#: RabbitMQ 3.10's plugin on a classic queue: the first drain ends the session (rabbitmq-server#7119).
CRASH = "session ended: session ended by broker: amqp:internal-error: {function_clause,[{rabbit_classic_queue,handle_event,[{send_drained"
RABBIT_CQ = with_(RELIABLE, browser1_first=fetched(answer=CRASH), browser1_then=fetched(answer=CRASH), browser2_first=fetched(answer=CRASH),
                  browser2_then=fetched(answer=CRASH), acquirer=fetched(answer=CRASH), acquirer_close="session ended: amqp:internal-error",
                  browser3=fetched(answer=CRASH), acquirer2=fetched(dl(H, 1, fa=False)))

FIVE = ["m1", "m2", "m3", "m4", "m5"]


def listener(acked: int, returned: list[str], *, protocol10: bool = True, barrier: bool = True) -> dict[str, Any]:
    if protocol10:
        held = [dl(m, i) for i, m in enumerate(FIVE, 1)]
        back = [dl(m, i, count=1, fa=False) for i, m in enumerate(returned, 1)]
    else:
        held = [d091(m, i) for i, m in enumerate(FIVE, 1)]
        back = [d091(m, i, True) for i, m in enumerate(returned, 1)]
    return {"published": FIVE, "held": held, "acknowledged": FIVE[:acked], "barrier": barrier, "returned": back}


AUTO = listener(2, ["m3", "m4", "m5"])
PRE = listener(3, ["m4", "m5"])
DUPS = listener(2, ["m1", "m3", "m4", "m5"], barrier=False)
ALL = {"published": ["a1", "a2", "b1", "b2"], "held": [dl("a1", 1), dl("a2", 2), dl("b1", 3), dl("b2", 4)], "returned": []}

GOOD: list[Example] = [
    ex("TestSeedBrowseAcquireDemo", "reliable", RELIABLE),
    ex("TestSeedBrowseAcquireDemo", "reliable-qpidd-signal", RELIABLE, QPIDD),
    ex("TestSeedBrowseAcquireDemo", "unreliable", UNRELIABLE),
    ex("TestSeedBrowseAcquireDemo", "unreliable-qpidd", UNRELIABLE, QPIDD),
    ex("TestSeedBrowseAcquireDemo", "qpidd-as-seen", QPIDD_SEEN, QPIDD),
    ex("TestSeedBrowseSeesReturnMarked", "reliable", RELIABLE),
    ex("TestSeedBrowseSeesReturnMarked", "reliable-qpidd-signal", RELIABLE, QPIDD),
    ex("TestJmsAutoAcknowledge", "m3-m5-back", AUTO, QPIDD),
    ex("TestJmsAutoAcknowledge", "amqp091", listener(2, ["m3", "m4", "m5"], protocol10=False), RABBIT),
    ex("TestJmsPreAcknowledge", "m4-m5-back", PRE, QPIDD),
    ex("TestJmsDupsOkAcknowledge", "one-duplicate", DUPS, QPIDD),
    ex("TestJmsDupsOkAcknowledge", "no-duplicate", listener(2, ["m3", "m4", "m5"], barrier=False), QPIDD),
    ex("TestAcknowledgeAllSync", "none-back", ALL),
    ex("TestAcknowledgeAllAsync", "none-back", ALL),
]

VIOLATIONS: list[tuple[Example, str]] = [
    (ex("TestSeedBrowseSeesReturnMarked", "qpidd-browser-3-sees-first-acquirer", QPIDD_SEEN, QPIDD),
     "hello-world(first-acquirer=true, delivery-count=0): first-acquirer=true"),
    (ex("TestSeedBrowseSeesReturnMarked", "count-not-advanced", with_(RELIABLE, browser3=fetched(dl(H, 4, count=0, fa=False))), QPIDD),
     "delivery-count 0, though the profile documents"),
    (ex("TestSeedBrowseSeesReturnMarked", "no-copy-shown", with_(RELIABLE, browser3=NONE, acquirer2=NONE)), "8 browser 3 fetches: FAILED"),
    (ex("TestSeedBrowseAcquireDemo", "browse-acquires", RABBIT_QQ, P10), "2 while browsed: FAILED 0 ready"),
    (ex("TestSeedBrowseAcquireDemo", "drain-crash", RABBIT_CQ, P10), "FAILED browser 1's first fetch: session ended"),
    (ex("TestSeedBrowseAcquireDemo", "browser-sees-twice", with_(RELIABLE, browser1_then=fetched(dl(H, 5)))),
     "3 browser 1 fetches again: FAILED browser 1's second fetch: came back [hello-world]"),
    (ex("TestSeedBrowseAcquireDemo", "reliable-lost-at-close", with_(RELIABLE, browser3=NONE, acquirer2=NONE)),
     "8 browser 3 fetches: FAILED"),
    (ex("TestSeedBrowseAcquireDemo", "acquirer-2-first-acquirer", with_(RELIABLE, acquirer2=fetched(dl(H, 1, count=1, fa=True)))),
     "first-acquirer=true, though another link acquired"),
    (ex("TestSeedBrowseAcquireDemo", "redelivery-unmarked", with_(RELIABLE, acquirer2=fetched(dl(H, 1, count=0, fa=False))), QPIDD),
     "delivery-count 0, though the profile documents"),
    (ex("TestSeedBrowseAcquireDemo", "unreliable-came-back", with_(UNRELIABLE, browser3=fetched(dl(H, 4, count=1, fa=False)),
                                                                 acquirer2=fetched(dl(H, 1, count=1, fa=False)))),
     "8 browser 3 fetches: FAILED browser 3's fetch after the unreliable acquirer took it: came back [hello-world]"),
    (ex("TestSeedBrowseAcquireDemo", "unreliable-sent-unsettled", with_(UNRELIABLE, acquirer=fetched(dl(H, 3)))), "unsettled: [hello-world]"),
    (ex("TestSeedBrowseAcquireDemo", "empty-fetch-unanswered", with_(UNRELIABLE, acquirer2=fetched(answer="no drain answer within 3s"))),
     "acquirer 2's fetch: no drain answer"),
    (ex("TestJmsAutoAcknowledge", "acked-back", listener(2, ["m1", "m3", "m4", "m5"]), QPIDD), "unexpected [m1]"),
    (ex("TestJmsAutoAcknowledge", "in-hand-lost", listener(2, ["m4", "m5"]), QPIDD), "missing [m3]"),
    (ex("TestJmsAutoAcknowledge", "unmarked-091", with_(listener(2, [], protocol10=False), returned=[d091("m3", 1), d091("m4", 2, True), d091("m5", 3, True)]), RABBIT),
     "redelivered=false"),
    (ex("TestJmsPreAcknowledge", "pre-acked-back", listener(3, ["m3", "m4", "m5"]), QPIDD), "unexpected [m3]"),
    (ex("TestJmsPreAcknowledge", "unread-lost", listener(3, ["m4"]), QPIDD), "missing [m5]"),
    (ex("TestJmsDupsOkAcknowledge", "lost", listener(2, ["m3", "m5"], barrier=False), QPIDD), "missing [m4]"),
    (ex("TestJmsDupsOkAcknowledge", "twice", listener(2, ["m3", "m4", "m4", "m5"], barrier=False), QPIDD), "twice [m4]"),
    (ex("TestJmsDupsOkAcknowledge", "unknown", listener(2, ["m3", "m4", "m5", "m9"], barrier=False), QPIDD), "unexpected [m9]"),
    (ex("TestAcknowledgeAllSync", "one-back", with_(ALL, returned=[dl("b2", 1, count=1, fa=False)])), "unexpected [b2]"),
    (ex("TestAcknowledgeAllSync", "short", with_(ALL, held=ALL["held"][:3])), "missing [b2]"),
    (ex("TestAcknowledgeAllAsync", "all-back", with_(ALL, returned=[dl(m, i, count=1, fa=False) for i, m in enumerate(ALL["published"], 1)])),
     "unexpected [a1, a2, b1, b2]"),
    (ex("TestAcknowledgeAllAsync", "second-receiver-back", with_(ALL, returned=[dl("b1", 1, count=1, fa=False), dl("b2", 2, count=1, fa=False)])),
     "unexpected [b1, b2]"),
]
