"""Queue configurations (conformance/catalogue/data/configurations.yaml): cells named
<queue type>+<configuration>, a profile's word for a queue type holding for its configurations
unless it names one, and a configured cell judged by the same rule (a violation still fails)."""

from __future__ import annotations

import pytest

from conformance.cases import all_cases
from conformance.catalogue.configurations import base_of, cell_types, configurations, split
from conformance.catalogue.profiles import bundled_profiles
from conformance.errors import UsageError
from tests.verdicts.examples import judged
from tests.verdicts.test_ack import requeue_obs

RABBIT = next(p for p in bundled_profiles() if p.id == "rabbitmq-3.10")
LAVIN_1 = next(p for p in bundled_profiles() if p.id == "lavinmq-1")


def test_cells_are_each_queue_type_then_its_configurations() -> None:
    assert cell_types(("classic", "quorum"), ("priority", "delivery-limit")) == (
        "classic", "quorum", "classic+priority", "classic+delivery-limit", "quorum+priority", "quorum+delivery-limit")
    assert cell_types((None,), ("priority",)) == (None,)  # a case with no queue type has no configuration
    base, config = split("quorum+length-limit-reject")
    assert base == "quorum" and config is not None and config.arguments == {"x-max-length": 10000, "x-overflow": "reject-publish"}
    assert split("classic") == ("classic", None) and base_of("classic+priority") == "classic" and base_of(None) is None
    with pytest.raises(UsageError, match="unknown queue configuration 'lazy'"):
        split("classic+lazy")
    with pytest.raises(UsageError, match="unknown queue configuration"):
        cell_types(("classic",), ("lazy",))


def test_every_case_names_known_configurations_whose_arguments_stay_out_of_its_way() -> None:
    known = configurations()
    assert {"priority", "length-limit-reject", "length-limit-drop-head", "message-ttl", "delivery-limit"} <= set(known)
    assert any(c.configurations for c in all_cases())
    for c in all_cases():
        assert set(c.configurations) <= set(known), c.__name__
    # limits far above what a case publishes and a TTL far beyond its deadline: the feature's own
    # effect never decides a verdict
    assert known["length-limit-reject"].arguments["x-max-length"] >= 1000 and known["message-ttl"].arguments["x-message-ttl"] >= 600_000


def test_a_profile_row_for_a_queue_type_holds_for_its_configurations_unless_it_names_one() -> None:
    rows = RABBIT.entries["requeue.position.nack"]
    assert RABBIT.entry("requeue.position.nack", "quorum+length-limit-drop-head") is rows["quorum"]
    assert RABBIT.entry("requeue.position.nack", "quorum+delivery-limit") is rows["quorum+delivery-limit"]
    assert RABBIT.entry("requeue.position.nack", "classic+priority") is rows[None]
    dev = next(d for d in LAVIN_1.deviations if d.requirement == "ACK-FIRST-NOT-REDELIVERED")
    assert dev.applies("ACK-FIRST-NOT-REDELIVERED", "classic+priority") and not dev.applies("ACK-FIRST-NOT-REDELIVERED", "classic")
    reject = next(d for d in LAVIN_1.deviations if d.requirement == "NACK-REJECT-REQUEUE")
    assert reject.applies("NACK-REJECT-REQUEUE", "classic+priority")  # documented for classic: every classic configuration


def test_a_configured_cell_is_judged_by_the_same_rule() -> None:
    head = requeue_obs("nack", ["m2", "m1", "m3", "m4"])
    assert judged("TestRequeuePosition", head, RABBIT, "quorum+delivery-limit").outcome.value == "deviation"
    assert judged("TestRequeuePosition", head, RABBIT, "quorum").outcome.value == "fail"  # not what quorum without a limit does
    lost = requeue_obs("nack", ["m2", "m3", "m4"])
    assert judged("TestRequeuePosition", lost, RABBIT, "quorum+delivery-limit").outcome.value == "fail"
    publication = requeue_obs("nack", ["m1", "m2", "m3", "m4"])
    assert judged("TestRequeuePosition", publication, RABBIT, "classic+priority").outcome.value == "pass"


def test_a_configuration_may_set_flags_of_the_declaration(tmp_path, monkeypatch) -> None:
    known = configurations()
    assert known["exclusive"].declare == {"exclusive": True} and known["exclusive"].arguments == {}
    assert known["auto-delete"].declare == {"auto_delete": True}
    assert known["single-active-consumer"].declare == {} and known["single-active-consumer"].arguments == {"x-single-active-consumer": True}
    from conformance.catalogue import configurations as module

    bad = tmp_path / "configurations.yaml"
    bad.write_text("schema: conformance.configurations/1\nconfigurations:\n  odd:\n    meaning: m\n    arguments: {}\n"
                   "    declare: {durable: false}\n    source: s\n")
    monkeypatch.setattr(module, "DATA", bad)
    module.configurations.cache_clear()
    try:
        with pytest.raises(UsageError, match="declare: expected flags among exclusive, auto_delete"):
            module.configurations()
    finally:
        module.configurations.cache_clear()
