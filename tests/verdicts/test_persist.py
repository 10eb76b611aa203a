"""Verdicts of the persistence area (conformance/cases/persist/: node restart and kill -9) on synthetic
observations, held to the contract of tests/verdicts/examples.py. A quorum queue unavailable after kill -9
is the documented deviation; messages lost outright never are.
"""

from __future__ import annotations

from typing import Any

from conformance.kit.verdicts import Outcome, apply_profile
from tests.verdicts.examples import (
    CASES,
    OPEN,
    P43,
    P312,
    P313,
    QQ,
    RABBIT,
    Example,
    again,
    bad,
    connection_closed,
    d,
    dev,
    everywhere,
    first,
    judged,
    ok,
    soft,
    verdict_tests,
    with_,
)

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

REQUEUED = ["requeued-1", "requeued-2"]
PURGED, AFTER_PURGE = ["purged-1", "purged-2", "purged-3", "purged-4"], ["after-purge-1"]


def requeued(variant: str, drained: list[dict[str, Any]], unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "ids": REQUEUED, "before": first(*REQUEUED), "drained": drained, "unavailable": unavailable}


def purged(variant: str, drained: list[dict[str, Any]], count: int = 4, unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "ids": PURGED, "purged": count, "control": AFTER_PURGE, "drained": drained, "unavailable": unavailable}


COUNTED = ["counted-1"]
REFUSED_406 = soft(406, "PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue of queue type rabbit_classic_queue")


def counted(variant: str, before: list[int | None], after: list[int | None], unavailable: str | None = None,
            declare: dict[str, Any] = OPEN) -> dict[str, Any]:
    return {"variant": variant, "declare": declare, "ids": COUNTED, "unavailable": unavailable,
            "before": [d("counted-1", i + 1, i > 0, c) for i, c in enumerate(before)],
            "drained": [d("counted-1", 1, True, c) for c in after]}


def deleted_queue(variant: str, after: dict[str, Any] | None, unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "deleted": "dq", "after": after, "unavailable": unavailable}


GONE = soft(404, "NOT_FOUND - no queue 'dq' in vhost '/'")
PRIORITY_PUBLISHED = [["before-low1", 0], ["before-low2", 0], ["before-high", 9], ["after-low", 0], ["after-high", 9]]
PRIORITY_ORDER = ["before-high", "after-high", "before-low1", "before-low2", "after-low"]
PRIORITY_FIFO = [m for m, _ in PRIORITY_PUBLISHED]


def prioritised(variant: str, delivered: list[str], unavailable: str | None = None) -> dict[str, Any]:
    return {"variant": variant, "published": PRIORITY_PUBLISHED, "delivered": delivered, "unavailable": unavailable}


PERSIST_GOOD: list[Example] = [
    # the count continues whatever the first delivery carries (absent, 0 before RabbitMQ 3.12, 1 on LavinMQ 1.x)
    *(ok("TestDeliveryCountSurvives", f"continues-{v}-{b}", counted(v, before, [before[-1] + 1]), QQ, RABBIT)
      for v in ("restart", "kill") for b, before in (("absent", [None, 1]), ("zero", [0, 1]), ("one", [1, 2]))),
    *everywhere("TestRequeuedRedelivered", "restart", requeued("restart", again(*REQUEUED))),
    *everywhere("TestRequeuedRedelivered", "kill", requeued("kill", again(*REQUEUED))),
    *everywhere("TestPurgedStaysGone", "restart", purged("restart", kept(*AFTER_PURGE))),
    *everywhere("TestPurgedStaysGone", "kill", purged("kill", kept(*AFTER_PURGE))),
    *everywhere("TestConfirmedSurvives", "restart", survived("restart", kept(*PIDS))),
    *everywhere("TestConfirmedSurvives", "kill", survived("kill", kept(*PIDS))),
    *(ok("TestTransientFate", "transient-lost", TRANSIENT_LOST, "classic", p) for p in (RABBIT, P43)),
    *(ok("TestTransientFate", "transient-kept", TRANSIENT_KEPT, QQ, p) for p in (RABBIT, P43)),
    *(ok("TestNonDurableQueueGone", "deleted", NON_DURABLE_GONE, "classic", p) for p in (RABBIT, P312, P313, P43)),
    *everywhere("TestDeletedQueueStaysGone", "restart", deleted_queue("restart", GONE)),
    *everywhere("TestDeletedQueueStaysGone", "kill", deleted_queue("kill", GONE)),
    *(ok("TestPriorityOrderSurvives", f"{v}-{p.id}", prioritised(v, PRIORITY_ORDER), "classic+priority", p)
      for v in ("restart", "kill") for p in (RABBIT, P43)),
    # the same priority's order is basic/08's, not this requirement's
    ok("TestPriorityOrderSurvives", "highs-swapped", prioritised("restart", ["after-high", "before-high", *PRIORITY_ORDER[2:]]), "classic+priority", RABBIT),
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
    # PERSIST-REQUEUED-REDELIVERED (lavinmq#1911: the flag is not kept across a restart)
    bad("TestRequeuedRedelivered", "restart-clears-flag", requeued("restart", first(*REQUEUED)), shows="redelivered=false: [requeued-1, requeued-2]"),
    bad("TestRequeuedRedelivered", "kill-clears-one", requeued("kill", [*again("requeued-1"), *first("requeued-2", start=2)]), QQ,
        shows="redelivered=false: [requeued-2]"),
    bad("TestRequeuedRedelivered", "restart-loses-requeued", requeued("restart", again("requeued-2")), shows="= [requeued-2]"),
    bad("TestRequeuedRedelivered", "classic-unavailable", requeued("kill", [], UNAVAILABLE), "classic", RABBIT, shows="could not be consumed"),
    # PERSIST-PURGED-STAYS-GONE (lavinmq#2247: purged requeued messages come back)
    bad("TestPurgedStaysGone", "requeued-come-back", purged("restart", kept("purged-1", "purged-2", *AFTER_PURGE)), shows="purged messages back: [purged-1, purged-2]"),
    bad("TestPurgedStaysGone", "kill-brings-back-all", purged("kill", kept(*PURGED, *AFTER_PURGE)), QQ, shows="purged-4"),
    bad("TestPurgedStaysGone", "purge-ok-miscounts", purged("restart", kept(*AFTER_PURGE), count=2), shows="message-count 2"),
    bad("TestPurgedStaysGone", "control-lost", purged("restart", []), shows="= []"),
    # PERSIST-DELIVERY-COUNT-SURVIVES (lavinmq#1911: the count starts again after a restart)
    bad("TestDeliveryCountSurvives", "header-gone-after-restart", counted("restart", [None, 1], [None]), QQ, shows="= [none]"),
    bad("TestDeliveryCountSurvives", "count-reset-after-kill", counted("kill", [1, 2], [1]), QQ, shows="= [1]"),
    bad("TestDeliveryCountSurvives", "never-counted", counted("restart", [None, None], [None]), QQ, shows="[none, none]"),
    bad("TestDeliveryCountSurvives", "message-lost", counted("restart", [None, 1], []), QQ, shows="= []"),
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
    # PERSIST-DELETED-QUEUE-STAYS-GONE (lavinmq#209: deleted queues recreated on a crash)
    bad("TestDeletedQueueStaysGone", "back-after-kill", deleted_queue("kill", OPEN), shows="the queue exists again"),
    bad("TestDeletedQueueStaysGone", "back-after-restart", deleted_queue("restart", OPEN), shows="the queue exists again"),
    bad("TestDeletedQueueStaysGone", "passive-declare-closes-connection", deleted_queue("restart", connection_closed(541, "INTERNAL_ERROR")),
        shows="closed with 541"),
    bad("TestDeletedQueueStaysGone", "kept-queue-unavailable", deleted_queue("kill", None, UNAVAILABLE), shows="could not be consumed"),
    # PERSIST-PRIORITY-ORDER-SURVIVES (lavinmq#434: a priority queue restored as a plain one)
    bad("TestPriorityOrderSurvives", "fifo-after-restart", prioritised("restart", PRIORITY_FIFO), "classic+priority", shows="[before-low1, before-low2, before-high"),
    bad("TestPriorityOrderSurvives", "new-high-appended", prioritised("kill", ["before-high", "before-low1", "before-low2", "after-low", "after-high"]),
        "classic+priority", shows="after-low, after-high]"),
    bad("TestPriorityOrderSurvives", "high-lost", prioritised("restart", ["after-high", "before-low1", "before-low2", "after-low"]), "classic+priority",
        shows="= [after-high, after-low, before-low1, before-low2]"),
    bad("TestPriorityOrderSurvives", "unavailable", prioritised("kill", [], UNAVAILABLE), "classic+priority", shows="could not be consumed"),
    bad("TestNonDurableQueueGone", "passive-declare-closes-connection", with_(NON_DURABLE_GONE, after=connection_closed(541, "INTERNAL_ERROR")),
        "classic", RABBIT, shows="closed with 541"),
]


test_compliant_observation_passes, test_violation_fails = verdict_tests(PERSIST_GOOD, PERSIST_VIOLATIONS)


def test_quorum_unavailable_after_kill_is_the_known_bug_only_on_quorum() -> None:
    case = CASES["TestConfirmedSurvives"]()
    obs = survived("kill", [], UNAVAILABLE)
    quorum = apply_profile(case.verdict(obs, RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert quorum.outcome is Outcome.FAIL and "10070" in quorum.known_bug, "an open upstream bug stays a fail"
    classic = apply_profile(case.verdict(obs, RABBIT, "classic"), case.requirement, "classic", RABBIT)
    assert classic.outcome is Outcome.FAIL and not classic.known_bug
    lost = apply_profile(case.verdict(with_(obs, unavailable=None), RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert lost.outcome is Outcome.FAIL and not lost.known_bug, "messages lost outright are not the known unavailability"


def test_quorum_unavailable_after_graceful_restart_is_not_the_kill_deviation() -> None:
    case = CASES["TestConfirmedSurvives"]()
    v = apply_profile(case.verdict(survived("restart", [], UNAVAILABLE), RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert v.outcome is Outcome.FAIL and not v.known_bug


def test_non_durable_declare_refused_is_spec_fail_never_pass() -> None:
    v = judged("TestNonDurableQueueGone", NON_DURABLE_REFUSED, P43)
    assert v.outcome is Outcome.DEVIATION and v.spec == "fail" and "transient_nonexcl_queues" in v.citation + v.reason
    assert judged("TestNonDurableQueueGone", NON_DURABLE_REFUSED, RABBIT).outcome is Outcome.FAIL


def test_quorum_unavailable_after_kill_is_the_known_bug_for_the_new_restart_cases_too() -> None:
    for name, obs in (("TestRequeuedRedelivered", requeued("kill", [], UNAVAILABLE)), ("TestPurgedStaysGone", purged("kill", [], unavailable=UNAVAILABLE)),
                      ("TestDeliveryCountSurvives", counted("kill", [None, 1], [], UNAVAILABLE))):
        case = CASES[name]()
        v = apply_profile(case.verdict(obs, RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
        assert v.outcome is Outcome.FAIL and "10070" in v.known_bug
        after_restart = apply_profile(case.verdict(with_(obs, variant="restart"), RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
        assert after_restart.outcome is Outcome.FAIL and not after_restart.known_bug


def test_delivery_limit_refused_on_a_classic_queue_is_unsupported_by_refusal() -> None:
    case = CASES["TestDeliveryCountSurvives"]()
    v = case.verdict(counted("restart", [], [], declare=REFUSED_406), RABBIT, "classic")
    assert v.outcome is Outcome.UNSUPPORTED and v.unsupported_kind == "refused" and "406" in v.observed
