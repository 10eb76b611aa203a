"""What the plugin keeps on pytest's objects for the runner: the run's state on the config, and on
each case's item the runner's view of it (conformance.runner.shared_faults.PlannedCase), its
deadline and its Result until pytest reports the case."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.runner.deadline import Deadline
from conformance.runner.records import Result
from conformance.runner.shared_faults import PlannedCase
from conformance.runner.state import RunState

STATE_KEY = pytest.StashKey[RunState]()
#: The case's Result, stashed on its item once the runner decided it, until pytest reports the case.
STASH_RESULT = pytest.StashKey[Result]()
#: The case's deadline as the plugin armed it (pytest_timeout_set_timer).
DEADLINE = pytest.StashKey[Deadline]()
PLANNED = pytest.StashKey[PlannedCase]()


def state_of(config: pytest.Config) -> RunState | None:
    return config.stash.get(STATE_KEY, None)


def params(item: pytest.Item) -> dict[str, Any]:
    return item.callspec.params if hasattr(item, "callspec") else {}  # type: ignore[attr-defined]


def planned(item: pytest.Item) -> PlannedCase:
    """The runner's view of a collected case: one object per item for the whole session (a shared
    broker fault leaves what it prepared for the case on it). Its node id is the item's as it is
    now: xdist's loadgroup appends the group to it after the selection."""
    found = item.stash.get(PLANNED, None)
    if found is None:
        p = params(item)
        found = item.stash[PLANNED] = PlannedCase(item.nodeid, getattr(item, "cls", None), p.get("queue_type"), p.get("variant"),
                                                  p.get("conformance_attempt"))
    found.nodeid = item.nodeid
    return found
