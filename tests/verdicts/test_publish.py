"""Verdicts of the publish area (conformance/cases/publish/) on synthetic observations, held to the
contract of tests/verdicts/examples.py: content framing edges (an empty body, a body larger than
frame-max) and publishes in flight when a frame fault hits (at least once, a torn message discarded).
"""

from __future__ import annotations

from typing import Any

from tests.verdicts.examples import Example, everywhere, msgs, under_rabbit_and_baseline, verdict_tests, with_


def framing_obs(mid: str, size: int, *, confirm: str = "basic.ack", delivered: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sent = {"id": mid, "size": size, "sha": "s1"}
    return {"published": sent, "confirm": confirm, "delivered": [sent] if delivered is None else delivered}


FRAMING_GOOD = [
    *everywhere("TestEmptyBody", "confirmed-and-routed", framing_obs("m-empty", 0)),
    *everywhere("TestBodyLargerThanFrameMax", "reassembled", framing_obs("m-large", 394217)),
]
FRAMING_VIOLATIONS = [
    Example("TestEmptyBody", "never-confirmed-nor-routed",
            framing_obs("m-empty", 0, confirm="basic.publish: no basic.ack (publisher confirm) within 5s", delivered=[]), shows="no basic.ack"),
    Example("TestEmptyBody", "confirmed-not-routed", framing_obs("m-empty", 0, delivered=[]), shows="delivered before the sentinel: []"),
    Example("TestBodyLargerThanFrameMax", "altered", framing_obs("m-large", 394217, delivered=[{"id": "m-large", "size": 394217, "sha": "s2"}]),
            shows="got [s2]"),
    Example("TestBodyLargerThanFrameMax", "nacked", framing_obs("m-large", 394217, confirm="publish not confirmed: basic.nack"), shows="basic.nack"),
]


def ids(*mids: str, intact: bool = True) -> list[dict[str, Any]]:
    return [{"id": m, "intact": intact} for m in mids]


# m1..m6 published one confirm at a time, the connection reset at m4 (its basic.publish, its body or the
# broker's basic.ack withheld): what the queue kept, then what it holds after every unconfirmed message is resent.
INFLIGHT = {
    "variant": "confirm-withheld",
    "ids": msgs(6),
    "confirmed": ["m1", "m2", "m3"],
    "unconfirmed": ["m4", "m5", "m6"],
    "hit": "conn#1 server frame #12 basic.ack on channel 1",
    "kept": ids("m1", "m2", "m3", "m4"),
    "after_resend": ids("m4", "m5", "m6"),
}
TORN = {**INFLIGHT, "variant": "body-withheld", "kept": ids("m1", "m2", "m3"), "after_resend": ids("m4", "m5", "m6")}
INFLIGHT_OBS: dict[str, list[dict[str, Any]]] = {
    "TestInflightAtLeastOnce": [INFLIGHT, with_(INFLIGHT, variant="publish-withheld", kept=ids("m1", "m2", "m3"))],
    "TestTornMessageDiscarded": [TORN],
}
INFLIGHT_GOOD: list[Example] = under_rabbit_and_baseline(INFLIGHT_OBS)
INFLIGHT_VIOLATIONS: list[Example] = [
    Example("TestInflightAtLeastOnce", "confirmed-m2-lost", with_(INFLIGHT, kept=ids("m1", "m3", "m4"), after_resend=ids("m4", "m5", "m6"))),
    Example("TestInflightAtLeastOnce", "m5-missing-after-resend", with_(INFLIGHT, after_resend=ids("m4", "m6"))),
    Example("TestInflightAtLeastOnce", "confirmed-m1-duplicated", with_(INFLIGHT, after_resend=ids("m1", "m4", "m5", "m6"))),
    Example("TestInflightAtLeastOnce", "corrupt-body", with_(INFLIGHT, kept=[*ids("m1", "m2", "m3"), *ids("m4", intact=False)])),
    Example("TestTornMessageDiscarded", "torn-m4-enqueued", with_(TORN, kept=ids("m1", "m2", "m3", "m4"))),
    Example("TestTornMessageDiscarded", "torn-m4-enqueued-partial", with_(TORN, kept=[*ids("m1", "m2", "m3"), *ids("m4", intact=False)])),
    Example("TestTornMessageDiscarded", "m2-corrupt", with_(TORN, kept=[*ids("m1"), *ids("m2", intact=False), *ids("m3")])),
]

PUBLISH_GOOD: list[Example] = [*FRAMING_GOOD, *INFLIGHT_GOOD]
PUBLISH_VIOLATIONS: list[Example] = [*FRAMING_VIOLATIONS, *INFLIGHT_VIOLATIONS]


test_compliant_observation_passes, test_violation_fails = verdict_tests(PUBLISH_GOOD, PUBLISH_VIOLATIONS)
