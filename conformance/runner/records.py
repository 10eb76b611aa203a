"""A case's result record (results.jsonl) and report: attached sections and the redaction point."""

from __future__ import annotations

import os
import time
from typing import Any, Iterator

import pytest

from conformance.kit.case import Case
from conformance.catalogue.requirements import requirement
from conformance.runner import liveness  # issue 16: the case deadline named in the record
from conformance.catalogue import packs  # issue 19 §2: requirement packs
from conformance.runner import shared_faults  # issue 20: one broker fault shared by the disruptive cases
from conformance.secrets import scrub, scrub_in_place
from conformance.kit.verdicts import Outcome
from conformance.pytest_plugin.fixtures import ATTEMPT_ID
from conformance.runner.case_runner import STASH_RESULT
from conformance.runner.state import RunState, state_of


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Record the case and scrub the report before anything prints or writes it.

    ``trylast`` makes this the innermost wrapper: the console, JUnit and Allure all see the report
    only after it went through the redaction point."""
    outcome = yield
    state = state_of(item.config)
    if state is not None and outcome.excinfo is not None:
        # pytest could not even describe the failure (e.g. a traceback frame without a line number):
        # a one-line report instead of an INTERNALERROR that would end the whole run
        exc = outcome.excinfo[1]
        outcome.force_result(pytest.TestReport(
            item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed",
            f"error: the case's failure could not be formatted ({type(exc).__name__}: {exc})",
            call.when, [], call.duration, call.start, call.stop, list(item.user_properties)))
    report: pytest.TestReport = outcome.get_result()
    if state is None:
        return
    if isinstance(getattr(item, "instance", None), Case) and (report.when == "call" or (report.when == "setup" and not report.passed)):
        result = item.stash.get(STASH_RESULT, None)
        if result is None:  # interrupted before a verdict: deadline, or a crash outside the scenario
            req = requirement(type(item.instance).requirement)  # type: ignore[attr-defined]
            text = report.longreprtext.strip().splitlines()[-1] if report.longreprtext else report.outcome
            text = liveness.deadline_text(item.config.getoption("--case-timeout")) or text  # issue 16
            result = {"requirement": req.id, "level": req.level_for(state.adapter.protocol), "area": req.area, "verdict": Outcome.ERROR.value,
                      "spec_verdict": "n/a", "vendor_verdict": "n/a", "expected": req.text, "observed": text,
                      "reason": "case did not reach a verdict", "queue_type": item.callspec.params.get("queue_type") if hasattr(item, "callspec") else None}
        _attach(result, report)
        _write(item, state, result, report)
    _scrub_report(report)


def _scrub_report(report: pytest.TestReport) -> None:
    """The report's text through the redaction point (console, junit.xml and Allure read it).

    The longrepr keeps its type: junitxml asserts that a skip's is a (path, lineno, message) tuple,
    and the console and JUnit format a failure's repr objects by their class."""
    if report.longrepr is not None:
        report.longrepr = scrub_in_place(report.longrepr)
    report.sections = [(scrub(title), scrub(body)) for title, body in report.sections]


def _attach(result: dict[str, Any], report: pytest.TestReport) -> None:
    if result["verdict"] in ("pass", "unsupported", "undocumented") or result.get("brief"):
        return
    text = result.get("rendered") or f"Expected: {result['expected']}\nActual:   {result['observed']}"
    report.sections.append(("expected vs observed", text))
    if result.get("history_text"):
        report.sections.append(("history", result["history_text"]))
    if result.get("trace_text"):
        # "Captured stdout ..." sections are what junitxml writes to <system-out> (junit_logging).
        # junitxml titles it only "Captured Out", so the text names itself.
        report.sections.append(("Captured stdout wire trace", "Wire trace (every frame both ways, decoded):\n" + result["trace_text"]))


def case_id(item: pytest.Item) -> str:
    """The case's id, the same for every repetition (``--repeat``): the attempt is a field of its own."""
    node = shared_faults.plain_nodeid(item.nodeid)  # issue 20: without xdist's "@group" suffix
    node = packs.qualified_nodeid(item, node)  # issue 19 §2: a pack's case ids start with the pack's name
    attempt = getattr(item, "callspec", None) and item.callspec.params.get("conformance_attempt")
    if not attempt:
        return node
    return node.replace(f"-{ATTEMPT_ID}{attempt}]", "]").replace(f"[{ATTEMPT_ID}{attempt}]", "")


def _write(item: pytest.Item, state: RunState, result: dict[str, Any], report: pytest.TestReport) -> None:
    if state.writer is None:
        return
    record = {k: v for k, v in result.items() if k not in ("rendered", "history_text", "trace_text", "brief")}
    record.update(state.meta())
    record.update(
        case_id=case_id(item),
        attempt=(item.callspec.params.get("conformance_attempt", 1) if hasattr(item, "callspec") else 1),
        pytest_outcome=report.outcome,
        worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
        finished_at=time.time(),
    )
    if record.get("verdict") == "error" and report.longreprtext:
        record["traceback"] = report.longreprtext[-2000:]
    state.writer.append(record)  # the writer scrubs

