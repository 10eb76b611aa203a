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
SENDER_NO_NODE = {"exchange": "conformance.missing.x", "attach": {"address": "conformance.missing.x", "attach": "no target", "target_address": None,
                                                                 "detach": "detached", "error": {"condition": "amqp:not-found",
                                                                                                 "description": "Node not found: conformance.missing.x"}}}
TAGS = {"published": ["m1", "m2", "m3"], "got": [dl("m1", 1), dl("m2", 2), dl("m3", 3)], "tags": ["00", "01", "02"]}
TTL = {"published": ["m1"], "sent_ttl": 600000, "got": [dl("m1")], "ttl": "599990"}
OUTCOMES = {"published": ["m1"], "outcomes": ["amqp:accepted:list", "amqp:released:list"], "got": [dl("m1")], "detach": "answered", "after": []}

GOOD: list[Example] = [
    ex("TestAttachNoNode", "attach-no-source-then-detach-with-error", NO_NODE),
    ex("TestAttachNoNode", "node-created-on-attach", {"answer": {"address": "absent-1", "attach": "source", "source_address": "absent-1"}}),
    # PUBLISH-UNKNOWN-EXCHANGE-404 over AMQP 1.0: a sending link attached to an absent exchange's node (qpidd 1.39.0's answer)
    ex("TestUnknownExchange", "sender-attach-no-target-then-detach-with-error", SENDER_NO_NODE),
    ex("TestUnknownExchange", "exchange-node-created-on-attach", {"exchange": "x", "attach": {"address": "x", "attach": "target", "target_address": "x"}}),
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
    (ex("TestUnknownExchange", "sender-session-ended-instead",
        {"exchange": "x", "attach": {"address": "/exchange/x/rk", "attach": "session ended: amqp:not-found: NOT_FOUND - no exchange 'x'"}}), "session ended"),
    (ex("TestUnknownExchange", "sender-detached-without-error", with_(SENDER_NO_NODE, attach={**SENDER_NO_NODE["attach"], "error": None})),
     "without an error"),
    (ex("TestUnknownExchange", "sender-left-attached-with-no-target",
        with_(SENDER_NO_NODE, attach={**SENDER_NO_NODE["attach"], "detach": "no detach within 3s", "error": None})), "no detach within 3s"),
    (ex("TestDeliveryTagsUnique", "tag-repeated", with_(TAGS, tags=["00", "00", "01"])), "00 repeated"),
    (ex("TestDeliveryTagsUnique", "one-missing", with_(TAGS, got=TAGS["got"][:2], tags=["00", "01"])), "missing [m3]"),
    (ex("TestTtlReduced", "ttl-dropped", with_(TTL, ttl=None)), "no ttl"),
    (ex("TestTtlReduced", "ttl-raised", with_(TTL, ttl="4199990")), "ttl 4199990"),
    (ex("TestSourceOutcomesValid", "bogus-outcome", with_(OUTCOMES, outcomes=["amqp:accepted:list", "amqp:bogus:list"])), "amqp:bogus:list"),
    (ex("TestSourceOutcomesValid", "accepted-not-taken", with_(OUTCOMES, after=[dl("m1", 1, fa=False)])), "unexpected [m1]"),
]


# -- the recorded exchange (cases/link/test_spec_2_7_performatives.py): the broker's frames, decoded --
def _fr(who: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"from": who, "conn": 1, "ch": 0, "name": name, **fields}


def _attach(who: str, link: str, handle: int, role: str, idc: int | None = 0, unsettled: Any = None) -> dict[str, Any]:
    return _fr(who, "attach", link=link, handle=handle, role=role, source=True, target=True, unsettled=unsettled, **{
        "incomplete-unsettled": False, "initial-delivery-count": idc, "source-dynamic-node-properties": None, "target-dynamic-node-properties": None})


def _transfer(who: str, handle: int, did: int | None, tag: str | None, more: bool = False, settled: Any = None) -> dict[str, Any]:
    return _fr(who, "transfer", handle=handle, settled=settled, more=more, state=None, resume=False, aborted=False,
               **{"delivery-id": did, "delivery-tag": tag})


def _flow(handle: int | None, count: int | None, credit: int | None = 3, drain: bool = False) -> dict[str, Any]:
    return _fr("server", "flow", handle=handle, available=None, drain=drain, echo=False, **{"delivery-count": count, "link-credit": credit})


def _disp(first: int, settled: bool = True) -> dict[str, Any]:
    return _fr("server", "disposition", role="receiver", first=first, last=None, settled=settled, state={"descriptor": 36, "value": []})


FRAMES = [
    _attach("client", "s", 0, "sender"), _attach("server", "s", 0, "receiver", idc=None), _flow(0, 0, 100),
    _transfer("client", 0, 0, "01", more=True), _transfer("client", 0, None, None), _disp(0),
    _attach("client", "r", 1, "receiver", idc=None), _attach("server", "r", 1, "sender", idc=0),
    _transfer("server", 1, 0, "aa", more=True), _transfer("server", 1, 0, "aa"), _transfer("server", 1, 1, "ab", more=True), _transfer("server", 1, None, None),
    _flow(1, 3, 0, drain=True), _flow(None, None, None),
]
WIRE = {"published": ["m1", "m2"], "got": [dl("m1", 1), dl("m2", 2)], "drain": "answered", "ended": None, "frames": FRAMES}


def _swap(frames: list[dict[str, Any]], i: int, new: dict[str, Any]) -> list[dict[str, Any]]:
    return frames[:i] + [new] + frames[i + 1:]


ABORT = {"aborted": "aborted", "then": "m1 accepted", "published": ["m1"], "after": [dl("m1")]}
DYN = {"source": {"role": "receiver", "link": "dyn-r-1", "container": "c-1", "answer": "attached", "dynamic": True, "address": "c-1_dyn-r-1",
                  "properties": [["lifetime-policy", {"descriptor": 43, "value": []}], ["supported-dist-modes", ["move"]]]},
       "target": {"role": "sender", "link": "dyn-s-1", "container": "c-1", "answer": "attached", "dynamic": True, "address": "c-1_dyn-s-1", "properties": None}}
POST = {"published": ["m1"], "answer": "transactional-state accepted (this transaction)", "wire": [], "after": [dl("m1")]}

GOOD += [
    ex("TestTransferFields", "whole-deliveries-in-turn", WIRE),
    ex("TestAttachState", "initial-count-no-unsettled-map", WIRE),
    ex("TestFlowState", "delivery-count-stated", WIRE),
    ex("TestReceiverSettlesFirst", "settled-by-the-first-disposition", WIRE),
    ex("TestAbortDiscarded", "aborted-delivery-discarded", ABORT),
    ex("TestDynamicNodeAddress", "source-and-target-created", DYN),
    ex("TestDynamicNodeAddress", "target-refused-source-created", with_(DYN, target={**DYN["target"], "answer": "refused: amqp:not-implemented"})),
    ex("TestDynamicAddressTraceable", "address-names-link-and-container", DYN),
    ex("TestPostingPresumptiveOutcome", "transactional-state-accepted", POST),
]

VIOLATIONS += [
    (ex("TestTransferFields", "interleaved", with_(WIRE, frames=_swap(FRAMES, 9, _transfer("server", 1, 1, "ab", more=True)))), "interleaved"),
    (ex("TestTransferFields", "no-delivery-id", with_(WIRE, frames=_swap(FRAMES, 8, _transfer("server", 1, None, "aa", more=True)))), "without a delivery-id"),
    (ex("TestTransferFields", "continuation-tag-changed", with_(WIRE, frames=_swap(FRAMES, 9, _transfer("server", 1, 0, "ff")))), "delivery-tag ff"),
    (ex("TestAttachState", "no-initial-count", with_(WIRE, frames=_swap(FRAMES, 7, _attach("server", "r", 1, "sender", idc=None)))), "without initial-delivery-count"),
    (ex("TestAttachState", "unsettled-map-on-fresh-attach", with_(WIRE, frames=_swap(FRAMES, 7, _attach("server", "r", 1, "sender", unsettled=["aa", None])))),
     "with a null key"),
    (ex("TestFlowState", "receiver-flow-without-count", with_(WIRE, frames=_swap(FRAMES, 2, _flow(0, None, 100)))), "without the delivery-count it knows"),
    (ex("TestFlowState", "sender-count-behind", with_(WIRE, frames=_swap(FRAMES, 12, _flow(1, 1, 0, drain=True)))), "below initial 0 + 2"),
    (ex("TestFlowState", "session-flow-with-link-state", with_(WIRE, frames=_swap(FRAMES, 13, _flow(None, 4, 2)))), "carrying delivery-count"),
    (ex("TestReceiverSettlesFirst", "first-disposition-unsettled", with_(WIRE, frames=_swap(FRAMES, 5, _disp(0, settled=False)))), "not settled"),
    (ex("TestReceiverSettlesFirst", "no-disposition", with_(WIRE, frames=FRAMES[:5] + FRAMES[6:])), "no disposition"),
    (ex("TestAbortDiscarded", "aborted-queued", with_(ABORT, after=[dl("m-aborted"), dl("m1", 2)])), "unexpected [m-aborted]"),
    (ex("TestAbortDiscarded", "connection-closed", with_(ABORT, then="m1 not taken: connection lost", after=[])), "m1 not taken"),
    (ex("TestDynamicNodeAddress", "address-unset", with_(DYN, source={**DYN["source"], "address": None})), "source address None"),
    (ex("TestDynamicNodeAddress", "bad-lifetime-policy", with_(DYN, source={**DYN["source"], "properties": [["lifetime-policy", "forever"]]})), "no lifetime policy"),
    (ex("TestDynamicNodeAddress", "unanswered", with_(DYN, target={**DYN["target"], "answer": "no attach within 3s"})), "no attach within 3s"),
    (ex("TestDynamicAddressTraceable", "opaque-address", with_(DYN, source={**DYN["source"], "address": "tmp-42"})), "'tmp-42'"),
    (ex("TestDynamicAddressTraceable", "container-missing", with_(DYN, source={**DYN["source"], "address": "dyn-r-1"})), "'dyn-r-1'"),
    (ex("TestPostingPresumptiveOutcome", "plain-accepted", with_(POST, answer="accepted")), "accepted"),
    (ex("TestPostingPresumptiveOutcome", "other-transaction", with_(POST, answer="transactional-state accepted (txn-id b'x', not this transaction's)")),
     "not this transaction's"),
]


# -- the frame-level cases (cases/link/test_spec_2_7_frames.py) --
ECHO = {"attach": "answered", "flows": [{"handle": 0, "echo": False, "link-credit": 0}], "log": []}
EARLY = {"published": ["m1", "m2", "m3"], "credit": 1, "transfers": 1, "attach": "answered", "log": [], "after": [dl("m1"), dl("m2", 2), dl("m3", 3)]}
CONT = {"ready": "ready", "dispositions": [[1, 1, True]], "log": [], "published": ["m1", "m2"], "after": [dl("m1"), dl("m2", 2)]}
MORE = {"ready": "ready", "then": "m1 settled", "log": [], "published": ["m1"], "after": [dl("m1")]}
RESUME = {"ready": "ready", "dispositions": [[1, 1, True]], "ended": [], "log": [], "published": ["m1"], "after": [dl("m1")]}
INCOMPLETE = {"published": ["m1", "m2"], "attach": "answered", "new": [], "log": [], "after": [dl("m1"), dl("m2", 2)]}
FILTER = {"attach": "answered", "log": [], "filter": [{"key": "selector", "key-type": "symbol", "value": "...", "value-type": "described"}]}

GOOD += [
    ex("TestFlowEcho", "echo-answered", ECHO),
    ex("TestCreditBeforeAttach", "one-for-one", EARLY),
    ex("TestSettledContinuation", "no-disposition-for-the-settled", CONT),
    ex("TestMoreWithAborted", "aborted-wins", MORE),
    ex("TestResumeUnknownIgnored", "resumed-unknown-ignored", RESUME),
    ex("TestIncompleteUnsettled", "no-new-deliveries", INCOMPLETE),
    ex("TestFilterSetValid", "symbol-key-described-value", FILTER),
    ex("TestFilterSetValid", "no-filter-in-place", with_(FILTER, filter=None)),
]

VIOLATIONS += [
    (ex("TestFlowEcho", "unanswered", with_(ECHO, flows=[])), "flows: none"),
    (ex("TestFlowEcho", "echo-loop", with_(ECHO, flows=[{"handle": 0, "echo": True, "link-credit": 0}])), "'echo': True"),
    (ex("TestCreditBeforeAttach", "early-credit-ignored", with_(EARLY, transfers=0)), "0 transfer(s)"),
    (ex("TestCreditBeforeAttach", "beyond-credit", with_(EARLY, transfers=3)), "3 transfer(s)"),
    (ex("TestSettledContinuation", "taken-unsettled", with_(CONT, dispositions=[[0, 0, True], [1, 1, True]])), "covering m1: [[0, 0, True]]"),
    (ex("TestSettledContinuation", "lost", with_(CONT, after=[dl("m2")])), "missing [m1]"),
    (ex("TestMoreWithAborted", "session-ended", with_(MORE, then="no disposition for m1: end(internal-error)", after=[])), "no disposition for m1"),
    (ex("TestMoreWithAborted", "aborted-queued", with_(MORE, after=[dl("m-aborted"), dl("m1", 2)])), "unexpected [m-aborted]"),
    (ex("TestResumeUnknownIgnored", "resumed-queued", with_(RESUME, after=[dl("m-resumed"), dl("m1", 2)])), "unexpected [m-resumed]"),
    (ex("TestResumeUnknownIgnored", "no-credit", with_(RESUME, ready="no credit: attach, detach")), "no credit"),
    (ex("TestIncompleteUnsettled", "new-sent", with_(INCOMPLETE, new=["transfer(0, 0, 00, 0)"], after=[dl("m2", 2)])), "1 new"),
    (ex("TestIncompleteUnsettled", "lost", with_(INCOMPLETE, after=[dl("m1")])), "missing [m2]"),
    (ex("TestIncompleteUnsettled", "attach-unanswered", with_(INCOMPLETE, attach="none")), "attach: none"),
    (ex("TestFilterSetValid", "string-key", with_(FILTER, filter=[{**FILTER["filter"][0], "key-type": "str"}])), "'key-type': 'str'"),
    (ex("TestFilterSetValid", "plain-value", with_(FILTER, filter=[{**FILTER["filter"][0], "value-type": "str"}])), "'value-type': 'str'"),
]
