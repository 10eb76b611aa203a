"""A profile explains, it never excuses: verdicts measure the broker against the requirement's
reference, and a profile only turns a documented difference into a deviation (conformance.kit.reference).

The cases below are the documented bugs a profile used to turn into passes: RabbitMQ 3.10's quorum
queues (requeue at the tail, x-delivery-count 0 on basic.get only, 540 under global QoS) and LavinMQ's
x-delivery-count of 1 on a first delivery and N deliveries under a limit of N.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.catalogue.profiles import load_profile_file, select_profile
from conformance.catalogue.requirements import Reference, Requirement, check_references, requirement
from conformance.errors import UsageError
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import CASES, RABBIT, connection_closed
from tests.verdicts.test_ack import requeue_nack
from tests.verdicts.test_limit import counted, looped
from tests.verdicts.test_prefetch import SCOPE_SHARED

QQ = "quorum"


def judge(case: str, obs: dict, profile=RABBIT, qt: str | None = QQ):  # type: ignore[no-untyped-def]
    return CASES[case]().verdict(obs, profile, qt)


# -- the three quorum-queue findings on RabbitMQ 3.10.8 ---------------------------------------------


def test_quorum_nack_requeued_at_the_tail_is_a_deviation_citing_the_change() -> None:
    v = judge("TestRequeuePosition", requeue_nack(["m3", "m4", "m2", "m1"]))
    assert v.outcome is Outcome.DEVIATION
    assert "#3776" in v.reason + v.citation
    assert "publication-order" in v.expected or "m1, m2, m3, m4" in v.expected, v.expected


def test_quorum_delivery_count_zero_on_basic_get_only_is_a_deviation_citing_the_fix() -> None:
    v = judge("TestCountHeader", looped("nack", [0, 1, 2, 3], False, 4))
    assert v.outcome is Outcome.DEVIATION
    assert "3.12.0" in v.reason and "#7732" in v.reason
    # the reference (absent first) passes on 3.10 too
    assert judge("TestCountHeader", looped("nack", [None, 1, 2, 3], False, 4)).outcome is Outcome.PASS


def test_quorum_global_qos_refused_with_540_is_a_deviation() -> None:
    obs = {"variant": "global-true", "consume": connection_closed(540, "NOT_IMPLEMENTED - queue 'q' does not support global qos")}
    v = judge("TestPrefetchScope", obs)
    assert v.outcome is Outcome.DEVIATION and "540" in v.observed and "global" in v.reason.lower()
    # the connection-wide limit of the 0-9-1 text passes, whatever the profile documents
    assert judge("TestPrefetchScope", SCOPE_SHARED).outcome is Outcome.PASS


# -- LavinMQ's own tracker ------------------------------------------------------------------------


def test_lavinmq_bugs_are_deviations_on_the_affected_versions_and_failures_after_the_fix() -> None:
    one_based = looped("reject", [1, 2, 3, 4], False, 4)
    two_of_limit_two = looped("reject", counted(2, None), True, 6, limit=2)
    old, fixed = select_profile("LavinMQ", "1.3.1", "amqp-0-9-1"), select_profile("LavinMQ", "2.9.1", "amqp-0-9-1")
    v = judge("TestCountHeader", one_based, old, "classic")
    assert v.outcome is Outcome.DEVIATION and "Fixed in 2.2.0 (#977)" in v.reason
    assert judge("TestCountHeader", one_based, fixed, "classic").outcome is Outcome.FAIL
    v = judge("TestMaxDeliveries", two_of_limit_two, old, "classic")
    assert v.outcome is Outcome.DEVIATION and "Fixed in 2.4.0 (#996)" in v.reason
    assert judge("TestMaxDeliveries", two_of_limit_two, fixed, "classic").outcome is Outcome.FAIL


# -- anything else fails, and says what the profile documented ------------------------------------


def test_neither_the_reference_nor_the_documented_behaviour_fails_naming_both() -> None:
    head = requeue_nack(["m2", "m1", "m3", "m4"])  # 3.10 quorum documents the tail, the reference is publication order
    v = judge("TestRequeuePosition", head)
    assert v.outcome is Outcome.FAIL
    assert "neither the reference nor what profile rabbitmq-3.10 documents" in v.reason
    assert "tail-in-return-order" in v.reason


# -- the loader refuses a profile value that would turn a difference into a pass --------------------


def _profile_file(tmp_path: Path, entry: dict) -> Path:  # type: ignore[type-arg]
    data = {
        "id": "refusal-test",
        "match": {"product": "ExampleMQ", "versions": "*", "protocols": ["amqp-0-9-1"]},
        "queue_types": {"classic": {"declare": {"durable": True, "arguments": {}}, "source": "https://example.invalid/queues"}},
        "entries": entry,
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_differing_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, {"requeue.position.nack": {"value": "tail-in-return-order", "source": "observed here"}})
    with pytest.raises(UsageError, match="differs from ACK-REQUEUE-POSITION's reference publication-order"):
        load_profile_file(path)


def test_a_differing_entry_with_its_reason_loads_as_a_documented_deviation(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, {"requeue.position.nack": {
        "value": "tail-in-return-order", "source": "https://example.invalid/changelog#42",
        "reason": "a bug: nacked messages go to the tail; fixed in 9.9 (#42)"}})
    profile = load_profile_file(path)
    v = judge("TestRequeuePosition", requeue_nack(["m3", "m4", "m2", "m1"]), profile, "classic")
    assert v.outcome is Outcome.DEVIATION and "#42" in v.citation and "fixed in 9.9" in v.reason


def test_an_entry_equal_to_the_reference_needs_no_reason(tmp_path: Path) -> None:
    load_profile_file(_profile_file(tmp_path, {"requeue.position.nack": {"value": "publication-order", "source": "the vendor's docs"}}))


def test_a_vendor_choice_must_cite_the_vendors_documentation(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, {"delivery-limit.default": {"value": 5, "source": "observed on a test server"}})
    with pytest.raises(UsageError, match="must cite the vendor's documentation"):
        load_profile_file(path)
    load_profile_file(_profile_file(tmp_path, {"delivery-limit.default": {"value": 5, "source": "https://example.invalid/docs/limits"}}))


def test_every_bundled_difference_says_why() -> None:
    """Every bundled entry that differs from a reference carries its reason (the loader enforces it;
    this names the count so a silent schema change cannot empty the check). Every requirement that
    reads the key is asked, as the schema lists them, so a key added later is covered too."""
    from conformance.catalogue.profile_keys import profile_keys
    from conformance.catalogue.profiles import bundled_profiles
    from conformance.kit.reference import documented_difference

    differing = 0
    for p in bundled_profiles():
        for key, by_qt in p.entries.items():
            for qt, entry in by_qt.items():
                for rid in profile_keys()[key].read_by:
                    ref = requirement(rid).reference_for(key)
                    if ref is not None and documented_difference(key, p, qt, ref.values) is entry:
                        assert entry.reason, (p.id, key, qt)
                        differing += 1
                        break
    assert differing >= 55


# -- the catalogue: every requirement that judges by a key states its reference ---------------------


def test_a_requirement_reading_a_reference_key_without_a_reference_is_refused() -> None:
    base = requirement("ACK-REQUEUE-POSITION")
    from dataclasses import replace

    bare = replace(base, reference=tuple(r for r in base.reference if r.key != "requeue.position.nack"))
    with pytest.raises(UsageError, match="states no reference for it"):
        check_references({bare.id: bare})


def test_requirements_sharing_a_key_must_agree_on_its_reference() -> None:
    a = requirement("LIMIT-MAX-DELIVERIES")
    b = requirement("LIMIT-DEFAULT")
    from dataclasses import replace

    other = replace(b, reference=tuple(Reference(r.key, ("limit",), r.source) if r.key == "delivery-limit.deliveries" else r
                                       for r in b.reference))
    reqs: dict[str, Requirement] = {a.id: a, other.id: other}
    with pytest.raises(UsageError, match="disagree on the reference of delivery-limit.deliveries"):
        check_references(reqs)


def test_a_pass_the_case_cannot_tell_from_the_documented_difference_says_so() -> None:
    # 3.10 documents x-delivery-count 0 on a first basic.get only: on basic.consume it is at the
    # reference (absent), and the record says the observation cannot tell the two apart
    v = judge("TestCountHeader", looped("consumer-loss", [None, 1, 2, 3], False, 4))
    assert v.outcome is Outcome.PASS and "does not tell the reference from what profile rabbitmq-3.10 documents" in v.reason
    # a pass that rules the documented value out carries no such note
    assert judge("TestRequeuePosition", requeue_nack(["m1", "m2", "m3", "m4"])).reason == ""


@pytest.mark.parametrize("source", ["documented by our own test run", "observed in docker, 2026-11-21", "seen on a dev server"])
def test_an_observation_is_no_vendor_documentation(tmp_path: Path, source: str) -> None:
    with pytest.raises(UsageError, match="must cite the vendor's documentation"):
        load_profile_file(_profile_file(tmp_path, {"delivery-limit.default": {"value": 5, "source": source}}))


def test_a_deviation_fixed_in_a_patch_release_inside_the_profiles_range_stops_at_the_fix() -> None:
    """RabbitMQ's AMQP 1.0 drain crash on classic queues (#7119) was fixed in 3.10.18 and 3.11.9: the
    same observation is the documented deviation on 3.10.8 and a failure on 3.10.18."""
    from conformance.kit.verdicts import Verdict, apply_profile

    failed = Verdict(Outcome.FAIL, expected="drain answered", observed="session ended", key="drain-session-ended")
    old = select_profile("RabbitMQ", "3.10.8", "amqp-1.0")
    assert apply_profile(failed, "LINK-DRAIN", "classic", old).outcome is Outcome.DEVIATION
    for fixed in ("3.10.18", "3.11.9", "3.11.20"):
        assert apply_profile(failed, "LINK-DRAIN", "classic", select_profile("RabbitMQ", fixed, "amqp-1.0")).outcome is Outcome.FAIL, fixed
    assert apply_profile(failed, "LINK-DRAIN", "classic", select_profile("RabbitMQ", "3.11.8", "amqp-1.0")).outcome is Outcome.DEVIATION
