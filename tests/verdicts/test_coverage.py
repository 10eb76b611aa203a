"""Tests over the example tables of every area together: each case of the catalogue has a compliant
observation and at least two violations, no two examples share a name, and without a profile the
reference judges across the areas.

An area's examples live in tests/verdicts/test_<area>.py (the areas are the folders of
conformance/cases/); tests/verdicts/test_spec_rules.py holds the single-rule cases of several areas.
"""

from __future__ import annotations

import pytest

from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import BASELINE, CASES, OPEN, Example
from tests.verdicts.test_ack import ACK_GOOD, ACK_VIOLATIONS
from tests.verdicts.test_consumers import CONSUMERS_GOOD, CONSUMERS_VIOLATIONS
from tests.verdicts.test_cuts import CUTS_GOOD, CUTS_VIOLATIONS
from tests.verdicts.test_dlx import DLX_GOOD, DLX_VIOLATIONS, LAST_ABSENT, LAST_PRESENT
from tests.verdicts.test_failover import FAILOVER_GOOD, FAILOVER_VIOLATIONS
from tests.verdicts.test_limit import DEFAULT_NONE, LIMIT_GOOD, LIMIT_VIOLATIONS, looped, max_deliveries
from tests.verdicts.test_link import LINK_GOOD, LINK_VIOLATIONS
from tests.verdicts.test_nack import NACK_GOOD, NACK_VIOLATIONS
from tests.verdicts.test_persist import NON_DURABLE_GONE, PERSIST_GOOD, PERSIST_VIOLATIONS, TRANSIENT_LOST
from tests.verdicts.test_prefetch import PREFETCH_GOOD, PREFETCH_VIOLATIONS, SCOPE_OWN, SCOPE_SHARED
from tests.verdicts.test_publish import PUBLISH_GOOD, PUBLISH_VIOLATIONS
from tests.verdicts.test_spec_rules import SPEC_GOOD, SPEC_VIOLATIONS
from tests.verdicts.test_tx import TX_GOOD, TX_VIOLATIONS

#: Every compliant observation and every violation, from the module that holds it.
TABLES: dict[str, dict[str, list[Example]]] = {
    "compliant": {
        "test_ack.py": ACK_GOOD, "test_nack.py": NACK_GOOD, "test_limit.py": LIMIT_GOOD, "test_dlx.py": DLX_GOOD,
        "test_prefetch.py": PREFETCH_GOOD, "test_persist.py": PERSIST_GOOD, "test_publish.py": PUBLISH_GOOD,
        "test_tx.py": TX_GOOD, "test_link.py": LINK_GOOD, "test_failover.py": FAILOVER_GOOD, "test_spec_rules.py": SPEC_GOOD,
        "test_consumers.py": CONSUMERS_GOOD, "test_cuts.py": CUTS_GOOD,
    },
    "violations": {
        "test_ack.py": ACK_VIOLATIONS, "test_nack.py": NACK_VIOLATIONS, "test_limit.py": LIMIT_VIOLATIONS,
        "test_dlx.py": DLX_VIOLATIONS, "test_prefetch.py": PREFETCH_VIOLATIONS, "test_persist.py": PERSIST_VIOLATIONS,
        "test_publish.py": PUBLISH_VIOLATIONS, "test_tx.py": TX_VIOLATIONS, "test_link.py": [e for e, _ in LINK_VIOLATIONS],
        "test_failover.py": FAILOVER_VIOLATIONS, "test_spec_rules.py": SPEC_VIOLATIONS,
        "test_consumers.py": CONSUMERS_VIOLATIONS, "test_cuts.py": CUTS_VIOLATIONS,
    },
}
GOOD: list[Example] = [e for table in TABLES["compliant"].values() for e in table]
VIOLATIONS: list[Example] = [e for table in TABLES["violations"].values() for e in table]


def area(case: str) -> str:
    """The folder of conformance/cases/ the case lives in."""
    return CASES[case].__module__.split(".")[2]


def test_every_case_has_a_good_example_and_violations() -> None:
    good = {e.case for e in GOOD}
    violations: dict[str, int] = {}
    for e in VIOLATIONS:
        violations[e.case] = violations.get(e.case, 0) + 1
    missing_good = sorted(f"{name} (tests/verdicts/test_{area(name)}.py)" for name in CASES if name not in good)
    few_violations = sorted(f"{name} (tests/verdicts/test_{area(name)}.py)" for name in CASES if violations.get(name, 0) < 2)
    assert not missing_good, f"cases without a compliant observation: {missing_good}"
    assert not few_violations, f"cases with fewer than two violating observations: {few_violations}"
    stale = sorted((good | set(violations)) - set(CASES))
    assert not stale, f"examples name cases the catalogue no longer has: {stale}"


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_example_names_are_unique(kind: str) -> None:
    ids = [e.id for table in TABLES[kind].values() for e in table]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_area_examples_cover_every_case_of_the_areas() -> None:
    """Every case of every area has a compliant observation and two violations its verdict really
    fails (a violation marked as a known verdict bug does not count)."""
    good = {e.case for e in GOOD}
    bad_counts = {name: sum(1 for e in VIOLATIONS if e.case == name and not e.marks) for name in CASES}
    assert set(CASES) <= good, sorted(set(CASES) - good)
    assert all(n >= 2 for n in bad_counts.values()), {k: n for k, n in bad_counts.items() if n < 2}


def test_without_a_profile_entry_the_reference_judges_and_only_vendor_choices_are_undocumented() -> None:
    for case, obs, outcome in (
        ("TestLastDeath", LAST_ABSENT, Outcome.FAIL), ("TestLastDeath", LAST_PRESENT, Outcome.PASS),
        ("TestNonDurableQueueGone", NON_DURABLE_GONE, Outcome.PASS), ("TestArgumentSupport", {"answer": OPEN, "enforced": True, "deliveries": 3}, Outcome.PASS),
        ("TestArgumentSupport", {"answer": OPEN, "enforced": False, "deliveries": 5}, Outcome.FAIL),
        ("TestPrefetchScope", SCOPE_SHARED, Outcome.PASS), ("TestPrefetchScope", SCOPE_OWN, Outcome.FAIL),
        ("TestMaxDeliveries", max_deliveries("nack", 3, True), Outcome.PASS), ("TestCountHeader", looped("nack", [0, 1, 2, 3], False, 4), Outcome.FAIL),
        # the specification leaves these to the vendor: without its documented choice, nothing to judge by
        ("TestTransientFate", TRANSIENT_LOST, Outcome.UNDOCUMENTED), ("TestDefaultLimit", DEFAULT_NONE, Outcome.UNDOCUMENTED),
    ):
        assert CASES[case]().verdict(obs, BASELINE, "classic").outcome is outcome, case
