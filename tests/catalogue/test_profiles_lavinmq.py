"""The LavinMQ profiles: cited, gap-free from 1.0.0 to the newest release, the seed-003 behaviours
encoded, and the version deltas (x-delivery-count on a first delivery, deliveries per limit) judged
as the profile says. Verdicts are fed synthetic observations (pure logic; the broker is not here)."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conformance.catalogue.profile_keys import profile_keys
from conformance.catalogue.profiles import bundled_profiles, select_profile
from conformance.catalogue.requirements import catalogue
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import CASES
from tests.verdicts.test_dlx import LAST_ABSENT
from tests.verdicts.test_limit import counted, looped
from tests.verdicts.test_persist import TRANSIENT_KEPT, TRANSIENT_LOST
from tests.verdicts.test_prefetch import SCOPE_OWN, SCOPE_SHARED

#: The newest release in cloudamqp/lavinmq CHANGELOG.md as read for these profiles (research 2026-11).
NEWEST = Version("2.9.1")
LAVIN = [p for p in bundled_profiles() if p.product == "LavinMQ"]
SEED_003 = "003_8cd52a762dc6f1af.txt"


def test_the_lavinmq_profiles_are_bundled() -> None:
    assert {p.id for p in LAVIN} == {"lavinmq-1", "lavinmq-2.0", "lavinmq-2.2", "lavinmq-2.4", "lavinmq-2.9"}


def test_each_version_extends_the_previous_one() -> None:
    """A new version's profile holds only what differs: each extends the one before it."""
    from conformance.catalogue.profiles import _bundled_raw

    raw = {pid: data for pid, (_, data) in _bundled_raw().items() if pid.startswith("lavinmq-")}
    assert {pid: data.get("extends") for pid, data in raw.items()} == {
        "lavinmq-1": None, "lavinmq-2.0": "lavinmq-1", "lavinmq-2.2": "lavinmq-2.0", "lavinmq-2.4": "lavinmq-2.2",
        "lavinmq-2.9": "lavinmq-2.4",
    }


def test_2_9_grounds_failover_on_confirms_that_wait_for_the_replicas() -> None:
    """2.9.0 (#2002) confirms only what every in-sync follower has synced: the promoted follower holds
    every confirmed message. 2.4-2.8 keep the 2.0 citation; the value is the same."""
    by_id = {p.id: p for p in LAVIN}
    new, old = by_id["lavinmq-2.9"].entry("failover.classic-node-loss"), by_id["lavinmq-2.4"].entry("failover.classic-node-loss")
    assert new.value == old.value == {"unmirrored": "mirror-promoted", "mirrored": "mirror-promoted"}
    assert "#2002" not in old.source and "pull/2002" in new.source and "2.9.0" in new.source
    assert select_profile("LavinMQ", "2.8.3", "amqp-0-9-1").id == "lavinmq-2.4"
    assert select_profile("LavinMQ", "2.9.0", "amqp-0-9-1").id == select_profile("LavinMQ", "2.9.1", "amqp-0-9-1").id == "lavinmq-2.9"


def test_every_lavinmq_entry_cites_a_source() -> None:
    for p in LAVIN:
        assert p.checked and p.queue_types["classic"].source.strip()
        for key, by_qt in p.entries.items():
            for entry in by_qt.values():
                src = " ".join(entry.source.split())
                # A citation names a docs page, a CHANGELOG entry, an issue/PR or a source file.
                assert len(src) > 40 and any(t in src for t in ("LQ-DOC", "LQ-CL", "LQ:", "Seed 003", "#")), f"{p.id} {key}: {src!r}"


def releases_to_newest() -> list[Version]:
    """Every X.Y.Z from 1.0.0 to NEWEST on a grid dense enough to cross every range boundary."""
    out = [Version(f"{x}.{y}.{z}") for x in (1, 2) for y in range(0, 15) for z in range(0, 20)]
    return [v for v in out if Version("1.0.0") <= v <= NEWEST]


def test_version_ranges_neither_overlap_nor_leave_gaps() -> None:
    for v in releases_to_newest():
        matching = [p.id for p in LAVIN if v in SpecifierSet(p.versions)]
        assert len(matching) == 1, f"LavinMQ {v}: matched by {matching or 'no profile'}"
    for v in ("1.0.0", "1.3.1", "2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.4.0", "2.8.9", "2.9.0", str(NEWEST)):
        assert select_profile("LavinMQ", v, "amqp-0-9-1").product == "LavinMQ", v
    assert select_profile("LavinMQ", "0.9.9", "amqp-0-9-1").id == "amqp-0-9-1"  # AvalancheMQ era: no guess


def test_every_key_a_case_reads_has_an_entry() -> None:
    for p in LAVIN:
        missing = sorted(set(profile_keys()) - set(p.entries))
        assert not missing, f"{p.id}: no entry for {missing}"
        assert not p.unsupported, f"{p.id}: LavinMQ documents every seed-003 feature"


def test_seed_003_behaviours_are_encoded() -> None:
    seed_reqs = {r.id for r in catalogue().values() if any(SEED_003 in str(getattr(s, "ref", "")) for s in r.sources)}
    assert seed_reqs, "the catalogue cites seed 003"
    # Each seed-003 topic the spec leaves to the broker has a key, and every LavinMQ profile encodes it.
    topics = {
        "requeue to the original position": ("requeue.position.nack", "requeue.position.consumer-loss", "requeue.position.recover"),
        "x-delivery-limit": ("delivery-limit.support", "delivery-limit.deliveries", "delivery-limit.counted-returns", "delivery-limit.default"),
        "x-delivery-count incl. first delivery": ("delivery-count.first",),
        "dead-letter after the limit": ("dead-letter.last-death-headers",),
        "prefetch scope": ("prefetch.non-global", "prefetch.global"),
    }
    for p in LAVIN:
        for topic, keys in topics.items():
            for key in keys:
                assert p.entry(key, "classic") is not None, f"{p.id}: {topic}: {key}"
        assert p.entry("requeue.position.nack", "classic").value == "publication-order"
        assert p.entry("delivery-limit.support", "classic").value == "supported"
        assert set(p.entry("delivery-limit.counted-returns", "classic").value) == {"nack", "reject", "consumer-loss"}
    # Manual/auto ack and the multiple flag are spec behaviours: no LavinMQ profile may excuse them.
    for p in LAVIN:
        excused = {d.requirement for d in [*p.deviations, *p.unsupported]} & seed_reqs
        assert not excused, f"{p.id} excuses seed-003 requirements {excused}"


def verdict(case: str, obs: dict[str, Any], version: str) -> Outcome:
    return CASES[case]().verdict(obs, select_profile("LavinMQ", version, "amqp-0-9-1"), "classic").outcome


@pytest.mark.parametrize(("version", "first"), [("1.3.1", 1), ("2.1.0", 1), ("2.2.0", None), ("2.9.1", None)])
def test_x_delivery_count_on_the_first_delivery_by_version(version: str, first: int | None) -> None:
    """Before 2.2 the header counts this delivery (1, 2, 3...): a bug fixed in 2.2.0 (#977), so a
    deviation citing the fix there; absent first, then 1, 2... (the reference) passes on every version."""
    one_based = looped("reject", [1, 2, 3, 4], False, 4)
    absent_first = looped("reject", [None, 1, 2, 3], False, 4)
    profile = select_profile("LavinMQ", version, "amqp-0-9-1")
    for how in ("nack", "reject", "consumer-loss"):
        assert verdict("TestCountHeader", {**absent_first, "how": how}, version) is Outcome.PASS, (version, how)
        one = CASES["TestCountHeader"]().verdict({**one_based, "how": how}, profile, "classic")
        if first == 1:
            assert one.outcome is Outcome.DEVIATION and "#977" in one.reason and "2.2.0" in one.reason, (version, how)
        else:
            assert one.outcome is Outcome.FAIL, (version, how)
    assert verdict("TestCountHeader", looped("nack", [0, 1, 2, 3], False, 4), version) is Outcome.FAIL


@pytest.mark.parametrize(("version", "allowed"), [("1.3.1", 2), ("2.0.2", 2), ("2.3.0", 2), ("2.4.0", 3), ("2.9.1", 3)])
def test_deliveries_under_a_limit_by_version(version: str, allowed: int) -> None:
    """x-delivery-limit 2: the reference is 3 deliveries (limit+1); 2 while the check was at delivery
    time (<2.4) is that bug, fixed in 2.4.0 (#996): a deviation there, a failure after."""
    for how in ("nack", "reject", "consumer-loss"):
        assert verdict("TestMaxDeliveries", looped(how, counted(3, None), True, 6, limit=2), version) is Outcome.PASS, (version, how)
        v = CASES["TestMaxDeliveries"]().verdict(looped(how, counted(2, None), True, 6, limit=2),
                                                select_profile("LavinMQ", version, "amqp-0-9-1"), "classic")
        if allowed == 2:
            assert v.outcome is Outcome.DEVIATION and "2.4.0" in v.reason and "#996" in v.reason, (version, how)
        else:
            assert v.outcome is Outcome.FAIL, (version, how)


@pytest.mark.parametrize("version", ["1.3.1", "2.9.1"])
def test_the_other_lavinmq_entries_judge_both_ways(version: str) -> None:
    assert verdict("TestLastDeath", LAST_ABSENT, version) is Outcome.DEVIATION  # no x-last-death-*, documented
    assert verdict("TestTransientFate", TRANSIENT_KEPT, version) is Outcome.PASS
    assert verdict("TestTransientFate", TRANSIENT_LOST, version) is Outcome.FAIL
    assert verdict("TestPrefetchScope", SCOPE_OWN, version) is Outcome.DEVIATION  # per consumer, not the channel
    assert verdict("TestPrefetchScope", SCOPE_SHARED, version) is Outcome.PASS
    assert verdict("TestPrefetchScope", {**SCOPE_OWN, "variant": "global-true"}, version) is Outcome.FAIL
    assert verdict("TestDefaultLimit", looped("reject", counted(25, None), False, 25, default="none"), version) is Outcome.PASS


def test_queue_types_classic_runs_and_stream_is_documented_only() -> None:
    for p in LAVIN:
        assert p.queue_types["classic"].runs and p.queue_types["classic"].arguments == {}
        stream = p.queue_types["stream"]
        assert not stream.runs and stream.arguments == {"x-queue-type": "stream"} and stream.durable
        assert "1.2.0" in stream.source and "no requeue" in stream.reason
