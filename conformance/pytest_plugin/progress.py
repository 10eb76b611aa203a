"""The controller's pytest plugin behind ``conformance run``'s console: pytest's reports feed the
run's progress view (conformance.runner.progress.RunProgress), and pytest's own terminal output goes
to the results folder's log instead of the console."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import pytest

from conformance.runner.progress import Console, RunProgress


class ProgressPlugin:
    """Registered by ``conformance run`` in the controller process only: a worker never loads it, and
    the workers' reports reach the controller's ``pytest_runtest_logreport``."""

    def __init__(self, console: Console, out: Path, *, debug: bool = False, log: Path | None = None) -> None:
        self.view = RunProgress(console, out, debug=debug)
        self.log = log
        self._log_file: IO[str] | None = None

    @pytest.hookimpl(trylast=True)  # after pytest's terminal plugin made its reporter
    def pytest_configure(self, config: Any) -> None:
        """pytest's reporter writes into ``log`` (the results folder), not the console: its dots,
        tracebacks and summary stay there for debugging. It is kept, not disabled: pytest-timeout
        and xdist write through it (a missing reporter turned every case deadline into an error)."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if self.log is None or reporter is None:
            return
        from _pytest.config import create_terminal_writer

        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log, "w", encoding="utf-8")
        reporter._tw = create_terminal_writer(config, self._log_file)

    def pytest_unconfigure(self, config: Any) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def pytest_sessionstart(self, session: Any) -> None:
        self.view.begin()

    def pytest_collection_finish(self, session: Any) -> None:
        """Serial runs: the selected cases (after the suite's own deselection)."""
        self.view.start(len(session.items))

    @pytest.hookimpl(optionalhook=True)  # xdist is left out of a one-worker run
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Parallel runs: every worker collects the same cases; the first to finish gives the total."""
        if not self.view.total:
            self.view.start(len(ids))

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.view.case_started(nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.view.case_finished(nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        """A case's record is written before its report reaches the controller: read it now."""
        self.view.drain()

    def pytest_sessionfinish(self, session: Any) -> None:
        self.view.end()
