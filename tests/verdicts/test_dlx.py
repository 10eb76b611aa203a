"""Verdicts of the dead-lettering area (conformance/cases/dlx/: reasons, x-death, x-first-death and
x-last-death headers, the dead-letter routing key) on synthetic observations, held to the contract of
tests/verdicts/examples.py. x-last-death appears from RabbitMQ 3.13: its absence is a documented deviation
on 3.10 and a violation on 3.13 and 4.3.
"""

from __future__ import annotations

from typing import Any

from tests.verdicts.examples import P43, P313, QQ, RABBIT, Example, bad, dev, everywhere, ok, verdict_tests, with_

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


test_compliant_observation_passes, test_violation_fails = verdict_tests(DLX_GOOD, DLX_VIOLATIONS)
