"""Scores count only what judged the broker (pass, fail, deviation); error and blocked are shown
apart in the console summary, run.json and the compliance report. Synthetic records and cells."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from conformance.runner.judged import headline, summary
from reports.analysis import scores
from reports.render import render_html, render_markdown

COLUMN = "Broker 1.0 amqp-0-9-1 classic"


def cell(req: str, verdict: str, *, level: str = "MUST", area: str = "ack") -> dict[str, Any]:
    return {"column": COLUMN, "product": "Broker", "version": "1.0", "protocol": "amqp-0-9-1", "queue_type": "classic",
            "requirement": req, "level": level, "area": area, "verdict": verdict, "state": verdict, "flaky": False,
            "spec_verdict": verdict, "vendor_verdict": verdict, "records": 1, "cases": 1, "runs": 1, "passes": 0, "decided": 0,
            "pass_rate": None, "case_id": f"{area}/test_x.py::T{req}::test[classic]", "expected": f"{req} holds",
            "observed": f"{req} observed", "wire_trace": None, "reason": "", "citation": ""}


def result_of(cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cells": cells, "level_scores": scores(cells, "level"), "area_scores": scores(cells, "area"), "durations": [],
            "flakiness": [], "summary": {"records": len(cells), "quarantined": 0, "mutated": 0}, "runs": []}


def test_a_broker_the_suite_could_not_judge_has_no_score_and_its_errors_apart() -> None:
    counts = Counter({"error": 24})
    assert summary(counts) == {"judged": 0, "pass": 0, "fail": 0, "deviation": 0, "error": 24, "blocked": 0, "score": None}
    assert headline(counts) == "n/a (0/0 judged cases pass; 0 fail, 0 deviation); not judged: 24 error, 0 blocked"
    mixed = Counter({"pass": 3, "fail": 1, "error": 2, "blocked": 1, "unsupported": 5})
    assert summary(mixed)["judged"] == 4 and summary(mixed)["score"] == 0.75
    assert headline(mixed) == "75% (3/4 judged cases pass; 1 fail, 0 deviation); not judged: 2 error, 1 blocked"


def test_report_scores_leave_error_and_blocked_out_of_the_judged() -> None:
    cells = [cell("A", "pass"), cell("B", "fail"), cell("C", "error"), cell("D", "blocked"), cell("E", "deviation"),
             cell("F", "unsupported")]
    (area,) = scores(cells, "area")
    assert (area["judged"], area["pass"], area["score"], area["error"], area["blocked"]) == (3, 1, round(1 / 3, 4), 1, 1)


def test_the_report_of_an_unjudged_broker_shows_its_errors_not_a_zero_score() -> None:
    cells = [cell(f"R{i:02}", "error") for i in range(24)]
    md = render_markdown(result_of(cells))
    assert "| target | MUST pass | fail | flaky | deviation | error | blocked | unsupported |" in md
    assert f"| {COLUMN} | n/a | 0 | 0 | 0 | 24 | 0 | 0 |" in md
    assert "**Failing:**" not in md and "**Not judged" in md and "- `R00` [MUST] on " + COLUMN + ": error: R00 observed" in md
    page = render_html(result_of(cells))
    kpi = re.search(r'class="kpi">.*?</span></span>', page)
    assert kpi and "n/a" in kpi.group(0) and "0/0 judged requirements pass; not judged: 24 error, 0 blocked" in kpi.group(0)
    assert "0%" not in kpi.group(0)


def test_the_report_score_of_a_judged_broker_counts_pass_fail_deviation_only() -> None:
    cells = [cell("A", "pass"), cell("B", "fail"), cell("C", "error"), cell("D", "blocked")]
    md = render_markdown(result_of(cells))
    assert f"| {COLUMN} | 50% (1/2) | 1 | 0 | 0 | 1 | 1 | 0 |" in md
    assert md.index("**Failing:**") < md.index("- `B`") < md.index("**Not judged") < md.index("- `C`")
    page = render_html(result_of(cells))
    assert "(1/2 judged requirements pass; not judged: 1 error, 1 blocked)" in page


def test_the_console_summary_shows_the_score_of_judged_cases_and_errors_apart(tmp_path: Any, capsys: Any) -> None:
    from conformance.cli import summarize

    records = [{"requirement": f"R{i}", "level": "MUST", "area": "ack", "verdict": "error", "case_id": f"ack/x.py::T{i}::test"} for i in range(24)]
    summarize({"product": "Broker", "version": "1.0"}, records, tmp_path)
    out = capsys.readouterr().out
    assert "score: n/a (0/0 judged cases pass; 0 fail, 0 deviation); not judged: 24 error, 0 blocked" in out
