"""Persistence: what a node keeps across a graceful restart and across kill -9 and a start."""

from __future__ import annotations

from conformance.kit.case import Case
from conformance.nemesis.kinds import KILL, RESTART, FaultKind


class RestartOrKill(Case):
    """A persistence case run twice: across a graceful restart, and across kill -9 and a start on the
    node's own data (the variant names which; one fault of each kind serves every such case)."""

    variants = ("restart", "kill")
    disrupts_broker = True

    def broker_fault(self, variant: str | None) -> FaultKind:
        return KILL if variant == KILL.name else RESTART
