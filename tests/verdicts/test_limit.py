"""Verdicts of the delivery-limit area (conformance/cases/limit/: x-delivery-limit, x-delivery-count) on
synthetic observations, held to the contract of tests/verdicts/examples.py. What counts as a return, the
first x-delivery-count and the default limit change between RabbitMQ 3.10, 3.12 and 4.x: each is judged with
the profile of the version that documents it, and under another version's profile it is a violation.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import (
    OPEN,
    P43,
    P312,
    QQ,
    RABBIT,
    Example,
    bad,
    channel_406,
    connection_closed,
    dev,
    judged,
    ok,
    verdict_tests,
    with_,
)

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


test_compliant_observation_passes, test_violation_fails = verdict_tests(LIMIT_GOOD, LIMIT_VIOLATIONS)


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
