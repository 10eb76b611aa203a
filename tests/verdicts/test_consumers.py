"""Verdicts of the consumer cases (conformance/cases/ack/test_consumers.py) and of queue expiry
(conformance/cases/persist/test_queue_expires.py) on synthetic observations: a compliant broker's
observation passes under RabbitMQ 3.10's profile and the spec-only baseline, each violation fails
saying what it saw; the LavinMQ 1.x profile turns #924's early deletion into a deviation."""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import select_profile
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import (
    BASELINE,
    OPEN,
    RABBIT,
    Example,
    again,
    bad,
    first,
    judged,
    msgs,
    ok,
    verdict_tests,
    with_,
)

LAVINMQ_1 = select_profile("LavinMQ", "1.3.1", "amqp-0-9-1")


def _acked(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{**d, "by": who} for (mid, who), d in zip(pairs, first(*(m for m, _ in pairs)))]


GOOD_OBS: dict[str, dict[str, Any]] = {
    # A held m1..m3, was reset; B took them over redelivered.
    "TestLossHandsOver": {
        "published": msgs(3), "held": first(*msgs(3)), "taken_over": again(*msgs(3)),
        "how": "connection reset", "sac": False,
    },
    # m1 and m2 requeued by the low-priority consumer; the high-priority one acked everything.
    "TestSacPriorityNothingWithheld": {
        "published": msgs(3), "requeued": [*first("m1"), *again("m1", start=2)],
        "acked": _acked(("m1", "high"), ("m2", "high"), ("m3", "high")), "window_s": 2.0, "left": [],
    },
    "TestConsumerTagsBrokerNamed": {
        "tags": ["amq.ctag-a", "amq.ctag-b", "amq.ctag-c"], "published": msgs(2),
        "last_got": [{**d, "consumer_tag": "amq.ctag-c"} for d in first("m1", "m2")],
    },
    "TestQueueExpiresAfterLastConsumer": {
        "published": msgs(3), "expires_ms": 600, "grace_s": 2.0,
        "after_cancel": {"exists": True, "ready": 2, "answer": OPEN}, "gone_after_s": 0.64,
    },
}
G = GOOD_OBS

SAC_TAKEOVER = {
    "published": [*msgs(3), "late1", "late2"], "held": first(*msgs(3), "late1", "late2"),
    "taken_over": again(*msgs(3), "late1", "late2"), "how": "connection reset", "sac": True,
}

CONSUMERS_GOOD: list[Example] = [
    *(ok(case, "compliant", obs, qt, profile)
      for case, obs in GOOD_OBS.items() for profile in (RABBIT, BASELINE) for qt in ("classic", "quorum")),
    ok("TestLossHandsOver", "sac-takeover", SAC_TAKEOVER, "classic+single-active-consumer", RABBIT),
    ok("TestLossHandsOver", "exclusive-channel-close", with_(G["TestLossHandsOver"], how="channel.close"), "classic+exclusive", RABBIT),
    # a broker with priorities for single active consumers: the low one keeps nothing, the high one takes all
    ok("TestSacPriorityNothingWithheld", "low-keeps-serving", with_(G["TestSacPriorityNothingWithheld"],
       acked=_acked(("m1", "low"), ("m2", "low"), ("m3", "low"))), "quorum", RABBIT),
]

CONSUMERS_VIOLATIONS: list[Example] = [
    # ACK-LOSS-HANDS-OVER
    bad("TestLossHandsOver", "waiting-consumer-never-takes-over", with_(SAC_TAKEOVER, taken_over=[]),
        "classic+single-active-consumer", shows="missing"),
    bad("TestLossHandsOver", "one-lost", with_(G["TestLossHandsOver"], taken_over=again("m1", "m2")), shows="missing [m3]"),
    bad("TestLossHandsOver", "one-twice", with_(G["TestLossHandsOver"], taken_over=again("m1", "m2", "m3", "m3")), shows="m3"),
    bad("TestLossHandsOver", "not-flagged", with_(G["TestLossHandsOver"], taken_over=first(*msgs(3))), shows="wrong flag"),
    # ACK-SAC-PRIORITY-NOTHING-WITHHELD (rabbitmq-server#14141: delivery halts)
    bad("TestSacPriorityNothingWithheld", "delivery-halts", with_(G["TestSacPriorityNothingWithheld"], acked=[], left=again(*msgs(3))),
        "quorum", shows="never delivered again: [m1, m2, m3]"),
    bad("TestSacPriorityNothingWithheld", "one-withheld", with_(G["TestSacPriorityNothingWithheld"],
        acked=_acked(("m1", "high"), ("m3", "high")), left=again("m2")), "quorum", shows="[m2]"),
    bad("TestSacPriorityNothingWithheld", "both-consumers-get-m1", with_(G["TestSacPriorityNothingWithheld"],
        acked=_acked(("m1", "low"), ("m1", "high"), ("m2", "high"), ("m3", "high"))), "quorum", shows="twice"),
    # ACK-CONSUMER-TAGS-BROKER-NAMED (QPID-8571)
    bad("TestConsumerTagsBrokerNamed", "tag-repeated", with_(G["TestConsumerTagsBrokerNamed"],
        tags=["amq.ctag-a", "amq.ctag-a", "amq.ctag-a"], published=[], last_got=[]), None, shows="repeated"),
    bad("TestConsumerTagsBrokerNamed", "empty-tag", with_(G["TestConsumerTagsBrokerNamed"],
        tags=["", "amq.ctag-b", "amq.ctag-c"], published=[], last_got=[]), None, shows="consume-ok tags"),
    bad("TestConsumerTagsBrokerNamed", "cancel-stopped-the-wrong-one", with_(G["TestConsumerTagsBrokerNamed"], last_got=[]),
        None, shows="missing [m1, m2]"),
    bad("TestConsumerTagsBrokerNamed", "deliveries-under-another-tag", with_(G["TestConsumerTagsBrokerNamed"],
        last_got=[{**d, "consumer_tag": "amq.ctag-a"} for d in first("m1", "m2")]), None, shows="amq.ctag-a"),
    # PERSIST-QUEUE-EXPIRES-AFTER-LAST-CONSUMER (cloudamqp/lavinmq#924 on a profile that does not document it)
    bad("TestQueueExpiresAfterLastConsumer", "deleted-at-cancel", with_(G["TestQueueExpiresAfterLastConsumer"],
        after_cancel={"exists": False, "ready": None, "answer": {"closed": True, "code": 404, "text": "NOT_FOUND", "hard": False}},
        gone_after_s=None), shows="404"),
    bad("TestQueueExpiresAfterLastConsumer", "messages-lost-at-cancel", with_(G["TestQueueExpiresAfterLastConsumer"],
        after_cancel={"exists": True, "ready": 0, "answer": OPEN}), shows="holds 0 ready"),
    bad("TestQueueExpiresAfterLastConsumer", "expired-early", with_(G["TestQueueExpiresAfterLastConsumer"], gone_after_s=0.2),
        shows="deleted 200 ms"),
    bad("TestQueueExpiresAfterLastConsumer", "never-expires", with_(G["TestQueueExpiresAfterLastConsumer"], gone_after_s=None),
        shows="still there"),
]

test_compliant_observation_passes, test_violation_fails = verdict_tests(CONSUMERS_GOOD, CONSUMERS_VIOLATIONS)


def test_queue_deleted_at_cancel_is_a_deviation_on_lavinmq_before_2_2_only() -> None:
    deleted = with_(G["TestQueueExpiresAfterLastConsumer"], gone_after_s=None,
                    after_cancel={"exists": False, "ready": None, "answer": {"closed": True, "code": 404, "text": "NOT_FOUND", "hard": False}})
    on_1 = judged("TestQueueExpiresAfterLastConsumer", deleted, LAVINMQ_1)
    assert on_1.outcome is Outcome.DEVIATION and "lavinmq#924" in on_1.citation
    assert judged("TestQueueExpiresAfterLastConsumer", deleted, RABBIT).outcome is Outcome.FAIL
    # the same bug seen a moment later: there at the passive declare, gone within milliseconds
    early = with_(G["TestQueueExpiresAfterLastConsumer"], gone_after_s=0.2)
    assert judged("TestQueueExpiresAfterLastConsumer", early, LAVINMQ_1).outcome is Outcome.DEVIATION
    assert judged("TestQueueExpiresAfterLastConsumer", early, RABBIT).outcome is Outcome.FAIL
    never = with_(G["TestQueueExpiresAfterLastConsumer"], gone_after_s=None)
    assert judged("TestQueueExpiresAfterLastConsumer", never, LAVINMQ_1).outcome is Outcome.FAIL
