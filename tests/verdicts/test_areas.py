"""Verdicts of the nack, delivery-limit, dead-lettering, prefetch and persistence areas on synthetic
observations (plus the nack variant of ACK-REQUEUE-POSITION written out across versions).

Same contract as tests/verdicts/test_verdicts.py (whose completeness test also counts the examples here): a
compliant observation passes, each distinct violation fails with expected and observed. Where a
behaviour is version-dependent the examples are judged with the profile of the version that documents
it, and the same behaviour under the other version's profile is a violation.

Violations may name a fragment the failing verdict's observed text must contain (``shows``), so a
violation cannot pass this test by failing for some unrelated reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue.profiles import Profile, select_profile
from conformance.kit.verdicts import Outcome, apply_profile
from tests.verdicts.test_verdicts import (
    BASELINE,
    CASES,
    OPEN,
    RABBIT,
    Example,
    again,
    assert_fails,
    assert_passes,
    channel_406,
    connection_closed,
    d,
    first,
    msgs,
    soft,
    with_,
)

P312 = select_profile("RabbitMQ", "3.12.0", "amqp-0-9-1")
P313 = select_profile("RabbitMQ", "3.13.0", "amqp-0-9-1")
P43 = select_profile("RabbitMQ", "4.3.0", "amqp-0-9-1")

#: Profiles a profile-independent verdict is judged with (each with all its queue types).
EVERY_PROFILE = (RABBIT, BASELINE, P43)

#: Violation id -> a fragment the verdict's observed text must contain.
SHOWS: dict[str, str] = {}


def everywhere(case: str, name: str, obs: dict[str, Any]) -> list[Example]:
    """A compliant observation of a profile-independent case, judged under every profile and queue type."""
    return [
        Example(case, f"{name}-{profile.id}-{qt}", obs, queue_type=qt, profile=profile)
        for profile in EVERY_PROFILE
        for qt in profile.queue_types
    ]


def ok(case: str, name: str, obs: dict[str, Any], qt: str | None, profile: Profile, outcome: str = "pass") -> Example:
    """A behaviour the requirement allows: the reference (pass), or ``outcome`` "deviation" for one
    that differs as the profile documents, "unsupported" for a clean refusal."""
    return Example(case, f"{name}-{profile.id}-{qt}", obs, queue_type=qt, profile=profile, outcome=outcome)


def dev(case: str, name: str, obs: dict[str, Any], qt: str | None, profile: Profile) -> Example:
    """Differs from the requirement's reference exactly as the profile documents: a deviation."""
    return ok(case, name, obs, qt, profile, "deviation")


def bad(case: str, name: str, obs: dict[str, Any], qt: str | None = "classic", profile: Profile = RABBIT,
        shows: str | None = None, bug: str | None = None) -> Example:
    """A violation; ``bug`` marks one the case's verdict wrongly passes (strict xfail: the bug stays visible)."""
    ex = Example(case, f"{name}-{profile.id}-{qt}", obs, queue_type=qt, profile=profile,
                 marks=(pytest.mark.xfail(strict=True, reason=f"verdict bug: {bug}"),) if bug else ())
    if shows:
        SHOWS[ex.id] = shows
    return ex


# == NACK: basic.nack / basic.reject, judged by checkers.settled_as_expected =====================


def settled(n: int, expected_back: list[str], gone: list[str], back: list[dict[str, Any]], remaining: list[dict[str, Any]],
            channel: dict[str, Any] = OPEN, **extra: Any) -> dict[str, Any]:
    """A settle_and_watch observation: n held on one channel (tags 1..n). ``expected_back`` and
    ``gone`` document the example only: the scenario no longer reports them, the verdict knows them."""
    del expected_back, gone
    return {"published": msgs(n), "held": first(*msgs(n)), "channel": channel, "back": back, "remaining": remaining, **extra}


# nack(tag 3, requeue=true) of tags 1..5: m3 back at once (tags go on at 6), the rest after close.
NACK_SINGLE = settled(5, ["m3"], [], again("m3", start=6), again("m1", "m2", "m4", "m5"))
# ack(1), nack(4, multiple, requeue): m2..m4 back at once, m5 after close.
NACK_MULTIPLE = settled(5, ["m2", "m3", "m4"], ["m1"], again("m2", "m3", "m4", start=6), again("m5"))
# ack(1), nack(0, multiple, requeue) with 4 held: m2..m4 back at once, nothing left.
NACK_ZERO = settled(4, ["m2", "m3", "m4"], ["m1"], again("m2", "m3", "m4", start=5), [])
# nack(3, requeue=false) single: m3 gone; multiple: m1..m3 gone.
NACK_DISCARD_SINGLE = settled(5, [], ["m3"], [], again("m1", "m2", "m4", "m5"), variant="single")
NACK_DISCARD_MULTIPLE = settled(5, [], ["m1", "m2", "m3"], [], again("m4", "m5"), variant="multiple")
# reject(2, requeue=true) of tags 1..3 / reject(2, requeue=false).
# rule basic/reject/requeue/01: m2 not back on the same channel; all three in the queue after close.
REJECT_REQUEUE = settled(3, [], [], [], again("m1", "m2", "m3"))
# RabbitMQ's documented non-implementation of that rule: m2 back at once on the same channel.
REJECT_REQUEUE_RABBIT = settled(3, ["m2"], [], again("m2", start=4), again("m1", "m3"))
REJECT_DISCARD = settled(3, [], ["m2"], [], again("m1", "m3"))


def unknown_tag(variant: str, answer: dict[str, Any]) -> dict[str, Any]:
    return {"variant": variant, "tag": 1001, "answer": answer}


UNKNOWN_406 = channel_406("PRECONDITION_FAILED - unknown delivery tag 1001")

NACK_GOOD: list[Example] = [
    *everywhere("TestNackSingleRequeue", "nack-3", NACK_SINGLE),
    *everywhere("TestNackMultipleRequeue", "ack-1-nack-4-multiple", NACK_MULTIPLE),
    *everywhere("TestNackMultipleZeroAll", "ack-1-nack-0-multiple", NACK_ZERO),
    *everywhere("TestNackDiscard", "single", NACK_DISCARD_SINGLE),
    *everywhere("TestNackDiscard", "multiple", NACK_DISCARD_MULTIPLE),
    *everywhere("TestNackUnknownTag", "nack-406", unknown_tag("nack", UNKNOWN_406)),
    *everywhere("TestNackUnknownTag", "reject-406", unknown_tag("reject", UNKNOWN_406)),
    *everywhere("TestRejectRequeue", "reject-2", REJECT_REQUEUE),
    *everywhere("TestRejectDiscard", "reject-2", REJECT_DISCARD),
]

NACK_VIOLATIONS: list[Example] = [
    # NACK-SINGLE-REQUEUE
    bad("TestNackSingleRequeue", "nacked-not-redelivered", with_(NACK_SINGLE, back=[], remaining=again(*msgs(5))), shows="missing [m3]"),
    bad("TestNackSingleRequeue", "redelivered-without-flag", with_(NACK_SINGLE, back=[d("m3", 6, False)]), shows="wrong flag on m3"),
    bad("TestNackSingleRequeue", "treated-as-multiple", with_(NACK_SINGLE, back=again("m1", "m2", "m3", start=6), remaining=again("m4", "m5")),
        shows="unexpected [m1, m2]"),
    bad("TestNackSingleRequeue", "nacked-lost", with_(NACK_SINGLE, back=[], remaining=again("m1", "m2", "m4", "m5")), shows="missing [m3]"),
    bad("TestNackSingleRequeue", "requeued-twice", with_(NACK_SINGLE, remaining=again("m1", "m2", "m3", "m4", "m5")), shows="unexpected [m3]"),
    bad("TestNackSingleRequeue", "other-held-lost", with_(NACK_SINGLE, remaining=again("m1", "m2", "m5")), shows="missing [m4]"),
    bad("TestNackSingleRequeue", "channel-closed-406", with_(NACK_SINGLE, channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 3"), back=[]),
        shows="channel closed with 406"),
    # NACK-MULTIPLE-REQUEUE
    bad("TestNackMultipleRequeue", "returns-tag-above-n", with_(NACK_MULTIPLE, back=again("m2", "m3", "m4", "m5", start=6), remaining=[]),
        shows="unexpected [m5]"),
    bad("TestNackMultipleRequeue", "multiple-ignored", with_(NACK_MULTIPLE, back=again("m4", start=6), remaining=again("m2", "m3", "m5")),
        shows="missing [m2, m3]"),
    bad("TestNackMultipleRequeue", "acked-m1-returned", with_(NACK_MULTIPLE, back=again("m1", "m2", "m3", "m4", start=6)), shows="unexpected [m1]"),
    bad("TestNackMultipleRequeue", "returned-unflagged", with_(NACK_MULTIPLE, back=[d("m2", 6, True), d("m3", 7, False), d("m4", 8, True)]),
        shows="wrong flag on m3"),
    bad("TestNackMultipleRequeue", "m5-lost", with_(NACK_MULTIPLE, remaining=[]), shows="missing [m5]"),
    bad("TestNackMultipleRequeue", "connection-closed", with_(NACK_MULTIPLE, channel=connection_closed(540, "NOT_IMPLEMENTED - basic.nack"), back=[]),
        shows="connection closed with 540"),
    # NACK-MULTIPLE-ZERO-ALL
    bad("TestNackMultipleZeroAll", "tag-0-unknown-406", with_(NACK_ZERO, channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 0"), back=[]),
        shows="channel closed with 406"),
    bad("TestNackMultipleZeroAll", "tag-0-does-nothing", with_(NACK_ZERO, back=[], remaining=again("m2", "m3", "m4")), shows="missing [m2, m3, m4]"),
    bad("TestNackMultipleZeroAll", "tag-0-returns-first-only", with_(NACK_ZERO, back=again("m2", start=5), remaining=again("m3", "m4")),
        shows="missing [m3, m4]"),
    bad("TestNackMultipleZeroAll", "acked-m1-returned", with_(NACK_ZERO, back=again("m1", "m2", "m3", "m4", start=5)), shows="unexpected [m1]"),
    # NACK-DISCARD
    bad("TestNackDiscard", "single-discarded-back-at-once", with_(NACK_DISCARD_SINGLE, back=again("m3", start=6)), shows="unexpected [m3]"),
    bad("TestNackDiscard", "single-discarded-back-after-close", with_(NACK_DISCARD_SINGLE, remaining=again(*msgs(5))), shows="unexpected [m3]"),
    bad("TestNackDiscard", "multiple-discarded-m1-back", with_(NACK_DISCARD_MULTIPLE, remaining=again("m1", "m4", "m5")), shows="unexpected [m1]"),
    bad("TestNackDiscard", "multiple-treated-as-single", with_(NACK_DISCARD_MULTIPLE, remaining=again("m1", "m2", "m4", "m5")),
        shows="unexpected [m1, m2]"),
    bad("TestNackDiscard", "multiple-requeues-instead", with_(NACK_DISCARD_MULTIPLE, back=again("m1", "m2", "m3", start=6)),
        shows="unexpected [m1, m2, m3]"),
    bad("TestNackDiscard", "single-discards-held-m5-too", with_(NACK_DISCARD_SINGLE, remaining=again("m1", "m2", "m4")), shows="missing [m5]"),
    # NACK-UNKNOWN-TAG-406
    bad("TestNackUnknownTag", "nack-accepted", unknown_tag("nack", OPEN), shows="channel stayed open"),
    bad("TestNackUnknownTag", "reject-accepted", unknown_tag("reject", OPEN), shows="channel stayed open"),
    bad("TestNackUnknownTag", "nack-closes-connection", unknown_tag("nack", connection_closed(406, "PRECONDITION_FAILED - unknown delivery tag 1001")),
        shows="connection closed with 406"),
    bad("TestNackUnknownTag", "reject-closes-connection", unknown_tag("reject", connection_closed(503, "COMMAND_INVALID - unknown delivery tag 1001")),
        shows="connection closed with 503"),
    bad("TestNackUnknownTag", "nack-channel-404", unknown_tag("nack", soft(404, "NOT_FOUND - delivery tag 1001")), shows="channel closed with 404"),
    # NACK-REJECT-REQUEUE
    bad("TestRejectRequeue", "same-channel-redelivery", REJECT_REQUEUE_RABBIT, shows="m2 delivered again on the same channel"),
    bad("TestRejectRequeue", "rejected-lost", with_(REJECT_REQUEUE, remaining=again("m1", "m3")), shows="missing [m2]"),
    bad("TestRejectRequeue", "other-held-returned", with_(REJECT_REQUEUE, back=again("m1", start=4), remaining=again("m2", "m3")),
        shows="unexpected [m1]"),
    bad("TestRejectRequeue", "redelivered-without-flag", with_(REJECT_REQUEUE_RABBIT, back=first("m2", start=4)), shows="wrong flag on m2"),
    bad("TestRejectRequeue", "returns-all-held", with_(REJECT_REQUEUE_RABBIT, back=again("m1", "m2", "m3", start=4), remaining=[]),
        shows="unexpected [m1, m3]"),
    bad("TestRejectRequeue", "returned-twice", with_(REJECT_REQUEUE_RABBIT, back=again("m2", "m2", start=4)), shows="duplicated [m2]"),
    # NACK-REJECT-DISCARD
    bad("TestRejectDiscard", "discarded-back-at-once", with_(REJECT_DISCARD, back=again("m2", start=4)), shows="unexpected [m2]"),
    bad("TestRejectDiscard", "discarded-back-after-close", with_(REJECT_DISCARD, remaining=again("m1", "m2", "m3")), shows="unexpected [m2]"),
    bad("TestRejectDiscard", "held-m1-lost", with_(REJECT_DISCARD, remaining=again("m3")), shows="missing [m1]"),
    bad("TestRejectDiscard", "channel-closed-406", with_(REJECT_DISCARD, channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 2"),
                                                          remaining=again("m1", "m2", "m3")), shows="channel closed with 406"),
]


# == ACK-REQUEUE-POSITION, nack variant: the orders written out per version ========================
# A holds m1, B holds m2, m3 and m4 wait; B nacks first, then A.

def requeue_nack(order: list[str]) -> dict[str, Any]:
    return {"variant": "nack", "published": msgs(4), "returned": ["m2", "m1"], "order": order}


PUBLICATION, HEAD, TAIL = ["m1", "m2", "m3", "m4"], ["m2", "m1", "m3", "m4"], ["m3", "m4", "m2", "m1"]

REQUEUE_GOOD: list[Example] = [
    ok("TestRequeuePosition", "nack-publication-order", requeue_nack(PUBLICATION), "classic", RABBIT),
    dev("TestRequeuePosition", "nack-tail-in-return-order", requeue_nack(TAIL), "quorum", RABBIT),
    # the reference passes whatever the profile documents for the queue type
    ok("TestRequeuePosition", "nack-publication-order", requeue_nack(PUBLICATION), "quorum", RABBIT),
    ok("TestRequeuePosition", "nack-publication-order", requeue_nack(PUBLICATION), "classic", P43),
    # 4.x: the default delivery limit of 20 puts a nacked message near the head.
    dev("TestRequeuePosition", "nack-head-in-return-order", requeue_nack(HEAD), "quorum", P43),
]

REQUEUE_VIOLATIONS: list[Example] = [
    bad("TestRequeuePosition", "nack-tail-instead-of-publication-order", requeue_nack(TAIL), "classic", RABBIT, shows="[m3, m4, m2, m1]"),
    bad("TestRequeuePosition", "nack-4x-head-on-3.10-quorum", requeue_nack(HEAD), "quorum", RABBIT, shows="[m2, m1, m3, m4]"),
    bad("TestRequeuePosition", "nack-3.10-tail-on-4.3-quorum", requeue_nack(TAIL), "quorum", P43, shows="[m3, m4, m2, m1]"),
    bad("TestRequeuePosition", "nack-m1-lost", requeue_nack(["m2", "m3", "m4"]), "classic", RABBIT, shows="[m2, m3, m4]"),
]


# == LIMIT: x-delivery-limit, x-delivery-count ====================================================

QQ = "quorum"
SRC = "limit-src"


def delivered(counts: list[int | None]) -> list[dict[str, Any]]:
    """One record per delivery of the poison message, with its x-delivery-count (None: header absent)."""
    return [{"redelivered": k > 0, "count": c, "has_header": c is not None} for k, c in enumerate(counts)]


def counted(n: int, first_count: int | None) -> list[int | None]:
    """Counts when every return is counted: the documented first value, then 1, 2, ..."""
    return [first_count, *range(1, n)]


def looped(how: str, counts: list[int | None], gone: bool, rounds: int, **extra: Any) -> dict[str, Any]:
    return {"how": how, "rounds": rounds, "deliveries": delivered(counts), "gone": gone, **extra}


def max_deliveries(how: str, n: int, gone: bool) -> dict[str, Any]:
    # Counts as 3.10 reports them (get: 0 first, consume: absent); the verdict judges only how many.
    return looped(how, counted(n, None if how == "consumer-loss" else 0), gone, 6, limit=2)


ARG_REFUSED = channel_406("PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'q' in vhost '/' of queue type rabbit_classic_queue")

LIMIT_GOOD: list[Example] = [
    *(ok("TestArgumentSupport", "classic-refused-406", {"answer": ARG_REFUSED}, "classic", p, "unsupported") for p in (RABBIT, P43)),
    *(ok("TestArgumentSupport", "quorum-accepted", {"answer": OPEN, "enforced": True, "deliveries": 3}, QQ, p) for p in (RABBIT, P43)),
    # limit 2, limit+1: three deliveries, then removed, whichever return (all counted on 3.10).
    *(ok("TestMaxDeliveries", f"{how}-3-then-removed", max_deliveries(how, 3, True), QQ, RABBIT) for how in ("nack", "reject", "consumer-loss")),
    *(ok("TestMaxDeliveries", f"{how}-3-then-removed", max_deliveries(how, 3, True), QQ, P43) for how in ("reject", "consumer-loss")),
    # 4.3: nack(requeue) does not count, so the loop never ends.
    dev("TestMaxDeliveries", "nack-never-removed", looped("nack", [None] * 6, False, 6, limit=2), QQ, P43),
    # ...and a 4.3 broker that does count nack is at the reference
    ok("TestMaxDeliveries", "nack-counted-3-then-removed", max_deliveries("nack", 3, True), QQ, P43),
    # 3.10: basic.get starts at 0, basic.deliver without the header; every return counts.
    # (the 0 on basic.get is the 3.10-3.11 bug fixed in 3.12.0, #7732: a deviation)
    dev("TestCountHeader", "nack-get-0-1-2-3", looped("nack", [0, 1, 2, 3], False, 4), QQ, RABBIT),
    dev("TestCountHeader", "reject-get-0-1-2-3", looped("reject", [0, 1, 2, 3], False, 4), QQ, RABBIT),
    ok("TestCountHeader", "reject-get-absent-1-2-3", looped("reject", [None, 1, 2, 3], False, 4), QQ, RABBIT),
    ok("TestCountHeader", "consumer-loss-absent-1-2-3", looped("consumer-loss", [None, 1, 2, 3], False, 4), QQ, RABBIT),
    # 3.12: absent on every first delivery.
    ok("TestCountHeader", "nack-get-absent-1-2-3", looped("nack", [None, 1, 2, 3], False, 4), QQ, P312),
    # 4.3: absent first; nack(requeue) not counted, so never present.
    dev("TestCountHeader", "nack-never-counted", looped("nack", [None] * 4, False, 4), QQ, P43),
    ok("TestCountHeader", "nack-absent-1-2-3", looped("nack", [None, 1, 2, 3], False, 4), QQ, P43),
    ok("TestCountHeader", "reject-absent-1-2-3", looped("reject", [None, 1, 2, 3], False, 4), QQ, P43),
    ok("TestCountHeader", "consumer-loss-absent-1-2-3", looped("consumer-loss", [None, 1, 2, 3], False, 4), QQ, P43),
]


def dead_limit(gone: bool, dead: list[dict[str, Any]], n: int = 2) -> dict[str, Any]:
    return looped("reject", counted(n, 0), gone, 6, source=SRC, dead=dead)


def limit_death(reason: str = "delivery_limit", queue: str = SRC) -> dict[str, Any]:
    return {"count": 1, "reason": reason, "queue": queue, "time": "2026-11-21 10:00:00", "exchange": "", "routing-keys": [SRC]}


DEAD_LIMIT = dead_limit(True, [{"id": "poison1", "x-death": [limit_death()]}])
LIMIT_GOOD += [ok("TestDeadLetter", "dead-lettered-once", DEAD_LIMIT, QQ, p) for p in (RABBIT, P43)]
# Default limit: none before 4.0 (25 returns, still there); 20 from 4.0 (limit+1 = 21 deliveries).
DEFAULT_NONE = looped("reject", counted(25, 0), False, 25, default="none")
DEFAULT_20 = looped("reject", counted(21, None), True, 23, default=20)
LIMIT_GOOD += [
    ok("TestDefaultLimit", "none-never-removed", DEFAULT_NONE, QQ, RABBIT),
    ok("TestDefaultLimit", "20-removed-after-21", DEFAULT_20, QQ, P43),
]

LIMIT_VIOLATIONS: list[Example] = [
    # LIMIT-ARGUMENT-SUPPORT
    bad("TestArgumentSupport", "classic-silently-accepted", {"answer": OPEN, "enforced": False, "deliveries": 5}, "classic", RABBIT,
        shows="still in the queue"),
    bad("TestArgumentSupport", "quorum-accepted-not-enforced", {"answer": OPEN, "enforced": False, "deliveries": 5}, QQ, RABBIT,
        shows="delivered 5 times, then still in the queue"),
    bad("TestArgumentSupport", "classic-connection-406", {"answer": connection_closed(406, ARG_REFUSED["text"])}, "classic", RABBIT,
        shows="connection closed with 406"),
    bad("TestArgumentSupport", "quorum-refused", {"answer": channel_406("PRECONDITION_FAILED - invalid arg 'x-delivery-limit'")}, QQ, RABBIT,
        shows="channel closed with 406"),
    bad("TestArgumentSupport", "classic-silently-accepted", {"answer": OPEN, "enforced": False, "deliveries": 5}, "classic", P43,
        shows="still in the queue"),
    # LIMIT-MAX-DELIVERIES (limit 2, 3.10: limit+1 = 3 deliveries, every return counted)
    bad("TestMaxDeliveries", "nack-enforced-one-late", max_deliveries("nack", 4, True), QQ, RABBIT, shows="delivered 4 times, then removed"),
    bad("TestMaxDeliveries", "reject-enforced-early", max_deliveries("reject", 2, True), QQ, RABBIT, shows="delivered 2 times, then removed"),
    bad("TestMaxDeliveries", "consumer-loss-never-enforced", max_deliveries("consumer-loss", 6, False), QQ, RABBIT,
        shows="delivered 6 times, then still in the queue"),
    bad("TestMaxDeliveries", "nack-not-counted-on-3.10", looped("nack", [0] * 6, False, 6, limit=2), QQ, RABBIT,
        shows="delivered 6 times, then still in the queue"),
    bad("TestMaxDeliveries", "reject-enforced-one-late", max_deliveries("reject", 4, True), QQ, P43, shows="delivered 4 times, then removed"),
    bad("TestMaxDeliveries", "uncounted-nack-removes-after-last-round", looped("nack", [None] * 6, True, 6, limit=2), QQ, P43),
    # LIMIT-COUNT-HEADER
    bad("TestCountHeader", "redelivery-missing-count", looped("nack", [0, None, 2, 3], False, 4), QQ, RABBIT, shows="[0, none, 2, 3]"),
    bad("TestCountHeader", "count-grows-by-2", looped("reject", [0, 2, 4, 6], False, 4), QQ, RABBIT, shows="[0, 2, 4, 6]"),
    bad("TestCountHeader", "consume-first-zero-on-3.10", looped("consumer-loss", [0, 1, 2, 3], False, 4), QQ, RABBIT, shows="[0, 1, 2, 3]"),
    bad("TestCountHeader", "get-first-zero-on-3.12", looped("nack", [0, 1, 2, 3], False, 4), QQ, P312, shows="[0, 1, 2, 3]"),
    bad("TestCountHeader", "reject-count-stuck", looped("reject", [None, 1, 1, 1], False, 4), QQ, P43, shows="[none, 1, 1, 1]"),
    bad("TestCountHeader", "removed-early-under-limit-10", looped("nack", [0, 1, 2], True, 4), QQ, RABBIT, shows="3 deliveries"),
    # LIMIT-DEAD-LETTER
    bad("TestDeadLetter", "never-removed", dead_limit(False, [], 6), QQ, RABBIT, shows="still in the queue"),
    bad("TestDeadLetter", "removed-not-dead-lettered", with_(DEAD_LIMIT, dead=[]), QQ, RABBIT, shows="0 copies"),
    bad("TestDeadLetter", "two-copies", with_(DEAD_LIMIT, dead=[*DEAD_LIMIT["dead"], *DEAD_LIMIT["dead"]]), QQ, RABBIT, shows="2 copies"),
    bad("TestDeadLetter", "reason-rejected", with_(DEAD_LIMIT, dead=[{"id": "poison1", "x-death": [limit_death("rejected")]}]), QQ, RABBIT,
        shows="reason: rejected"),
    bad("TestDeadLetter", "queue-not-source", with_(DEAD_LIMIT, dead=[{"id": "poison1", "x-death": [limit_death(queue="limit-dlq")]}]), QQ, P43,
        shows="queue: limit-dlq"),
    bad("TestDeadLetter", "no-x-death", with_(DEAD_LIMIT, dead=[{"id": "poison1", "x-death": []}]), QQ, RABBIT, shows="reason: none"),
    # LIMIT-DEFAULT
    bad("TestDefaultLimit", "4.x-default-on-3.10", looped("reject", counted(21, 0), True, 25, default="none"), QQ, RABBIT,
        shows="delivered 21 times, then removed"),
    bad("TestDefaultLimit", "no-default-on-4.3", looped("reject", counted(23, None), False, 23, default=20), QQ, P43,
        shows="delivered 23 times, then still in the queue"),
    bad("TestDefaultLimit", "removed-after-20-on-4.3", looped("reject", counted(20, None), True, 23, default=20), QQ, P43,
        shows="delivered 20 times, then removed"),
    bad("TestDefaultLimit", "removed-after-last-round-on-3.10", looped("reject", counted(25, 0), True, 25, default="none"), QQ, RABBIT),
]


# == DLX: dead-lettering ============================================================================

Q, DLQ = "dlx-src", "dlx-dlq"
C1, C2 = "dlx-c1", "dlx-c2"
TIME = "2026-11-21 10:00:00"


def death(queue: str, reason: str = "rejected", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"count": count, "reason": reason, "queue": queue, "time": TIME, "exchange": "", "routing-keys": [queue], **extra}


def first_death(queue: str, reason: str = "rejected") -> dict[str, Any]:
    return {"x-first-death-queue": queue, "x-first-death-reason": reason, "x-first-death-exchange": ""}


def last_death(queue: str, reason: str = "rejected") -> dict[str, Any]:
    return {"x-last-death-queue": queue, "x-last-death-reason": reason, "x-last-death-exchange": ""}


def dead(mid: str, deaths: list[dict[str, Any]], headers: dict[str, Any], expiration: str | None = None) -> dict[str, Any]:
    return {"id": mid, "x-death": deaths, "headers": headers, "expiration": expiration}


def reason_obs(variant: str, reason: str, mid: str = "m1") -> dict[str, Any]:
    return {"variant": variant, "source": Q, "dead": [dead(mid, [death(Q, reason)], first_death(Q, reason))]}


XDEATH_FIELDS = {"source": Q, "dead": [dead("m1", [death(Q, **{"original-expiration": "60000"})], first_death(Q))]}
XDEATH_ENTRY = XDEATH_FIELDS["dead"][0]["x-death"][0]


def xdeath_fields(**changes: Any) -> dict[str, Any]:
    """XDEATH_FIELDS with the one dead-lettered copy changed (x-death entry fields under ``entry``)."""
    entry = changes.pop("entry", {})
    copy = {**XDEATH_FIELDS["dead"][0], "x-death": [{**XDEATH_ENTRY, **entry}], **changes}
    return {**XDEATH_FIELDS, "dead": [copy]}


def xdeath_count(deaths: list[dict[str, Any]], headers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"c1": C1, "c2": C2, "dead": [dead("m1", deaths, first_death(C1) if headers is None else headers)]}


# Rejected in c1, c2, c1: one entry per queue and reason, most recent first, c1 counted twice.
XDEATH_COUNT = xdeath_count([death(C1, count=2), death(C2)])


def last_death_obs(headers: dict[str, Any]) -> dict[str, Any]:
    return {"source": Q, "dead": [dead("m1", [death(Q)], headers)]}


LAST_ABSENT = last_death_obs(first_death(Q))
LAST_PRESENT = last_death_obs({**first_death(Q), **last_death(Q)})


def routed(variant: str, original: list[str], override: list[str]) -> dict[str, Any]:
    return {"variant": variant, "original": original, "override": override}


DLX_GOOD: list[Example] = [
    *everywhere("TestReason", "rejected", reason_obs("rejected", "rejected")),
    *everywhere("TestReason", "nacked", reason_obs("nacked", "rejected")),
    *everywhere("TestReason", "expired", reason_obs("expired", "expired")),
    *everywhere("TestReason", "maxlen", reason_obs("maxlen", "maxlen")),
    *everywhere("TestXDeathFields", "one-entry", XDEATH_FIELDS),
    *everywhere("TestXDeathCount", "c1-twice-c2-once", XDEATH_COUNT),
    *everywhere("TestRoutingKey", "original", routed("original", ["m1"], [])),
    *everywhere("TestRoutingKey", "override", routed("override", [], ["m1"])),
    *(dev("TestLastDeath", "absent", LAST_ABSENT, qt, RABBIT) for qt in RABBIT.queue_types),
    ok("TestLastDeath", "present", LAST_PRESENT, "classic", RABBIT),
    *(ok("TestLastDeath", "present", LAST_PRESENT, qt, p) for p in (P313, P43) for qt in p.queue_types),
]

DLX_VIOLATIONS: list[Example] = [
    # DLX-REASON
    bad("TestReason", "nacked-reason-nacked", reason_obs("nacked", "nacked"), shows="reason: nacked"),
    bad("TestReason", "expired-reason-rejected", reason_obs("expired", "rejected"), QQ, shows="reason: rejected"),
    bad("TestReason", "maxlen-reason-expired", reason_obs("maxlen", "expired"), shows="reason: expired"),
    bad("TestReason", "maxlen-drops-newest", reason_obs("maxlen", "maxlen", mid="m2"), shows="held [m2]"),
    bad("TestReason", "two-copies", with_(reason_obs("rejected", "rejected"), dead=reason_obs("rejected", "rejected")["dead"] * 2), QQ,
        shows="held [m1, m1]"),
    bad("TestReason", "not-dead-lettered", with_(reason_obs("rejected", "rejected"), dead=[]), shows="held []"),
    bad("TestReason", "queue-is-dlq", {"variant": "rejected", "source": Q, "dead": [dead("m1", [death(DLQ)], first_death(DLQ))]},
        shows="queue: dlx-dlq"),
    # DLX-XDEATH-FIELDS
    bad("TestXDeathFields", "expiration-not-removed", xdeath_fields(expiration="60000"), shows="expiration = 60000"),
    bad("TestXDeathFields", "original-expiration-missing", xdeath_fields(entry={"original-expiration": None}), shows="original-expiration: none"),
    bad("TestXDeathFields", "count-0", xdeath_fields(entry={"count": 0}), QQ, shows="count: 0"),
    bad("TestXDeathFields", "no-time", xdeath_fields(entry={"time": None}), shows="time = none"),
    bad("TestXDeathFields", "routing-keys-dlq", xdeath_fields(entry={"routing-keys": [DLQ]}), shows="routing-keys: [dlx-dlq]"),
    bad("TestXDeathFields", "two-entries", with_(XDEATH_FIELDS, dead=[{**XDEATH_FIELDS["dead"][0], "x-death": [XDEATH_ENTRY, XDEATH_ENTRY]}]),
        shows="x-death = ["),
    bad("TestXDeathFields", "first-death-missing", xdeath_fields(headers={}), shows="x-first-death-queue: none"),
    bad("TestXDeathFields", "two-copies", with_(XDEATH_FIELDS, dead=XDEATH_FIELDS["dead"] * 2), shows="held [m1, m1]"),
    # DLX-XDEATH-COUNT
    bad("TestXDeathCount", "count-not-incremented", xdeath_count([death(C1, count=1), death(C2)]), shows="count: 1}, {queue: dlx-c2"),
    bad("TestXDeathCount", "first-death-queue-changed", xdeath_count([death(C1, count=2), death(C2)], first_death(C2)),
        shows="x-first-death-queue: dlx-c2"),
    bad("TestXDeathCount", "entry-per-death", xdeath_count([death(C1), death(C2), death(C1)]), QQ,
        shows="{queue: dlx-c1, reason: rejected, count: 1}, {queue: dlx-c2"),
    bad("TestXDeathCount", "oldest-first", xdeath_count([death(C2), death(C1, count=2)]), shows="[{queue: dlx-c2"),
    bad("TestXDeathCount", "two-copies", with_(XDEATH_COUNT, dead=XDEATH_COUNT["dead"] * 2), shows="held [m1, m1]"),
    bad("TestXDeathCount", "first-death-reason-dropped", xdeath_count([death(C1, count=2), death(C2)], {"x-first-death-queue": C1}),
        shows="x-first-death-reason: none"),
    # DLX-LAST-DEATH
    bad("TestLastDeath", "absent-on-3.13", LAST_ABSENT, "classic", P313, shows="x-last-death-queue: none"),
    bad("TestLastDeath", "absent-on-4.3", LAST_ABSENT, QQ, P43, shows="x-last-death-queue: none"),
    bad("TestLastDeath", "wrong-queue-on-3.13", last_death_obs({**first_death(Q), **last_death(DLQ)}), QQ, P313, shows="x-last-death-queue: dlx-dlq"),
    bad("TestLastDeath", "not-dead-lettered", with_(LAST_ABSENT, dead=[]), "classic", RABBIT, shows="held []"),
    # DLX-ROUTING-KEY
    bad("TestRoutingKey", "override-ignored", routed("override", ["m1"], []), shows="original: [m1]"),
    bad("TestRoutingKey", "routed-by-both", routed("override", ["m1"], ["m1"]), QQ, shows="original: [m1], override: [m1]"),
    bad("TestRoutingKey", "original-key-not-used", routed("original", [], []), shows="original: [], override: []"),
    bad("TestRoutingKey", "two-copies", routed("original", ["m1", "m1"], []), shows="original: [m1, m1]"),
]


# == PREFETCH =======================================================================================

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


ZERO = {"published": msgs(40), "received_without_ack": msgs(40), "ready_after": 0}
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
    *everywhere("TestPrefetchZero", "all-40", ZERO),
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
    bad("TestPrefetchZero", "m17-held-back", with_(ZERO, received_without_ack=[m for m in msgs(40) if m != "m17"], ready_after=1),
        shows="m15, m16, m18, m19"),
    bad("TestPrefetchZero", "m40-lost", with_(ZERO, received_without_ack=msgs(39)), QQ, shows="m39, m4, m5"),
    bad("TestPrefetchZero", "m3-twice-m4-missing", with_(ZERO, received_without_ack=[*msgs(3), "m3", *msgs(40)[4:]]), shows="m3, m3"),
    bad("TestPrefetchZero", "ready-left", with_(ZERO, ready_after=2), shows="messages still ready in the queue = 2"),
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


# == PERSIST: node restart and kill -9 ==============================================================

PIDS = ["persistent-1", "persistent-2", "persistent-3"]
TRANSIENT, CONTROL = ["transient-1", "transient-2"], ["persistent-1"]


def kept(*mids: str, persistent: bool = True) -> list[dict[str, Any]]:
    return [{"id": m, "persistent": persistent} for m in mids]


def survived(variant: str, drained: list[dict[str, Any]], unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "ids": PIDS, "drained": drained, "unavailable": unavailable}


def transient_fate(drained: list[dict[str, Any]], unavailable: str | None = None) -> dict[str, Any]:
    return {"transient": TRANSIENT, "control": CONTROL, "drained": drained, "unavailable": unavailable}


TRANSIENT_LOST = transient_fate(kept(*CONTROL))
TRANSIENT_KEPT = transient_fate([*kept(*TRANSIENT, persistent=False), *kept(*CONTROL)])
UNAVAILABLE = "OperationTimeout: basic.get on 'q' not answered in 15.0s"
NON_DURABLE_GONE = {"declare": OPEN, "after": soft(404, "NOT_FOUND - no queue 'nd' in vhost '/'")}
NON_DURABLE_REFUSED = {"declare": connection_closed(541, "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated")}

PERSIST_GOOD: list[Example] = [
    *everywhere("TestConfirmedSurvives", "restart", survived("restart", kept(*PIDS))),
    *everywhere("TestConfirmedSurvives", "kill", survived("kill", kept(*PIDS))),
    *(ok("TestTransientFate", "transient-lost", TRANSIENT_LOST, "classic", p) for p in (RABBIT, P43)),
    *(ok("TestTransientFate", "transient-kept", TRANSIENT_KEPT, QQ, p) for p in (RABBIT, P43)),
    *(ok("TestNonDurableQueueGone", "deleted", NON_DURABLE_GONE, "classic", p) for p in (RABBIT, P312, P313, P43)),
    # 4.3 refuses the declare (deprecated transient non-exclusive queues): documented, a deviation
    dev("TestNonDurableQueueGone", "declare-refused", NON_DURABLE_REFUSED, "classic", P43),
]

PERSIST_VIOLATIONS: list[Example] = [
    # PERSIST-CONFIRMED-SURVIVES
    bad("TestConfirmedSurvives", "restart-loses-one", survived("restart", kept("persistent-1", "persistent-3")), shows="[persistent-1, persistent-3]"),
    bad("TestConfirmedSurvives", "kill-loses-all", survived("kill", []), QQ, shows="after kill -9 and start = []"),
    bad("TestConfirmedSurvives", "restart-flag-lost", survived("restart", [*kept("persistent-1", persistent=False), *kept(*PIDS[1:])]),
        shows="not persistent: [persistent-1]"),
    bad("TestConfirmedSurvives", "kill-duplicates", survived("kill", kept(*PIDS, "persistent-3")), shows="persistent-3, persistent-3"),
    bad("TestConfirmedSurvives", "kill-classic-unavailable", survived("kill", [], UNAVAILABLE), "classic", RABBIT, shows="could not be consumed"),
    # PERSIST-TRANSIENT-FATE
    bad("TestTransientFate", "classic-keeps-transient", TRANSIENT_KEPT, "classic", RABBIT, shows="transient-1"),
    bad("TestTransientFate", "quorum-loses-transient", TRANSIENT_LOST, QQ, RABBIT, shows="= [persistent-1]"),
    bad("TestTransientFate", "classic-keeps-transient", TRANSIENT_KEPT, "classic", P43, shows="transient-1"),
    bad("TestTransientFate", "quorum-loses-one-transient", transient_fate([*kept("transient-2", persistent=False), *kept(*CONTROL)]), QQ, P43,
        shows="= [persistent-1, transient-2]"),
    bad("TestTransientFate", "classic-control-lost", transient_fate([]), "classic", RABBIT, shows="= []"),
    bad("TestTransientFate", "unavailable", transient_fate([], UNAVAILABLE), QQ, RABBIT, shows="could not be consumed"),
    # PERSIST-NON-DURABLE-QUEUE-GONE
    bad("TestNonDurableQueueGone", "survives-restart", with_(NON_DURABLE_GONE, after=OPEN), "classic", RABBIT, shows="the queue still exists"),
    bad("TestNonDurableQueueGone", "declare-refused-on-3.10", NON_DURABLE_REFUSED, "classic", RABBIT, shows="refused with 541"),
    bad("TestNonDurableQueueGone", "declare-accepted-and-survives-on-4.3", with_(NON_DURABLE_GONE, after=OPEN), "classic", P43, shows="still exists"),
    bad("TestNonDurableQueueGone", "passive-declare-closes-connection", with_(NON_DURABLE_GONE, after=connection_closed(541, "INTERNAL_ERROR")),
        "classic", RABBIT, shows="closed with 541"),
]


# == publish: content framing edges ================================================================

def framing_obs(mid: str, size: int, *, confirm: str = "basic.ack", delivered: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sent = {"id": mid, "size": size, "sha": "s1"}
    return {"published": sent, "confirm": confirm, "delivered": [sent] if delivered is None else delivered}


FRAMING_GOOD = [
    *everywhere("TestEmptyBody", "confirmed-and-routed", framing_obs("m-empty", 0)),
    *everywhere("TestBodyLargerThanFrameMax", "reassembled", framing_obs("m-large", 394217)),
]
SHOWS.update({
    "TestEmptyBody:never-confirmed-nor-routed": "no basic.ack",
    "TestEmptyBody:confirmed-not-routed": "delivered before the sentinel: []",
    "TestBodyLargerThanFrameMax:altered": "got [s2]",
    "TestBodyLargerThanFrameMax:nacked": "basic.nack",
})
FRAMING_VIOLATIONS = [
    Example("TestEmptyBody", "never-confirmed-nor-routed",
            framing_obs("m-empty", 0, confirm="basic.publish: no basic.ack (publisher confirm) within 5s", delivered=[])),
    Example("TestEmptyBody", "confirmed-not-routed", framing_obs("m-empty", 0, delivered=[])),
    Example("TestBodyLargerThanFrameMax", "altered", framing_obs("m-large", 394217, delivered=[{"id": "m-large", "size": 394217, "sha": "s2"}])),
    Example("TestBodyLargerThanFrameMax", "nacked", framing_obs("m-large", 394217, confirm="publish not confirmed: basic.nack")),
]


# == the tables =====================================================================================

AREAS_GOOD: list[Example] = [*NACK_GOOD, *REQUEUE_GOOD, *LIMIT_GOOD, *DLX_GOOD, *PREFETCH_GOOD, *PERSIST_GOOD, *FRAMING_GOOD]
AREAS_VIOLATIONS: list[Example] = [*NACK_VIOLATIONS, *REQUEUE_VIOLATIONS, *LIMIT_VIOLATIONS, *DLX_VIOLATIONS, *PREFETCH_VIOLATIONS,
                                   *PERSIST_VIOLATIONS, *FRAMING_VIOLATIONS]


@pytest.mark.parametrize("ex", [e.param() for e in AREAS_GOOD])
def test_compliant_observation_passes(ex: Example) -> None:
    assert_passes(ex)


@pytest.mark.parametrize("ex", [e.param() for e in AREAS_VIOLATIONS])
def test_violation_fails(ex: Example) -> None:
    assert_fails(ex, SHOWS.get(ex.id))


def test_example_names_are_unique() -> None:
    for table in (AREAS_GOOD, AREAS_VIOLATIONS):
        ids = [e.id for e in table]
        assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_area_examples_cover_every_case_of_the_areas() -> None:
    areas = ("nack", "limit", "dlx", "prefetch", "persist")
    from tests.verdicts.test_spec_rules import SPEC_GOOD, SPEC_VIOLATIONS  # single-rule cases, some in these areas

    in_areas = {name for name, cls in CASES.items() if cls.__module__.split(".")[2] in areas}
    good = {e.case for e in AREAS_GOOD + SPEC_GOOD}
    bad_counts = {name: sum(1 for e in AREAS_VIOLATIONS + SPEC_VIOLATIONS if e.case == name and not e.marks) for name in in_areas}
    assert in_areas <= good, sorted(in_areas - good)
    assert all(n >= 2 for n in bad_counts.values()), {k: n for k, n in bad_counts.items() if n < 2}


def test_without_a_profile_entry_the_reference_judges_and_only_vendor_choices_are_undocumented() -> None:
    for case, obs, outcome in (
        ("TestLastDeath", LAST_ABSENT, Outcome.FAIL), ("TestLastDeath", LAST_PRESENT, Outcome.PASS),
        ("TestNonDurableQueueGone", NON_DURABLE_GONE, Outcome.PASS), ("TestArgumentSupport", {"answer": OPEN, "enforced": True, "deliveries": 3}, Outcome.PASS),
        ("TestArgumentSupport", {"answer": OPEN, "enforced": False, "deliveries": 5}, Outcome.FAIL),
        ("TestPrefetchScope", SCOPE_SHARED, Outcome.PASS), ("TestPrefetchScope", SCOPE_OWN, Outcome.FAIL),
        ("TestMaxDeliveries", max_deliveries("nack", 3, True), Outcome.PASS), ("TestCountHeader", looped("nack", [0, 1, 2, 3], False, 4), Outcome.FAIL),
        # the specification leaves these to the vendor: without its documented choice, nothing to judge by
        ("TestTransientFate", TRANSIENT_LOST, Outcome.UNDOCUMENTED), ("TestDefaultLimit", DEFAULT_NONE, Outcome.UNDOCUMENTED),
    ):
        assert CASES[case]().verdict(obs, BASELINE, "classic").outcome is outcome, case


def test_quorum_unavailable_after_kill_is_the_documented_deviation_only_on_quorum() -> None:
    case = CASES["TestConfirmedSurvives"]()
    obs = survived("kill", [], UNAVAILABLE)
    quorum = apply_profile(case.verdict(obs, RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert quorum.outcome is Outcome.DEVIATION and "10070" in quorum.citation
    classic = apply_profile(case.verdict(obs, RABBIT, "classic"), case.requirement, "classic", RABBIT)
    assert classic.outcome is Outcome.FAIL
    lost = apply_profile(case.verdict(with_(obs, unavailable=None), RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert lost.outcome is Outcome.FAIL, "messages lost outright are not the documented unavailability"


def test_quorum_unavailable_after_graceful_restart_is_not_the_kill_deviation() -> None:
    case = CASES["TestConfirmedSurvives"]()
    v = apply_profile(case.verdict(survived("restart", [], UNAVAILABLE), RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert v.outcome is Outcome.FAIL


# == verdicts that cannot pass a violation ==========================================================


def judged(case: str, obs: dict[str, Any], profile: Profile, qt: str | None = "classic") -> Any:
    c = CASES[case]()
    return apply_profile(c.verdict(obs, profile, qt), c.requirement, qt, profile)


def test_reject_requeue_same_channel_is_spec_fail_and_rabbitmq_deviation() -> None:
    for profile in (RABBIT, P312, P313, P43):
        v = judged("TestRejectRequeue", REJECT_REQUEUE_RABBIT, profile)
        assert v.outcome is Outcome.DEVIATION and v.spec == "fail" and "specification" in v.citation, profile.id
    # without the profile's deviation (the baseline) it is a plain failure
    assert judged("TestRejectRequeue", REJECT_REQUEUE_RABBIT, BASELINE).outcome is Outcome.FAIL
    # the deviation covers exactly the documented behaviour, not a lost message beside it
    lost = with_(REJECT_REQUEUE_RABBIT, remaining=again("m1"))
    assert judged("TestRejectRequeue", lost, RABBIT).outcome is Outcome.FAIL


def test_non_durable_declare_refused_is_spec_fail_never_pass() -> None:
    v = judged("TestNonDurableQueueGone", NON_DURABLE_REFUSED, P43)
    assert v.outcome is Outcome.DEVIATION and v.spec == "fail" and "transient_nonexcl_queues" in v.citation + v.reason
    assert judged("TestNonDurableQueueGone", NON_DURABLE_REFUSED, RABBIT).outcome is Outcome.FAIL


def _with_entry(profile: Profile, key: str, value: str, qt: str) -> Profile:
    from dataclasses import replace as dc_replace

    from conformance.catalogue.profiles import Entry

    entries = {**profile.entries, key: {**profile.entries.get(key, {}),
                                        qt: Entry(value=value, source="https://example.invalid/vendor-doc", reason="documented as accepted and ignored")}}
    return dc_replace(profile, entries=entries)


def test_argument_ignored_is_never_a_pass() -> None:
    ignoring = _with_entry(RABBIT, "delivery-limit.support", "ignored", "classic")
    v = judged("TestArgumentSupport", {"answer": OPEN, "enforced": False, "deliveries": 5}, ignoring)
    assert v.outcome is Outcome.DEVIATION and v.spec == "n/a" and v.citation == "https://example.invalid/vendor-doc"
    # a clean refusal of the optional feature is unsupported (refused), with the refusal recorded
    refused = judged("TestArgumentSupport", {"answer": ARG_REFUSED}, ignoring)
    assert refused.outcome is Outcome.UNSUPPORTED and refused.unsupported_kind == "refused" and "406" in refused.observed
    # ... but where the vendor documents support, the same refusal fails
    assert judged("TestArgumentSupport", {"answer": ARG_REFUSED}, RABBIT, "quorum").outcome is Outcome.FAIL


def test_extension_verdicts_carry_no_spec_verdict() -> None:
    # NACK-DISCARD is EXTENSION: pass or fail, its spec verdict is n/a
    assert judged("TestNackDiscard", NACK_DISCARD_SINGLE, RABBIT).spec == "n/a"
    v = judged("TestNackDiscard", with_(NACK_DISCARD_SINGLE, back=again("m3", start=6)), RABBIT)
    assert v.outcome is Outcome.FAIL and v.spec == "n/a"
    # a MUST keeps its spec verdict
    assert judged("TestRejectDiscard", REJECT_DISCARD, RABBIT).spec == "pass"
