"""Issue 19 §6: no import cycle between the CLI and the modules it drives. conformance.cli.selftest is a
command of the CLI, so neither it nor the run's command-line builder may import conformance.cli
(even lazily, inside a function: a cycle hidden in a function still ties the two together)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT


def imported(module_file: Path) -> set[str]:
    tree = ast.parse(module_file.read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names


@pytest.mark.parametrize("module", ["selftest", "run"])
def test_the_cli_is_imported_by_none_of_the_modules_it_drives(module: str) -> None:
    assert "conformance.cli" not in imported(ROOT / "conformance" / "cli" / f"{module}.py")


def test_the_cli_and_the_selftest_share_the_pytest_command_line_through_run() -> None:
    from conformance import cli
    from conformance.cli import run
    from conformance.cli import selftest  # noqa: F401 - importable on their own, in any order

    assert cli.pytest_args is run.pytest_args
    assert "conformance.cli.run" in imported(ROOT / "conformance" / "cli" / "selftest.py")


# --- issue 19 §6: the plugin's and the case context's roles, each in a module of its own ------------

#: The modules the plugin and the case context were split into, in an order where each imports
#: only modules before it (a module importing one after it would be a cycle, or the start of one).
SPLIT = [
    "context_state", "context_connections", "context_proxies", "context_queues", "context_waits",
    "context_faults", "context_cleanup", "case",
    "run_options", "run_state", "run_lifecycle", "case_runner", "case_fixtures", "case_records", "selection",
    "pytest_plugin",
]


@pytest.mark.parametrize("module", SPLIT)
def test_each_split_module_imports_only_the_ones_before_it(module: str) -> None:
    later = {f"conformance.{m}" for m in SPLIT[SPLIT.index(module) + 1:]}
    assert not imported(ROOT / "conformance" / f"{module}.py") & later


def test_the_plugin_module_still_holds_every_hook_and_fixture_pytest_must_find() -> None:
    """``-p conformance.pytest_plugin`` is the one plugin: pytest registers what its namespace holds."""
    from conformance import pytest_plugin

    hooks = {n for n in dir(pytest_plugin) if n.startswith("pytest_")}
    assert hooks == {
        "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure", "pytest_configure_node",
        "pytest_generate_tests", "pytest_internalerror", "pytest_keyboard_interrupt", "pytest_runtest_makereport",
        "pytest_sessionfinish", "pytest_sessionstart", "pytest_timeout_set_timer", "pytest_unconfigure",
    }
    for fixture in ("conformance_case", "conformance_attempt", "queue_type", "variant"):
        assert hasattr(pytest_plugin, fixture), fixture


def test_cases_import_the_case_and_its_context_from_conformance_case() -> None:
    from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, ScenarioVoid, Settled, delivery_obs, sentinel_body  # noqa: F401

    assert all(hasattr(CaseContext, m) for m in ("connect", "proxy", "queue", "drain", "restart_broker", "absorb", "close"))
