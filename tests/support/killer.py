"""pytest plugin for the dead-target test: kill -9 the broker before the Nth case starts."""

from __future__ import annotations

import os
import signal

import pytest

_seen = 0


def pytest_runtest_setup(item: pytest.Item) -> None:
    global _seen
    _seen += 1
    if _seen == int(os.environ["KILL_BEFORE_CASE"]):
        os.killpg(int(os.environ["KILL_PGID"]), signal.SIGKILL)
