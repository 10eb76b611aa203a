"""A case's report: its record written (conformance.runner.records builds it), its sections attached,
and its text through the redaction point before anything prints or writes it."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from conformance import inflight
from conformance.kit.case import Case
from conformance.pytest_plugin.stash import STASH_RESULT, planned, state_of
from conformance.runner import records
from conformance.secrets import scrub, scrub_in_place


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
        case = planned(item)
        if result is None:  # interrupted before a verdict: deadline, or a crash outside the scenario
            text = report.longreprtext.strip().splitlines()[-1] if report.longreprtext else report.outcome
            text = inflight.deadline_text(item.config.getoption("--case-timeout")) or text
            result = records.undecided(case, state.adapter.protocol, text)
        report.sections.extend(records.sections(result))
        if state.writer is not None:
            state.writer.append(records.record(case, state, result, outcome=report.outcome, longrepr=report.longreprtext,
                                               worker=os.environ.get("PYTEST_XDIST_WORKER", "main")))  # the writer scrubs
    _scrub_report(report)


def _scrub_report(report: pytest.TestReport) -> None:
    """The report's text through the redaction point (console, junit.xml and Allure read it).

    The longrepr keeps its type: junitxml asserts that a skip's is a (path, lineno, message) tuple,
    and the console and JUnit format a failure's repr objects by their class."""
    if report.longrepr is not None:
        report.longrepr = scrub_in_place(report.longrepr)
    report.sections = [(scrub(title), scrub(body)) for title, body in report.sections]
