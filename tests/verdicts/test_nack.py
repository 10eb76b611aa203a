"""Verdicts of the nack area (conformance/cases/nack/: basic.nack, basic.reject) on synthetic observations,
held to the contract of tests/verdicts/examples.py. RabbitMQ's same-channel redelivery after basic.reject
is a documented deviation on every version; without the profile it is a plain failure.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import select_profile
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import (
    BASELINE,
    OPEN,
    P43,
    P312,
    P313,
    RABBIT,
    Example,
    again,
    bad,
    channel_406,
    connection_closed,
    d,
    everywhere,
    first,
    judged,
    msgs,
    soft,
    verdict_tests,
    with_,
)


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


test_compliant_observation_passes, test_violation_fails = verdict_tests(NACK_GOOD, NACK_VIOLATIONS)


def test_reject_requeue_same_channel_is_spec_fail_and_rabbitmq_deviation() -> None:
    for profile in (RABBIT, P312, P313, P43):
        v = judged("TestRejectRequeue", REJECT_REQUEUE_RABBIT, profile)
        assert v.outcome is Outcome.DEVIATION and v.spec == "fail" and "specification" in v.citation, profile.id
    # without the profile's deviation (the baseline) it is a plain failure
    assert judged("TestRejectRequeue", REJECT_REQUEUE_RABBIT, BASELINE).outcome is Outcome.FAIL
    # the deviation covers exactly the documented behaviour, not a lost message beside it
    lost = with_(REJECT_REQUEUE_RABBIT, remaining=again("m1"))
    assert judged("TestRejectRequeue", lost, RABBIT).outcome is Outcome.FAIL


def test_extension_verdicts_carry_no_spec_verdict() -> None:
    # NACK-DISCARD is EXTENSION: pass or fail, its spec verdict is n/a
    assert judged("TestNackDiscard", NACK_DISCARD_SINGLE, RABBIT).spec == "n/a"
    v = judged("TestNackDiscard", with_(NACK_DISCARD_SINGLE, back=again("m3", start=6)), RABBIT)
    assert v.outcome is Outcome.FAIL and v.spec == "n/a"
    # a MUST keeps its spec verdict
    assert judged("TestRejectDiscard", REJECT_DISCARD, RABBIT).spec == "pass"


def amqp10(mid: str, tag: int, *, fa: bool, count: int) -> dict[str, Any]:
    """One AMQP 1.0 delivery, shaped like conformance.kit.case.delivery_obs on the proton adapter."""
    return {"id": mid, "tag": tag, "redelivered": (not fa) or count > 0, "delivery_count": count, "first_acquirer": fa, "presettled": False}


def nack_single_10(back: dict[str, Any]) -> dict[str, Any]:
    """NACK_SINGLE over AMQP 1.0: nack = released on the same link; the rest return after the link closes."""
    held = [amqp10(m, i + 1, fa=True, count=0) for i, m in enumerate(msgs(5))]
    remaining = [amqp10(m, i + 1, fa=False, count=1) for i, m in enumerate(["m1", "m2", "m4", "m5"])]
    return {"published": msgs(5), "held": held, "channel": OPEN, "back": [back], "remaining": remaining}


def test_released_back_to_the_same_link_is_unchanged_not_redelivered() -> None:
    """qpidd 1.39.0 gives a message released on a link back to that link with first-acquirer=true and
    delivery-count 0: AMQP 1.0 3.4.4 (released: delivery-count MUST NOT be incremented) and 3.2.1
    (first-acquirer=true: no *other* link acquired it) both allow it. RabbitMQ's first-acquirer=false
    is allowed too. A count incremented by the release breaks 3.4.4: a spec failure."""
    for profile in (select_profile("qpid-cpp", "1.39.0", "amqp-1.0"), select_profile("Other", "1.0", "amqp-1.0")):
        qpidd = judged("TestNackSingleRequeue", nack_single_10(amqp10("m3", 6, fa=True, count=0)), profile)
        assert qpidd.outcome is Outcome.PASS, (profile.id, qpidd)
        rabbit = judged("TestNackSingleRequeue", nack_single_10(amqp10("m3", 6, fa=False, count=0)), profile)
        assert rabbit.outcome is Outcome.PASS, (profile.id, rabbit)
        counted = judged("TestNackSingleRequeue", nack_single_10(amqp10("m3", 6, fa=False, count=1)), profile)
        assert counted.outcome is Outcome.FAIL and "3.4.4" in counted.observed, (profile.id, counted)
