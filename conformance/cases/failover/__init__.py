"""Failover across cluster nodes: cases that kill one node of a cluster target."""

from __future__ import annotations

from conformance.kit.case import Case, CaseContext, Obs
from conformance.nemesis.cluster import Nodes, with_healing
from conformance.nemesis.kinds import NODE_KILL


class NodeLossCase(Case):
    """A case that kills a node of the cluster: its scenario body (``on_nodes``) gets the cluster's
    nodes, and every node it killed is back before the next case, whatever happened."""

    disrupts_broker = True
    faults = (NODE_KILL,)

    def scenario(self, ctx: CaseContext) -> Obs:
        nodes = Nodes(ctx)
        return with_healing(nodes, lambda: self.on_nodes(ctx, nodes))

    def on_nodes(self, ctx: CaseContext, nodes: Nodes) -> Obs:
        raise NotImplementedError
