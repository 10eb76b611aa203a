"""A node the suite launched without a store (the target's no_store) takes restart and kill -9, and
what it then keeps is judged: qpidd documents that without its store module no durable queue or
persistent message survives, so its profile makes that loss a deviation on such a target only
(``when_target: no-store``). The same observation on a qpidd with a store, or on a URL the suite
only connects to, stays a FAIL; a loss the documentation does not cover (a deleted queue back, a
purge that removed nothing) fails on any target.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.catalogue.profiles import parse_profile, select_profile
from conformance.errors import UsageError
from conformance.kit.verdicts import Outcome, apply_profile
from conformance.nemesis import kinds
from conformance.targets import TARGET_CONDITIONS, target_conditions
from tests.verdicts.examples import CASES, OPEN, soft

QPIDD = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
NO_STORE = replace(QPIDD, target_conditions=frozenset({"no-store"}))
GONE = ("OperationTimeout: timed out after 0.5s waiting for q to answer after the restart; the broker's last answer: "
        "404 NOT_FOUND - no queue 'q' (QMF query of org.apache.qpid.broker:queue:q answered no object)")
IDS = ["persistent-1", "persistent-2", "persistent-3"]


def judge(case: str, obs: dict[str, Any], profile: Any, qt: str = "classic") -> Any:
    c = CASES[case]()
    return apply_profile(c.verdict(obs, profile, qt), c.requirement, qt, profile)


#: An observation of each case whose requirement needs durable state, with the durable queue gone.
LOST = {
    "TestConfirmedSurvives": {"variant": "kill", "ids": IDS, "drained": [], "unavailable": GONE},
    "TestAckedStaysGone": {"variant": "restart", "ids": ["held-1", "held-2", "held-3", "held-4"], "acked": ["held-1", "held-3"],
                           "drained": [], "unavailable": GONE},
    "TestPurgedStaysGone": {"variant": "restart", "ids": ["purged-1", "purged-2", "purged-3", "purged-4"], "purged": 4,
                            "control": ["after-purge-1"], "drained": [], "unavailable": GONE},
    "TestDeletedQueueStaysGone": {"variant": "kill", "deleted": "dq", "after": soft(404, "NOT_FOUND - no queue 'dq'"), "unavailable": GONE},
    "TestTransientFate": {"transient": ["transient-1"], "control": ["persistent-1"], "drained": [], "unavailable": GONE},
}


@pytest.mark.parametrize("case", sorted(LOST))
def test_durable_state_lost_is_the_documented_deviation_only_on_a_target_without_a_store(case: str) -> None:
    on_no_store = judge(case, LOST[case], NO_STORE)
    assert on_no_store.outcome is Outcome.DEVIATION, (case, on_no_store)
    assert "store module" in on_no_store.reason and "persistence module is not loaded" in on_no_store.citation
    with_store = judge(case, LOST[case], QPIDD)  # a qpidd with its store module: the same loss fails
    assert with_store.outcome is Outcome.FAIL and "could not be consumed" in with_store.observed, (case, with_store)


def test_a_deleted_queue_back_fails_even_where_the_barrier_queue_is_gone() -> None:
    obs = {**LOST["TestDeletedQueueStaysGone"], "after": OPEN}
    v = judge("TestDeletedQueueStaysGone", obs, NO_STORE)
    assert v.outcome is Outcome.FAIL and "the queue exists again" in v.observed and "still gone" in v.expected


def test_the_deleted_queue_is_reported_beside_the_gone_barrier() -> None:
    v = judge("TestDeletedQueueStaysGone", LOST["TestDeletedQueueStaysGone"], NO_STORE)
    assert "the deleted one: passive declare closed with 404" in v.observed


def test_a_purge_that_removed_nothing_fails_whatever_the_fault_did_after_it() -> None:
    obs = {**LOST["TestPurgedStaysGone"], "purged": 0}
    v = judge("TestPurgedStaysGone", obs, NO_STORE)
    assert v.outcome is Outcome.FAIL and "message-count 0" in v.observed


def test_messages_lost_with_the_queue_still_there_are_no_documented_loss() -> None:
    """The deviation is keyed on the durable queue being gone; a queue that came back empty is not it."""
    obs = {**LOST["TestConfirmedSurvives"], "unavailable": None}
    v = judge("TestConfirmedSurvives", obs, NO_STORE)
    assert v.outcome is Outcome.FAIL and "= []" in v.observed


def test_a_store_independent_requirement_passes_or_fails_on_its_own() -> None:
    gone = {"declare": OPEN, "after": soft(404, "NOT_FOUND - no queue 'nd'")}
    assert judge("TestNonDurableQueueGone", gone, NO_STORE).outcome is Outcome.PASS
    survived = {"declare": OPEN, "after": OPEN}
    v = judge("TestNonDurableQueueGone", survived, NO_STORE)
    assert v.outcome is Outcome.FAIL and "still exists" in v.observed


# -- the profile condition and the target's facts -----------------------------------------------

BASE = {"id": "x", "match": {"product": "X", "protocols": ["p"]}}
ENTRY = {"requirement": "PERSIST-CONFIRMED-SURVIVES", "observed": "queue-gone-after-restart", "reason": "r", "source": "s"}


def test_when_target_names_facts_of_the_one_vocabulary() -> None:
    p = parse_profile({**BASE, "deviations": [{**ENTRY, "when_target": "no-store"}]}, "t")
    assert p.deviations[0].when_target == ("no-store",)
    with pytest.raises(UsageError, match="when_target"):
        parse_profile({**BASE, "deviations": [{**ENTRY, "when_target": "no-disk"}]}, "t")
    assert set(TARGET_CONDITIONS) == {"no-store"}


def test_a_conditioned_entry_applies_only_where_the_target_reports_the_fact() -> None:
    p = parse_profile({**BASE, "deviations": [{**ENTRY, "when_target": ["no-store"]}]}, "t")
    assert p.deviation(ENTRY["requirement"], "classic", ENTRY["observed"]) is None
    assert replace(p, target_conditions=frozenset({"no-store"})).deviation(ENTRY["requirement"], "classic", ENTRY["observed"]) is not None
    plain = parse_profile({**BASE, "deviations": [ENTRY]}, "t")
    assert plain.deviation(ENTRY["requirement"], "classic", ENTRY["observed"]) is not None, "an unconditioned entry holds on every target"


def test_a_target_reports_no_store_from_its_definition_and_a_url_nothing() -> None:
    assert target_conditions(None) == frozenset()
    assert target_conditions(SimpleNamespace(no_store="no store module")) == frozenset({"no-store"})
    assert target_conditions(SimpleNamespace(no_store=None)) == frozenset()


class Launched:
    name = "qpidd-process"
    can_restart = True

    def __init__(self, no_store: str | None) -> None:
        self.no_store = no_store


def test_a_launched_target_without_a_store_takes_restart_and_kill_and_says_why_state_vanished() -> None:
    node = Launched("this qpidd has no store module")
    assert kinds.fault_applicability([kinds.RESTART, kinds.KILL], node) is None
    note = kinds.fault_notes([kinds.RESTART, kinds.KILL], node)
    assert "has no store (this qpidd has no store module)" in note and note.count("qpidd-process has no store") == 1
    assert kinds.fault_notes([kinds.RESTART], Launched(None)) == ""
    assert kinds.fault_notes([kinds.RESTART], None) == "", "a URL target takes no restart: nothing to note"


def test_a_queue_answering_404_on_a_launched_target_without_a_store_is_gone_for_good() -> None:
    """The case stops waiting out its recovery window: nothing durable is left to recover it."""
    from adapters.process.launcher import ProcessTarget

    assert ProcessTarget.queue_known(Launched("no store module"), "q") is False  # type: ignore[arg-type]
    assert ProcessTarget.queue_known(Launched(None), "q") is None  # type: ignore[arg-type]
