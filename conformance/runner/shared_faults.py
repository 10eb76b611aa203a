"""One broker fault shared by many cases: the runner's grouping of disruptive cases.

A case that needs a broker restart or kill -9 names it (:meth:`Case.broker_fault`) and splits its
scenario into :meth:`Case.prepare` (before the fault) and :meth:`Case.observe` (after it). When a
run holds several such cases with the same fault, the first of them to run prepares every one (each
in its own context and history), then ONE restart or kill serves them all; each case then observes
and judges its own queues when its own turn comes, under its own deadline, and writes its own
record. A case's history shows the shared fault and how many cases it served.

The runner keeps the cases of one fault contiguous (:func:`order`), so nothing else disrupts the
broker between a fault and the observations that depend on it. Under xdist, every disruptive case
carries the same ``xdist_group`` so one worker runs them all (``--dist loadgroup``). A case run on
its own (a single selection, or the only one of its fault) runs its ordinary scenario, which does
its own fault: the per-case path is unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import pytest

from conformance.kit.case import Case, CaseContext, Obs, Settled
from conformance.nemesis.kinds import KILL, RESTART, broker_kind, strike

#: The xdist group of every disruptive case: one worker runs them, in order.
XDIST_GROUP = "broker-fault"


def plain_nodeid(nodeid: str) -> str:
    """A node id without the ``@broker-fault`` suffix xdist's loadgroup appends (records name the
    case the same under any number of workers)."""
    suffix = "@" + XDIST_GROUP
    return nodeid[: -len(suffix)] if nodeid.endswith(suffix) else nodeid


@dataclass
class Prepared:
    """What one case's prepare left for its observe: the context it ran in and its answer."""

    ctx: CaseContext
    prepared: Obs | None = None
    error: BaseException | None = None
    #: The shared fault failed: every case it was meant to serve fails with it.
    fault_error: BaseException | None = None


@dataclass
class Batch:
    kind: str
    members: list[pytest.Item] = field(default_factory=list)


PREPARED = pytest.StashKey[Prepared]()


def fault_of(item: pytest.Item) -> str | None:
    """The name of the broker fault a collected case shares (conformance.nemesis.kinds: "restart",
    "kill"), or None for a case without phases."""
    cls = getattr(item, "cls", None)
    if cls is None or not issubclass(cls, Case) or not getattr(cls, "disrupts_broker", False):
        return None
    params = item.callspec.params if hasattr(item, "callspec") else {}
    phased = cls().broker_fault(params.get("variant"))
    return broker_kind(phased).name if phased is not None else None


def order(items: list[pytest.Item]) -> None:
    """Disruptive cases last (those that fault the broker on their own first, then the shared
    restart, then the shared kill), those of one fault together; each keeps its own relative order.
    Under xdist, one worker takes them all, and their group must be the last unit of work handed
    out (``--no-loadscope-reorder``, conformance.cli.run): every ordinary case waits for the
    broker lock while a disruptive one holds it."""
    kinds = {id(it): fault_of(it) for it in items}
    rank = {RESTART.name: 2, KILL.name: 3}
    disruptive = [it for it in items if getattr(getattr(it, "cls", None), "disrupts_broker", False)]
    for it in disruptive:
        it.add_marker(pytest.mark.xdist_group(XDIST_GROUP))
    items[:] = sorted(items, key=lambda it: rank.get(kinds[id(it)] or "", 1) if getattr(getattr(it, "cls", None), "disrupts_broker", False) else 0)


def scenario(item: pytest.Item, case: Case, ctx: CaseContext, context_for: Callable[[pytest.Item], CaseContext | None]) -> Obs:
    """The runner's call in place of ``case.scenario(ctx)``; see the module's docstring.

    ``context_for(other)`` gives a fresh context for another case of the run, or None when that case
    will not run its scenario (not applicable, blocked, target down)."""
    phased = case.broker_fault(ctx.variant)
    kind = broker_kind(phased) if phased is not None else None
    if kind is None or not kind.offered_by(ctx.target):
        return case.scenario(ctx)  # no phases, or a target the suite cannot fault: the case says so
    mine = item.stash.get(PREPARED, None)
    if mine is None:
        batch = _batch(item, kind.name)
        if len(batch.members) < 2:
            return case.scenario(ctx)  # alone: its own fault
        _run_batch(item, case, ctx, batch, context_for)
        mine = item.stash[PREPARED]
    else:
        ctx.absorb(mine.ctx)  # the context prepare ran in: its queues, connections and history
    if mine.error is not None:
        raise mine.error
    if mine.fault_error is not None:
        raise mine.fault_error
    assert mine.prepared is not None
    if isinstance(mine.prepared, Settled):
        return dict(mine.prepared)
    return case.observe(ctx, mine.prepared)


def _batch(item: pytest.Item, kind: str) -> Batch:
    """This case and the cases of the same fault that follow it without a gap and have not run."""
    items = item.session.items
    batch = Batch(kind)
    start = items.index(item)
    for other in items[start:]:
        if fault_of(other) != kind:
            break
        if other is item or other.stash.get(PREPARED, None) is None:
            batch.members.append(other)
    return batch


def _run_batch(first: pytest.Item, first_case: Case, first_ctx: CaseContext, batch: Batch, context_for: Callable[[pytest.Item], CaseContext | None]) -> None:
    prepared: list[tuple[pytest.Item, Prepared]] = []
    for member in batch.members:
        ctx = first_ctx if member is first else context_for(member)
        if ctx is None:
            continue
        p = Prepared(ctx)
        case = first_case if member is first else member.cls()  # type: ignore[attr-defined]
        try:
            p.prepared = case.prepare(ctx)
        except Exception as exc:  # noqa: BLE001 - the member's own run reports it, as its own error
            p.error = exc
        member.stash[PREPARED] = p
        prepared.append((member, p))
    served = [(m, p) for m, p in prepared if p.error is None and not isinstance(p.prepared, Settled)]
    if not served:
        return
    target = first_ctx.target
    kind = broker_kind(batch.kind)
    for _, p in served:
        p.ctx._cut_all()  # every connection of a served case is dead after the fault anyway

    def say(op: str, detail: str) -> None:
        for _, p in served:
            p.ctx.history.add("nemesis", op, detail)

    try:
        assert target is not None
        strike(kind, target, say, f"(one {kind.name} shared by {len(served)} cases)")
    except Exception as exc:  # noqa: BLE001 - each served case fails with the fault's own error
        for _, p in served:
            p.fault_error = exc
        return
    done = time.monotonic()
    for _, p in served:
        p.ctx.fault_at, p.ctx.fault_kind = done, kind.name
