"""Verdicts of the connection-cut cases (conformance/cases/ack/test_cuts.py: cuts at each frame of a
delivery and around basic.ack, a consumer leaving mid-body) and of the store-edge persistence cases
(conformance/cases/persist/test_store_edges.py), on synthetic observations held to the contract of
tests/verdicts/examples.py.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import select_profile
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import RABBIT, Example, again, bad, everywhere, first, judged, verdict_tests

UNREACHABLE = "ConnectionLost: connection lost: ConnectionRefusedError(111, 'Connection refused')"


def delivery(variant: str, returned: list[dict[str, Any]], intact: list[bool] | None = None, unreachable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "published": ["m1"], "hit": "conn#1 server frame #9 content-body on channel 1", "received": [],
            "returned": returned, "intact": intact if intact is not None else [True] * len(returned), "unreachable": unreachable}


def ack(variant: str, returned: list[dict[str, Any]], unreachable: str | None = None) -> dict[str, Any]:
    acked = ["m1", "m2"] if "multiple" in variant else ["m2"]
    return {"variant": variant, "published": ["m1", "m2", "m3"], "hit": "conn#1 client frame #12 basic.ack on channel 1",
            "held": first("m1", "m2", "m3"), "acked": acked, "returned": returned, "intact": [True] * len(returned), "unreachable": unreachable}


def mid_body(variant: str, returned: list[dict[str, Any]], error: str | None = None, unreachable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "published": ["m1", "m2"], "hit": "conn#1 server frame #9 content-body on channel 1",
            "answer": {"ok": error is None, "error": error}, "returned": returned, "intact": [True] * len(returned), "unreachable": unreachable}


BACK = [*again("m1"), *first("m2", start=2)]


# -- AMQP 1.0 (the proton adapter): the ack is the receiver's disposition; the consumer leaves by a
# closing detach or the session's end; redelivery marks are the header's (qpidd 1.39.0 counts returns)

def d10(mid: str, tag: int, *, fa: bool, count: int) -> dict[str, Any]:
    """One AMQP 1.0 delivery, shaped like conformance.kit.case.delivery_obs on the proton adapter."""
    return {"id": mid, "tag": tag, "redelivered": (not fa) or count > 0, "delivery_count": count, "first_acquirer": fa, "presettled": False}


def back10(*mids: str) -> list[dict[str, Any]]:
    """Returned to the next acquirer as qpidd 1.39.0 gives them: first-acquirer=false, delivery-count 1."""
    return [d10(m, i + 1, fa=False, count=1) for i, m in enumerate(mids)]


def ack10(variant: str, returned: list[dict[str, Any]]) -> dict[str, Any]:
    return {**ack(variant, returned), "hit": "conn#1 client frame #9 disposition on channel 0", "ack": "disposition (accepted, settled)",
            "held": [d10(m, i + 1, fa=True, count=0) for i, m in enumerate(("m1", "m2", "m3"))]}


def mid_body10(variant: str, returned: list[dict[str, Any]], error: str | None = None) -> dict[str, Any]:
    return {**mid_body(variant, returned, error), "hit": "conn#1 server frame #9 transfer on channel 0; held until client frame #8 detach passed",
            "left_by": ["detach", "end"]}


BACK10 = [*back10("m1"), d10("m2", 2, fa=True, count=0)]
QPIDD = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
SPEC10 = select_profile("Other", "1.0", "amqp-1.0")


def on10(case: str, name: str, obs: dict[str, Any]) -> list[Example]:
    return [Example(case, f"{name}-{p.id}", obs, queue_type="classic", profile=p) for p in (QPIDD, SPEC10)]
LOST_CONN = "ConnectionLost: connection lost: StreamLostError: ('Transport indicated EOF',)"


def declared(drained: list[str], unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": "kill", "ids": ["after-kill-1"], "drained": [{"id": m, "persistent": True} for m in drained], "unavailable": unavailable}


SEGMENT_IDS = [f"segment-{i}" for i in range(1, 6)]
PUBLISHED = [f"m{i}" for i in range(1, 7)]
HELD = ["held-1", "held-2", "held-3", "held-4"]
TWICE = ["twice-1", "twice-2", "twice-3"]


def two_faults(drained: list[dict[str, Any]], unavailable: str | None = None, between: str | None = None) -> dict[str, Any]:
    return {"variant": "restart-then-kill", "ids": TWICE, "after_restart": None if between else 3, "between": between,
            "drained": drained, "unavailable": unavailable}


def acked(variant: str, drained: list[dict[str, Any]], unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "ids": HELD, "acked": ["held-1", "held-3"], "drained": drained, "unavailable": unavailable}


def confirm_cut(variant: str, kept: list[str], intact: bool = True) -> dict[str, Any]:
    return {"variant": variant, "ids": PUBLISHED, "confirmed": PUBLISHED[:3], "in_flight": "m4", "hit": "conn#1 server frame #14 basic.ack",
            "kept": [{"id": m, "intact": intact} for m in kept]}


def segments(drained: list[dict[str, Any]], unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": "restart", "ids": SEGMENT_IDS, "drained": drained, "unavailable": unavailable}


def stored(*mids: str, persistent: bool = True, intact: bool = True) -> list[dict[str, Any]]:
    return [{"id": m, "persistent": persistent, "intact": intact} for m in mids]


GONE_404 = ("OperationTimeout: the broker answered 404 NOT_FOUND - no queue 'q' in vhost '/' before and after its own queue "
            "listing had no q (neither running nor durable to recover): the queue is gone")

CUTS_GOOD: list[Example] = [
    *(e for v in ("after-deliver-method", "after-content-header", "inside-body", "after-last-body-frame")
      for e in everywhere("TestCutInsideDelivery", v, delivery(v, again("m1")))),
    *everywhere("TestCutAroundAck", "withheld", ack("ack-withheld", again("m1", "m2", "m3"))),
    *everywhere("TestCutAroundAck", "delivered-took-effect", ack("ack-delivered", again("m1", "m3"))),
    *everywhere("TestCutAroundAck", "delivered-lost-in-flight", ack("ack-delivered", again("m1", "m2", "m3"))),
    *everywhere("TestCutAroundAck", "multiple-took-effect", ack("ack-multiple-delivered", again("m3"))),
    *everywhere("TestCutAroundAck", "multiple-lost-in-flight", ack("ack-multiple-delivered", again("m1", "m2", "m3"))),
    *everywhere("TestCancelMidBody", "cancel", mid_body("cancel", BACK)),
    *everywhere("TestCancelMidBody", "channel-close", mid_body("channel-close", BACK)),
    *everywhere("TestDeclaredQueueSurvivesKill", "kept", declared(["after-kill-1"])),
    *everywhere("TestConfirmedAcrossSegments", "kept", segments(stored(*SEGMENT_IDS))),
    *everywhere("TestConfirmCutAtMostOnce", "confirm-withheld-kept", confirm_cut("confirm-withheld", PUBLISHED[:4])),
    *everywhere("TestConfirmCutAtMostOnce", "body-delivered-dropped", confirm_cut("body-delivered", PUBLISHED[:3])),
    *everywhere("TestConfirmCutAtMostOnce", "publish-withheld", confirm_cut("publish-withheld", PUBLISHED[:3])),
    *everywhere("TestAckedStaysGone", "restart", acked("restart", again("held-2", "held-4"))),
    *everywhere("TestAckedStaysGone", "kill", acked("kill", first("held-2", "held-4"))),
    *everywhere("TestSurvivesRestartThenKill", "kept", two_faults([{"id": m, "persistent": True} for m in TWICE])),
    *on10("TestCutAroundAck", "amqp10-withheld", ack10("ack-withheld", back10("m1", "m2", "m3"))),
    *on10("TestCutAroundAck", "amqp10-delivered-took-effect", ack10("ack-delivered", back10("m1", "m3"))),
    *on10("TestCutAroundAck", "amqp10-range-took-effect", ack10("ack-multiple-delivered", back10("m3"))),
    *on10("TestCutAroundAck", "amqp10-range-lost-in-flight", ack10("ack-multiple-delivered", back10("m1", "m2", "m3"))),
    *on10("TestCancelMidBody", "amqp10-detach", mid_body10("cancel", BACK10)),
    *on10("TestCancelMidBody", "amqp10-end", mid_body10("channel-close", BACK10)),
]

CUTS_VIOLATIONS: list[Example] = [
    # ACK-CUT-INSIDE-DELIVERY
    bad("TestCutInsideDelivery", "lost-inside-body", delivery("inside-body", []), shows="missing [m1]"),
    bad("TestCutInsideDelivery", "unmarked-after-header", delivery("after-content-header", first("m1")), "quorum", shows="wrong flag"),
    bad("TestCutInsideDelivery", "twice-after-last-frame", delivery("after-last-body-frame", again("m1", "m1")), shows="duplicated [m1]"),
    bad("TestCutInsideDelivery", "torn-body", delivery("inside-body", again("m1"), intact=[False]), shows="bodies differ: [m1]"),
    bad("TestCutInsideDelivery", "broker-gone", delivery("after-deliver-method", [], unreachable=UNREACHABLE), shows="could not be drained"),
    # ACK-CUT-AROUND-ACK
    bad("TestCutAroundAck", "withheld-ack-took-effect", ack("ack-withheld", again("m1", "m3")), shows="missing [m2]"),
    bad("TestCutAroundAck", "unacked-lost", ack("ack-delivered", again("m1", "m2")), "quorum", shows="missing [m3]"),
    bad("TestCutAroundAck", "multiple-loses-the-uncovered", ack("ack-multiple-delivered", []), shows="missing [m3]"),
    bad("TestCutAroundAck", "acked-twice", ack("ack-delivered", again("m1", "m2", "m2", "m3")), shows="twice: [m2]"),
    bad("TestCutAroundAck", "unmarked", ack("ack-withheld", first("m1", "m2", "m3")), shows="wrong flag"),
    bad("TestCutAroundAck", "broker-gone", ack("ack-delivered", [], unreachable=UNREACHABLE), shows="could not be drained"),
    # ACK-CANCEL-MID-BODY (LavinMQ 1.3.1 closed the connection instead of answering basic.cancel)
    bad("TestCancelMidBody", "connection-dropped", mid_body("cancel", BACK, error=LOST_CONN), shows="no answer: ConnectionLost"),
    bad("TestCancelMidBody", "message-lost", mid_body("channel-close", first("m2")), shows="missing [m1]"),
    bad("TestCancelMidBody", "unmarked", mid_body("cancel", first("m1", "m2")), shows="wrong flag"),
    bad("TestCancelMidBody", "broker-crashed", mid_body("cancel", [], error=LOST_CONN, unreachable=UNREACHABLE), shows="no answer"),
    # the same two over AMQP 1.0
    bad("TestCutAroundAck", "amqp10-range-loses-the-uncovered", ack10("ack-multiple-delivered", []), profile=QPIDD, shows="missing [m3]"),
    bad("TestCutAroundAck", "amqp10-withheld-disposition-took-effect", ack10("ack-withheld", back10("m1", "m3")), profile=QPIDD, shows="missing [m2]"),
    bad("TestCutAroundAck", "amqp10-redelivery-claims-first-acquirer", ack10("ack-delivered", [d10("m1", 1, fa=True, count=1), *back10("m3")]), profile=QPIDD,
        shows="first-acquirer=true, though another link acquired"),
    bad("TestCancelMidBody", "amqp10-detach-unanswered", mid_body10("cancel", BACK10, error="detach: no detach answer within 5s"), profile=QPIDD,
        shows="no answer: detach: no detach answer"),
    bad("TestCancelMidBody", "amqp10-incomplete-delivery-lost", mid_body10("channel-close", [d10("m2", 1, fa=True, count=0)]), profile=QPIDD, shows="missing [m1]"),
    bad("TestCancelMidBody", "amqp10-torn", {**mid_body10("cancel", BACK10), "intact": [False, True]}, profile=QPIDD, shows="bodies differ: [m1]"),
    # PERSIST-DECLARED-QUEUE-SURVIVES-KILL (LavinMQ before 1.3.0: the empty message file stops the queue loading)
    bad("TestDeclaredQueueSurvivesKill", "queue-gone", declared([], GONE_404), shows="could not be consumed after the kill -9"),
    bad("TestDeclaredQueueSurvivesKill", "publish-lost", declared([]), shows="= []"),
    # PERSIST-CONFIRMED-ACROSS-SEGMENTS (LavinMQ issue #669: the queue closed at a segment's end after a restart)
    bad("TestConfirmedAcrossSegments", "second-segment-lost", segments(stored(*SEGMENT_IDS[:2])), shows="= [segment-1, segment-2]"),
    bad("TestConfirmedAcrossSegments", "queue-closed", segments([], "ChannelClosed: 541 INTERNAL_ERROR"), shows="could not be consumed"),
    bad("TestConfirmedAcrossSegments", "flag-lost", segments([*stored(*SEGMENT_IDS[:4]), *stored("segment-5", persistent=False)]),
        shows="not persistent: [segment-5]"),
    bad("TestConfirmedAcrossSegments", "torn", segments([*stored(*SEGMENT_IDS[:4]), *stored("segment-5", intact=False)]), shows="bodies differ"),
]

CUTS_VIOLATIONS += [
    # PUBLISH-CONFIRM-CUT-AT-MOST-ONCE
    bad("TestConfirmCutAtMostOnce", "confirmed-lost", confirm_cut("confirm-withheld", ["m1", "m3", "m4"]), shows="confirmed but missing: [m2]"),
    bad("TestConfirmCutAtMostOnce", "in-flight-twice", confirm_cut("confirm-withheld", [*PUBLISHED[:4], "m4"]), "quorum", shows="twice: [m4]"),
    bad("TestConfirmCutAtMostOnce", "withheld-publish-enqueued", confirm_cut("publish-withheld", PUBLISHED[:4]), shows="in the queue: [m4]"),
    bad("TestConfirmCutAtMostOnce", "never-sent-enqueued", confirm_cut("body-delivered", [*PUBLISHED[:3], "m5"]), shows="in the queue: [m5]"),
    bad("TestConfirmCutAtMostOnce", "torn", confirm_cut("body-delivered", PUBLISHED[:4], intact=False), shows="corrupt"),
    # PERSIST-ACKED-STAYS-GONE (LavinMQ before 1.1.7: truncated ack files brought acknowledged messages back)
    bad("TestAckedStaysGone", "acked-back-after-restart", acked("restart", again(*HELD)), shows="acknowledged but back: [held-1, held-3]"),
    bad("TestAckedStaysGone", "unacked-lost", acked("kill", again("held-2")), shows="= [held-2]"),
    bad("TestAckedStaysGone", "unacked-twice", acked("restart", again("held-2", "held-4", "held-4")), shows="held-4, held-4"),
    bad("TestAckedStaysGone", "unavailable", acked("kill", [], "OperationTimeout: basic.get on 'q' not answered in 15.0s"), shows="could not be consumed"),
    # PERSIST-SURVIVES-RESTART-THEN-KILL (ActiveMQ Artemis before 2.18.0: a reloaded durable message reads as non-durable)
    bad("TestSurvivesRestartThenKill", "lost-at-the-second-fault", two_faults([{"id": "twice-1", "persistent": True}]), shows="= [twice-1]"),
    bad("TestSurvivesRestartThenKill", "flag-lost-by-the-reload", two_faults([{"id": m, "persistent": m != "twice-2"} for m in TWICE]),
        shows="not persistent: [twice-2]"),
    bad("TestSurvivesRestartThenKill", "gone-after-the-restart", two_faults([], between=GONE_404), shows="after the restart"),
    bad("TestSurvivesRestartThenKill", "gone-after-the-kill", two_faults([], GONE_404), shows="after the kill -9"),
]

test_compliant_observation_passes, test_violation_fails = verdict_tests(CUTS_GOOD, CUTS_VIOLATIONS)


def test_declared_queue_gone_after_a_kill_is_a_fail_with_the_key_the_kill_loss_tests_name() -> None:
    v = judged("TestDeclaredQueueSurvivesKill", declared([], GONE_404), RABBIT)
    assert v.outcome is Outcome.FAIL and v.key == "queue-gone-after-restart" and "404" in v.observed


def test_connection_dropped_at_a_mid_body_cancel_is_a_deviation_only_before_the_fix() -> None:
    from conformance.catalogue.profiles import select_profile

    obs = mid_body("cancel", BACK, error=LOST_CONN)
    old = judged("TestCancelMidBody", obs, select_profile("LavinMQ", "1.3.1", "amqp-0-9-1"))
    assert old.outcome is Outcome.DEVIATION and "#825" in old.citation
    assert judged("TestCancelMidBody", obs, select_profile("LavinMQ", "2.9.1", "amqp-0-9-1")).outcome is Outcome.FAIL
    lost = judged("TestCancelMidBody", mid_body("cancel", first("m2"), error=None), select_profile("LavinMQ", "1.3.1", "amqp-0-9-1"))
    assert lost.outcome is Outcome.FAIL, "a message lost is not the documented dropped connection"


def test_acked_back_after_a_kill_is_rabbitmqs_documented_redelivery_only_after_a_kill() -> None:
    v = judged("TestAckedStaysGone", acked("kill", again(*HELD)), RABBIT)
    assert v.outcome is Outcome.DEVIATION and "reliability" in v.citation
    assert judged("TestAckedStaysGone", acked("restart", again(*HELD)), RABBIT).outcome is Outcome.FAIL
    assert judged("TestAckedStaysGone", acked("kill", again("held-1", "held-3")), RABBIT).outcome is Outcome.FAIL, "unacknowledged ones lost"
