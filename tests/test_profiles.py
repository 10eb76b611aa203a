"""Profiles: every entry cites its source; selection by product and version; bad files refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conformance.errors import UsageError
from conformance.catalogue.profiles import bundled_profiles, load_profile_file, select_profile


def test_every_profile_entry_has_a_citation() -> None:
    for p in bundled_profiles():
        for qt in p.queue_types.values():
            assert qt.source.strip(), f"{p.id}: queue type {qt.name} has no source"
        for key, by_qt in p.entries.items():
            for qt_name, entry in by_qt.items():
                assert entry.source.strip(), f"{p.id}: {key} ({qt_name or 'all'}) has no source"
        for doc in [*p.deviations, *p.unsupported]:
            assert doc.source.strip() and doc.reason.strip(), f"{p.id}: {doc.requirement} lacks reason or source"


def test_selection_by_product_and_version() -> None:
    assert select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1").id == "rabbitmq-3.10"
    assert select_profile("rabbitmq", "3.11.2", "amqp-0-9-1").id == "rabbitmq-3.10"
    assert select_profile("RabbitMQ", "3.12.1", "amqp-0-9-1").id == "rabbitmq-3.12"
    assert select_profile("RabbitMQ", "3.13.7", "amqp-0-9-1").id == "rabbitmq-3.13"
    assert select_profile("RabbitMQ", "4.0.5", "amqp-0-9-1").id == "rabbitmq-4.0"
    assert select_profile("RabbitMQ", "4.2.1", "amqp-0-9-1").id == "rabbitmq-4.0"
    assert select_profile("RabbitMQ", "4.3.0", "amqp-0-9-1").id == "rabbitmq-4.3"
    # A version no product profile covers falls back to the spec-only baseline, never to a wrong vendor profile.
    assert select_profile("RabbitMQ", "5.0.0", "amqp-0-9-1").id == "amqp-0-9-1"
    assert select_profile("LavinMQ", "0.9.0", "amqp-0-9-1").id == "amqp-0-9-1"


RABBIT_IDS = ("rabbitmq-3.10", "rabbitmq-3.12", "rabbitmq-3.13", "rabbitmq-4.0", "rabbitmq-4.3")
_ALL_RETURNS = ["nack", "reject", "consumer-loss"]
_TAIL, _HEAD = "tail-in-return-order", "head-in-return-order"

# The RabbitMQ version deltas (research broker-semantics.md section 9) each profile must encode.
# key, queue type, expected value for each profile in RABBIT_IDS order
VERSION_DELTAS = [
    ("delivery-count.first", "quorum", ({"get": "zero", "consume": "absent"}, "absent", "absent", "absent", "absent")),
    ("delivery-limit.default", "quorum", ("none", "none", "none", 20, 20)),
    ("dead-letter.last-death-headers", "quorum", ("absent", "absent", "present", "present", "present")),
    ("dead-letter.last-death-headers", "classic", ("absent", "absent", "present", "present", "present")),
    ("prefetch.global", "classic", ("per-channel", "per-channel", "per-channel", "per-channel", "per-consumer")),
    ("prefetch.global", "quorum", ("refused-540", "refused-540", "refused-540", "refused-540", "per-consumer")),
    ("delivery-limit.counted-returns", "quorum", (_ALL_RETURNS,) * 4 + (["reject", "consumer-loss"],)),
    ("requeue.position.nack", "quorum", (_TAIL, _TAIL, _TAIL, _HEAD, _HEAD)),
    ("requeue.position.recover", "quorum", (_TAIL, _TAIL, _TAIL, _HEAD, _HEAD)),
    ("requeue.position.consumer-loss", "quorum", (_HEAD,) * 5),
    ("requeue.position.nack", "classic", ("publication-order",) * 5),
    ("persistence.non-durable-queue", "classic", ("deleted",) * 4 + ("declare-refused",)),
]


@pytest.mark.parametrize(
    "key, queue_type, expected", VERSION_DELTAS, ids=[f"{k}-{qt}" for k, qt, _ in VERSION_DELTAS]
)
def test_rabbitmq_version_deltas_are_encoded(key: str, queue_type: str, expected: tuple) -> None:
    by_id = {p.id: p for p in bundled_profiles()}
    assert len(expected) == len(RABBIT_IDS)
    for pid, want in zip(RABBIT_IDS, expected):
        entry = by_id[pid].entry(key, queue_type)
        assert entry is not None, f"{pid}: no {key} for {queue_type}"
        assert entry.value == want, f"{pid}: {key} ({queue_type}) is {entry.value!r}, expected {want!r}"
        assert entry.source.strip(), f"{pid}: {key} ({queue_type}) has no source"


def test_only_rabbitmq_4_3_stops_counting_nack_returns() -> None:
    for p in bundled_profiles():
        if p.product.lower() != "rabbitmq" or "amqp-0-9-1" not in p.protocols:
            continue
        entry = p.entry("delivery-limit.counted-returns", "quorum")
        assert entry is not None, p.id
        assert ("nack" in entry.value) == (p.id != "rabbitmq-4.3"), p.id


def test_rabbitmq_profile_version_ranges_do_not_overlap() -> None:
    rabbit = [p for p in bundled_profiles() if p.product.lower() == "rabbitmq" and "amqp-0-9-1" in p.protocols]
    assert sorted(p.id for p in rabbit) == sorted(RABBIT_IDS)
    minors = [(3, 10), (3, 11), (3, 12), (3, 13), (4, 0), (4, 1), (4, 2), (4, 3)]
    for major, minor in minors:
        for patch in range(10):
            v = Version(f"{major}.{minor}.{patch}")
            covering = [p.id for p in rabbit if v in SpecifierSet(p.versions)]
            # exactly one: no overlap, and no gap between 3.10 and 4.3
            assert len(covering) == 1, f"RabbitMQ {v} is covered by {covering}"


def test_user_override_by_id_and_by_file(tmp_path: Path) -> None:
    assert select_profile("LavinMQ", "2.9.0", "amqp-0-9-1", override="rabbitmq-3.10").id == "rabbitmq-3.10"
    src = next(p for p in bundled_profiles() if p.id == "rabbitmq-3.10")
    data = yaml.safe_load(Path(src.path).read_text())
    data["id"] = "mine"
    f = tmp_path / "mine.yaml"
    f.write_text(yaml.safe_dump(data))
    assert select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1", override=str(f)).id == "mine"
    with pytest.raises(UsageError, match="unknown profile"):
        select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1", override="nope")


@pytest.mark.parametrize(
    "text, message",
    [
        ("id: x\nmatch: {product: P, protocols: [amqp-0-9-1]}\nentries: {k: {value: 1}}\n", "missing 'source'"),
        ("id: x\nmatch: {product: P, versions: '>>3', protocols: [amqp-0-9-1]}\n", "bad version range"),
        ("id: x\nmatch: {product: P, protocols: [amqp-0-9-1]}\nqueue_types: {classic: {declare: {}}}\n", "missing 'source'"),
        ("id: x\nmatch: {product: P, protocols: [amqp-0-9-1]}\ndeviations: [{requirement: R, reason: r, source: s}]\n", "missing 'observed'"),
        ("id: x\n", "missing 'match'"),
        ("- just a list\n", "must be a mapping"),
        ("id: [\n", "cannot read profile"),
    ],
)
def test_malformed_profiles_are_refused(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_profile_file(f)
