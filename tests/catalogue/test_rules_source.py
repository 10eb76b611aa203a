"""conformance/catalogue/data/rules/amqp-0-9-1.yaml is derived from the specification's XML: every <rule>
of the suite's areas is listed under its first RFC keyword with a word-for-word quote, and every
chassis rule under the chassis' implement level. The XML is the excerpt the suite ships
(conformance/catalogue/data/rules/sources/, licence kept); the same check runs on the full amqp0-9-1.xml:
``python3 -m conformance.catalogue.rule_source path/to/amqp0-9-1.xml --check``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.catalogue.rule_source import check, excerpt_path, extract, main
from conformance.catalogue.rules import all_rules


def test_the_shipped_excerpt_keeps_the_licence_and_its_provenance() -> None:
    text = excerpt_path().read_text()
    assert "License\n    =======" in text and "Copyright (c) 2006-2008" in text
    assert "0e33284b08e4d8b369f3f13268a05bc40ed15e6b" in text


def test_extract_reads_rule_ids_keywords_and_on_failure() -> None:
    rules = {r.id: r for r in extract(excerpt_path())}
    assert rules["basic/ack/multiple/exists"].keyword == "MUST"
    assert rules["basic/ack/multiple/exists"].on_failure == "precondition-failed"
    assert rules["basic/reject/requeue/01"].keyword == "MUST NOT"
    assert rules["basic/qos/prefetch-count/01"].keyword == "MUST NOT"  # "may send less" is not a keyword
    assert rules["queue/declare/exclusive/exclusive"].keyword == "MAY NOT"
    assert rules["basic/consume/exclusive/01"].on_failure == "access-refused"
    assert rules["tx/chassis/server"].keyword == "SHOULD" and rules["tx/commit/chassis/server"].keyword == "MUST"
    assert rules["basic/recover-async/chassis/server"].keyword == "MAY"
    assert sum(r.kind == "rule" for r in rules.values()) == 44


def test_the_rule_data_is_derived_from_the_xml() -> None:
    assert check(extract(excerpt_path()), all_rules().values()) == []
    assert main(["--check"]) == 0


@pytest.mark.parametrize("rid, change, says", [
    ("basic/reject/requeue/01", {"keyword": "SHOULD NOT"}, "first keyword is MUST NOT"),
    ("basic/01", {"quote": "The server MUST respect the persistent property of basic messages"}, "not found word for word"),
    ("tx/commit/chassis/server", {"keyword": "SHOULD"}, "implement = MUST"),
    ("tx/atomic", {"quote": "Servers MUST implement atomic transactions"}, "not in the <doc> of tx"),
])
def test_check_names_a_keyword_or_quote_that_is_not_the_spec_s(rid: str, change: dict, says: str) -> None:
    rules = dict(all_rules())
    ref = f"amqp-0-9-1 {rid}"
    rules[ref] = replace(rules[ref], **change)
    problems = check(extract(excerpt_path()), rules.values())
    assert any(says in p for p in problems), problems


def test_check_names_a_rule_of_the_xml_the_data_leaves_out() -> None:
    rules = {k: v for k, v in all_rules().items() if k != "amqp-0-9-1 basic/consume/01"}
    assert check(extract(excerpt_path()), rules.values()) == ["basic/consume/01: a rule of the XML the data does not list"]
