"""Verdicts of the dead-lettering area (conformance/cases/dlx/: reasons, x-death, x-first-death and
x-last-death headers, the dead-letter routing key) on synthetic observations, held to the contract of
tests/verdicts/examples.py. x-last-death appears from RabbitMQ 3.13: its absence is a documented deviation
on 3.10 and a violation on 3.13 and 4.3.
"""

from __future__ import annotations

from typing import Any

from tests.verdicts.examples import BASELINE, P43, P313, QQ, RABBIT, Example, bad, dev, everywhere, ok, verdict_tests, with_

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


# -- dead-letter topologies (conformance/cases/dlx/test_topologies.py) --------------------------
W, D = "dlx-work", "dlx-delay"


def arrival(*deaths_: dict[str, Any], headers: dict[str, Any] | None = None) -> dict[str, Any]:
    return dead("m1", list(deaths_), first_death(W) if headers is None else headers)


def cycle(variant: str = "reject-expire", arrivals: list[dict[str, Any]] | None = None, error: str | None = None) -> dict[str, Any]:
    if arrivals is None:
        if variant == "self":
            arrivals = [dead("m1", [], {}), arrival(death(W)), arrival(death(W, count=2))]
        else:
            arrivals = [dead("m1", [], {}), arrival(death(D, "expired"), death(W)), arrival(death(D, "expired", 2), death(W, count=2))]
    return {"variant": variant, "work": W, "delay": D if variant != "self" else None, "arrivals": arrivals, "error": error,
            "ready": {W: 0}}


CYCLE = cycle()


def ttl_unread(dead_: list[dict[str, Any]] | None = None, left: int = 0) -> dict[str, Any]:
    dead_ = [dead(m, [death(Q, "expired")], first_death(Q, "expired")) for m in ("m1", "m2")] if dead_ is None else dead_
    return {"source": Q, "arrived": bool(dead_), "dead": dead_, "left": left}


def after_requeue(dead_: list[dict[str, Any]] | None = None, error: str | None = None) -> dict[str, Any]:
    return {"source": Q, "redelivered": True, "error": error, "left": 0,
            "dead": [dead("m1", [death(Q)], first_death(Q))] if dead_ is None else dead_}


APP = {"app-text": "hello", "app-int": 42, "app-table": {"inner": "value", "deeper": {"leaf": "x"}}, "app-array": ["a", 1, True]}


def headers_kept(app: dict[str, Any] | None = None, deaths_: list[dict[str, Any]] | None = None, copies: int = 1) -> dict[str, Any]:
    copy = dead("m1", [death(Q)] if deaths_ is None else deaths_, first_death(Q))
    return {"sent": APP, "dead": [copy] * copies, "app": [APP if app is None else app] * copies}


def republished(copies: list[dict[str, Any]] | None = None, error: str | None = None, left: int = 0,
                variant: str = "rejected") -> dict[str, Any]:
    if copies is None:
        copies = [dead("m1", [death(Q, variant)], first_death(Q, variant)), dead("m1", [death(Q, variant, 2)], first_death(Q, variant))]
    return {"variant": variant, "source": Q, "error": error, "copies": copies, "left": left}


RESTARTED = [dead("m1", [death(Q)], first_death(Q)), dead("m1", [death(Q)], first_death(Q))]


def maxlen_order(order: tuple[str, ...] = ("m1", "m2", "m3"), reason: str = "maxlen", kept: tuple[str, ...] = ("m4", "m5")) -> dict[str, Any]:
    return {"source": Q, "dead": [dead(m, [death(Q, reason)], first_death(Q, reason)) for m in order], "kept": list(kept)}


def target_limit(variant: str, dlq: list[str], side: list[str], source: list[str] | None = None,
                 side_deaths: list[dict[str, Any]] | None = None, error: str | None = None) -> dict[str, Any]:
    pushed = [death(DLQ, "maxlen"), death(Q)] if side_deaths is None else side_deaths
    side_obs = [dead(m, pushed if variant == "drop-head" else [death(Q)], first_death(Q)) for m in side]
    return {"variant": variant, "source": Q, "dlq": DLQ, "dlq_held": [dead(m, [death(Q)], first_death(Q)) for m in dlq],
            "side_held": side_obs, "source_held": source or [], "error": error}


TOPOLOGY_GOOD: list[Example] = [
    *everywhere("TestCycleWithRejection", "reject-expire", CYCLE),
    *everywhere("TestCycleWithRejection", "self", cycle("self")),
    *everywhere("TestQueueTtlExpiresUnread", "both-expired", ttl_unread()),
    *everywhere("TestDeadLetterAfterRequeue", "one-copy", after_requeue()),
    *everywhere("TestHeadersKept", "unchanged", headers_kept()),
    *(ok("TestRepublishedDiesAgain", "count-2", republished(), qt, p) for p in (RABBIT, BASELINE) for qt in p.queue_types),
    *(ok("TestRepublishedDiesAgain", "expired-count-2", republished(variant="expired"), qt, p) for p in (RABBIT, BASELINE) for qt in p.queue_types),
    # RabbitMQ 4.x does not interpret a client's x-death (4.0.1 release notes): a history of its own
    *(dev("TestRepublishedDiesAgain", "restarted-on-4.3", republished(RESTARTED), qt, P43) for qt in P43.queue_types),
    *everywhere("TestMaxlenOrder", "oldest-first", maxlen_order()),
    *everywhere("TestTargetLimit", "drop-head", target_limit("drop-head", ["m2", "m3"], ["m1"])),
    *everywhere("TestTargetLimit", "reject-publish", target_limit("reject-publish", ["m1", "m2"], ["m1", "m2", "m3"])),
]

TOPOLOGY_VIOLATIONS: list[Example] = [
    # DLX-CYCLE-WITH-REJECTION
    bad("TestCycleWithRejection", "dropped-second-round", cycle(arrivals=CYCLE["arrivals"][:2]), shows="arrivals [m1, m1]"),
    bad("TestCycleWithRejection", "dropped-first-round", cycle("self", arrivals=CYCLE["arrivals"][:1]), QQ, shows="arrivals [m1]"),
    bad("TestCycleWithRejection", "count-not-incremented",
        cycle(arrivals=[*CYCLE["arrivals"][:2], arrival(death(D, "expired"), death(W))]), shows="count: 1"),
    bad("TestCycleWithRejection", "oldest-first",
        cycle(arrivals=[*CYCLE["arrivals"][:2], arrival(death(W, count=2), death(D, "expired", 2))]), shows="[{queue: dlx-work"),
    bad("TestCycleWithRejection", "first-death-rewritten",
        cycle(arrivals=[*CYCLE["arrivals"][:2], arrival(death(D, "expired", 2), death(W, count=2), headers=first_death(D, "expired"))]),
        shows="x-first-death-queue: dlx-delay"),
    bad("TestCycleWithRejection", "crashed", cycle(arrivals=CYCLE["arrivals"][:1], error="channel closed with 541 INTERNAL_ERROR"),
        shows="541"),
    # DLX-QUEUE-TTL-EXPIRES-UNREAD
    bad("TestQueueTtlExpiresUnread", "never-expired", ttl_unread([], left=2), shows="held []; 2 still ready"),
    bad("TestQueueTtlExpiresUnread", "one-expired", ttl_unread(ttl_unread()["dead"][:1], left=1), QQ, shows="held [m1]"),
    bad("TestQueueTtlExpiresUnread", "reason-rejected", ttl_unread([dead(m, [death(Q)], first_death(Q)) for m in ("m1", "m2")]),
        shows="reason: rejected"),
    bad("TestQueueTtlExpiresUnread", "newest-first", ttl_unread(list(reversed(ttl_unread()["dead"]))), shows="held [m2, m1]"),
    # DLX-AFTER-REQUEUE
    bad("TestDeadLetterAfterRequeue", "crashed", after_requeue([], "channel closed with 541 INTERNAL_ERROR"), QQ, shows="541"),
    bad("TestDeadLetterAfterRequeue", "not-dead-lettered", after_requeue([]), shows="held []"),
    bad("TestDeadLetterAfterRequeue", "published-lost", {"source": Q, "lost": "m1, published to q, never handed out", "dead": []},
        QQ, shows="m1, published to q, never handed out"),
    bad("TestDeadLetterAfterRequeue", "requeue-counted", after_requeue([dead("m1", [death(Q, count=2)], first_death(Q))]), QQ,
        shows="count: 2"),
    # DLX-HEADERS-KEPT
    bad("TestHeadersKept", "stripped", headers_kept({}), shows="copy = {}"),
    bad("TestHeadersKept", "nested-table-lost", headers_kept({**APP, "app-table": {"inner": "value"}}), QQ, shows="app-table: {inner: value}, app-array"),
    bad("TestHeadersKept", "no-x-death", headers_kept(deaths_=[]), shows="x-death = []"),
    bad("TestHeadersKept", "two-copies", headers_kept(copies=2), shows="held [m1, m1]"),
    bad("TestHeadersKept", "published-lost", {"sent": APP, "lost": "m1, published to q, never handed out", "dead": [], "app": []},
        shows="m1, published to q, never handed out"),
    # DLX-REPUBLISHED-DIES-AGAIN
    bad("TestRepublishedDiesAgain", "second-death-lost", republished(republished()["copies"][:1], left=1), shows="copies [m1]; 1 still ready"),
    bad("TestRepublishedDiesAgain", "republished-lost",
        {**republished(republished()["copies"][:1]), "lost": "m1 re-published by the client to q, never handed out by basic.get within 3s"},
        shows="m1 re-published by the client to q, never"),
    bad("TestRepublishedDiesAgain", "crashed", republished(republished()["copies"][:1], "channel closed with 541 INTERNAL_ERROR"), QQ,
        shows="541"),
    bad("TestRepublishedDiesAgain", "history-restarted", republished(RESTARTED), shows="count: 1"),
    bad("TestRepublishedDiesAgain", "expired-history-restarted",
        republished([dead("m1", [death(Q, "expired")], first_death(Q, "expired"))] * 2, variant="expired"), QQ, shows="count: 1"),
    bad("TestRepublishedDiesAgain", "expired-counted-as-rejected", republished(variant="expired", copies=republished()["copies"]),
        shows="reason: rejected"),
    bad("TestRepublishedDiesAgain", "first-death-lost", republished([republished()["copies"][0], dead("m1", [death(Q, count=2)], {})]),
        shows="x-first-death-queue: none"),
    # DLX-MAXLEN-ORDER
    bad("TestMaxlenOrder", "reversed", maxlen_order(("m3", "m2", "m1")), QQ, shows="held [m3, m2, m1]"),
    bad("TestMaxlenOrder", "newest-dropped", maxlen_order(("m3", "m4", "m5"), kept=("m1", "m2")), shows="held [m3, m4, m5]"),
    bad("TestMaxlenOrder", "reason-expired", maxlen_order(reason="expired"), shows="reason: expired"),
    # DLX-TARGET-LIMIT
    bad("TestTargetLimit", "drop-head-unlimited", target_limit("drop-head", ["m1", "m2", "m3"], []), shows="dlq: [m1, m2, m3]"),
    bad("TestTargetLimit", "m2-lost", {**target_limit("reject-publish", ["m1"], ["m1"]), "lost": "m2, published to q, never handed out"},
        shows="m2, published to q, never handed out"),
    bad("TestTargetLimit", "drop-head-newest-dropped", target_limit("drop-head", ["m1", "m2"], []), QQ, shows="side: []"),
    bad("TestTargetLimit", "drop-head-reason", target_limit("drop-head", ["m2", "m3"], ["m1"], side_deaths=[death(DLQ, "expired"), death(Q)]),
        shows="reason: expired"),
    bad("TestTargetLimit", "reject-publish-unlimited", target_limit("reject-publish", ["m1", "m2", "m3"], ["m1", "m2", "m3"]),
        shows="dlq: [m1, m2, m3]"),
    # the same on a quorum queue under RabbitMQ 3.10's profile is the known bug #8495 (open): still a fail
    bad("TestTargetLimit", "reject-publish-unlimited-quorum", target_limit("reject-publish", ["m1", "m2", "m3"], ["m1", "m2", "m3"]), QQ,
        shows="dlq: [m1, m2, m3]"),
    bad("TestTargetLimit", "reject-publish-connection-closed",
        target_limit("reject-publish", ["m1", "m2"], ["m1", "m2"], error="basic.reject(requeue=false) of m3: channel closed with 541 INTERNAL_ERROR"),
        shows="of m3: channel closed with 541"),
    bad("TestTargetLimit", "reject-publish-returned", target_limit("reject-publish", ["m1", "m2"], ["m1", "m2", "m3"], ["m3"]), QQ,
        shows="source: [m3]"),
]

DLX_GOOD += TOPOLOGY_GOOD
DLX_VIOLATIONS += TOPOLOGY_VIOLATIONS


test_compliant_observation_passes, test_violation_fails = verdict_tests(DLX_GOOD, DLX_VIOLATIONS)


def test_a_quorum_dead_letter_queue_over_its_limit_is_the_known_bug_on_3_10() -> None:
    """rabbitmq-server#8495 (open): the rabbitmq-3.10 profile names exactly that observation as a
    known bug, only on quorum queues; it stays a fail and carries the report."""
    from tests.verdicts.examples import judged

    over = target_limit("reject-publish", ["m1", "m2", "m3"], ["m1", "m2", "m3"])
    quorum = judged("TestTargetLimit", over, RABBIT, QQ)
    assert quorum.outcome.value == "fail" and "8495" in quorum.known_bug and quorum.reason.startswith("known broker bug, open upstream: ")
    classic = judged("TestTargetLimit", over, RABBIT, "classic")
    assert classic.outcome.value == "fail" and not classic.known_bug
    returned = target_limit("reject-publish", ["m1", "m2"], ["m1", "m2", "m3"], ["m3"])
    assert judged("TestTargetLimit", returned, RABBIT, QQ).outcome.value == "fail"


def test_a_second_expiry_dropped_as_a_loop_is_the_fixed_bug_on_lavinmq_1_only() -> None:
    """cloudamqp/lavinmq#1134 (fixed by #1206 in 2.5.0): the lavinmq-1 profile documents exactly the
    dropped second expiry of a re-published dead letter; 2.9.1 must dead-letter it."""
    from tests.verdicts.examples import judged, select_profile

    lost = republished([dead("m1", [death(Q, "expired")], first_death(Q, "expired"))], variant="expired")
    assert judged("TestRepublishedDiesAgain", lost, select_profile("LavinMQ", "1.3.1", "amqp-0-9-1")).outcome.value == "deviation"
    assert judged("TestRepublishedDiesAgain", lost, select_profile("LavinMQ", "2.9.1", "amqp-0-9-1")).outcome.value == "fail"
    rejected_lost = republished(republished()["copies"][:1])
    assert judged("TestRepublishedDiesAgain", rejected_lost, select_profile("LavinMQ", "1.3.1", "amqp-0-9-1")).outcome.value == "fail"
