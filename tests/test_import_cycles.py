"""Issue 19 §6: no import cycle between the CLI and the modules it drives. conformance.selftest is a
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


@pytest.mark.parametrize("module", ["selftest", "run_args"])
def test_the_cli_is_imported_by_none_of_the_modules_it_drives(module: str) -> None:
    assert "conformance.cli" not in imported(ROOT / "conformance" / f"{module}.py")


def test_the_cli_and_the_selftest_share_the_pytest_command_line_through_run_args() -> None:
    from conformance import cli, run_args, selftest  # noqa: F401 - importable on their own, in any order

    assert cli.pytest_args is run_args.pytest_args
    assert "conformance.run_args" in imported(ROOT / "conformance" / "selftest.py")
