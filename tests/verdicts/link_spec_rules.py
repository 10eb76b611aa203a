"""Verdict examples of the AMQP 1.0 spec-rule cases (conformance/cases/link/test_spec_*.py), joined
to the link area's tables in tests/verdicts/test_link.py; judged with the spec-only amqp-1.0 profile."""

from __future__ import annotations

from typing import Any

from tests.verdicts.examples import Example, with_
from tests.verdicts.link_settlement import SPEC10, dl


def ex(case: str, name: str, obs: dict[str, Any]) -> Example:
    return Example(case, name, obs, queue_type="classic", profile=SPEC10)


NO_NODE = {"answer": {"address": "absent-1", "attach": "no source", "source_address": None, "detach": "detached",
                      "error": {"condition": "amqp:not-found", "description": "no such queue"}}}
TAGS = {"published": ["m1", "m2", "m3"], "got": [dl("m1", 1), dl("m2", 2), dl("m3", 3)], "tags": ["00", "01", "02"]}
TTL = {"published": ["m1"], "sent_ttl": 600000, "got": [dl("m1")], "ttl": "599990"}
OUTCOMES = {"published": ["m1"], "outcomes": ["amqp:accepted:list", "amqp:released:list"], "got": [dl("m1")], "detach": "answered", "after": []}

GOOD: list[Example] = [
    ex("TestAttachNoNode", "attach-no-source-then-detach-with-error", NO_NODE),
    ex("TestAttachNoNode", "node-created-on-attach", {"answer": {"address": "absent-1", "attach": "source", "source_address": "absent-1"}}),
    ex("TestDeliveryTagsUnique", "distinct-tags", TAGS),
    ex("TestTtlReduced", "reduced-ttl", TTL),
    ex("TestTtlReduced", "same-ttl", with_(TTL, ttl="600000")),
    ex("TestSourceOutcomesValid", "offered-outcomes", OUTCOMES),
    ex("TestSourceOutcomesValid", "no-outcomes-named", with_(OUTCOMES, outcomes=None)),
]

VIOLATIONS: list[tuple[Example, str]] = [
    (ex("TestAttachNoNode", "session-ended-instead", {"answer": {"address": "absent-1", "attach": "session ended: amqp:not-found: no queue"}}),
     "session ended"),
    (ex("TestAttachNoNode", "never-detached", with_(NO_NODE, answer={**NO_NODE["answer"], "detach": "no detach within 3s", "error": None})),
     "no detach within 3s"),
    (ex("TestAttachNoNode", "detached-without-error", with_(NO_NODE, answer={**NO_NODE["answer"], "error": None})), "without an error"),
    (ex("TestDeliveryTagsUnique", "tag-repeated", with_(TAGS, tags=["00", "00", "01"])), "00 repeated"),
    (ex("TestDeliveryTagsUnique", "one-missing", with_(TAGS, got=TAGS["got"][:2], tags=["00", "01"])), "missing [m3]"),
    (ex("TestTtlReduced", "ttl-dropped", with_(TTL, ttl=None)), "no ttl"),
    (ex("TestTtlReduced", "ttl-raised", with_(TTL, ttl="4199990")), "ttl 4199990"),
    (ex("TestSourceOutcomesValid", "bogus-outcome", with_(OUTCOMES, outcomes=["amqp:accepted:list", "amqp:bogus:list"])), "amqp:bogus:list"),
    (ex("TestSourceOutcomesValid", "accepted-not-taken", with_(OUTCOMES, after=[dl("m1", 1, fa=False)])), "unexpected [m1]"),
]
