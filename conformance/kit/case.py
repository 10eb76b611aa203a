"""Cases: one scenario (drives the broker, returns observations) and one verdict (judges them).

A case module reads like an h2spec section: one class per case, naming the requirement it checks::

    class TestFirstDeliveryNotRedelivered(Case):
        requirement = "ACK-FIRST-NOT-REDELIVERED"

        def scenario(self, ctx): ...           # returns plain, JSON-able observations
        def verdict(self, obs, profile, qt): ...  # pure: unit tests feed it violating observations

The pytest plugin supplies the ``conformance_case`` fixture that runs scenario then verdict, applies
the profile, writes the result record and turns the verdict into a pytest outcome.
"""

from __future__ import annotations

from typing import Callable, ClassVar

from conformance.api import Delivery
from conformance.catalogue.profiles import Profile
from conformance.kit.context.broker_faults import BrokerFaults
from conformance.kit.context.cleanup import Cleanup
from conformance.kit.context.proxies import Proxies
from conformance.kit.context.state import WAIT_S, Obs, ScenarioVoid, sentinel_body
from conformance.kit.verdicts import Verdict
from conformance.nemesis.kinds import FaultKind, broker_kind

#: Cases import these from here (their home is conformance.kit.context.state, which the helpers share).
__all__ = ["WAIT_S", "Case", "CaseContext", "Obs", "ScenarioVoid", "Settled", "delivery_obs", "sentinel_body"]


class Case:
    """Base of every case. Subclasses set ``requirement`` and implement scenario and verdict."""

    requirement: ClassVar[str]
    #: Queue types the case runs on; None means every queue type of the selected profile.
    queue_types: ClassVar[tuple[str, ...] | None] = None
    #: Extra parameter axis (e.g. which trigger requeues): each value runs as its own case.
    variants: ClassVar[tuple[str, ...] | None] = None
    #: Queue configurations (conformance/catalogue/data/configurations.yaml) the case is meaningful
    #: under besides each queue type's default: each runs as its own cell ("classic+priority").
    configurations: ClassVar[tuple[str, ...]] = ()
    #: The scenario restarts or kills the broker: it runs alone, never beside another case (cases of
    #: the same fault may share one restart or kill, see conformance.runner.shared_faults).
    disrupts_broker: ClassVar[bool] = False
    #: The kinds of fault the scenario inflicts itself (conformance.nemesis.kinds, e.g. NODE_KILL
    #: through conformance.nemesis.cluster.Nodes); a phased case's :meth:`broker_fault` is added.
    #: A target that cannot take one of them makes the case unsupported (no-fault) before it runs.
    faults: ClassVar[tuple[FaultKind, ...]] = ()

    def fault_kinds(self, variant: str | None) -> tuple[FaultKind, ...]:
        """Every kind of fault this case (with ``variant``) inflicts: what its target must be able to take."""
        return (*self.faults, *self.broker_faults(variant))

    def scenario(self, ctx: "CaseContext") -> Obs:
        """A phased case (one that names a :meth:`broker_fault`) runs its phases around its own fault;
        the runner may instead share one fault among many phased cases (conformance.runner.shared_faults)."""
        kinds = self.broker_faults(ctx.variant)
        if not kinds:
            raise NotImplementedError
        prepared = self.prepare(ctx)
        for i, kind in enumerate(kinds):
            if i and not isinstance(prepared, Settled):
                prepared = self.between(ctx, prepared)
            if isinstance(prepared, Settled):
                return dict(prepared)
            ctx.fault_broker(kind)
        return self.observe(ctx, prepared)

    # -- phases of a case that needs a broker fault (restart or kill -9) ----------------------
    # prepare: set up the scenario and return what observe needs (plain data); a Settled answer
    # means the scenario is decided before any fault. The fault comes from the runner, which may
    # share one fault among many cases; observe then looks at this case's own queues.

    def broker_fault(self, variant: str | None) -> FaultKind | str | None:
        """A broker kind of conformance.nemesis.kinds (RESTART, KILL; or its name) or None (the
        default: the case has no phases, only a scenario)."""
        return None

    def broker_faults(self, variant: str | None) -> tuple[FaultKind, ...]:
        """The broker faults the scenario goes through, in order: the one of :meth:`broker_fault`, or
        (for a case that overrides this) a restart and then a kill -9, with :meth:`between` after the
        first. The last one is :meth:`broker_fault`'s, the fault whose group the runner puts it in."""
        phased = self.broker_fault(variant)
        return (broker_kind(phased),) if phased is not None else ()

    def prepare(self, ctx: "CaseContext") -> Obs:
        raise NotImplementedError

    def between(self, ctx: "CaseContext", prepared: Obs) -> Obs:
        """After the first of two faults, before the second: what observe will need (default: unchanged)."""
        return prepared

    def observe(self, ctx: "CaseContext", prepared: Obs) -> Obs:
        raise NotImplementedError

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        raise NotImplementedError

    # The pytest entry point: collected once per case class, parametrized by the plugin.
    def test(self, conformance_case: Callable[["Case"], None]) -> None:
        conformance_case(self)


class Settled(dict):  # type: ignore[type-arg]
    """What :meth:`Case.prepare` returns when the scenario is decided before any fault: the final
    observations (e.g. the broker refused the declaration the fault was meant to test)."""


def delivery_obs(d: Delivery) -> Obs:
    """The parts of a delivery a verdict may judge, as plain data."""
    obs: Obs = {"id": d.message_id, "tag": d.tag, "redelivered": d.redelivered, "delivery_count": d.delivery_count}
    if d.first_acquirer is not None:
        obs["first_acquirer"] = d.first_acquirer
    if d.presettled is not None:
        obs["presettled"] = d.presettled
    return obs


class CaseContext(BrokerFaults, Proxies, Cleanup):
    """What a scenario drives the broker with: connections, queues, barriers. The generator's toolbox.

    Its parts live in modules of their own (conformance.kit.context.*): connections, proxies, queues
    and messages, waits and barriers, broker faults, cleanup. All build on
    :class:`conformance.kit.context.state.ContextState`, whose constructor this is."""
