"""Profiles: every entry cites its source; selection by product and version; bad files refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.errors import UsageError
from conformance.profile import bundled_profiles, load_profile_file, select_profile


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
    # A version no product profile covers falls back to the spec-only baseline, never to a wrong vendor profile.
    assert select_profile("RabbitMQ", "4.3.0", "amqp-0-9-1").id == "amqp-0-9-1"
    assert select_profile("LavinMQ", "2.9.0", "amqp-0-9-1").id == "amqp-0-9-1"


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
