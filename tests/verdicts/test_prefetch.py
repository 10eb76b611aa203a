"""Verdicts of the prefetch area (conformance/cases/prefetch/: basic.qos) on synthetic observations, held to
the contract of tests/verdicts/examples.py. The prefetch history is built by a model of the scenario's loop
(``workload``); RabbitMQ's reading of the global flag is a documented deviation from the 0-9-1 text.
"""

from __future__ import annotations

from typing import Any

from conformance.kit.verdicts import Outcome, apply_profile
from tests.verdicts.examples import (
    CASES,
    OPEN,
    P43,
    QQ,
    RABBIT,
    Example,
    bad,
    connection_closed,
    dev,
    everywhere,
    msgs,
    ok,
    soft,
    verdict_tests,
    with_,
)

PREFETCH_N, PREFETCH_M = 3, 12
ACK_PATTERN = ((1, False), (2, True), (3, True), (1, False))


def workload(window: int = PREFETCH_N) -> dict[str, Any]:
    """The prefetch scenario's history against a broker that keeps ``window`` deliveries outstanding
    (the scenario's loop: catch up, ack by the pattern, record what the ack released)."""
    ids = msgs(PREFETCH_M)
    seen: list[str] = []
    events: list[Any] = []
    refills: list[dict[str, int]] = []
    acked = step = 0

    def dispatch() -> None:
        while len(seen) < PREFETCH_M and len(seen) - acked < window:
            seen.append(ids[len(seen)])
            events.append(["deliver", seen[-1]])

    dispatch()
    while acked < PREFETCH_M:
        k, _ = ACK_PATTERN[step % len(ACK_PATTERN)]
        step += 1
        k = min(k, len(seen) - acked)
        events.append(["ack", seen[acked:acked + k]])
        acked += k
        before = len(seen)
        if len(seen) < PREFETCH_M:
            dispatch()
            refills.append({"acked": k, "received": len(seen) - before, "ready_left": PREFETCH_M - before})
    return {"prefetch": PREFETCH_N, "published": PREFETCH_M, "events": events, "refills": refills}


PREFETCH = workload()
assert PREFETCH["refills"] == [
    {"acked": 1, "received": 1, "ready_left": 9}, {"acked": 2, "received": 2, "ready_left": 8}, {"acked": 3, "received": 3, "ready_left": 6},
    {"acked": 1, "received": 1, "ready_left": 3}, {"acked": 1, "received": 1, "ready_left": 2}, {"acked": 2, "received": 1, "ready_left": 1},
], PREFETCH["refills"]


def events_where(transform: Any) -> dict[str, Any]:
    return with_(PREFETCH, events=transform([list(e) for e in PREFETCH["events"]]))


def moved_before(events: list[Any], moved: list[Any], anchor: list[Any]) -> list[Any]:
    """``moved`` taken out of the history and put back right before ``anchor``."""
    rest = [e for e in events if e != moved]
    i = rest.index(anchor)
    return [*rest[:i], moved, *rest[i:]]


def refill(i: int, received: int) -> dict[str, Any]:
    refills = [dict(r) for r in PREFETCH["refills"]]
    refills[i]["received"] = received
    return with_(PREFETCH, refills=refills)


DROP = {"prefetch": 2, "returns": 2, "events": [["deliver", "p1"], ["nack", ["p1"]], ["deliver", "m1"], ["deliver", "p1"], ["nack", ["p1"]], ["deliver", "m2"]]}
DROP_CREDIT_TWICE = with_(DROP, events=[*DROP["events"], ["deliver", "m3"]])
ZERO = {"published": 2100, "received": 2100, "missing": [], "duplicated": [], "ready_after": 0}
# C: a second consumer on A's channel; B: a consumer on a second channel of the same connection.
SCOPE_OWN = {"variant": "global-false", "consume": OPEN, "c_held_back": False, "b_held_back": False, "c_got": "c1", "b_got": "b1"}
SCOPE_CHANNEL = with_(SCOPE_OWN, c_held_back=True)
SCOPE_SHARED = {**SCOPE_CHANNEL, "variant": "global-true", "b_held_back": True}  # the whole connection: the 0-9-1 text
SCOPE_GLOBAL_CHANNEL = with_(SCOPE_SHARED, b_held_back=False)
SCOPE_GLOBAL_OWN = with_(SCOPE_SHARED, c_held_back=False, b_held_back=False)
SCOPE_540 = {"variant": "global-true", "consume": connection_closed(540, "NOT_IMPLEMENTED - queue 'q' in vhost '/' does not support global qos")}

PREFETCH_GOOD: list[Example] = [
    *everywhere("TestPrefetchLimit", "3-of-12", PREFETCH),
    *everywhere("TestAckReleases", "3-of-12", PREFETCH),
    *everywhere("TestPrefetchZero", "all-2100", ZERO),
    *everywhere("TestLimitAfterDrop", "slot-refilled-once", DROP),
    # LavinMQ before 2.4 drops the poison message at the next delivery attempt: one return only
    *everywhere("TestLimitAfterDrop", "dropped-at-attempt", with_(DROP, returns=1, events=[["deliver", "p1"], ["nack", ["p1"]], ["deliver", "m1"], ["deliver", "m2"]])),
    # RabbitMQ's reinterpretation of the flag is a documented deviation from the 0-9-1 text
    *(dev("TestPrefetchScope", "global-false-own-limit", SCOPE_OWN, qt, p) for p in (RABBIT, P43) for qt in p.queue_types),
    dev("TestPrefetchScope", "global-true-per-channel", SCOPE_GLOBAL_CHANNEL, "classic", RABBIT),
    dev("TestPrefetchScope", "global-true-refused-540", SCOPE_540, QQ, RABBIT),
    *(dev("TestPrefetchScope", "global-true-per-consumer", SCOPE_GLOBAL_OWN, qt, P43) for qt in P43.queue_types),
    # the 0-9-1 text's scopes pass whatever a profile documents
    ok("TestPrefetchScope", "global-false-per-channel", SCOPE_CHANNEL, "classic", RABBIT),
    ok("TestPrefetchScope", "global-true-shared-on-quorum", SCOPE_SHARED, QQ, RABBIT),
    ok("TestPrefetchScope", "global-true-shared", SCOPE_SHARED, "classic", P43),
]

PREFETCH_VIOLATIONS: list[Example] = [
    # PREFETCH-LIMIT
    bad("TestPrefetchLimit", "4-held-with-prefetch-3", workload(window=4), shows="at most 4 held at once"),
    bad("TestPrefetchLimit", "4-held-late-in-history", events_where(lambda es: moved_before(es, ["deliver", "m10"], ["ack", ["m7"]])), QQ,
        shows="at most 4 held at once"),
    bad("TestPrefetchLimit", "unlimited", workload(window=PREFETCH_M), shows="at most 12 held at once"),
    bad("TestPrefetchLimit", "m12-never-delivered", events_where(lambda es: [e for e in es if e != ["deliver", "m12"]]),
        shows="11 deliveries of 11 messages"),
    bad("TestPrefetchLimit", "m5-delivered-twice-m12-never",
        events_where(lambda es: [e for e in es if e != ["deliver", "m12"]] + [["deliver", "m5"], ["ack", ["m5"]]]),
        shows="12 deliveries of 11 messages"),
    # PREFETCH-ACK-RELEASES
    bad("TestAckReleases", "ack-of-2-releases-3", refill(1, 3), shows="[1, 3, 3, 1, 1, 1]"),
    bad("TestAckReleases", "ack-of-3-releases-1", refill(2, 1), QQ, shows="[1, 2, 1, 1, 1, 1]"),
    bad("TestAckReleases", "ack-of-1-releases-nothing", refill(0, 0), shows="[0, 2, 3, 1, 1, 1]"),
    bad("TestAckReleases", "last-ready-withheld", refill(5, 0), shows="[1, 2, 3, 1, 1, 0]"),
    bad("TestAckReleases", "everything-up-front-no-refill", with_(PREFETCH, refills=[]), shows="no acknowledgement ever freed a slot"),
    # PREFETCH-ZERO-UNLIMITED
    bad("TestPrefetchZero", "capped-at-2000", with_(ZERO, received=2000, missing=[f"m{i}" for i in range(2001, 2009)], ready_after=100),
        QQ, shows="2000 deliveries (missing [m2001, m2002"),
    bad("TestPrefetchZero", "m2100-lost", with_(ZERO, received=2099, missing=["m2100"]), QQ, shows="missing [m2100]"),
    bad("TestPrefetchZero", "m3-twice-m4-missing", with_(ZERO, missing=["m4"], duplicated=["m3"]), shows="duplicated [m3]"),
    bad("TestPrefetchZero", "prefetch-1", with_(ZERO, received=1, missing=[f"m{i}" for i in range(2, 10)], ready_after=2099),
        shows="1 deliveries"),
    bad("TestPrefetchZero", "ready-left", with_(ZERO, ready_after=2), shows="messages still ready in the queue = 2"),
    # PREFETCH-LIMIT-AFTER-DROP
    bad("TestLimitAfterDrop", "credit-granted-twice", DROP_CREDIT_TWICE, shows="at most 3 held at once"),
    bad("TestLimitAfterDrop", "credit-granted-twice-on-4.3-quorum", DROP_CREDIT_TWICE, QQ, P43, shows="at most 3 held at once"),
    bad("TestLimitAfterDrop", "three-before-any-drop", with_(DROP, events=[["deliver", "p1"], ["deliver", "m1"], ["deliver", "m2"]]), QQ,
        shows="at most 3 held at once"),
    # PREFETCH-SCOPE
    bad("TestPrefetchScope", "global-false-refused", {"variant": "global-false", "consume": connection_closed(540, "NOT_IMPLEMENTED - global qos")},
        QQ, shows="connection closed with 540"),
    bad("TestPrefetchScope", "global-true-per-consumer-on-3.10-classic", SCOPE_GLOBAL_OWN, "classic", RABBIT, shows="C (same channel): false"),
    bad("TestPrefetchScope", "global-false-across-the-connection", with_(SCOPE_CHANNEL, b_held_back=True), "classic", RABBIT,
        shows="B (second channel): true"),
    bad("TestPrefetchScope", "global-false-second-channel-only", with_(SCOPE_OWN, b_held_back=True), "classic", RABBIT,
        shows="C (same channel): false, B (second channel): true"),
    bad("TestPrefetchScope", "c-never-delivered", with_(SCOPE_CHANNEL, c_got=None), "classic", RABBIT, shows="[none, b1]"),
    bad("TestPrefetchScope", "global-true-channel-540-on-3.10-quorum", {"variant": "global-true", "consume": soft(540, "NOT_IMPLEMENTED - global qos")},
        QQ, RABBIT, shows="channel closed with 540"),
    bad("TestPrefetchScope", "global-true-refused-on-4.3-quorum", SCOPE_540, QQ, P43, shows="connection closed with 540"),
]


test_compliant_observation_passes, test_violation_fails = verdict_tests(PREFETCH_GOOD, PREFETCH_VIOLATIONS)


def test_quorum_prefetch_zero_capped_at_2000_is_the_known_bug_and_nothing_else() -> None:
    case = CASES["TestPrefetchZero"]()
    capped = with_(ZERO, received=2000, missing=["m2001"], ready_after=100)
    v = apply_profile(case.verdict(capped, RABBIT, QQ), case.requirement, QQ, RABBIT)
    assert v.outcome is Outcome.FAIL and v.vendor == "fail" and "14485" in v.known_bug, "an open upstream bug stays a fail"
    classic = apply_profile(case.verdict(capped, RABBIT, "classic"), case.requirement, "classic", RABBIT)
    assert classic.outcome is Outcome.FAIL and not classic.known_bug
    one = with_(ZERO, received=1, missing=["m2"], ready_after=2099)
    other = apply_profile(case.verdict(one, RABBIT, QQ), case.requirement, QQ, RABBIT)
    assert other.outcome is Outcome.FAIL and not other.known_bug


def test_prefetch_zero_key_names_what_was_delivered_and_the_stall_only_describes() -> None:
    case = CASES["TestPrefetchZero"]()
    for got in (1999, 2000, 2001):
        v = case.verdict(with_(ZERO, received=got, missing=[f"m{got + 1}"], ready_after=2100 - got, stalled_s=9.5), RABBIT, QQ)
        assert v.outcome is Outcome.FAIL and v.key == f"held-back-at-{got}", "the key is generic: held-back-at-N"
        assert "stood still for 9.5s" in v.observed
        known = apply_profile(v, case.requirement, QQ, RABBIT).known_bug
        assert bool(known) is (got == 2000), "the profile's #14485 entry matches exactly 2000"
    trickling = case.verdict(with_(ZERO, received=700, missing=["m701"], ready_after=1400, stalled_s=0.0), RABBIT, "classic")
    assert trickling.outcome is Outcome.FAIL and "still falling at the deadline" in trickling.observed
    late = case.verdict(with_(ZERO, stalled_s=0.2), RABBIT, QQ)
    assert late.outcome is Outcome.PASS, "everything delivered: a deadline passed on the way is no finding"


def test_quorum_credit_granted_twice_at_the_limit_is_a_deviation_on_3_10_only() -> None:
    case = CASES["TestLimitAfterDrop"]()
    v = apply_profile(case.verdict(DROP_CREDIT_TWICE, RABBIT, QQ), case.requirement, QQ, RABBIT)
    assert v.outcome is Outcome.DEVIATION and "5609" in v.citation
    four = with_(DROP_CREDIT_TWICE, events=[*DROP_CREDIT_TWICE["events"], ["deliver", "m4"]])
    assert apply_profile(case.verdict(four, RABBIT, QQ), case.requirement, QQ, RABBIT).outcome is Outcome.FAIL
    early = with_(DROP, events=[["deliver", "p1"], ["nack", ["p1"]], ["deliver", "m1"], ["deliver", "m2"], ["deliver", "p1"]], returns=1)
    assert apply_profile(case.verdict(early, RABBIT, QQ), case.requirement, QQ, RABBIT).outcome is Outcome.FAIL, \
        "three held before the drop is a limit exceeded all along, not the credit granted twice at the drop"
