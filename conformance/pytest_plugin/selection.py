"""Which cases run, in which order, and the deadline each runs under."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue.requirements import requirement
from conformance.kit.case import Case
from conformance.pytest_plugin.stash import DEADLINE, params, planned
from conformance.runner import shared_faults
from conformance.runner.deadline import Deadline


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """A case's deadline re-fires until caught (conformance.runner.deadline); other items keep pytest-timeout's."""
    if settings.method == "signal" and isinstance(getattr(item, "instance", None), Case):
        return set_timer(item, settings.timeout) or None
    return None


def set_timer(item: pytest.Item, timeout: float) -> bool:
    """Arm the case's repeating deadline, ending it with pytest-timeout's ``Failed`` (main thread
    only); False leaves it to pytest-timeout. pytest-timeout's cancel hook (``cancel_timeout``) ends it."""
    deadline = Deadline(timeout, pytest.fail)
    if not deadline.can_arm:
        return False
    item.cancel_timeout = deadline.cancel  # type: ignore[attr-defined]
    item.stash[DEADLINE] = deadline
    return deadline.arm()


def order(items: list[pytest.Item]) -> None:
    """The runner's order of the cases (conformance.runner.shared_faults.order), and every disruptive
    case in one xdist group, so one worker runs them (``--dist loadgroup``)."""
    cases = {id(planned(it)): it for it in items}
    for it in items:
        if planned(it).disrupts:
            it.add_marker(pytest.mark.xdist_group(shared_faults.GROUP))
    items[:] = [cases[id(c)] for c in shared_faults.order([planned(it) for it in items])]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks it sets (loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every case its deadline; keep only the cases asked for.

    The deadline covers the case's scenario and verdict only (``func_only``): a deadline that fired
    inside pytest's own reporting would end the whole run with an internal error.
    """
    deadline = config.getoption("--case-timeout")
    for item in items:
        if isinstance(getattr(item, "instance", None), Case) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(deadline, func_only=True))
    wanted_reqs = set(config.getoption("--requirement") or [])
    wanted_areas = set(config.getoption("--area") or [])
    excluded_areas = set(config.getoption("--exclude-area") or [])
    levels = {lv.upper() for lv in config.getoption("--level") or []}
    queue_types = set(config.getoption("--queue-type") or [])
    disruptive = config.getoption("--disruptive")
    keep, drop = [], []
    for item in items:
        cls = getattr(item, "cls", None)
        rid = getattr(cls, "requirement", None)
        req = requirement(rid) if rid else None
        disrupts = planned(item).disrupts
        if item.get_closest_marker("conformance_not_posed") is not None:  # a case of no queue this broker has
            drop.append(item)
            continue
        wanted = (
            (disruptive == "include" or disrupts == (disruptive == "only"))
            and ((not wanted_reqs and not wanted_areas) or rid in wanted_reqs or (req is not None and req.area in wanted_areas))
            and (req is None or req.area not in excluded_areas)
            and (not levels or (req is not None and req.level in levels))
            and (not queue_types or params(item).get("queue_type") in queue_types)
        )
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
    order(items)  # the cases of one broker fault together, last
