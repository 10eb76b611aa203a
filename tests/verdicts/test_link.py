"""Verdicts of the unreliable-link area on synthetic observations: each compliant observation passes,
each violation fails naming what it saw (same contract as tests/verdicts/examples.py states;
tests/verdicts/test_coverage.py counts these examples too). AMQP 1.0 examples are judged with the spec-only amqp-1.0 profile
unless they exercise a documented RabbitMQ 3.10 plugin behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue.profiles import select_profile
from conformance.kit.verdicts import Outcome, Verdict, apply_profile
from tests.verdicts import link_seeds as seeds
from tests.verdicts import link_settlement as settlement
from tests.verdicts import link_spec_rules as spec_rules
from tests.verdicts.examples import CASES, RABBIT, Example, assert_fails, assert_passes, with_

SPEC10 = select_profile("Other", "1.0", "amqp-1.0")
P10 = select_profile("RabbitMQ", "3.10.8", "amqp-1.0")


def dl(mid: str, tag: int = 1, *, redelivered: bool = False, fa: bool | None = True, count: int | None = 0,
       presettled: bool | None = False) -> dict[str, Any]:
    out: dict[str, Any] = {"id": mid, "tag": tag, "redelivered": redelivered, "delivery_count": count}
    if fa is not None:
        out["first_acquirer"] = fa
    if presettled is not None:
        out["presettled"] = presettled
    return out


def ex(case: str, name: str, obs: dict[str, Any], profile: Any = SPEC10, qt: str | None = "classic") -> Example:
    return Example(case, name, obs, queue_type=qt, profile=profile)


GONE = {"published": ["m1", "m2"], "granted": {"snd-settle-mode": "settled"},
        "fetched": [dl("m1", 1, presettled=True), dl("m2", 2, presettled=True)], "second": []}
NO_SETTLE = {"published": ["m1"], "fetched": [dl("m1", presettled=True)],
             "answer": {"refused_by": "client", "text": "pre-settled"}, "after": []}
#: AMQP 1.0 through the frame-level client, as qpidd 1.39.0 answers (the disposition ignored, nothing back)
NO_SETTLE_RAW = {"published": ["m1"], "raw": True, "attach": "answered", "transfer": {"delivery-id": 0, "settled": True}, "outcome": "released",
                 "barrier": "answered", "errors": [], "log": [], "after": []}
SYNC = {"published": ["m1"], "acked": [dl("m1")], "after": []}
ASYNC = {"published": ["m1", "m2", "m3"], "acked": [dl("m1", 1), dl("m2", 2), dl("m3", 3)], "after": []}
BROWSE = {"published": ["m1"], "acquirer": [dl("m1")],
          "browsers": [{"granted": "copy", "seen": [dl("m1")], "ready_while_browsing": 1} for _ in range(3)]}
DRAIN = {"published": ["m1", "m2", "m3"], "first": [dl("m1")],
         "drain_with_messages": {"answer": "drained", "got": [dl("m2", 2), dl("m3", 3)]},
         "drain_empty": {"answer": "drained", "got": []}}

#: AMQP 1.0 observations of the ack area's redelivery cases, as a broker sending no header gives them.
FIRST10 = {"published": ["m1", "m2", "m3", "m4"], "fetched": [dl("m1", redelivered=True, fa=False)],
           "consumed": [dl(f"m{i}", i, redelivered=True, fa=False) for i in (2, 3, 4)]}
LOSS10 = {"published": ["m1", "m2", "m3"], "held": [dl(f"m{i}", i, redelivered=True, fa=False) for i in (1, 2, 3)],
          "returned": [dl(f"m{i}", i, redelivered=True, fa=False) for i in (1, 2, 3)], "how": "cut"}
#: A reliable link's acquirer cut with three unsettled deliveries, as a broker setting both header marks gives them.
RELIABLE = with_(LOSS10, held=[dl(f"m{i}", i) for i in (1, 2, 3)], returned=[dl(f"m{i}", i, redelivered=True, fa=False, count=1) for i in (1, 2, 3)])
QPIDD = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
ORDER10 = {"published": [{"id": f"m{i}", "persistent": i % 2 == 0} for i in range(1, 9)],
           "delivered": [dl(f"m{i}", i, redelivered=True, fa=False) for i in range(1, 9)]}

LINK_GOOD: list[Example] = [
    ex("TestRedeliverOnConnectionLoss", "amqp10-both-headers", RELIABLE),
    ex("TestRedeliverOnConnectionLoss", "amqp10-counted-as-qpidd-documents", RELIABLE, QPIDD),
    ex("TestRedeliverOnConnectionLoss", "amqp10-first-acquirer-only-3.10-plugin",
       with_(RELIABLE, returned=[dl(f"m{i}", i, redelivered=True, fa=False, count=0) for i in (1, 2, 3)]), P10),
    ex("TestUnreliableLinkGoneAtFetch", "presettled", GONE),
    ex("TestUnreliableLinkGoneAtFetch", "amqp091-no-ack", with_(GONE, granted={}), RABBIT),
    ex("TestUnreliableLinkNoSettle", "broker-406", with_(NO_SETTLE, answer={"refused_by": "broker", "text": "406 unknown delivery tag 1"}), RABBIT),
    ex("TestUnreliableLinkNoSettle", "amqp10-disposition-of-presettled-ignored", NO_SETTLE_RAW, QPIDD),
    ex("TestUnreliableLinkNoSettle", "amqp10-rejected-session-ended-with-error",
       with_(NO_SETTLE_RAW, outcome="rejected", barrier="ended: end(error)", errors=["end(amqp:illegal-state)"]), QPIDD),
    ex("TestAckSync", "gone", SYNC),
    ex("TestAckAsync", "gone", ASYNC),
    ex("TestBrowseNonDestructive", "three-browsers", BROWSE),
    ex("TestDrain", "drained-both-times", DRAIN),
    # AMQP 1.0 3.2.1: a broker that sends no header says first-acquirer=false, delivery-count 0 on every
    # delivery (the Qpid Proton example broker); the spec permits it, so spec-only judging passes it.
    ex("TestFirstDeliveryNotRedelivered", "no-header-at-all", FIRST10),
    ex("TestOrderPreserved", "amqp10-no-header-at-all", ORDER10),
    ex("TestRedeliverOnConnectionLoss", "no-header-at-all", LOSS10),
    *settlement.GOOD,
    *spec_rules.GOOD,
    *seeds.GOOD,
]

LINK_VIOLATIONS: list[tuple[Example, str]] = [
    (ex("TestRedeliverOnConnectionLoss", "amqp10-count-only-but-profile-says-first-acquirer",
        with_(RELIABLE, returned=[dl("m1", 1, redelivered=True, fa=True, count=1)] + RELIABLE["returned"][1:]), P10),
     "m1(first-acquirer=true, delivery-count=1): first-acquirer=true"),
    (ex("TestRedeliverOnConnectionLoss", "amqp10-uncounted-but-profile-says-delivery-count",
        with_(RELIABLE, returned=[dl("m1", 1, redelivered=True, fa=False, count=0)] + RELIABLE["returned"][1:]), QPIDD),
     "delivery-count 0, though the profile documents"),
    (ex("TestRedeliverOnConnectionLoss", "amqp10-redelivery-claims-first-acquirer-no-header-count",
        with_(RELIABLE, returned=[dl("m1", 1, fa=True, count=None)] + RELIABLE["returned"][1:])), "first-acquirer=true, though another link acquired"),
    (ex("TestFirstDeliveryNotRedelivered", "amqp10-first-delivery-counted",
        with_(FIRST10, consumed=[dl("m2", 2, redelivered=True, fa=False), dl("m3", 3, redelivered=True, fa=True, count=2),
                                 dl("m4", 4, redelivered=True, fa=False)])), "m3(first-acquirer=true, delivery-count=2): delivery-count=2"),
    (ex("TestFirstDeliveryNotRedelivered", "amqp10-not-first-acquirer-but-profile-says-it-sets-it", FIRST10, P10),
     "first-acquirer=false, though the profile"),
    (ex("TestRedeliverOnConnectionLoss", "amqp10-redelivery-claims-first-acquirer",
        with_(LOSS10, returned=[dl("m1", 1, redelivered=True, fa=False), dl("m2", 2, fa=True), dl("m3", 3, redelivered=True, fa=False)])),
     "m2(first-acquirer=true, delivery-count=0): first-acquirer=true"),
    (ex("TestOrderPreserved", "amqp10-first-delivery-counted",
        with_(ORDER10, delivered=ORDER10["delivered"][:7] + [dl("m8", 8, redelivered=True, fa=False, count=1)])),
     "m8(first-acquirer=false, delivery-count=1): delivery-count=1"),
    (ex("TestRedeliverOnConnectionLoss", "amqp10-lost-on-disconnect", with_(LOSS10, returned=[])), "missing [m1, m2, m3]"),
    (ex("TestRedeliverOnConnectionLoss", "amqp10-duplicated", with_(RELIABLE, returned=RELIABLE["returned"] + RELIABLE["returned"][:1])), "duplicated"),
    (ex("TestUnreliableLinkGoneAtFetch", "came-back", with_(GONE, second=[dl("m1", redelivered=True, fa=False)])), "unexpected [m1]"),
    (ex("TestUnreliableLinkGoneAtFetch", "sent-unsettled", with_(GONE, fetched=[dl("m1", 1), dl("m2", 2, presettled=True)])), "unsettled: [m1]"),
    (ex("TestUnreliableLinkGoneAtFetch", "granted-unsettled", with_(GONE, granted={"snd-settle-mode": "unsettled"})), "granted snd-settle-mode unsettled"),
    (ex("TestUnreliableLinkGoneAtFetch", "lost-one", with_(GONE, fetched=[dl("m1", presettled=True)])), "missing [m2]"),
    (ex("TestUnreliableLinkNoSettle", "release-accepted", with_(NO_SETTLE, answer={"refused_by": None, "text": ""})), "accepted without complaint"),
    (ex("TestUnreliableLinkNoSettle", "released-back", with_(NO_SETTLE, answer={"refused_by": "broker", "text": "406 x"},
                                                             after=[dl("m1", redelivered=True)])), "unexpected [m1]"),
    (ex("TestUnreliableLinkNoSettle", "amqp10-released-back", with_(NO_SETTLE_RAW, after=[dl("m1", redelivered=True, fa=False)])), "unexpected [m1]"),
    (ex("TestUnreliableLinkNoSettle", "amqp10-sent-unsettled", with_(NO_SETTLE_RAW, transfer={"delivery-id": 0, "settled": False})), "unsettled"),
    (ex("TestUnreliableLinkNoSettle", "amqp10-no-transfer", with_(NO_SETTLE_RAW, transfer=None)), "no transfer"),
    (ex("TestUnreliableLinkNoSettle", "amqp10-barrier-unanswered", with_(NO_SETTLE_RAW, barrier="no answer within 2s")), "no answer within 2s"),
    (ex("TestAckSync", "resurrected", with_(SYNC, after=[dl("m1", redelivered=True, fa=False)])), "unexpected [m1]"),
    (ex("TestAckSync", "never-delivered", with_(SYNC, acked=[])), "missing [m1]"),
    (ex("TestAckAsync", "one-back", with_(ASYNC, after=[dl("m2", redelivered=True, fa=False)])), "unexpected [m2]"),
    (ex("TestAckAsync", "short", with_(ASYNC, acked=ASYNC["acked"][:2])), "missing [m3]"),
    (ex("TestBrowseNonDestructive", "acquired", with_(BROWSE, browsers=[{**BROWSE["browsers"][0], "ready_while_browsing": 0}] + BROWSE["browsers"][1:])), "ready = 0"),
    (ex("TestBrowseNonDestructive", "seen-as-reacquired", with_(BROWSE, browsers=BROWSE["browsers"][:1] + [
        {"granted": "copy", "seen": [dl("m1", redelivered=True, fa=False, count=1)], "ready_while_browsing": 1}] + BROWSE["browsers"][2:])),
     "delivery-count=1"),
    (ex("TestBrowseNonDestructive", "second-browser-blind", with_(BROWSE, browsers=BROWSE["browsers"][:1] + [
        {"granted": "copy", "seen": [], "ready_while_browsing": 1}] + BROWSE["browsers"][2:])), "missing [m1]"),
    (ex("TestBrowseNonDestructive", "gone-after-browsing", with_(BROWSE, acquirer=[])), "missing [m1]"),
    (ex("TestDrain", "session-crash", with_(DRAIN, drain_with_messages={"answer": "session ended: amqp:internal-error", "got": []},
                                           drain_empty={"answer": "not tried", "got": []})), "session ended"),
    (ex("TestDrain", "empty-unanswered", with_(DRAIN, drain_empty={"answer": "no flow answer within 3s", "got": []})), "no flow answer"),
    (ex("TestDrain", "withheld-one", with_(DRAIN, drain_with_messages={"answer": "drained", "got": [dl("m2", 2)]})), "missing [m3]"),
    *settlement.VIOLATIONS,
    *spec_rules.VIOLATIONS,
    *seeds.VIOLATIONS,
]


@pytest.mark.parametrize("e", [e.param() for e in LINK_GOOD])
def test_link_compliant_observation_passes(e: Example) -> None:
    assert_passes(e)


@pytest.mark.parametrize("e,shows", [pytest.param(e, s, id=e.id) for e, s in LINK_VIOLATIONS])
def test_link_violation_fails(e: Example, shows: str) -> None:
    assert_fails(e, shows)


def on_3_10(name: str, qt: str) -> Verdict:
    e = next(e for e, _ in LINK_VIOLATIONS if e.name == name)
    return apply_profile(Example(e.case, e.name, e.obs, queue_type=qt, profile=P10).judge(), CASES[e.case].requirement, qt, P10)


@pytest.mark.parametrize("qt", ["classic", "quorum"])
def test_browse_that_acquires_is_the_documented_3_10_deviation(qt: str) -> None:
    v = on_3_10("acquired", qt)
    assert v.outcome is Outcome.DEVIATION and "3.10.8" in v.citation and "copy" in v.reason


def test_a_false_first_acquirer_alone_is_no_spec_violation() -> None:
    """Judged by the spec only, a header-less first delivery passes; with a profile that documents
    first-acquirer it fails as a vendor verdict, never as a spec one."""
    e = next(e for e, _ in LINK_VIOLATIONS if e.name == "amqp10-not-first-acquirer-but-profile-says-it-sets-it")
    v = e.judge()
    assert v.outcome is Outcome.FAIL and v.spec == "n/a"
    counted = next(e for e, _ in LINK_VIOLATIONS if e.name == "amqp10-first-delivery-counted").judge()
    assert counted.outcome is Outcome.FAIL and counted.spec == "fail"


def test_a_broker_that_never_sets_first_acquirer_passes_and_a_counted_first_delivery_still_fails() -> None:
    """Broker-J's profile documents delivery-count as its signal: a first delivery without
    first-acquirer is no violation to excuse, and a first delivery counted as a redelivery breaks
    AMQP 1.0 3.2.1 whatever the profile says."""
    bj = select_profile("qpid-broker-j", "9.2.0", "amqp-1.0")
    req = CASES["TestFirstDeliveryNotRedelivered"].requirement
    quiet = with_(FIRST10, fetched=[dl("m1", fa=False, count=0)])
    assert apply_profile(Example("TestFirstDeliveryNotRedelivered", "bj", quiet, profile=bj).judge(), req, "classic", bj).outcome is Outcome.PASS
    counted = with_(FIRST10, fetched=[dl("m1", fa=False, count=1)])
    v = apply_profile(Example("TestFirstDeliveryNotRedelivered", "bj", counted, profile=bj).judge(), req, "classic", bj)
    # the requirement names no AMQP 1.0 rule (EXTENSION there, no spec verdict): the observation names 3.2.1
    assert v.outcome is Outcome.FAIL and "3.2.1" in v.observed, v


def test_drain_crash_is_a_deviation_on_classic_only() -> None:
    assert on_3_10("session-crash", "classic").outcome is Outcome.DEVIATION
    assert "7141" in on_3_10("session-crash", "classic").citation
    assert on_3_10("session-crash", "quorum").outcome is Outcome.FAIL
    assert on_3_10("empty-unanswered", "quorum").outcome is Outcome.DEVIATION
    assert on_3_10("withheld-one", "quorum").outcome is Outcome.FAIL


def test_no_settle_refused_by_our_own_client_tests_nothing() -> None:
    """The adapter's own refusal never satisfies LINK-UNRELIABLE-NO-SETTLE: the broker was not tested."""
    from conformance.kit.verdicts import Outcome

    v = ex("TestUnreliableLinkNoSettle", "client-refuses", NO_SETTLE).judge()
    assert v.outcome is Outcome.UNSUPPORTED and "not tested" in v.reason


def test_a_detach_that_keeps_unsettled_deliveries_is_the_documented_3_x_deviation() -> None:
    e = next(e for e, _ in settlement.VIOLATIONS if e.name == "kept-acquired")
    for qt in ("classic", "quorum"):
        v = apply_profile(Example(e.case, e.name, e.obs, queue_type=qt, profile=P10).judge(), CASES[e.case].requirement, qt, P10)
        assert v.outcome is Outcome.DEVIATION and "9022" in v.citation, v
    unanswered = next(e for e, _ in settlement.VIOLATIONS if e.name == "unanswered")
    v = apply_profile(Example(unanswered.case, unanswered.name, unanswered.obs, profile=P10).judge(), CASES[unanswered.case].requirement, "classic", P10)
    assert v.outcome is Outcome.FAIL, v  # an unanswered detach is no documented 3.x behaviour


def test_a_refused_transfer_without_outcome_and_a_transfer_to_nowhere_accepted_are_the_3_x_deviations() -> None:
    for name, cite in (("no-outcome", "2839"), ("nowhere-accepted", "8015")):
        e = next(e for e, _ in settlement.VIOLATIONS if e.name == name)
        v = apply_profile(Example(e.case, e.name, e.obs, queue_type="quorum", profile=P10).judge(), CASES[e.case].requirement, "quorum", P10)
        assert v.outcome is Outcome.DEVIATION and cite in v.citation, v
    lost = next(e for e, _ in settlement.VIOLATIONS if e.name == "accepted-but-dropped")
    v = apply_profile(Example(lost.case, lost.name, lost.obs, profile=P10).judge(), CASES[lost.case].requirement, "classic", P10)
    assert v.outcome is Outcome.FAIL, v


def test_seed_demo_on_rabbitmq_3_10_is_the_documented_browse_and_drain_deviations() -> None:
    """Seed 001's browsers acquire on RabbitMQ 3.10's plugin (quorum), and its first drain ends the
    session on a classic queue (#7119, fixed 3.10.18): deviations citing them; qpidd's stale marks on
    browser 3's copy are no documented behaviour: a fail."""
    req = CASES["TestSeedBrowseAcquireDemo"].requirement
    for name, qt, cite in (("browse-acquires", "quorum", "broker-semantics"), ("drain-crash", "classic", "7119")):
        e = next(e for e, _ in seeds.VIOLATIONS if e.name == name)
        v = apply_profile(Example(e.case, e.name, e.obs, queue_type=qt, profile=P10).judge(), req, qt, P10)
        assert v.outcome is Outcome.DEVIATION and cite in v.citation, v
    e = next(e for e, _ in seeds.VIOLATIONS if e.name == "drain-crash")
    fixed = select_profile("RabbitMQ", "3.10.18", "amqp-1.0")
    v = apply_profile(Example(e.case, e.name, e.obs, queue_type="classic", profile=fixed).judge(), req, "classic", fixed)
    assert v.outcome is Outcome.FAIL, v
    q = next(e for e, _ in seeds.VIOLATIONS if e.name == "qpidd-browser-3-sees-first-acquirer")
    v = apply_profile(q.judge(), req, "classic", seeds.QPIDD)
    assert v.outcome is Outcome.FAIL and v.spec == "fail", v
