"""The soak checkers: each a pure function ``check(ops, options) -> CheckResult`` of the history.

``run_all`` runs every checker, each a linear pass over the operations:

- ``queue``: confirmed and committed publishes delivered at least once, nothing unexpected, nothing
  refused delivered, duplicates after an ack the broker had;
- ``redelivery``: the redelivered flag and delivery counts of repeated deliveries;
- ``order``: first deliveries in publish order per producer and consumer (``options.ordered``);
- ``tx``: transactions delivered all or none, and none unless committed.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from conformance.soak.checkers import order, queue, redelivery, tx
from conformance.soak.checkers.base import VERDICTS, Anomaly, CheckOptions, CheckResult

__all__ = ["CHECKERS", "VERDICTS", "Anomaly", "CheckOptions", "CheckResult", "run_all"]

#: name -> check function, in the order run_all runs and reports them.
CHECKERS: dict[str, Callable[[list[dict[str, Any]], CheckOptions], CheckResult]] = {
    queue.NAME: queue.check,
    redelivery.NAME: redelivery.check,
    order.NAME: order.check,
    tx.NAME: tx.check,
}


def run_all(ops: list[dict[str, Any]], options: CheckOptions | None = None) -> dict[str, CheckResult]:
    """Every checker's result, by name. The cyclic garbage collector is paused meanwhile: the
    checkers build only acyclic dicts, lists and tuples, and on a history of a million operations
    each full collection would walk all of them again for nothing (a quarter of the time)."""
    options = options or CheckOptions()
    paused = gc.isenabled()
    gc.disable()
    try:
        return {name: check(ops, options) for name, check in CHECKERS.items()}
    finally:
        if paused:
            gc.enable()

