"""The run's session hooks: pytest's configure, unconfigure, session start and finish, and the xdist
hand-off, over the run's lifecycle (conformance.runner.lifecycle).

The controller process launches the target (if a launcher was named) and hands its URL to xdist
workers; every process probes the server once to learn product and version and pick the profile.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.errors import UsageError
from conformance.pytest_plugin.stash import STATE_KEY, state_of
from conformance.runner import lifecycle
from conformance.runner.options import PYTEST_OPTIONS
from conformance.secrets import scrub


def option_values(config: pytest.Config) -> dict[str, Any]:
    return {o.name: config.getoption(o.long) for o in PYTEST_OPTIONS}


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a requirement-traced conformance case")
    config.addinivalue_line("markers", "conformance_not_posed: a case none of whose queue types this broker can have (deselected)")
    values = option_values(config)
    worker = getattr(config, "workerinput", None)
    try:
        started = lifecycle.start(values, worker)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if started is None:
        return
    state, loaded = started
    config.args.extend(str(p.cases_dir) for p in loaded if str(p.cases_dir) not in config.args)  # packs' cases
    config.stash[STATE_KEY] = state
    if worker is None:
        lifecycle.record_start(state, values, getattr(config.option, "allure_report_dir", None))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: workers reuse the controller's target and run id instead of launching their own."""
    state = state_of(node.config)
    if state:
        node.workerinput.update(lifecycle.worker_input(state))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = state_of(config)
    if state is None or getattr(config, "workerinput", None) is not None:
        return
    lifecycle.finish(state)


def pytest_internalerror(excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An error in the suite itself ends the run: run.json says ``aborted`` with the cause."""
    config = _CONFIG.get("config")
    state = state_of(config) if config is not None else None
    if state is not None and state.abort_cause is None:
        state.abort_cause = scrub(f"internal error: {lifecycle.one_line(excinfo.value)}")


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    config = _CONFIG.get("config")
    state = state_of(config) if config is not None else None
    if state is not None and state.abort_cause is None:
        state.abort_cause = "interrupted"


def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = state_of(session.config)
    if state is not None and state.abort_cause is None and exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        state.abort_cause = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "internal error"


#: The hooks above that pytest calls without a config (internal error, interrupt) find it here.
_CONFIG: dict[str, pytest.Config] = {}
