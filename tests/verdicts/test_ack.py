"""Verdicts of the ack area (conformance/cases/ack/) on synthetic observations: no broker, pure data.

For every case of the area one observation as a compliant broker produces it (the verdict must pass)
and several observations of distinct ways a broker could violate the case's requirement (the verdict
must fail, saying what it expected and what it saw); the contract is tests/verdicts/examples.py's. The
orders of ACK-REQUEUE-POSITION come from the profile entries, its nack variant is also written out per
version. Also here: how apply_profile turns a documented failure of an ack case into a deviation.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue.profiles import Profile, parse_profile
from conformance.kit.verdicts import Outcome, Verdict, apply_profile, holds
from tests.verdicts.examples import (
    BASELINE,
    CASES,
    OPEN,
    P43,
    RABBIT,
    Example,
    again,
    bad,
    channel_406,
    connection_closed,
    d,
    dev,
    first,
    msgs,
    ok,
    soft,
    verdict_tests,
    with_,
)

# -- compliant observations --------------------------------------------------------------------

GOOD_OBS: dict[str, dict[str, Any]] = {
    # ack tag 1 alone, ack tag 5 with multiple=true, close: nothing comes back.
    "TestAckMultipleUpToTag": {
        "published": msgs(5),
        "held": first(*msgs(5)),
        "acked": ["m1", "m5"],
        "channel": OPEN,
        "returned": [],
    },
    # ack tag 1 alone, ack tag 5 without multiple, close: 2, 3, 4 come back redelivered.
    "TestAckSingleOnlyTag": {
        "published": msgs(5),
        "held": first(*msgs(5)),
        "acked": ["m1", "m5"],
        "channel": OPEN,
        "returned": again("m2", "m3", "m4"),
    },
    # ack(0, multiple=true), close: nothing comes back.
    "TestAckMultipleZeroAll": {
        "published": msgs(4),
        "held": first(*msgs(4)),
        "acked": msgs(4),
        "channel": OPEN,
        "returned": [],
    },
    "TestAckUnknownTag": {
        "held_tag": 1,
        "acked_tag": 1001,
        "answer": channel_406("PRECONDITION_FAILED - unknown delivery tag 1001"),
    },
    "TestDoubleAck": {
        "tag": 1,
        "first": OPEN,
        "second": channel_406("PRECONDITION_FAILED - unknown delivery tag 1"),
    },
    # m1, m2 held; cancel; nothing requeued; ack m1 accepted; close returns m2 only.
    "TestCancelKeepsUnacked": {
        "published": msgs(2),
        "held": first("m1", "m2"),
        "acked_after_cancel": "m1",
        "requeued_by_cancel": [],
        "ack_after_cancel": OPEN,
        "returned_after_close": again("m2"),
    },
    # m1..m5 held (prefetch 5), cancel, re-consume under the same tag, ack tags 1..5 accepted; the new
    # consumer gets m6..m10 once under tags 6..10; close returns nothing.
    "TestReconsumeSameTagInFlight": {
        "published": msgs(10),
        "consumer_tag": "reconsume-q",
        "held": first(*msgs(5)),
        "reconsume_answer": OPEN,
        "ack_after_reconsume": OPEN,
        "reconsumed": first("m6", "m7", "m8", "m9", "m10", start=6),
        "reconsume_channel": OPEN,
        "returned_after_close": [],
    },
    # m1..m3 held, m2 acked, recover(requeue=true): m1 and m3 again (same channel, tags go on).
    "TestAckMultipleZeroNothingOutstanding": {"channel": OPEN, "after": first("m1")},
    "TestRecoverNoRequeue": {
        "held": first("m1", "m2", "m3"), "acked": "m2", "answer": OPEN,
        "again": again("m1", "m3", start=4), "open": OPEN, "elsewhere": [],
    },
    "TestRecoverRedelivers": {
        "published": msgs(3),
        "held": first(*msgs(3)),
        "acked": "m2",
        "returned": again("m1", "m3", start=4),
    },
    "TestClientAcknowledgeCumulative": {
        "published": msgs(5),
        "held": first(*msgs(5)),
        "acknowledged": "m3",
        "scope": "cumulative",
        "returned": again("m4", "m5"),
    },
    "TestClientAcknowledgeIndividual": {
        "published": msgs(5),
        "held": first(*msgs(5)),
        "acknowledged": "m3",
        "scope": "individual",
        "returned": again("m1", "m2", "m4", "m5"),
    },
    "TestAutoAckRemovedOnDelivery": {
        "published": msgs(3),
        "received": first(*msgs(3)),
        "returned": [],
    },
    # basic.get takes m1, a consumer on another channel gets m2..m4.
    "TestFirstDeliveryNotRedelivered": {
        "published": msgs(4),
        "consumed": first("m2", "m3", "m4"),
        "fetched": first("m1"),
    },
    "TestRedeliverOnConnectionLoss": {
        "published": msgs(3),
        "held": first(*msgs(3)),
        "returned": again(*msgs(3)),
        "how": "cut",
    },
    "TestRedeliverOnChannelClose": {
        "published": msgs(3),
        "held": first(*msgs(3)),
        "returned": again(*msgs(3)),
        "how": "channel.close",
    },
    # m1..m4 held, m2 and m4 acked, cut: m1 and m3 come back.
    "TestAckedNeverRedelivered": {
        "published": msgs(4),
        "held": first(*msgs(4)),
        "acked": ["m2", "m4"],
        "returned": again("m1", "m3"),
    },
}

# -- ACK-REQUEUE-POSITION: expectations come from the profile entries ---------------------------

#: The module docstring's scenario: A holds m1, B holds m2, m3 and m4 wait; B returns first, then A.
REQUEUE_PUBLISHED = msgs(4)
REQUEUE_RETURNED = ["m2", "m1"]
#: The order each documented policy produces, written out independently of the case's own helper.
POLICY_ORDER = {
    "publication-order": ["m1", "m2", "m3", "m4"],
    "head-in-return-order": ["m2", "m1", "m3", "m4"],
    "tail-in-return-order": ["m3", "m4", "m2", "m1"],
}
REQUEUE_VARIANTS: tuple[str, ...] = CASES["TestRequeuePosition"].variants or ()


def requeue_obs(variant: str, order: list[str]) -> dict[str, Any]:
    return {"variant": variant, "published": list(REQUEUE_PUBLISHED), "returned": list(REQUEUE_RETURNED), "order": order}


def documented_policy(variant: str, queue_type: str) -> str:
    entry = RABBIT.entry(f"requeue.position.{variant}", queue_type)
    assert entry is not None, f"{RABBIT.id} documents no requeue.position.{variant} for {queue_type}"
    return str(entry.value)


#: ACK-REQUEUE-POSITION's reference (conformance/catalogue/data/requirements/ack.yaml): back at the original place.
REFERENCE_POLICY = "publication-order"


def requeue_good() -> list[Example]:
    """What RabbitMQ documents for each variant and queue type: a pass where that is the reference, a
    deviation (with the profile's reason and citation) where it differs."""
    return [
        Example(
            "TestRequeuePosition",
            f"{variant}-{qt}-{documented_policy(variant, qt)}",
            requeue_obs(variant, POLICY_ORDER[documented_policy(variant, qt)]),
            queue_type=qt,
            outcome="pass" if documented_policy(variant, qt) == REFERENCE_POLICY else "deviation",
        )
        for variant in REQUEUE_VARIANTS
        for qt in RABBIT.queue_types
    ] + [
        # the reference passes whatever a profile documents for the queue type
        Example("TestRequeuePosition", f"{variant}-quorum-reference-despite-{documented_policy(variant, 'quorum')}",
                requeue_obs(variant, POLICY_ORDER[REFERENCE_POLICY]), queue_type="quorum")
        for variant in REQUEUE_VARIANTS
    ]


def requeue_violations() -> list[Example]:
    out = []
    for variant in REQUEUE_VARIANTS:
        for qt in RABBIT.queue_types:
            policy = documented_policy(variant, qt)
            expected = POLICY_ORDER[policy]
            for other, order in POLICY_ORDER.items():
                if other not in (policy, REFERENCE_POLICY):
                    out.append(Example("TestRequeuePosition", f"{variant}-{qt}-{other}-instead-of-{policy}", requeue_obs(variant, order), qt))
            lost = [m for m in expected if m != "m1"]
            out.append(Example("TestRequeuePosition", f"{variant}-{qt}-requeued-m1-lost", requeue_obs(variant, lost), qt))
            dup = [*expected, "m2"]
            out.append(Example("TestRequeuePosition", f"{variant}-{qt}-requeued-m2-delivered-twice", requeue_obs(variant, dup), qt))
    return out


# -- the tables ----------------------------------------------------------------------------------


def good_examples() -> list[Example]:
    out = []
    for case, obs in GOOD_OBS.items():
        for profile in (RABBIT, BASELINE):
            for qt in profile.queue_types:
                out.append(Example(case, f"{profile.id}-{qt}", obs, queue_type=qt, profile=profile))
    return out + requeue_good()


G = GOOD_OBS

VIOLATIONS: list[Example] = [
    # ACK-MULTIPLE-UP-TO-TAG
    Example("TestAckMultipleUpToTag", "multiple-ignored-acks-only-tag-5",
            with_(G["TestAckMultipleUpToTag"], returned=again("m2", "m3", "m4"))),
    Example("TestAckMultipleUpToTag", "multiple-acks-only-tags-below-5",
            with_(G["TestAckMultipleUpToTag"], returned=again("m5"))),
    Example("TestAckMultipleUpToTag", "multiple-stops-short-tag-4-returns",
            with_(G["TestAckMultipleUpToTag"], returned=again("m4"))),
    Example("TestAckMultipleUpToTag", "acked-tag-1-comes-back",
            with_(G["TestAckMultipleUpToTag"], returned=again("m1"))),
    Example("TestAckMultipleUpToTag", "multiple-ack-channel-closed-406",
            with_(G["TestAckMultipleUpToTag"], channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 5"),
                  returned=again("m2", "m3", "m4", "m5"))),
    Example("TestAckMultipleUpToTag", "multiple-ack-connection-closed",
            with_(G["TestAckMultipleUpToTag"], channel=connection_closed(503, "COMMAND_INVALID - multiple ack not supported"),
                  returned=again("m2", "m3", "m4", "m5"))),
    # ACK-SINGLE-ONLY-TAG
    Example("TestAckSingleOnlyTag", "single-ack-treated-as-multiple",
            with_(G["TestAckSingleOnlyTag"], returned=[])),
    Example("TestAckSingleOnlyTag", "unacked-tag-4-lost",
            with_(G["TestAckSingleOnlyTag"], returned=again("m2", "m3"))),
    Example("TestAckSingleOnlyTag", "acked-tag-5-comes-back",
            with_(G["TestAckSingleOnlyTag"], returned=again("m2", "m3", "m4", "m5"))),
    Example("TestAckSingleOnlyTag", "acked-tag-1-comes-back",
            with_(G["TestAckSingleOnlyTag"], returned=again("m1", "m2", "m3", "m4"))),
    Example("TestAckSingleOnlyTag", "m3-returned-twice",
            with_(G["TestAckSingleOnlyTag"], returned=again("m2", "m3", "m3", "m4"))),
    Example("TestAckSingleOnlyTag", "returned-redelivered-false",
            with_(G["TestAckSingleOnlyTag"], returned=[d("m2", 1, True), d("m3", 2, False), d("m4", 3, True)])),
    Example("TestAckSingleOnlyTag", "single-ack-channel-closed-406",
            with_(G["TestAckSingleOnlyTag"], channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 5"),
                  returned=again("m2", "m3", "m4", "m5"))),
    # ACK-MULTIPLE-ZERO-ALL
    Example("TestAckMultipleZeroAll", "tag-0-ack-does-nothing",
            with_(G["TestAckMultipleZeroAll"], returned=again(*msgs(4)))),
    Example("TestAckMultipleZeroAll", "tag-0-acks-only-first",
            with_(G["TestAckMultipleZeroAll"], returned=again("m2", "m3", "m4"))),
    Example("TestAckMultipleZeroAll", "tag-0-treated-as-unknown-406",
            with_(G["TestAckMultipleZeroAll"], channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 0"),
                  returned=again(*msgs(4)))),
    Example("TestAckMultipleZeroAll", "tag-0-closes-connection",
            with_(G["TestAckMultipleZeroAll"], channel=connection_closed(503, "COMMAND_INVALID - delivery tag 0"),
                  returned=again(*msgs(4)))),
    # ACK-UNKNOWN-TAG-406
    Example("TestAckUnknownTag", "no-exception-raised",
            with_(G["TestAckUnknownTag"], answer=OPEN)),
    Example("TestAckUnknownTag", "connection-level-406",
            with_(G["TestAckUnknownTag"], answer=connection_closed(406, "PRECONDITION_FAILED - unknown delivery tag 1001"))),
    Example("TestAckUnknownTag", "connection-level-503",
            with_(G["TestAckUnknownTag"], answer=connection_closed(503, "COMMAND_INVALID - unknown delivery tag 1001"))),
    Example("TestAckUnknownTag", "channel-closed-404-not-406",
            with_(G["TestAckUnknownTag"], answer=soft(404, "NOT_FOUND - unknown delivery tag 1001"))),
    Example("TestAckUnknownTag", "channel-closed-530-not-406",
            with_(G["TestAckUnknownTag"], answer=soft(530, "NOT_ALLOWED - unknown delivery tag 1001"))),
    # ACK-DOUBLE-ACK-406
    Example("TestDoubleAck", "second-ack-ignored",
            with_(G["TestDoubleAck"], second=OPEN)),
    Example("TestDoubleAck", "second-ack-connection-level-406",
            with_(G["TestDoubleAck"], second=connection_closed(406, "PRECONDITION_FAILED - unknown delivery tag 1"))),
    Example("TestDoubleAck", "second-ack-channel-closed-404",
            with_(G["TestDoubleAck"], second=soft(404, "NOT_FOUND - delivery tag 1"))),
    Example("TestDoubleAck", "first-ack-rejected-406",
            with_(G["TestDoubleAck"], first=channel_406(), second=None)),
    # ACK-CANCEL-KEEPS-UNACKED
    Example("TestCancelKeepsUnacked", "cancel-requeues-both",
            with_(G["TestCancelKeepsUnacked"], requeued_by_cancel=again("m1", "m2"),
                  ack_after_cancel=channel_406(), returned_after_close=[])),
    Example("TestCancelKeepsUnacked", "cancel-requeues-one",
            with_(G["TestCancelKeepsUnacked"], requeued_by_cancel=again("m2"), returned_after_close=[])),
    Example("TestCancelKeepsUnacked", "ack-after-cancel-rejected-406",
            with_(G["TestCancelKeepsUnacked"], ack_after_cancel=channel_406(), returned_after_close=again("m1", "m2"))),
    Example("TestCancelKeepsUnacked", "ack-after-cancel-closes-connection",
            with_(G["TestCancelKeepsUnacked"], ack_after_cancel=connection_closed(406, "PRECONDITION_FAILED - unknown delivery tag 1"),
                  returned_after_close=again("m1", "m2"))),
    Example("TestCancelKeepsUnacked", "cancel-discards-unacked",
            with_(G["TestCancelKeepsUnacked"], returned_after_close=[])),
    Example("TestCancelKeepsUnacked", "ack-after-cancel-silently-ignored",
            with_(G["TestCancelKeepsUnacked"], returned_after_close=again("m1", "m2"))),
    Example("TestCancelKeepsUnacked", "returned-after-close-redelivered-false",
            with_(G["TestCancelKeepsUnacked"], returned_after_close=first("m2"))),
    Example("TestCancelKeepsUnacked", "m2-returned-twice",
            with_(G["TestCancelKeepsUnacked"], returned_after_close=again("m2", "m2"))),
    # ACK-RECONSUME-SAME-TAG-IN-FLIGHT
    Example("TestReconsumeSameTagInFlight", "old-tags-refused-406",
            with_(G["TestReconsumeSameTagInFlight"], ack_after_reconsume=channel_406(), reconsume_channel=None, reconsumed=[],
                  returned_after_close=again(*msgs(10)))),
    # rabbitmq-server#5927 on a classic queue: no profile entry covers it there
    Example("TestReconsumeSameTagInFlight", "channel-crash-541",
            with_(G["TestReconsumeSameTagInFlight"], ack_after_reconsume=connection_closed(541, "INTERNAL_ERROR"), reconsume_channel=None,
                  reconsumed=[], returned_after_close=again(*msgs(10)))),
    Example("TestReconsumeSameTagInFlight", "crash-on-the-re-consume",
            with_(G["TestReconsumeSameTagInFlight"], reconsume_answer=connection_closed(541, "INTERNAL_ERROR"),
                  ack_after_reconsume=None, reconsume_channel=None, reconsumed=[], returned_after_close=again(*msgs(10)))),
    Example("TestReconsumeSameTagInFlight", "same-tag-refused-530",
            with_(G["TestReconsumeSameTagInFlight"], reconsume_answer=connection_closed(530, "NOT_ALLOWED - attempt to reuse consumer tag"),
                  ack_after_reconsume=None, reconsume_channel=None, reconsumed=[], returned_after_close=again(*msgs(10)))),
    Example("TestReconsumeSameTagInFlight", "crash-while-taking-the-rest",
            with_(G["TestReconsumeSameTagInFlight"], reconsume_channel=connection_closed(541, "INTERNAL_ERROR"), reconsumed=first("m6", start=6),
                  returned_after_close=again("m7", "m8", "m9", "m10"))),
    # rabbitmq-server#9158: ready messages never delivered to the new consumer
    Example("TestReconsumeSameTagInFlight", "ready-messages-withheld",
            with_(G["TestReconsumeSameTagInFlight"], reconsumed=first("m6", "m7", start=6), returned_after_close=again("m8", "m9", "m10"))),
    Example("TestReconsumeSameTagInFlight", "cancel-requeued-old-ones-come-again",
            with_(G["TestReconsumeSameTagInFlight"], reconsumed=[*again(*msgs(5), start=6), *first("m6", "m7", "m8", "m9", "m10", start=11)])),
    Example("TestReconsumeSameTagInFlight", "new-consumer-reuses-old-delivery-tags",
            with_(G["TestReconsumeSameTagInFlight"], reconsumed=first("m6", "m7", "m8", "m9", "m10", start=1))),
    Example("TestReconsumeSameTagInFlight", "ack-silently-ignored-old-ones-return",
            with_(G["TestReconsumeSameTagInFlight"], returned_after_close=again(*msgs(5)))),
    # ACK-RECOVER-REDELIVERS
    Example("TestAckMultipleZeroNothingOutstanding", "tag-0-unknown-406",
            with_(G["TestAckMultipleZeroNothingOutstanding"], channel=channel_406("PRECONDITION_FAILED - unknown delivery tag 0")),
            shows="channel closed with 406"),
    Example("TestAckMultipleZeroNothingOutstanding", "nothing-delivered-after",
            with_(G["TestAckMultipleZeroNothingOutstanding"], after=[]), shows="missing [m1]"),
    Example("TestRecoverRedelivers", "get-delivery-left-out",
            {"published": msgs(4), "held": first("m1", "m2", "m3", "m4"), "acked": "m3", "returned": again("m2", "m4", start=5)},
            shows="missing [m1]"),
    Example("TestRecoverNoRequeue", "requeued-to-the-other-consumer",
            with_(G["TestRecoverNoRequeue"], again=again("m1", start=4), elsewhere=again("m3")), shows="m3"),
    Example("TestRecoverNoRequeue", "connection-541",
            with_(G["TestRecoverNoRequeue"], answer=connection_closed(541, "INTERNAL_ERROR - Unexpected error, please report")),
            shows="connection closed with 541"),
    Example("TestRecoverNoRequeue", "acked-resent",
            with_(G["TestRecoverNoRequeue"], again=again("m1", "m2", "m3", start=4)), shows="unexpected [m2]"),
    Example("TestRecoverNoRequeue", "not-flagged",
            with_(G["TestRecoverNoRequeue"], again=first("m1", "m3", start=4)), shows="wrong flag"),
    Example("TestRecoverNoRequeue", "nothing-redelivered",
            with_(G["TestRecoverNoRequeue"], again=[]), shows="missing [m1, m3]"),
    Example("TestRecoverNoRequeue", "channel-closed-after",
            with_(G["TestRecoverNoRequeue"], open=soft(406, "PRECONDITION_FAILED")), shows="channel closed with 406"),
    Example("TestRecoverRedelivers", "recover-resends-acked",
            with_(G["TestRecoverRedelivers"], returned=again("m1", "m2", "m3", start=4))),
    Example("TestRecoverRedelivers", "recover-loses-m3",
            with_(G["TestRecoverRedelivers"], returned=again("m1", start=4))),
    Example("TestRecoverRedelivers", "recover-resends-nothing",
            with_(G["TestRecoverRedelivers"], returned=[])),
    Example("TestRecoverRedelivers", "recover-redelivered-false",
            with_(G["TestRecoverRedelivers"], returned=first("m1", "m3", start=4))),
    Example("TestRecoverRedelivers", "recover-flag-false-on-one",
            with_(G["TestRecoverRedelivers"], returned=[d("m1", 4, True), d("m3", 5, False)])),
    Example("TestRecoverRedelivers", "recover-duplicates-m1",
            with_(G["TestRecoverRedelivers"], returned=again("m1", "m3", "m1", start=4))),
    # ACK-CLIENT-CUMULATIVE
    Example("TestClientAcknowledgeCumulative", "client-acks-only-the-target",
            with_(G["TestClientAcknowledgeCumulative"], returned=again("m1", "m2", "m4", "m5"))),
    Example("TestClientAcknowledgeCumulative", "client-acks-all-held",
            with_(G["TestClientAcknowledgeCumulative"], returned=[])),
    Example("TestClientAcknowledgeCumulative", "client-acks-nothing",
            with_(G["TestClientAcknowledgeCumulative"], returned=again(*msgs(5)))),
    Example("TestClientAcknowledgeCumulative", "acknowledged-target-comes-back",
            with_(G["TestClientAcknowledgeCumulative"], returned=again("m3", "m4", "m5"))),
    Example("TestClientAcknowledgeCumulative", "unacked-m5-lost",
            with_(G["TestClientAcknowledgeCumulative"], returned=again("m4"))),
    Example("TestClientAcknowledgeCumulative", "returned-redelivered-false",
            with_(G["TestClientAcknowledgeCumulative"], returned=[d("m4", 1, False), d("m5", 2, True)])),
    # ACK-CLIENT-INDIVIDUAL
    Example("TestClientAcknowledgeIndividual", "individual-acks-cumulatively",
            with_(G["TestClientAcknowledgeIndividual"], returned=again("m4", "m5"))),
    Example("TestClientAcknowledgeIndividual", "individual-acks-all-held",
            with_(G["TestClientAcknowledgeIndividual"], returned=[])),
    Example("TestClientAcknowledgeIndividual", "individual-acks-nothing",
            with_(G["TestClientAcknowledgeIndividual"], returned=again(*msgs(5)))),
    Example("TestClientAcknowledgeIndividual", "unacked-m1-lost",
            with_(G["TestClientAcknowledgeIndividual"], returned=again("m2", "m4", "m5"))),
    Example("TestClientAcknowledgeIndividual", "m4-returned-twice",
            with_(G["TestClientAcknowledgeIndividual"], returned=again("m1", "m2", "m4", "m4", "m5"))),
    Example("TestClientAcknowledgeIndividual", "returned-redelivered-false",
            with_(G["TestClientAcknowledgeIndividual"], returned=first("m1", "m2", "m4", "m5"))),
    # ACK-AUTO-REMOVED-ON-DELIVERY
    Example("TestAutoAckRemovedOnDelivery", "no-ack-messages-come-back",
            with_(G["TestAutoAckRemovedOnDelivery"], returned=again(*msgs(3)))),
    Example("TestAutoAckRemovedOnDelivery", "last-in-flight-no-ack-message-comes-back",
            with_(G["TestAutoAckRemovedOnDelivery"], returned=again("m3"))),
    Example("TestAutoAckRemovedOnDelivery", "no-ack-message-comes-back-unflagged",
            with_(G["TestAutoAckRemovedOnDelivery"], returned=first("m1"))),
    Example("TestAutoAckRemovedOnDelivery", "no-ack-consumer-receives-two-of-three",
            with_(G["TestAutoAckRemovedOnDelivery"], received=first("m1", "m2"))),
    Example(
        "TestAutoAckRemovedOnDelivery",
        "no-ack-message-delivered-twice-to-same-consumer",
        # m1 is delivered a second time to the no-ack consumer (and m3 never is): the count of
        # deliveries still equals the count published and nothing is left for the drain.
        with_(G["TestAutoAckRemovedOnDelivery"], received=[d("m1", 1), d("m2", 2), d("m1", 3, True)]),
    ),
    # ACK-FIRST-NOT-REDELIVERED
    Example("TestFirstDeliveryNotRedelivered", "deliver-flag-true-on-first-delivery",
            with_(G["TestFirstDeliveryNotRedelivered"], consumed=[d("m2", 1), d("m3", 2, True), d("m4", 3)])),
    Example("TestFirstDeliveryNotRedelivered", "deliver-flag-true-on-every-first-delivery",
            with_(G["TestFirstDeliveryNotRedelivered"], consumed=again("m2", "m3", "m4"))),
    Example("TestFirstDeliveryNotRedelivered", "get-ok-flag-true-on-first-delivery",
            with_(G["TestFirstDeliveryNotRedelivered"], fetched=again("m1"))),
    Example("TestFirstDeliveryNotRedelivered", "get-empty-with-messages-ready",
            with_(G["TestFirstDeliveryNotRedelivered"], fetched=[])),
    # ACK-REDELIVER-ON-CONNECTION-LOSS
    Example("TestRedeliverOnConnectionLoss", "redelivered-false-on-one",
            with_(G["TestRedeliverOnConnectionLoss"], returned=[d("m1", 1, True), d("m2", 2, False), d("m3", 3, True)])),
    Example("TestRedeliverOnConnectionLoss", "redelivered-false-on-all",
            with_(G["TestRedeliverOnConnectionLoss"], returned=first(*msgs(3)))),
    Example("TestRedeliverOnConnectionLoss", "unacked-m2-lost",
            with_(G["TestRedeliverOnConnectionLoss"], returned=again("m1", "m3"))),
    Example("TestRedeliverOnConnectionLoss", "nothing-comes-back",
            with_(G["TestRedeliverOnConnectionLoss"], returned=[])),
    Example("TestRedeliverOnConnectionLoss", "m1-returned-twice",
            with_(G["TestRedeliverOnConnectionLoss"], returned=again("m1", "m2", "m3", "m1"))),
    # ACK-REDELIVER-ON-CHANNEL-CLOSE
    Example("TestRedeliverOnChannelClose", "redelivered-false-on-one",
            with_(G["TestRedeliverOnChannelClose"], returned=[d("m1", 1, False), d("m2", 2, True), d("m3", 3, True)])),
    Example("TestRedeliverOnChannelClose", "redelivered-false-on-all",
            with_(G["TestRedeliverOnChannelClose"], returned=first(*msgs(3)))),
    Example("TestRedeliverOnChannelClose", "unacked-m3-lost",
            with_(G["TestRedeliverOnChannelClose"], returned=again("m1", "m2"))),
    Example("TestRedeliverOnChannelClose", "nothing-comes-back",
            with_(G["TestRedeliverOnChannelClose"], returned=[])),
    Example("TestRedeliverOnChannelClose", "m2-returned-twice",
            with_(G["TestRedeliverOnChannelClose"], returned=again("m1", "m2", "m2", "m3"))),
    # ACK-ACKED-NEVER-REDELIVERED
    Example("TestAckedNeverRedelivered", "acked-m2-comes-back",
            with_(G["TestAckedNeverRedelivered"], returned=again("m1", "m2", "m3"))),
    Example("TestAckedNeverRedelivered", "every-acked-comes-back",
            with_(G["TestAckedNeverRedelivered"], returned=again(*msgs(4)))),
    Example("TestAckedNeverRedelivered", "acked-m4-comes-back-unflagged",
            with_(G["TestAckedNeverRedelivered"], returned=[*again("m1", "m3"), d("m4", 3, False)])),
    Example("TestAckedNeverRedelivered", "unacked-m3-lost",
            with_(G["TestAckedNeverRedelivered"], returned=again("m1"))),
    Example("TestAckedNeverRedelivered", "m1-returned-twice",
            with_(G["TestAckedNeverRedelivered"], returned=again("m1", "m1", "m3"))),
    # ACK-REQUEUE-POSITION (orders from the profile entries, both variants, both queue types)
    *requeue_violations(),
]


# -- ACK-REQUEUE-POSITION, nack variant: the orders written out per version -------------------------
# A holds m1, B holds m2, m3 and m4 wait; B nacks first, then A.

def requeue_nack(order: list[str]) -> dict[str, Any]:
    return {"variant": "nack", "published": msgs(4), "returned": ["m2", "m1"], "order": order}


PUBLICATION, HEAD, TAIL = ["m1", "m2", "m3", "m4"], ["m2", "m1", "m3", "m4"], ["m3", "m4", "m2", "m1"]

REQUEUE_NACK_GOOD: list[Example] = [
    ok("TestRequeuePosition", "nack-publication-order", requeue_nack(PUBLICATION), "classic", RABBIT),
    dev("TestRequeuePosition", "nack-tail-in-return-order", requeue_nack(TAIL), "quorum", RABBIT),
    # the reference passes whatever the profile documents for the queue type
    ok("TestRequeuePosition", "nack-publication-order", requeue_nack(PUBLICATION), "quorum", RABBIT),
    ok("TestRequeuePosition", "nack-publication-order", requeue_nack(PUBLICATION), "classic", P43),
    # 4.x: the default delivery limit of 20 puts a nacked message near the head.
    dev("TestRequeuePosition", "nack-head-in-return-order", requeue_nack(HEAD), "quorum", P43),
]

REQUEUE_NACK_VIOLATIONS: list[Example] = [
    bad("TestRequeuePosition", "nack-tail-instead-of-publication-order", requeue_nack(TAIL), "classic", RABBIT, shows="[m3, m4, m2, m1]"),
    bad("TestRequeuePosition", "nack-4x-head-on-3.10-quorum", requeue_nack(HEAD), "quorum", RABBIT, shows="[m2, m1, m3, m4]"),
    bad("TestRequeuePosition", "nack-3.10-tail-on-4.3-quorum", requeue_nack(TAIL), "quorum", P43, shows="[m3, m4, m2, m1]"),
    bad("TestRequeuePosition", "nack-m1-lost", requeue_nack(["m2", "m3", "m4"]), "classic", RABBIT, shows="[m2, m3, m4]"),
]


ACK_GOOD: list[Example] = [*good_examples(), *REQUEUE_NACK_GOOD]
ACK_VIOLATIONS: list[Example] = [*VIOLATIONS, *REQUEUE_NACK_VIOLATIONS]


# -- the tests -----------------------------------------------------------------------------------

test_compliant_observation_passes, test_violation_fails = verdict_tests(ACK_GOOD, ACK_VIOLATIONS)


def test_reconsume_channel_crash_is_a_deviation_on_quorum_before_3_10_9_only() -> None:
    crash = with_(G["TestReconsumeSameTagInFlight"], ack_after_reconsume=connection_closed(541, "INTERNAL_ERROR"),
                  reconsume_channel=None, reconsumed=[], returned_after_close=again(*msgs(10)))
    case = CASES["TestReconsumeSameTagInFlight"]()
    on_consume = with_(crash, reconsume_answer=connection_closed(541, "INTERNAL_ERROR"), ack_after_reconsume=None)
    for qt, obs in (("quorum", crash), ("quorum+delivery-limit", crash), ("quorum", on_consume)):
        v = case.verdict(obs, RABBIT, qt)
        out = apply_profile(v, "ACK-RECONSUME-SAME-TAG-IN-FLIGHT", qt, RABBIT)
        assert (v.key, out.outcome) == ("connection-541", Outcome.DEVIATION)
        assert "5927" in out.citation
    v = case.verdict(crash, P43, "quorum")
    assert apply_profile(v, "ACK-RECONSUME-SAME-TAG-IN-FLIGHT", "quorum", P43).outcome is Outcome.FAIL


def test_requeue_position_cites_the_reference_or_the_profile_entry() -> None:
    from conformance.catalogue.requirements import requirement

    for ex in requeue_good():
        v = ex.judge()
        entry = RABBIT.entry(f"requeue.position.{ex.obs['variant']}", ex.queue_type)
        assert entry is not None
        if v.outcome is Outcome.DEVIATION:
            assert v.citation == entry.source and v.reason.startswith(entry.reason)
        else:
            assert v.citation == requirement("ACK-REQUEUE-POSITION").reference_for(f"requeue.position.{ex.obs['variant']}").source
        assert v.spec == "n/a", "the spec leaves the requeue position to the broker"


@pytest.mark.parametrize("variant", REQUEUE_VARIANTS)
@pytest.mark.parametrize("queue_type", [None, *BASELINE.queue_types])
def test_requeue_position_without_profile_entry_is_judged_by_the_reference(variant: str, queue_type: str | None) -> None:
    assert not BASELINE.entries
    case = CASES["TestRequeuePosition"]()
    for policy, order in POLICY_ORDER.items():
        v = case.verdict(requeue_obs(variant, order), BASELINE, queue_type)
        assert v.outcome is (Outcome.PASS if policy == REFERENCE_POLICY else Outcome.FAIL), policy


# -- apply_profile -------------------------------------------------------------------------------

DEVIATION_SOURCE = "https://example.invalid/docs/consumers#cancel (cancel returns held deliveries)"
DEVIATION_REASON = "this broker requeues a cancelled consumer's unacknowledged deliveries"


def deviating_profile(queue_types: tuple[str, ...] | None = ("quorum",)) -> Profile:
    raw: dict[str, Any] = {
        "requirement": "ACK-CANCEL-KEEPS-UNACKED",
        "observed": "cancel-requeued",
        "reason": DEVIATION_REASON,
        "source": DEVIATION_SOURCE,
    }
    if queue_types is not None:
        raw["queue_types"] = list(queue_types)
    return parse_profile(
        {
            "id": "test-deviations",
            "match": {"product": "TestBroker", "versions": "*", "protocols": ["amqp-0-9-1"]},
            "queue_types": {
                "classic": {"declare": {"durable": True}, "source": "test"},
                "quorum": {"declare": {"durable": True}, "source": "test"},
            },
            "deviations": [raw],
        },
        "test-profile",
    )


def cancel_verdict(obs: dict[str, Any], profile: Profile, queue_type: str) -> Verdict:
    return CASES["TestCancelKeepsUnacked"]().verdict(obs, profile, queue_type)


CANCEL_REQUEUES = with_(G["TestCancelKeepsUnacked"], requeued_by_cancel=again("m1", "m2"),
                        ack_after_cancel=channel_406(), returned_after_close=[])


def test_parse_profile_reads_the_deviation() -> None:
    p = deviating_profile()
    assert len(p.deviations) == 1
    doc = p.deviations[0]
    assert (doc.requirement, doc.queue_types, doc.observed) == ("ACK-CANCEL-KEEPS-UNACKED", ("quorum",), "cancel-requeued")
    assert (doc.reason, doc.source) == (DEVIATION_REASON, DEVIATION_SOURCE)


def test_fail_matching_documented_observation_becomes_deviation() -> None:
    p = deviating_profile()
    v = cancel_verdict(CANCEL_REQUEUES, p, "quorum")
    assert (v.outcome, v.key) == (Outcome.FAIL, "cancel-requeued")
    out = apply_profile(v, "ACK-CANCEL-KEEPS-UNACKED", "quorum", p)
    assert out.outcome is Outcome.DEVIATION
    assert out.citation == DEVIATION_SOURCE
    assert out.reason == DEVIATION_REASON
    assert out.vendor == "pass"
    assert out.spec == "fail", "a documented deviation is still a spec failure"
    assert (out.expected, out.observed, out.key) == (v.expected, v.observed, v.key)


def test_deviation_without_queue_types_applies_to_every_queue_type() -> None:
    p = deviating_profile(queue_types=None)
    for qt in ("classic", "quorum", None):
        v = cancel_verdict(CANCEL_REQUEUES, p, qt or "classic")
        assert apply_profile(v, "ACK-CANCEL-KEEPS-UNACKED", qt, p).outcome is Outcome.DEVIATION


def test_fail_with_a_different_key_stays_fail() -> None:
    p = deviating_profile()
    # Nothing requeued by the cancel, but the ack afterwards is refused: key "channel-406".
    obs = with_(G["TestCancelKeepsUnacked"], ack_after_cancel=channel_406(), returned_after_close=again("m1", "m2"))
    v = cancel_verdict(obs, p, "quorum")
    assert v.outcome is Outcome.FAIL and v.key == "channel-406"
    out = apply_profile(v, "ACK-CANCEL-KEEPS-UNACKED", "quorum", p)
    assert out.outcome is Outcome.FAIL
    assert out.citation == "" and out.reason == ""


def test_fail_without_key_stays_fail() -> None:
    p = deviating_profile()
    v = holds(False, expected="x", observed="y")
    assert v.key is None
    assert apply_profile(v, "ACK-CANCEL-KEEPS-UNACKED", "quorum", p).outcome is Outcome.FAIL


def test_documented_key_on_another_queue_type_or_requirement_stays_fail() -> None:
    p = deviating_profile(("quorum",))
    v = cancel_verdict(CANCEL_REQUEUES, p, "classic")
    assert apply_profile(v, "ACK-CANCEL-KEEPS-UNACKED", "classic", p).outcome is Outcome.FAIL
    other = holds(False, expected="x", observed="y", key="cancel-requeued")
    assert apply_profile(other, "ACK-RECOVER-REDELIVERS", "quorum", p).outcome is Outcome.FAIL


def test_pass_stays_pass() -> None:
    p = deviating_profile()
    v = cancel_verdict(G["TestCancelKeepsUnacked"], p, "quorum")
    assert v.outcome is Outcome.PASS
    out = apply_profile(v, "ACK-CANCEL-KEEPS-UNACKED", "quorum", p)
    assert out == v
    # Even a pass whose key would match the documented one is left alone.
    keyed = holds(True, expected="x", observed="x", key="cancel-requeued")
    assert apply_profile(keyed, "ACK-CANCEL-KEEPS-UNACKED", "quorum", p) == keyed


def test_requeue_order_deviation_keyed_by_observed_order() -> None:
    """The equality check's key is the observed value, so a profile can document an exact order."""
    tail = POLICY_ORDER["tail-in-return-order"]
    p = parse_profile(
        {
            "id": "test-requeue",
            "match": {"product": "TestBroker", "protocols": ["amqp-0-9-1"]},
            "entries": {"requeue.position.consumer-loss": {"value": "publication-order", "source": "vendor docs"}},
            "deviations": [
                {
                    "requirement": "ACK-REQUEUE-POSITION",
                    "queue_types": ["classic"],
                    "observed": "[m3, m4, m2, m1]",
                    "reason": "requeued after a consumer loss to the tail, despite the docs",
                    "source": "vendor issue tracker",
                }
            ],
        },
        "test-requeue-profile",
    )
    case = CASES["TestRequeuePosition"]()
    v = case.verdict(requeue_obs("consumer-loss", tail), p, "classic")
    assert v.outcome is Outcome.FAIL
    out = apply_profile(v, case.requirement, "classic", p)
    assert out.outcome is Outcome.DEVIATION and out.citation == "vendor issue tracker"
    head = case.verdict(requeue_obs("consumer-loss", POLICY_ORDER["head-in-return-order"]), p, "classic")
    assert apply_profile(head, case.requirement, "classic", p).outcome is Outcome.FAIL


def test_recover_without_requeue_refused_with_540_is_rabbitmqs_documented_deviation_only() -> None:
    case = CASES["TestRecoverNoRequeue"]()
    refused = with_(G["TestRecoverNoRequeue"], answer=connection_closed(540, "NOT_IMPLEMENTED - requeue=false"))
    for qt in RABBIT.queue_types:
        v = apply_profile(case.verdict(refused, RABBIT, qt), case.requirement, qt, RABBIT)
        assert v.outcome is Outcome.DEVIATION and "rabbit_channel.erl" in v.citation
    crashed = with_(G["TestRecoverNoRequeue"], answer=connection_closed(541, "INTERNAL_ERROR"))
    assert apply_profile(case.verdict(crashed, RABBIT, "classic"), case.requirement, "classic", RABBIT).outcome is Outcome.FAIL
    assert apply_profile(case.verdict(refused, BASELINE, "classic"), case.requirement, "classic", BASELINE).outcome is Outcome.FAIL
