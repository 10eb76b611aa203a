"""Profiles: every entry cites its source; selection by product and version; bad files refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conformance.catalogue.profiles import bundled_profiles, load_profile_file, select_profile
from conformance.errors import UsageError


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


# --- extends: a profile holds only what differs from its parent -------------------------------------

CHILD = """\
id: mine
title: mine
extends: rabbitmq-3.12
match: {versions: ">=9.0"}
entries:
  prefetch.global:
    by_queue_type:
      quorum: {value: per-consumer, reason: treated like global=false, source: "https://example.invalid/docs/qos"}
  tx.confirms-exclusive: null
deviations:
  - requirement: PREFETCH-SIZE-SINGLE-MESSAGE
    observed: connection-540
    remove: true
unsupported:
  - requirement: LIMIT-MAX-DELIVERIES
    queue_types: [classic]
    kind: refused
    refusal: "406 x-delivery-limit"
    reason: replaced in place
    source: https://example.invalid/docs/limits
"""


def _write(tmp_path: Path, text: str, name: str = "child.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_extends_resolves_over_the_parent(tmp_path: Path) -> None:
    parent = next(p for p in bundled_profiles() if p.id == "rabbitmq-3.12")
    child = load_profile_file(_write(tmp_path, CHILD))
    # id, title, checked: the child's own; match merged key by key
    assert (child.id, child.title, child.checked) == ("mine", "mine", "")
    assert (child.product, child.protocols, child.versions) == (parent.product, parent.protocols, ">=9.0")
    assert child.queue_types == parent.queue_types
    # one row replaced, the default row kept; an entry removed; the rest inherited in order
    assert child.entries["prefetch.global"][None] == parent.entries["prefetch.global"][None]
    assert child.entries["prefetch.global"]["quorum"].value == "per-consumer"
    assert "tx.confirms-exclusive" not in child.entries
    assert list(child.entries) == [k for k in parent.entries if k != "tx.confirms-exclusive"]
    # list items by identity: removed, replaced in place
    assert [d.requirement for d in child.deviations] == [d.requirement for d in parent.deviations if d.requirement != "PREFETCH-SIZE-SINGLE-MESSAGE"]
    assert [u.requirement for u in child.unsupported] == [u.requirement for u in parent.unsupported]
    assert child.unsupported[0].reason == "replaced in place" and child.unsupported[1] == parent.unsupported[1]


def test_bundled_children_resolve_to_whole_profiles() -> None:
    from conformance.catalogue.profiles import _bundled_raw

    raw = {pid: data for pid, (_, data) in _bundled_raw().items()}
    children = {pid: data["extends"] for pid, data in raw.items() if "extends" in data}
    assert children["rabbitmq-4.3"] == "rabbitmq-4.0" and children["lavinmq-2.4"] == "lavinmq-2.2"
    by_id = {p.id: p for p in bundled_profiles()}
    for pid, parent in children.items():
        assert parent in by_id and set(by_id[parent].entries) <= set(by_id[pid].entries) | {"failover.classic-node-loss"}, pid
    # The RabbitMQ deviations every 0-9-1 version shares are written once, in the root profile.
    written = [pid for pid, data in raw.items() if pid.startswith("rabbitmq-")
               for d in data.get("deviations") or [] if d.get("requirement") == "NACK-REJECT-REQUEUE"]
    assert written == ["rabbitmq-3.12"]
    assert all(p.deviation("NACK-REJECT-REQUEUE", "classic", "redelivered-same-channel") for p in by_id.values()
               if p.product == "RabbitMQ" and "amqp-0-9-1" in p.protocols)


@pytest.mark.parametrize(
    "text, message",
    [
        (CHILD.replace("extends: rabbitmq-3.12", "extends: nope"), "extends: unknown profile 'nope'"),
        (CHILD.replace("id: mine", "id: rabbitmq-3.12"), "extends cycle: rabbitmq-3.12 -> rabbitmq-3.12"),
        (CHILD.replace('match: {versions: ">=9.0"}', "match: {product: X}"), "names its own match.versions"),
        (CHILD.replace("tx.confirms-exclusive: null", "no.such-entry: null"), "parent has no 'no.such-entry'"),
        (CHILD.replace("PREFETCH-SIZE-SINGLE-MESSAGE", "NOPE"), "remove: the parent has no item with requirement 'NOPE'"),
        (CHILD.replace("    by_queue_type:\n      quorum: {value", "    source: x\n    by_queue_type:\n      quorum: {value"), "a row is replaced whole"),
        (CHILD.replace("extends: rabbitmq-3.12\n", "").replace("  tx.confirms-exclusive: null\n", "").replace('">=9.0"', '">=9.0", product: X, protocols: [amqp-0-9-1]'), "'remove' takes an inherited item away"),
    ],
)
def test_bad_extends_are_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as exc:
        load_profile_file(_write(tmp_path, text))
    assert "\n" not in str(exc.value)


def test_an_extends_cycle_between_files_is_refused() -> None:
    from conformance.catalogue.profiles import resolve

    files = {"a": ("a.yaml", {"id": "a", "extends": "b", "match": {"versions": "*"}}),
             "b": ("b.yaml", {"id": "b", "extends": "a", "match": {"versions": "*"}})}
    with pytest.raises(UsageError, match=re.escape("extends cycle: a -> b -> a")):
        resolve(files["a"][1], "a.yaml", files.get)


def test_the_digest_is_of_the_resolved_profile_not_its_file(tmp_path: Path) -> None:
    from conformance.catalogue.profiles import _bundled_raw, profile_digest, resolve

    by_id = {p.id: p for p in bundled_profiles()}
    src = by_id["rabbitmq-4.3"]
    text = Path(src.path).read_text()
    # another folder, another file name, another comment: the same digest
    moved = load_profile_file(_write(tmp_path, "# moved\n" + text, "elsewhere.yaml"))
    assert moved.path != src.path and profile_digest(moved) == profile_digest(src)
    # the same profile written whole, without extends (a pure fold undone): the same digest
    whole = resolve(_bundled_raw()["rabbitmq-4.3"][1], src.path)
    assert "extends" not in whole
    assert profile_digest(load_profile_file(_write(tmp_path, yaml.safe_dump(whole), "whole.yaml"))) == profile_digest(src)
    # a changed citation is another profile
    changed = load_profile_file(_write(tmp_path, text.replace("(v4.3.0) l.1577-1615", "(v4.3.1) l.1577-1615"), "changed.yaml"))
    assert profile_digest(changed) != profile_digest(src)
    # the server a run met is not profile data
    assert profile_digest(select_profile("RabbitMQ", "4.3.0", "amqp-0-9-1")) == profile_digest(src)


def test_a_removal_outside_extends_is_refused(tmp_path: Path) -> None:
    root = CHILD.replace("extends: rabbitmq-3.12\n", "").replace('">=9.0"', '">=9.0", product: X, protocols: [amqp-0-9-1]')
    with pytest.raises(UsageError, match="null removes an inherited member, so it belongs only in a profile that extends another"):
        load_profile_file(_write(tmp_path, root))
