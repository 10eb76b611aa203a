"""One broker fault shared by many cases: the runner's grouping of disruptive cases.

A case that needs a broker restart or kill -9 names it (:meth:`Case.broker_fault`) and splits its
scenario into :meth:`Case.prepare` (before the fault) and :meth:`Case.observe` (after it). When a
run holds several such cases with the same fault, the first of them to run prepares every one (each
in its own context and history), then ONE restart or kill serves them all; each case then observes
and judges its own queues when its own turn comes, under its own deadline, and writes its own
record. A case's history shows the shared fault and how many cases it served.

The runner keeps the cases of one fault contiguous (:func:`order`), so nothing else disrupts the
broker between a fault and the observations that depend on it. Every disruptive case is in one
group (:data:`GROUP`), which the pytest plugin hands to xdist so one worker runs them all
(``--dist loadgroup``). A case run on its own (a single selection, or the only one of its fault)
runs its ordinary scenario, which does its own fault: the per-case path is unchanged.

The runner sees the run's cases as :class:`PlannedCase` values (id, class, parameters), which the
pytest plugin makes from its collected items.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from conformance.kit.case import Case, CaseContext, Obs, Settled
from conformance.nemesis.kinds import KILL, RESTART, broker_kind, strike

#: The group of every disruptive case: one worker runs them, in order.
GROUP = "broker-fault"


def plain_nodeid(nodeid: str) -> str:
    """A node id without the ``@broker-fault`` suffix xdist's loadgroup appends (records name the
    case the same under any number of workers)."""
    suffix = "@" + GROUP
    return nodeid[: -len(suffix)] if nodeid.endswith(suffix) else nodeid


@dataclass
class Prepared:
    """What one case's prepare left for its observe: the context it ran in and its answer."""

    ctx: CaseContext
    prepared: Obs | None = None
    error: BaseException | None = None
    #: The shared fault failed: every case it was meant to serve fails with it.
    fault_error: BaseException | None = None
    #: A case of two faults that had its first: the name of the fault it still waits for.
    awaiting: str | None = None


@dataclass(eq=False)
class PlannedCase:
    """One case of the run: its node id, its class and its parameters (``attempt``: its repetition
    under ``--repeat``, else None). One object per case for the whole run: a batch leaves what it
    prepared for the case in ``prepared``, until the case's own turn."""

    nodeid: str
    cls: type | None
    queue_type: str | None = None
    variant: str | None = None
    attempt: int | None = None
    prepared: Prepared | None = None

    @property
    def disrupts(self) -> bool:
        return bool(getattr(self.cls, "disrupts_broker", False))


@dataclass
class Batch:
    kind: str
    members: list[PlannedCase] = field(default_factory=list)


def fault_of(case: PlannedCase) -> str | None:
    """The name of the broker fault a case shares (conformance.nemesis.kinds: "restart", "kill"), or
    None for a case without phases."""
    cls = case.cls
    if cls is None or not issubclass(cls, Case) or not getattr(cls, "disrupts_broker", False):
        return None
    phased = cls().broker_fault(case.variant)
    return broker_kind(phased).name if phased is not None else None


def two_faults(case: PlannedCase) -> tuple[str, str] | None:
    """The names of a two-fault case's faults (a restart, then a kill -9), or None. Such a case is in
    the group of its last fault; the batch of its first prepares it (out of that batch's run of
    cases), and the batch of its last runs its :meth:`Case.between` before that fault."""
    cls = case.cls
    if cls is None or not issubclass(cls, Case) or not getattr(cls, "disrupts_broker", False):
        return None
    kinds = cls().broker_faults(case.variant)
    return (kinds[0].name, kinds[1].name) if len(kinds) == 2 else None


def order(cases: Sequence[PlannedCase]) -> list[PlannedCase]:
    """Disruptive cases last (those that fault the broker on their own first, then the shared
    restart, then the shared kill), those of one fault together; each keeps its own relative order.
    Under xdist, one worker takes them all (:data:`GROUP`), and their group must be the last unit of
    work handed out (``--no-loadscope-reorder``, conformance.runner.pytest_argv): every ordinary case waits for
    the broker lock while a disruptive one holds it."""
    kinds = {id(c): fault_of(c) for c in cases}
    rank = {RESTART.name: 2, KILL.name: 3}
    return sorted(cases, key=lambda c: rank.get(kinds[id(c)] or "", 1) if c.disrupts else 0)


def scenario(me: PlannedCase, case: Case, ctx: CaseContext, following: Callable[[], Sequence[PlannedCase]],
             context_for: Callable[[PlannedCase], CaseContext | None]) -> Obs:
    """The runner's call in place of ``case.scenario(ctx)``; see the module's docstring.

    ``following()`` gives this case and the cases after it, in the run's order; ``context_for(other)``
    a fresh context for another case of the run, or None when that case will not run its scenario
    (not applicable, blocked, target down)."""
    phased = case.broker_fault(ctx.variant)
    kind = broker_kind(phased) if phased is not None else None
    if kind is None or not kind.offered_by(ctx.target):
        return case.scenario(ctx)  # no phases, or a target the suite cannot fault: the case says so
    mine = me.prepared
    if mine is None:
        if two_faults(me) is not None:
            return case.scenario(ctx)  # no batch gave it its first fault: alone, its own two faults
        batch = _batch(me, following(), kind.name)
        if len(batch.members) < 2:
            return case.scenario(ctx)  # alone: its own fault
        _run_batch(me, case, ctx, batch, context_for)
        mine = me.prepared
        assert mine is not None
    elif mine.awaiting == kind.name:  # had its first fault in an earlier batch; this batch is its second
        ctx.absorb(mine.ctx)
        mine.ctx = ctx
        _run_batch(me, case, ctx, _batch(me, following(), kind.name), context_for)
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


def _batch(me: PlannedCase, following: Sequence[PlannedCase], kind: str) -> Batch:
    """This case and the cases of the same fault that follow it without a gap and have not run."""
    batch = Batch(kind)
    contiguous = True
    for other in following:
        two, earlier = two_faults(other), other.prepared
        if two is not None:  # a two-fault case joins the batch of its first fault, then that of its second
            if (earlier is None and two[0] == kind) or (earlier is not None and earlier.awaiting == kind):
                batch.members.append(other)
            continue
        if not contiguous:
            continue
        if fault_of(other) != kind:
            contiguous = False
            continue
        if other is me or earlier is None:
            batch.members.append(other)
    return batch


def _run_batch(first: PlannedCase, first_case: Case, first_ctx: CaseContext, batch: Batch,
               context_for: Callable[[PlannedCase], CaseContext | None]) -> None:
    prepared: list[tuple[PlannedCase, Prepared]] = []
    for member in batch.members:
        earlier = member.prepared
        if earlier is not None and earlier.awaiting == batch.kind:  # its second fault: between, then this one
            earlier.awaiting = None
            if earlier.error is None and earlier.fault_error is None and not isinstance(earlier.prepared, Settled):
                between = first_case if member is first else member.cls()  # type: ignore[misc]
                try:
                    earlier.prepared = between.between(earlier.ctx, earlier.prepared)
                except Exception as exc:  # noqa: BLE001 - the member's own run reports it
                    earlier.error = exc
            prepared.append((member, earlier))
            continue
        ctx = first_ctx if member is first else context_for(member)
        if ctx is None:
            continue
        p = Prepared(ctx)
        case = first_case if member is first else member.cls()  # type: ignore[misc]
        try:
            p.prepared = case.prepare(ctx)
        except Exception as exc:  # noqa: BLE001 - the member's own run reports it, as its own error
            p.error = exc
        two = two_faults(member)
        p.awaiting = two[1] if two is not None else None
        member.prepared = p
        prepared.append((member, p))
    served = [(m, p) for m, p in prepared if p.error is None and p.fault_error is None and not isinstance(p.prepared, Settled)]
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
