"""The suite's pytest options, generated from the one option table (conformance.runner.options), and
their check before anything is launched."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue.packs import Pack
from conformance.errors import UsageError
from conformance.runner.options import PYTEST_OPTIONS, check, declare


def pytest_addoption(parser: pytest.Parser) -> None:
    declare(parser.getgroup("conformance").addoption, PYTEST_OPTIONS, for_pytest=True)


def option_values(config: pytest.Config) -> dict[str, Any]:
    return {o.name: config.getoption(o.long) for o in PYTEST_OPTIONS}


def check_options(config: pytest.Config, adapter: str | None = None) -> list[Pack]:
    """Every option is validated before anything is launched: bad input costs no node boot. Returns
    the requirement packs the options (and ``adapter``, once known) select, activated."""
    try:
        return check(option_values(config), adapter)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
