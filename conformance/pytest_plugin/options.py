"""The suite's pytest options, generated from the one option table (conformance.runner.options); the
run's lifecycle checks their values before anything is launched (conformance.runner.lifecycle)."""

from __future__ import annotations

import pytest

from conformance.runner.options import PYTEST_OPTIONS, declare


def pytest_addoption(parser: pytest.Parser) -> None:
    declare(parser.getgroup("conformance").addoption, PYTEST_OPTIONS, for_pytest=True)

