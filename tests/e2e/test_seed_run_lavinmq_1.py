"""The whole catalogue on LavinMQ 1.3.1 (../shared/brokers), compared with its reviewed expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.seed_run import RUN_LIMIT_S, catalogue_matches_its_expectation

NAMES = ["lavinmq-1.3.1"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.timeout(RUN_LIMIT_S + 60)
def test_the_catalogue_on_the_seed_server_matches_its_reviewed_expectation(name: str, tmp_path: Path) -> None:
    catalogue_matches_its_expectation(name, tmp_path)
