"""The cells a whole-catalogue run has: each case class on each of its queue types, its queue
configurations on those ("classic+priority"), and each variant."""

from __future__ import annotations

from typing import Any

from conformance.cases import all_cases
from conformance.catalogue.configurations import cell_types


def catalogue_cells(queue_types: tuple[str, ...] = ("classic", "quorum"), *, configured: bool = True) -> list[tuple[Any, str | None, str | None]]:
    """(case class, queue type, variant) for every cell of a run on ``queue_types`` (a profile's),
    with the configured cells unless the run's adapter cannot declare queue arguments."""
    out = []
    for c in all_cases():
        qts: tuple[str | None, ...] = c.queue_types or queue_types
        if configured:
            qts = cell_types(qts, c.configurations)
        out += [(c, qt, v) for qt in qts for v in (c.variants or [None])]
    return out
