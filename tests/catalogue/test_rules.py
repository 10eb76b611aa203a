"""Spec rules as data (conformance/catalogue/data/rules/) and the levels requirements take from them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.catalogue.requirements import _parse_area, catalogue, check_levels
from conformance.catalogue.rules import KEYWORDS, PROTOCOLS, all_rules, load_rules
from conformance.errors import UsageError


def test_rule_files_load_with_ids_keywords_and_quotes() -> None:
    rules = all_rules()
    assert {r.protocol for r in rules.values()} == set(PROTOCOLS)
    for r in rules.values():
        assert r.keyword in KEYWORDS and r.quote and r.area
        assert r.testable or r.reason, r.ref
    # rules the catalogue's levels rest on, with the spec's own keyword
    assert rules["amqp-0-9-1 basic/reject/requeue/01"].keyword == "MUST NOT"
    assert rules["amqp-0-9-1 basic/01"].keyword == "SHOULD"
    assert rules["amqp-0-9-1 tx/atomic"].keyword == "SHOULD"
    assert rules["amqp-1.0 3.4.5 modified undeliverable-here"].keyword == "MUST NOT"


def _write(tmp_path: Path, rules: list[dict]) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump({"protocol": "amqp-0-9-1", "source": {"url": "x"}, "rules": rules}))
    return p


GOOD = {"id": "basic/x/01", "keyword": "MUST", "area": "ack", "quote": "The server MUST do x."}


@pytest.mark.parametrize("bad, says", [
    ({**GOOD, "keyword": "SHALL"}, "not one of"),
    ({**GOOD, "quote": "The server does x."}, "does not contain its keyword"),
    ({**GOOD, "testable": False}, "needs a reason"),
    ({**GOOD, "area": "routing"}, "area"),
    ({k: v for k, v in GOOD.items() if k != "quote"}, "missing quote"),
    ({**GOOD, "level": "MUST"}, "unknown field"),
])
def test_schema_refuses_a_bad_rule(tmp_path: Path, bad: dict, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        load_rules([_write(tmp_path, [bad])])


def test_schema_refuses_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="duplicate"):
        load_rules([_write(tmp_path, [GOOD, GOOD])])


def _req(level: str, rules: dict | None, sources: list | None = None, protocols: list | None = None):
    raw = {"id": "X-ONE", "level": level, "text": "t", "protocols": protocols or ["amqp-0-9-1", "amqp-1.0"], "needs": [],
           "sources": sources or [{"kind": "vendor", "ref": "v"}]}
    if rules is not None:
        raw["rules"] = rules
    return _parse_area({"area": "ack", "requirements": [raw]}, "t").requirements[0]


def test_catalogue_refuses_a_must_without_a_spec_rule() -> None:
    with pytest.raises(UsageError, match="MUST without a MUST rule"):
        check_levels(_req("MUST", None, [{"kind": "spec", "ref": "some section"}]))
    with pytest.raises(UsageError, match="MUST without a MUST rule"):
        check_levels(_req("MUST", {"amqp-0-9-1": ["basic/01"]}))  # a SHOULD rule


def test_level_is_the_rules_keyword_per_protocol() -> None:
    r = _req("MUST", {"amqp-0-9-1": ["basic/01"], "amqp-1.0": ["3.2.1 header durable"]})
    check_levels(r)
    assert (r.level_for("amqp-0-9-1"), r.level_for("amqp-1.0")) == ("SHOULD", "MUST")
    only_vendor = _req("EXTENSION", None)
    check_levels(only_vendor)
    assert only_vendor.level_for("amqp-0-9-1") == "EXTENSION"
    with pytest.raises(UsageError, match="level SHOULD but its rules give EXTENSION"):
        check_levels(_req("SHOULD", None))
    with pytest.raises(UsageError, match="unknown rule"):
        check_levels(_req("MUST", {"amqp-0-9-1": ["basic/99"]}))


def test_the_catalogue_obeys_the_rules() -> None:
    cat = catalogue()
    assert cat["NACK-REJECT-REQUEUE"].level_for("amqp-0-9-1") == "MUST"
    assert cat["TX-COMMIT-IN-FLIGHT-ATOMIC"].level_for("amqp-0-9-1") == "SHOULD"
    assert cat["PERSIST-CONFIRMED-SURVIVES"].level_for("amqp-0-9-1") == "SHOULD"
    assert cat["PERSIST-CONFIRMED-SURVIVES"].level_for("amqp-1.0") == "MUST"
    for r in cat.values():
        if r.level == "MUST":
            assert any(all_rules()[f"{p} {ids[0]}"].level == "MUST" for p, ids in r.rules), r.id
        if not r.rules:
            assert r.level == "EXTENSION", r.id


def test_coverage_map_names_covering_requirements_or_a_reason() -> None:
    from conformance.catalogue.coverage import UNCOVERED_TESTABLE, coverage, figures

    rows = {c.rule.ref: c for c in coverage()}
    assert rows["amqp-0-9-1 basic/reject/requeue/01"].requirements == ("NACK-REJECT-REQUEUE",)
    assert "not testable" in rows["amqp-0-9-1 basic/reject/03"].reason
    assert rows["amqp-0-9-1 delivery-tag/non-zero"].requirements == ("ACK-DELIVERY-TAG-NON-ZERO",)
    assert rows["amqp-0-9-1 basic/publish/immediate/01"].reason == UNCOVERED_TESTABLE
    figs = figures(list(rows.values()))
    for f in figs.values():
        assert 0 < f["covered"] <= f["total"] and f["testable"] <= f["total"]


def test_list_rules_prints_the_map_and_the_figures() -> None:
    import json
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "list", "--rules", "--json"], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"amqp-0-9-1", "amqp-1.0"} == set(out["figures"])
    assert any(r["id"] == "basic/reject/requeue/01" and r["requirements"] == ["NACK-REJECT-REQUEUE"] for r in out["rules"])
