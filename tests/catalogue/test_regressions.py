"""The regression corpus (conformance/regressions/): every entry is checked when loaded, a bad one
is refused in one line naming it, `caught` follows the self-test's declared kills, and
`conformance list --regressions` prints the table with its counts per product."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conformance.errors import UsageError
from conformance.nemesis.mutations import available, expectations
from conformance.regressions.corpus import corpus, load_file, parse_entry
from tests.conftest import ROOT, conformance_cmd

GOOD = {
    "id": "x-1", "upstream": {"ref": "o/r#1", "url": "https://example.org/1", "title": "a bug"},
    "affected": ">=1.0.0,<1.2.0", "fixed": "1.2.0", "area": "limit", "protocol": "amqp-0-9-1",
    "scenario": "x-delivery-count counts the current delivery",
    "case": {"requirement": "LIMIT-COUNT-HEADER", "queue_type": "classic", "variant": "nack"},
    "mutation": "delivery-count-falsified",
    "observed": {"version": "1.1.0", "verdict": "deviation", "note": "n"},
}


def test_the_corpus_loads_and_every_entry_says_what_catches_it_or_what_is_missing() -> None:
    entries = corpus()
    assert entries and len({e.id for e in entries}) == len(entries)
    declared = expectations()
    for e in entries:
        caught, why = e.caught()
        if caught:
            assert e.case is not None and e.mutation is not None
            assert e.case.requirement in declared[e.mutation].breaks  # proven by the self-test in CI
            assert e.mutation in {m.name for m in available(e.protocol)}
        else:
            assert why, e.id


def test_an_entry_is_caught_only_when_its_mutation_breaks_its_case() -> None:
    e = parse_entry(GOOD, "X", "t.yaml entry 1")
    assert e.caught() == (True, "")
    other = parse_entry({**GOOD, "mutation": "redelivered-set"}, "X", "t.yaml entry 1")
    caught, why = other.caught()
    assert not caught and "redelivered-set is not declared to break LIMIT-COUNT-HEADER" in why
    none = parse_entry({**GOOD, "mutation": None, "missing": "a mutation adding the header to a first delivery"}, "X", "t")
    assert none.caught() == (False, "a mutation adding the header to a first delivery")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tracker": 1}, "unknown key(s) tracker"),
        ({"id": "X 1"}, "id 'X 1'"),
        ({"upstream": {"ref": "o/r#1", "url": "example.org"}}, "upstream: expected ref, url"),
        ({"affected": "one"}, "is not a version range"),
        ({"fixed": "1.1.0"}, "fixed 1.1.0 lies inside affected"),
        ({"area": "misc"}, "is not a catalogue area"),
        ({"protocol": "mqtt"}, "protocol: one of"),
        ({"case": {"requirement": "NO-SUCH"}}, "case: expected requirement"),
        ({"mutation": "first-acquirer-flipped"}, "is not a amqp-0-9-1 mutation"),
        ({"mutation": None}, "missing: say what would reach the bug"),
        ({"observed": {"version": "1.3.0", "verdict": "fail"}}, "not an affected version"),
        ({"observed": {"version": "1.1.0", "verdict": "bad"}}, "observed: expected version, verdict"),
    ],
)
def test_a_bad_entry_is_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_entry({**GOOD, **change}, "X", "t.yaml entry 1")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_data_file_without_its_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("product: X\nentries: []\n")
    with pytest.raises(UsageError, match="expected schema: conformance.regressions/1"):
        load_file(path)


def test_list_regressions_prints_the_table_and_the_counts_per_product() -> None:
    proc = subprocess.run(conformance_cmd("list", "--regressions"), capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    for header in ("entry", "product", "versions", "case", "mutation", "caught"):
        assert header in proc.stdout
    products = {e.product for e in corpus()}
    for product in products:
        assert f"{product}: {sum(1 for e in corpus() if e.product == product)} entries" in proc.stdout
    assert f"all: {len(corpus())} entries across {len(products)} products" in proc.stdout
    rows = json.loads(subprocess.run(conformance_cmd("list", "--regressions", "--json"), capture_output=True, text=True,
                                     timeout=120, cwd=ROOT).stdout)
    assert {r["id"] for r in rows} == {e.id for e in corpus()}
    assert all(r["caught"] == (r["why_not"] is None) for r in rows)
