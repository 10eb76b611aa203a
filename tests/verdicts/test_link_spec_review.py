"""Verdicts of the AMQP 1.0 spec-rule cases where the review of their first runs on real brokers
changed how they judge: a broker that declines link recovery, one that answers nothing, and the
RabbitMQ 3.x flow that states no delivery-count (a documented deviation; a wrong count still fails)."""

from __future__ import annotations

from conformance.catalogue.profiles import select_profile
from conformance.kit.verdicts import Outcome, apply_profile
from tests.verdicts import link_spec_rules as spec_rules
from tests.verdicts.examples import CASES, Example, with_

SPEC10 = select_profile("Other", "1.0", "amqp-1.0")
P10 = select_profile("RabbitMQ", "3.10.8", "amqp-1.0")


def test_link_recovery_declined_with_not_implemented_is_a_refusal_and_a_silent_broker_fails() -> None:
    """RabbitMQ 3.10's plugin ends the session on an attach carrying an unsettled map ("Link recovery
    not supported", amqp:not-implemented): nothing was put to it, so no pass; a broker that does not
    answer the attach at all fails."""
    end = "end({'descriptor': 29, 'value': [symbol('amqp:not-implemented'), 'Link recovery not supported', None]})"
    declined = with_(spec_rules.INCOMPLETE, attach="none", ended=[end])
    v = Example("TestIncompleteUnsettled", "declined", declined, queue_type="classic", profile=SPEC10).judge()
    assert v.outcome is Outcome.UNSUPPORTED and v.unsupported_kind == "refused" and "Link recovery" in v.observed
    silent = with_(spec_rules.INCOMPLETE, attach="none", ended=[])
    assert Example("TestIncompleteUnsettled", "silent", silent, queue_type="classic", profile=SPEC10).judge().outcome is Outcome.FAIL
    sent = with_(spec_rules.INCOMPLETE, new=["transfer(0, 0, 00, 0)"], ended=[end])
    assert Example("TestIncompleteUnsettled", "sent-then-ended", sent, queue_type="classic", profile=SPEC10).judge().outcome is Outcome.FAIL


def test_flow_state_keys_a_missing_count_apart_from_a_wrong_one() -> None:
    from conformance.cases.link.test_spec_2_7_performatives import _flow_key

    assert _flow_key("flow of the broker's receiving link 'x' without the delivery-count it knows") == "receiver-flow-without-delivery-count"
    assert _flow_key("flow of the broker's sending link 'x' without a delivery-count") == "sender-flow-without-delivery-count"
    assert _flow_key("flow of the broker's receiving link 'x': delivery-count 7, while the client's sender started at 0") == "delivery-count"
    assert _flow_key("a session flow (no handle) carrying delivery-count") == "session-flow-link-state"


def test_the_3_x_attach_flow_without_delivery_count_is_the_documented_deviation_and_a_wrong_count_still_fails() -> None:
    missing = next(e for e, _ in spec_rules.VIOLATIONS if e.name == "receiver-flow-without-count")
    behind = next(e for e, _ in spec_rules.VIOLATIONS if e.name == "sender-count-behind")
    req = CASES["TestFlowState"].requirement
    v = apply_profile(Example(missing.case, missing.name, missing.obs, queue_type="classic", profile=P10).judge(), req, "classic", P10)
    assert v.outcome is Outcome.DEVIATION and "9022" in v.citation
    w = apply_profile(Example(behind.case, behind.name, behind.obs, queue_type="classic", profile=P10).judge(), req, "classic", P10)
    assert w.outcome is Outcome.FAIL
