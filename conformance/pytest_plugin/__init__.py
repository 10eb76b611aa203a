"""pytest integration: the thin shell over conformance.runner (options, hooks, fixtures, selection, reporting).

Load with ``-p conformance.pytest_plugin`` (``conformance run`` does). The controller process
launches the target (if a launcher was named) and hands its URL to xdist workers; every process
probes the server once to learn product and version and pick the profile.

Each role has a module of its own, and this module is only where pytest finds them.
pytest registers the hooks and fixtures it finds in a plugin module's namespace, imported ones
included, so importing them here keeps the one plugin (``-p conformance.pytest_plugin``) and every
hook's ordering (tryfirst, trylast, hookwrapper) exactly as they were:

- conformance.pytest_plugin.options: the command-line options (their one check is the runner's);
- conformance.pytest_plugin.session: configure, unconfigure, session start and end, the xdist
  hand-off, over the run's lifecycle (conformance.runner.lifecycle: target, profile, preflight,
  run.json, the end);
- conformance.pytest_plugin.fixtures: a case's parameters and the ``conformance_case`` fixture, which
  hands the case to conformance.runner.case_runner (scenario, verdict, profile, the broker lock);
- conformance.pytest_plugin.reporting: one case's report: its record written, its text scrubbed
  (conformance.runner.records builds the record, the one place its fields are set);
- conformance.pytest_plugin.selection: which cases run, in which order, under which deadline;
- conformance.pytest_plugin.stash: what the plugin keeps on pytest's config and items.

The runner (conformance.runner) imports no pytest: the plugin hands it plain values.
"""

from __future__ import annotations

from conformance.pytest_plugin.fixtures import conformance_attempt, conformance_case, pytest_generate_tests, queue_type, variant
from conformance.pytest_plugin.options import pytest_addoption
from conformance.pytest_plugin.reporting import pytest_runtest_makereport
from conformance.pytest_plugin.selection import pytest_collection_modifyitems, pytest_timeout_set_timer
from conformance.pytest_plugin.session import (
    pytest_configure,
    pytest_configure_node,
    pytest_internalerror,
    pytest_keyboard_interrupt,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_unconfigure,
)
from conformance.pytest_plugin.stash import STASH_RESULT, STATE_KEY
from conformance.runner.records import ATTEMPT_ID, case_id
from conformance.runner.state import RunState

#: Everything pytest must find here (hooks and fixtures), and the names other code may import.
__all__ = [
    "ATTEMPT_ID",
    "STASH_RESULT",
    "STATE_KEY",
    "RunState",
    "case_id",
    "conformance_attempt",
    "conformance_case",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_internalerror",
    "pytest_keyboard_interrupt",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_timeout_set_timer",
    "pytest_unconfigure",
    "queue_type",
    "variant",
]
