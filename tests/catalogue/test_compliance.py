"""The suite's spec verdicts beside RabbitMQ's own rule grades, on synthetic records, and
the committed comparison (docs/rabbitmq-compliance-comparison.md) kept in step with the catalogue."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from conformance.catalogue.compliance import compare, load_grades, render, vendor_conforms
from conformance.catalogue.coverage import coverage
from conformance.errors import UsageError

DOC = Path(__file__).resolve().parents[2] / "docs" / "rabbitmq-compliance-comparison.md"


def rec(req: str, spec: str, verdict: str | None = None) -> dict[str, Any]:
    return {"requirement": req, "spec_verdict": spec, "verdict": verdict or spec, "protocol": "amqp-0-9-1"}


def test_grades_load_and_name_only_rules_the_suite_knows() -> None:
    grades = load_grades()
    ids = {c.rule.id for c in coverage() if c.rule.protocol == "amqp-0-9-1"}
    assert grades.vendor == "RabbitMQ" and grades.url.startswith("https://www.rabbitmq.com/")
    assert set(grades.grades) <= ids, sorted(set(grades.grades) - ids)
    assert grades.grades["basic/reject/requeue/01"]["status"] == "planned"


def test_a_bad_grade_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "g.yaml"
    p.write_text("schema: conformance.vendor-grades/1\nvendor: X\nprotocol: amqp-0-9-1\nsource: {url: x}\ngrades: {basic/01: {status: great}}\n")
    with pytest.raises(UsageError, match="status must be one of"):
        load_grades(p)


@pytest.mark.parametrize("status, keyword, says", [
    ("ok", "MUST", True), ("planned", "MUST NOT", False), ("failing", "MUST NOT", False),
    ("does", "SHOULD", True), ("doesn't", "SHOULD", False), ("doesn't", "MAY NOT", None), ("does", "MAY", None),
])
def test_what_a_grade_says(status: str, keyword: str, says: bool | None) -> None:
    assert vendor_conforms(status, keyword) is says


def test_compare_agrees_disagrees_and_sets_options_apart() -> None:
    grades = load_grades()
    records = [rec("NACK-REJECT-REQUEUE", "fail", "deviation"), rec("ACK-UNKNOWN-TAG-406", "pass"), rec("ACK-DOUBLE-ACK-406", "pass"),
               rec("NACK-UNKNOWN-TAG-406", "fail"), rec("PERSIST-EXCLUSIVE-QUEUE-LOCKED", "pass")]
    rows = {r.rule: r for r in compare(records, grades)}
    assert rows["basic/reject/requeue/01"].agreement == "agree"  # planned (not implemented) and spec fail
    assert "vendor deviation" in rows["basic/reject/requeue/01"].verdicts[0]
    assert rows["basic/ack/multiple/exists"].suite == "fail" and rows["basic/ack/multiple/exists"].agreement == "disagree"
    assert rows["queue/declare/exclusive/exclusive"].agreement == "option"  # doesn't, on a MAY NOT
    assert rows["basic/recover/01"].agreement == "not run"
    text = render(list(rows.values()), grades, {"product": "RabbitMQ", "version": "3.10.8", "protocol": "amqp-0-9-1", "profile": "rabbitmq-3.10"})
    assert "| `basic/reject/requeue/01` | MUST NOT | planned" in text and "1 disagree" in text


def test_the_committed_comparison_covers_every_rule_both_the_suite_covers_and_rabbitmq_grades() -> None:
    grades = load_grades()
    expected = {c.rule.id for c in coverage() if c.rule.protocol == "amqp-0-9-1" and c.covered and c.rule.id in grades.grades}
    listed = set(re.findall(r"^\| `([^`]+)` \|", DOC.read_text(), re.M))
    assert listed == expected, f"regenerate {DOC.name}: python3 -m conformance.catalogue.compliance RUN/results.jsonl --out {DOC}"
    assert " disagree |" not in DOC.read_text() or "## Disagreements" in DOC.read_text()
    assert "no explanation recorded" not in DOC.read_text(), "every disagreement and option needs a comment in the grades file"
