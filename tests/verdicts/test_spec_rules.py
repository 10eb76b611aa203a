"""Verdicts of the cases that check single spec rules (reply codes, delivery tags, basic.get-empty, ...)
on synthetic observations: a compliant observation passes, each violation fails and says so.

Same contract as tests/verdicts/examples.py states; tests/verdicts/test_coverage.py counts these examples too."""

from __future__ import annotations

import pytest

from tests.verdicts.examples import (
    BASELINE,
    OPEN,
    RABBIT,
    Example,
    assert_fails,
    assert_passes,
    channel_406,
    d,
    first,
    soft,
    with_,
)

PROFILES = (RABBIT, BASELINE)

RESOURCE_LOCKED = soft(405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'q' in vhost '/'")
ACCESS_REFUSED = soft(403, "ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")

GOOD_OBS = {
    "TestGetEmpty": {"empty_answer": OPEN, "first": None, "published": ["m1"], "after_publish": d("m1", 1)},
    "TestDeliveryTagNonZero": {"published": ["m1", "m2", "m3"],
                               "tags": [{"via": "basic.get-ok", "id": "m1", "tag": 1},
                                        {"via": "basic.deliver", "id": "m2", "tag": 2},
                                        {"via": "basic.deliver", "id": "m3", "tag": 3}]},
    "TestConsumeExclusiveRefused": {"answer": ACCESS_REFUSED, "published": ["m1"], "owner_got": "m1"},
    "TestSixteenConsumers": {"accepted": 16, "refusal": None, "reported": 16},
    "TestExclusiveQueueLocked": {"declared": OPEN, "passive": RESOURCE_LOCKED, "consume": RESOURCE_LOCKED, "owner_use": OPEN},
    "TestPriorityTwoLevels": {"published": [{"id": "low1", "priority": 0}, {"id": "low2", "priority": 0}, {"id": "low3", "priority": 0}, {"id": "high", "priority": 9}],
                              "delivered": first("high", "low1", "low2", "low3")},
    "TestUnknownExchange": {"exchange": "conformance.missing.x", "answer": soft(404, "NOT_FOUND - no exchange 'conformance.missing.x' in vhost '/'")},
    "TestPrefetchSizeSingleMessage": {"qos": OPEN, "published": ["m1"], "delivered": ["m1"]},
    "TestOrderPreserved": {"published": [{"id": f"m{i}", "persistent": i % 2 == 0} for i in range(1, 9)],
                           "delivered": first(*[f"m{i}" for i in range(1, 9)])},
}
G = GOOD_OBS

SPEC_GOOD: list[Example] = [
    Example(case, f"{p.id}-{qt}", obs, queue_type=qt, profile=p)
    for case, obs in GOOD_OBS.items() for p in PROFILES for qt in (None, *p.queue_types)
] + [
    # ACK-SIXTEEN-CONSUMERS over AMQP 1.0 (qpidd 1.39.0: sixteen receiving links of one session, QMF consumerCount 16)
    Example("TestSixteenConsumers", "amqp10-sixteen-links", {"asked": "attach of a receiving link", "accepted": 16, "refusal": None, "reported": 16}, queue_type=None),
]

#: (example, fragment the observed text must contain)
SPEC_VIOLATION_TABLE: list[tuple[Example, str]] = [
    # ACK-GET-EMPTY
    (Example("TestGetEmpty", "get-on-empty-queue-is-an-error", with_(G["TestGetEmpty"], empty_answer=channel_406("PRECONDITION_FAILED - empty"), after_publish=None)),
     "closed with 406"),
    (Example("TestGetEmpty", "get-empty-although-a-message-is-ready", with_(G["TestGetEmpty"], after_publish=None)), "basic.get-empty"),
    (Example("TestGetEmpty", "get-ok-on-an-empty-queue", with_(G["TestGetEmpty"], first=d("ghost", 1))), "basic.get-ok"),
    (Example("TestGetEmpty", "get-ok-with-another-message", with_(G["TestGetEmpty"], after_publish=d("m9", 1))), "get-ok with m9"),
    # ACK-DELIVERY-TAG-NON-ZERO
    (Example("TestDeliveryTagNonZero", "get-ok-tag-zero",
             with_(G["TestDeliveryTagNonZero"], tags=[{**G["TestDeliveryTagNonZero"]["tags"][0], "tag": 0}, *G["TestDeliveryTagNonZero"]["tags"][1:]])),
     "tag 0"),
    (Example("TestDeliveryTagNonZero", "deliver-tags-from-zero",
             with_(G["TestDeliveryTagNonZero"], tags=[{"via": "basic.deliver", "id": f"m{i + 1}", "tag": i} for i in range(3)])),
     "basic.deliver m1 tag 0"),
    (Example("TestDeliveryTagNonZero", "a-delivery-missing", with_(G["TestDeliveryTagNonZero"], tags=G["TestDeliveryTagNonZero"]["tags"][:2])),
     "m2 tag 2"),
    # ACK-CONSUME-EXCLUSIVE-REFUSED
    (Example("TestConsumeExclusiveRefused", "exclusive-consume-granted", with_(G["TestConsumeExclusiveRefused"], answer=OPEN)), "no channel exception"),
    (Example("TestConsumeExclusiveRefused", "refused-with-resource-locked", with_(G["TestConsumeExclusiveRefused"], answer=RESOURCE_LOCKED)), "405"),
    (Example("TestConsumeExclusiveRefused", "refused-by-connection-close",
             with_(G["TestConsumeExclusiveRefused"], answer={"closed": True, "code": 403, "text": "ACCESS_REFUSED", "hard": True})), "connection closed"),
    (Example("TestConsumeExclusiveRefused", "existing-consumer-lost-the-queue", with_(G["TestConsumeExclusiveRefused"], owner_got=None)), "got None"),
    # ACK-SIXTEEN-CONSUMERS
    (Example("TestSixteenConsumers", "eighth-refused",
             with_(G["TestSixteenConsumers"], accepted=7, refusal=soft(406, "PRECONDITION_FAILED - too many consumers"), reported=7)), "7 basic.consume accepted"),
    (Example("TestSixteenConsumers", "queue-reports-fewer", with_(G["TestSixteenConsumers"], reported=1)), "reports 1"),
    # over AMQP 1.0: the links attached, the admin backend's count (qpidd's QMF consumerCount)
    (Example("TestSixteenConsumers", "amqp10-ninth-link-refused",
             {"asked": "attach of a receiving link", "accepted": 8, "refusal": soft(506, "broker refused a receiving link: amqp:resource-limit-exceeded"),
              "reported": 8}), "8 attach of a receiving link accepted"),
    (Example("TestSixteenConsumers", "amqp10-queue-counts-one-session-once",
             {"asked": "attach of a receiving link", "accepted": 16, "refusal": None, "reported": 1}), "reports 1"),
    # PERSIST-EXCLUSIVE-QUEUE-LOCKED
    (Example("TestExclusiveQueueLocked", "passive-declare-from-another-connection-allowed",
             with_(G["TestExclusiveQueueLocked"], passive=OPEN)), "no channel exception"),
    (Example("TestExclusiveQueueLocked", "consume-from-another-connection-allowed",
             with_(G["TestExclusiveQueueLocked"], consume=OPEN)), "no channel exception"),
    (Example("TestExclusiveQueueLocked", "locked-with-the-wrong-code",
             with_(G["TestExclusiveQueueLocked"], consume=ACCESS_REFUSED)), "403"),
    (Example("TestExclusiveQueueLocked", "owner-locked-out-too",
             with_(G["TestExclusiveQueueLocked"], owner_use=RESOURCE_LOCKED)), "closed with 405"),
    (Example("TestExclusiveQueueLocked", "exclusive-declare-refused",
             with_(G["TestExclusiveQueueLocked"], declared=soft(406, "PRECONDITION_FAILED - exclusive"), passive=None, consume=None, owner_use=None)), "406"),
    # PUBLISH-PRIORITY-TWO-LEVELS
    (Example("TestPriorityTwoLevels", "fifo-whatever-the-priority", with_(G["TestPriorityTwoLevels"], delivered=first("low1", "low2", "low3", "high"))),
     "['low1', 'low2', 'low3', 'high']"),
    (Example("TestPriorityTwoLevels", "high-priority-lost", with_(G["TestPriorityTwoLevels"], delivered=first("low1", "low2", "low3"))), "['low1', 'low2', 'low3']"),
    # PUBLISH-UNKNOWN-EXCHANGE-404
    (Example("TestUnknownExchange", "publish-to-missing-exchange-dropped-silently", with_(G["TestUnknownExchange"], answer=OPEN)), "no channel exception"),
    (Example("TestUnknownExchange", "missing-exchange-closes-the-connection",
             with_(G["TestUnknownExchange"], answer={"closed": True, "code": 404, "text": "NOT_FOUND", "hard": True})), "connection closed with 404"),
    (Example("TestUnknownExchange", "wrong-code", with_(G["TestUnknownExchange"], answer=channel_406())), "closed with 406"),
    # PREFETCH-SIZE-SINGLE-MESSAGE
    (Example("TestPrefetchSizeSingleMessage", "prefetch-size-refused",
             with_(G["TestPrefetchSizeSingleMessage"], qos={"closed": True, "code": 540, "text": "NOT_IMPLEMENTED - prefetch_size!=0 (1)", "hard": True}, delivered=[])),
     "connection closed with 540"),
    (Example("TestPrefetchSizeSingleMessage", "single-message-held-back", with_(G["TestPrefetchSizeSingleMessage"], delivered=[])), "delivered []"),
    # PUBLISH-ORDER-PRESERVED
    (Example("TestOrderPreserved", "transient-overtakes-persistent",
             with_(G["TestOrderPreserved"], delivered=first("m1", "m3", "m2", "m4", "m5", "m6", "m7", "m8"))), "m1', 'm3', 'm2"),
    (Example("TestOrderPreserved", "persistent-last",
             with_(G["TestOrderPreserved"], delivered=first("m1", "m3", "m5", "m7", "m2", "m4", "m6", "m8"))), "'m7', 'm2'"),
    (Example("TestOrderPreserved", "first-delivery-marked-redelivered",
             with_(G["TestOrderPreserved"], delivered=[*first(*[f"m{i}" for i in range(1, 8)]), d("m8", 8, redelivered=True)])), "wrong flag on m8(redelivered=true)"),
]
SPEC_VIOLATIONS = [e for e, _ in SPEC_VIOLATION_TABLE]


@pytest.mark.parametrize("ex", [e.param() for e in SPEC_GOOD])
def test_compliant_observation_passes(ex: Example) -> None:
    assert_passes(ex)


@pytest.mark.parametrize("ex,shows", [pytest.param(e, s, id=e.id) for e, s in SPEC_VIOLATION_TABLE])
def test_violation_fails(ex: Example, shows: str) -> None:
    assert_fails(ex, shows)


def test_rabbitmq_s_refusal_of_prefetch_size_is_spec_fail_beside_a_documented_deviation() -> None:
    from conformance.kit.verdicts import Outcome, apply_profile

    ex = next(e for e, _ in SPEC_VIOLATION_TABLE if e.name == "prefetch-size-refused")
    v = apply_profile(ex.judge(), "PREFETCH-SIZE-SINGLE-MESSAGE", None, RABBIT)
    assert v.outcome is Outcome.DEVIATION and v.spec == "fail" and "rabbit_channel.erl" in v.citation
    assert apply_profile(ex.judge(), "PREFETCH-SIZE-SINGLE-MESSAGE", None, BASELINE).outcome is Outcome.FAIL


def test_rabbitmq_3_ignoring_priorities_is_spec_fail_beside_a_documented_deviation() -> None:
    from conformance.kit.verdicts import Outcome, apply_profile

    ex = next(e for e, _ in SPEC_VIOLATION_TABLE if e.name == "fifo-whatever-the-priority")
    for qt in ("classic", "quorum"):
        v = apply_profile(ex.judge(), "PUBLISH-PRIORITY-TWO-LEVELS", qt, RABBIT)
        assert v.outcome is Outcome.DEVIATION and v.spec == "fail" and "priority" in v.citation
    lost = next(e for e, _ in SPEC_VIOLATION_TABLE if e.name == "high-priority-lost")
    assert apply_profile(lost.judge(), "PUBLISH-PRIORITY-TWO-LEVELS", "classic", RABBIT).outcome is Outcome.FAIL
