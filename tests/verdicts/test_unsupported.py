"""``unsupported`` has three meanings only, and the record names which (conformance.unsupported).

Every path that can end a case unsupported, judged on synthetic observations: a clean refusal seen
on the wire is unsupported (refused) with the refusal recorded; what the adapter or protocol cannot
express, or a fault the target cannot take, says so; a broker that refuses what its specification
requires, answers outside its protocol, or accepts and does not do, fails naming the rule."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue.profiles import Documented, bundled_profiles, parse_profile, select_profile
from conformance.catalogue.requirements import requirement
from conformance.errors import ChannelClosed, ProtocolViolation, TargetCannot, Unsupported, UsageError
from conformance.kit.refusals import observed_refusal, profile_skip, refusal_verdict, unsupported_verdict, violation_verdict
from conformance.kit.verdicts import Outcome
from conformance.unsupported import CANNOT_EXPRESS, KINDS, NO_FAULT, REFUSED, label, tally
from tests.verdicts.examples import CASES

RABBIT = select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1")
SPEC10 = select_profile("Other", "1.0", "amqp-1.0")
REFUSED_406 = Documented("LIMIT-MAX-DELIVERIES", ("classic",), "classic queues have no delivery limit", "feature matrix",
                         kind=REFUSED, refusal="406 x-delivery-limit")
CANNOT = Documented("LIMIT-MAX-DELIVERIES", ("classic",), "no such queue argument in this dialect", "vendor doc", kind=CANNOT_EXPRESS)


# -- the exceptions carry their kind ------------------------------------------------------------

def test_each_unsupported_exception_carries_one_of_the_three_kinds() -> None:
    assert Unsupported("no basic.recover over AMQP 1.0").kind == CANNOT_EXPRESS
    assert TargetCannot("an external URL cannot be restarted").kind == NO_FAULT
    refused = TargetCannot("coordinator refused", kind=REFUSED, refusal="detach amqp:not-implemented")
    assert refused.kind == REFUSED and refused.refusal == "detach amqp:not-implemented"
    with pytest.raises(ValueError, match="refusal"):
        TargetCannot("the broker said no", kind=REFUSED)  # a refusal nobody saw is no refusal
    with pytest.raises(ValueError, match="kind"):
        Unsupported("x", kind="broker-is-odd")
    assert set(KINDS) == {"cannot-express", "refused", "no-fault"}


def test_an_unsupported_verdict_records_its_kind_and_a_refusal_as_the_observation() -> None:
    v = unsupported_verdict(TargetCannot("coordinator refused", kind=REFUSED, refusal="attach answered with detach: amqp:not-implemented"),
                            "expected", "target rabbitmq-local")
    assert (v.outcome, v.unsupported_kind) == (Outcome.UNSUPPORTED, REFUSED)
    assert "amqp:not-implemented" in v.observed and v.reason.startswith("target rabbitmq-local: ")
    fault = unsupported_verdict(TargetCannot("the URL cannot be restarted"), "expected", "target amqp://h/")
    assert (fault.unsupported_kind, fault.observed) == (NO_FAULT, "not run")
    assert "UNSUPPORTED (no-fault)" in fault.render("PERSIST-X", "MUST")


# -- a protocol violation fails, naming the rule -------------------------------------------------

def test_a_declare_answered_with_accepted_fails_naming_amqp_1_0_4_3() -> None:
    from adapters.amqp10.proton_adapter import DECLARE_RULE

    exc = ProtocolViolation(DECLARE_RULE, expected="declare answered with declared (carrying a txn-id), or rejected with a transaction-error",
                            observed="the broker attached a link to the transaction coordinator, then answered declare with accepted")
    v = violation_verdict(exc)
    assert (v.outcome, v.spec) == (Outcome.FAIL, "fail")
    assert "amqp-1.0 4.3 declare error" in v.reason and "MUST" in v.citation and "transaction-error" in v.citation
    assert "answered declare with accepted" in v.observed and "declared" in v.expected


def test_the_proton_adapter_raises_a_violation_not_unsupported_for_a_declare_answered_accepted() -> None:
    """The adapter's judgement of the coordinator's answer, on a synthetic disposition."""
    from proton import Delivery

    from adapters.amqp10.proton_adapter import DECLARED, ProtonSession

    class Remote:
        def __init__(self, data: Any) -> None:
            self.data = data

    class Answer:
        def __init__(self, state: Any, data: Any = None) -> None:
            self.remote_state, self.remote = state, Remote(data)

    session = ProtonSession.__new__(ProtonSession)
    session._control = lambda body, what: Answer(Delivery.ACCEPTED)  # type: ignore[method-assign]
    with pytest.raises(ProtocolViolation) as caught:
        session._declare()
    assert caught.value.rule == "amqp-1.0 4.3 declare error" and "answered declare with accepted" in caught.value.observed
    assert not isinstance(caught.value, Unsupported)
    session._control = lambda body, what: Answer(DECLARED, [b"txn-1"])  # type: ignore[method-assign]
    session._declare()
    assert session._txn == b"txn-1"


# -- a refusal on the wire ------------------------------------------------------------------------

def test_the_refusal_a_profile_documents_seen_on_the_wire_is_unsupported_refused() -> None:
    req = requirement("LIMIT-MAX-DELIVERIES")
    exc = ChannelClosed(406, "PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'q'")
    v = refusal_verdict(exc, req, "amqp-0-9-1", REFUSED_406)
    assert v is not None and (v.outcome, v.unsupported_kind) == (Outcome.UNSUPPORTED, REFUSED)
    assert "406 PRECONDITION_FAILED" in v.observed and v.citation == "feature matrix"
    # another code than the documented one is no documented refusal: the runner's error path
    assert refusal_verdict(ChannelClosed(404, "NOT_FOUND"), req, "amqp-0-9-1", REFUSED_406) is None
    assert refusal_verdict(exc, req, "amqp-0-9-1", None) is None


def test_540_for_a_method_the_specification_requires_fails_naming_its_chassis_rule() -> None:
    req = requirement("TX-PUBLISH-VISIBLE-AFTER-COMMIT")
    for hard in (False, True):  # a channel close, or the whole connection closed
        v = refusal_verdict(ChannelClosed(540, "NOT_IMPLEMENTED - tx.select not supported", hard=hard), req, "amqp-0-9-1")
        assert v is not None and (v.outcome, v.spec) == (Outcome.FAIL, "fail"), v
        assert "amqp-0-9-1 tx/select/chassis/server" in v.reason and "540 NOT_IMPLEMENTED" in v.observed
        assert "connection closed" in v.observed if hard else "channel closed" in v.observed


def test_540_for_an_optional_feature_is_a_clean_refusal() -> None:
    v = refusal_verdict(ChannelClosed(540, "NOT_IMPLEMENTED - x-delivery-limit"), requirement("LIMIT-MAX-DELIVERIES"), "amqp-0-9-1")
    assert v is not None and (v.outcome, v.unsupported_kind) == (Outcome.UNSUPPORTED, REFUSED) and "540" in v.observed


def test_a_refusal_the_case_caught_itself_is_matched_in_its_observations() -> None:
    refused = {"declare": {"closed": True, "hard": False, "code": 406, "text": "PRECONDITION_FAILED - invalid arg 'x-delivery-limit'"}}
    v = observed_refusal(refused, "expected", REFUSED_406)
    assert v is not None and (v.outcome, v.unsupported_kind) == (Outcome.UNSUPPORTED, REFUSED) and "406" in v.observed
    # accepted (no refusal in the observations): the case is judged like any other
    assert observed_refusal({"declare": {"closed": False}}, "expected", REFUSED_406) is None
    assert observed_refusal(refused, "expected", CANNOT) is None and observed_refusal(refused, "expected", None) is None


def test_accepted_and_not_enforced_fails_where_the_profile_says_the_broker_refuses() -> None:
    """RabbitMQ 3.10's profile says classic queues refuse x-delivery-limit: the case runs, and a
    broker that took the argument and delivered the message forever fails instead of being excused."""
    doc = RABBIT.unsupported_reason("LIMIT-MAX-DELIVERIES", "classic")
    assert doc is not None and (doc.kind, doc.refusal) == (REFUSED, "406 x-delivery-limit")
    assert profile_skip(doc, "expected") is None  # the case is run, not skipped
    rounds = 8
    obs = {"limit": 2, "how": "reject", "rounds": rounds, "gone": False,
           "deliveries": [{"redelivered": i > 0, "count": None, "has_header": False} for i in range(rounds)]}
    assert observed_refusal(obs, "expected", doc) is None
    assert CASES["TestMaxDeliveries"]().verdict(obs, RABBIT, "classic").outcome is Outcome.FAIL


def test_only_a_cannot_express_profile_entry_skips_its_case() -> None:
    v = profile_skip(CANNOT, "expected")
    assert v is not None and (v.outcome, v.unsupported_kind, v.observed) == (Outcome.UNSUPPORTED, CANNOT_EXPRESS, "not run")
    assert profile_skip(REFUSED_406, "expected") is None and profile_skip(None, "expected") is None


# -- the profile loader --------------------------------------------------------------------------

def _profile(unsupported: list[dict[str, Any]]) -> Any:
    return parse_profile({"id": "t", "match": {"product": "T", "protocols": ["amqp-0-9-1"]}, "unsupported": unsupported}, "t.yaml")


BASE = {"requirement": "LIMIT-MAX-DELIVERIES", "reason": "no delivery limit", "source": "vendor doc"}


@pytest.mark.parametrize("entry, problem", [
    (BASE, "kind"),
    ({**BASE, "kind": "because"}, "kind"),
    ({**BASE, "kind": "refused"}, "needs 'refusal'"),
    ({**BASE, "kind": "cannot-express", "refusal": "406"}, "cannot claim a refusal"),
    ({**BASE, "kind": "cannot-express", "reason": "x-delivery-limit is refused with 406"}, "cannot claim a refusal"),
    ({**BASE, "kind": "no-fault"}, "kind"),  # a broker's profile cannot say the target takes no fault
])
def test_the_loader_refuses_an_unsupported_entry_without_a_kind_or_refusal(entry: dict[str, Any], problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        _profile([entry])


def test_the_loader_keeps_kind_and_refusal() -> None:
    doc = _profile([{**BASE, "kind": "refused", "refusal": "406 x-delivery-limit"}]).unsupported[0]
    assert (doc.kind, doc.refusal) == (REFUSED, "406 x-delivery-limit")
    with pytest.raises(UsageError, match="bare reply code"):
        _profile([{**BASE, "kind": "refused", "refusal": 406}])


def test_every_bundled_unsupported_entry_names_its_kind() -> None:
    for p in bundled_profiles():
        for doc in p.unsupported:
            assert doc.kind in ("cannot-express", "refused"), (p.id, doc.requirement)
            assert doc.kind != "refused" or doc.refusal, (p.id, doc.requirement)


# -- the unreliable link's client-side refusal --------------------------------------------------

NO_SETTLE = {"published": ["m1"], "fetched": [{"id": "m1", "tag": 1, "redelivered": False, "presettled": True}],
             "answer": {"refused_by": "client", "text": "pre-settled"}, "after": []}


def test_an_unreliable_link_message_that_comes_back_fails_even_when_the_client_cannot_settle_it() -> None:
    back = {**NO_SETTLE, "after": [{"id": "m1", "tag": 1, "redelivered": True}]}
    v = CASES["TestUnreliableLinkNoSettle"]().verdict(back, SPEC10, "classic")
    assert v.outcome is Outcome.FAIL and "m1" in v.observed
    kept = CASES["TestUnreliableLinkNoSettle"]().verdict(NO_SETTLE, SPEC10, "classic")
    assert (kept.outcome, kept.unsupported_kind) == (Outcome.UNSUPPORTED, CANNOT_EXPRESS) and "not tested" in kept.reason


# -- what outputs show --------------------------------------------------------------------------

def test_outputs_show_the_kind_beside_unsupported() -> None:
    assert label({"verdict": "unsupported", "unsupported_kind": "refused"}) == "unsupported (refused)"
    assert label({"verdict": "fail", "unsupported_kind": None}) == "fail"
    records = [{"verdict": "unsupported", "unsupported_kind": k} for k in ("refused", "refused", "no-fault")] + [{"verdict": "pass"}]
    assert tally(records) == "unsupported: 1 no-fault, 2 refused" or tally(records) == "unsupported: 2 refused, 1 no-fault"
    from conformance.runner.progress import case_line

    assert case_line({"verdict": "unsupported", "unsupported_kind": "no-fault", "case_id": "c", "requirement": "R", "level": "MUST"}) \
        .startswith("UNSUPPORTED (NO-FAULT)")


def test_the_record_schema_and_the_report_carry_the_kind() -> None:
    from reports.groupings import LATEST_FIELDS, WORST_FIELDS
    from reports.render import context
    from reports.schema import RESULT_FIELDS

    assert "unsupported_kind" in {f for f, _, _ in RESULT_FIELDS}
    assert "unsupported_kind" in LATEST_FIELDS and "unsupported_kind" in WORST_FIELDS
    cell = {"column": "RabbitMQ 3.10.8 amqp-1.0", "requirement": "TX-X", "level": "EXTENSION", "area": "tx", "verdict": "unsupported",
            "unsupported_kind": "refused", "product": "RabbitMQ", "version": "3.10.8", "protocol": "amqp-1.0", "queue_type": None}
    # a column of nothing but unsupported cells is not drawn (reports.analysis.undrawn_columns): one judged cell beside it
    judged = {**cell, "requirement": "TX-Y", "verdict": "pass", "unsupported_kind": None}
    ctx = context({"cells": [cell, judged], "level_scores": [], "area_scores": [], "runs": [], "durations": [], "flakiness": [], "summary": {}})
    assert ctx["grid"][("TX-X", cell["column"])]["label"] == "unsupported (refused)"


def test_a_profile_lack_cannot_claim_a_refusal() -> None:
    def lacking(reason: str) -> Any:
        return parse_profile({"id": "t", "match": {"product": "T", "protocols": ["amqp-1.0"]},
                              "lacks": [{"capability": "browse", "reason": reason, "source": "doc"}]}, "t.yaml")

    assert "browse" in lacking("the dialect has no distribution modes").lacks
    with pytest.raises(UsageError, match="cannot claim a refusal"):
        lacking("the broker refuses distribution-mode copy")


def test_a_documented_refusal_matches_its_words_not_any_close_with_its_code() -> None:
    """A 406 for something else later in the case (an unknown delivery tag after the argument was
    accepted) is not the documented refusal of x-delivery-limit: the case is judged, not excused."""
    doc = RABBIT.unsupported_reason("LIMIT-MAX-DELIVERIES", "classic")
    req = requirement("LIMIT-MAX-DELIVERIES")
    argument = ChannelClosed(406, "PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'q'")
    other = ChannelClosed(406, "PRECONDITION_FAILED - unknown delivery tag 3")
    refused = refusal_verdict(argument, req, "amqp-0-9-1", doc)
    assert refused is not None and refused.unsupported_kind == REFUSED
    assert refusal_verdict(other, req, "amqp-0-9-1", doc) is None
    late = {"declare": {"closed": False}, "ack": {"closed": True, "hard": False, "code": 406, "text": "PRECONDITION_FAILED - unknown delivery tag 3"}}
    assert observed_refusal(late, "expected", doc) is None


def test_only_the_coordinator_links_own_detach_is_a_refusal_of_transactions() -> None:
    from adapters.amqp10.proton_adapter import coordinator_refused

    refused = ChannelClosed(540, "broker refused a transaction coordinator link: amqp:not-implemented: no transactions")
    assert coordinator_refused(refused, link_detached=True)
    assert coordinator_refused(refused, link_detached=False)  # RabbitMQ 3.x ends the session with it
    assert coordinator_refused(ChannelClosed(0, "broker refused a transaction coordinator link: amqp:unauthorized-access"), link_detached=True)
    # the session ended for another reason, the broker failed internally, the connection closed: no refusal
    assert not coordinator_refused(ChannelClosed(0, "session ended by broker: amqp:resource-limit-exceeded"), link_detached=False)
    assert not coordinator_refused(ChannelClosed(541, "amqp:internal-error: boom"), link_detached=True)
    assert not coordinator_refused(ChannelClosed(320, "amqp:connection:forced", hard=True), link_detached=True)


def test_a_delivery_limit_refused_by_another_brokers_code_is_a_clean_refusal_too() -> None:
    """Not RabbitMQ's 406 alone: any channel exception at the declare, or 540, is the protocol's own
    way of refusing the optional argument (a broker the suite never met may answer 405 or 540)."""
    case = CASES["TestArgumentSupport"]()
    spec_only = select_profile("Other", "1.0", "amqp-0-9-1")
    for answer in ({"closed": True, "hard": False, "code": 405, "text": "RESOURCE_LOCKED - no limits here"},
                   {"closed": True, "hard": True, "code": 540, "text": "NOT_IMPLEMENTED - x-delivery-limit"}):
        v = case.verdict({"answer": answer}, spec_only, "classic")
        assert (v.outcome, v.unsupported_kind) == (Outcome.UNSUPPORTED, REFUSED) and str(answer["code"]) in v.observed
    # a connection closed for another reason is no clean refusal: judged (fails)
    v = case.verdict({"answer": {"closed": True, "hard": True, "code": 320, "text": "CONNECTION_FORCED"}}, spec_only, "classic")
    assert v.outcome is Outcome.FAIL
